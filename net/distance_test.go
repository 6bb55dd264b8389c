package net

import (
	"runtime"
	"testing"
	"time"

	"github.com/gofi-dev/fi/internal/placement"
)

// probeCPUs answers with the class the placement package's own probe
// gives (on a machine whose placement does not sit near the line), and
// cpusFar then answers from it, fresh until distEvery; a CPU outside the
// mask fails the probe and is recorded as not known.
func TestProbeCPUs(t *testing.T) {
	cpus, err := placement.Allowed()
	if err != nil || len(cpus) < 2 || runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two CPUs and two Ps")
	}
	a, b := cpus[0], cpus[1]
	prober.run()
	if _, known, stale := cpusFar(a, a); known || stale {
		t.Fatal("one CPU with itself: known, or to probe")
	}
	var far, known bool
	// A busy host may keep the responder from its CPU past probeLimit
	// (then the probe fails and counts as not known, which the product
	// takes as "no join"): at load 20 under -race, 5 probes failed in
	// 20 s. The answer's checks need an answer; the failure path's below
	// do not.
	for end := time.Now().Add(60 * time.Second); !known && time.Now().Before(end); {
		if !prober.busy.Load() {
			far, known = probeCPUs(b, a)
		}
		// Not spinning: the responder needs a P (two here) to run, and
		// with this loop holding one and another test's leftover loop the
		// other, it waited for preemption (-race -count=3: 19 probes
		// failed in 20 s).
		time.Sleep(time.Millisecond)
	}
	if !known {
		t.Logf("no probe of CPUs %d and %d answered within 60 s (%d failed): the host kept the responder from its CPU; checking the failure path only", a, b, prober.fails.Load())
	} else {
		f2, k2, stale := cpusFar(a, b)
		if f2 != far || !k2 || stale {
			t.Fatalf("cpusFar after the probe: far %v known %v stale %v; the probe said far %v", f2, k2, stale, far)
		}
		r, err := placement.Probe(a, b)
		t.Logf("probeCPUs(%d, %d): far %v; placement.Probe: %v", a, b, far, r)
		if err == nil && (r.RTNs < placement.FarNs/2 || r.RTNs > 2*placement.FarNs) && far != (r.Class == "far") {
			t.Errorf("probeCPUs says far %v, placement.Probe %v", far, r)
		}
	}
	for end := time.Now().Add(20 * time.Second); prober.busy.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the responder never finished")
		}
	}
	fails := prober.fails.Load()
	if _, known := probeCPUs(a, placeCPU-1); known || prober.fails.Load() != fails+1 {
		t.Fatal("a CPU outside the mask: known, or not counted as failed")
	}
	if _, known, stale := cpusFar(a, placeCPU-1); known || stale {
		t.Fatalf("after a failed probe: known %v, stale %v; want recorded as not known", known, stale)
	}
}

// An initiator that stops waiting for the responder (probeLimit) leaves
// probeGaveUp in the word, not probeStop: a responder that comes late
// waits for the initiator's own last store (probeStop) before it clears
// busy, so that store cannot land in the next probe's word.
func TestProbeBounce_GivingUpIsNotTheLastStore(t *testing.T) {
	pt := &probeThreads{} // no responder
	f := &pt.flag[1].v
	if pt.bounce(f) {
		t.Fatal("a probe without a responder answered")
	}
	if v := f.Load(); v != probeGaveUp {
		t.Fatalf("word after giving up %#x, want probeGaveUp %#x (not probeStop %#x)", v, uint64(probeGaveUp), uint64(probeStop))
	}
}
