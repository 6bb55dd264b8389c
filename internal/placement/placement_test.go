package placement

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestPair_ChoosesTheRunsCPUs(t *testing.T) {
	cases := []struct {
		name      string
		own, peer []int
		a, b      int
		pinned    bool
	}{
		{"both pinned", []int{3}, []int{7}, 3, 7, true},
		{"both pinned to one CPU", []int{2}, []int{2}, 2, 2, true},
		{"unpinned, two CPUs", []int{0, 1}, []int{0, 1}, 0, 1, false},
		{"unpinned, many CPUs", []int{4, 5, 6}, []int{4, 5, 6}, 4, 5, false},
		{"only we are pinned", []int{1}, []int{0, 1}, 1, 0, false},
		{"only the peer is pinned, to our first", []int{0, 1}, []int{0}, 1, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b, pinned, err := Pair(c.own, c.peer)
			if err != nil || a != c.a || b != c.b || pinned != c.pinned {
				t.Fatalf("Pair(%v, %v) = %d, %d, %v, %v; want %d, %d, %v", c.own, c.peer, a, b, pinned, err, c.a, c.b, c.pinned)
			}
		})
	}
	if _, _, _, err := Pair(nil, []int{0}); err == nil {
		t.Fatal("Pair with an empty mask: no error")
	}
}

func TestProbe_MeasuresTwoCPUs(t *testing.T) {
	cpus, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) < 2 {
		t.Skipf("one CPU allowed (%v): nothing to probe", cpus)
	}
	r, err := Probe(cpus[0], cpus[1])
	if err != nil {
		t.Fatal(err)
	}
	if r.RTNs <= 0 || r.MinNs <= 0 || r.MinNs > r.RTNs || (r.Class != "near" && r.Class != "far") {
		t.Fatalf("probe %+v: want positive round trips, min <= median, a class", r)
	}
	if !strings.Contains(r.String(), "cache-line round trip") {
		t.Fatalf("String() = %q", r.String())
	}
	tl, err := ProbeTail(cpus[0], cpus[1], 2000)
	if err != nil {
		t.Fatal(err)
	}
	if tl.N != 2000 || tl.P50 <= 0 || tl.P50 > tl.P99 || tl.P99 > tl.P999 || tl.P999 > tl.Max {
		t.Fatalf("tail %+v: want ordered positive percentiles", tl)
	}
	t.Logf("%v; tail %+v", r, tl)
}

// A process with one P (started on one CPU, as under taskset -c N) still
// probes: its two sides spin at once, and it keeps its one P.
func TestProbe_WithOnePStillMeasures(t *testing.T) {
	cpus, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) < 2 {
		t.Skipf("one CPU allowed (%v): nothing to probe", cpus)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	done := make(chan error, 1)
	go func() {
		_, err := Probe(cpus[0], cpus[1])
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("probe with one P still running after 60s (the two sides taking turns at 10 ms preemptions)")
	}
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("GOMAXPROCS %d after the probe, want 1 back", n)
	}
}

func TestProbe_SameCPUAndBadCPU(t *testing.T) {
	r, err := Probe(0, 0)
	if err != nil || r.Class != "same-cpu" {
		t.Fatalf("Probe(0, 0) = %+v, %v; want class same-cpu", r, err)
	}
	if _, err := Pin(-1); err == nil {
		t.Fatal("Pin(-1): no error")
	}
	if _, err := ProbeTail(0, 0, 10); err == nil {
		t.Fatal("ProbeTail on one CPU: no error")
	}
}

// A responder preempted between reading a round's odd value and storing
// its answer stores the answer after the initiator gave up on the round
// (probeLimit) and stored stopVal. stop stores stopVal again, so the
// responder, which exits on stopVal only, still exits and Probe returns.
func TestStop_OutlastsALateAnswer(t *testing.T) {
	line := new(flagLine)
	f := line.word()
	f.Store(7) // the round the initiator gave up on
	done := make(chan struct{})
	go func() { // the responder's steps, with the preemption made certain
		defer close(done)
		v := f.Load()
		for f.Load() != stopVal { // preempted until the initiator stopped
			runtime.Gosched()
		}
		f.Store(v + 1) // the late answer, over stopVal
		for f.Load() != stopVal {
			runtime.Gosched()
		}
	}()
	stopped := make(chan struct{})
	go func() {
		stop(f, done)
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("stop still waiting after 30 s: the responder's late answer overwrote stopVal")
	}
}
