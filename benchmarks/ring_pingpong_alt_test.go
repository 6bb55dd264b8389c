package benchmarks

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/ring"
	"github.com/gofi-dev/fi/shm"
)

// BenchmarkShmPingPongAlternated is BenchmarkShmPingPong's three variants
// (flag, flag2, ring), the ring at the capacity shm gives a pair's rings
// first (ring4k: shm.DefaultMinRingSize, which small messages keep) and a
// ring.Duplex of that capacity (duplex: its 8-byte records go through the
// turn line's slots) against one peer process, alternated in batches of
// altBatch round trips: flag, flag2, ring, ring4k, flag (second copy),
// duplex, flag, ... On this
// 2-vCPU machine the two vCPUs move between placements (cache-line round
// trips of about 66, 110 or 480 ns) within a run, and other processes take
// the CPUs for milliseconds at a time; a batch lasts 0.1-1 ms, so the
// three batches of a round almost always share a placement and a quiet
// spell, where BenchmarkShmPingPong's samples (a fresh peer and b.N round
// trips each, tens of milliseconds) often do not.
//
// The flag runs from two copies of its loops placed 32 bytes apart modulo
// 64 (flagA, flagB; see ring_flag_loops_test.go: near, the flag's time
// moved by 16% with its code's alignment), and each round's flag is the
// faster of the two batches.
//
// b.N is the round trips per variant. Reported: ns/op, the median batch's
// ring round trip (64 KiB rings, as BenchmarkShmPingPong); flag-ns,
// flag2-ns and ring4k-ns, the same for the others; flagA-ns and flagB-ns,
// each copy's, with flagA-at and flagB-at, where each copy's initiator
// loop starts in a 64-byte block; ring/flag, ring/flag2, ring4k/flag and
// ring4k/flag2, the medians over rounds of each round's ratio (the
// figures to compare across placements); duplex-ns, duplex/flag and
// duplex/ring4k, the same for the duplex; rt-ns, the placement before the
// run.
//
// GOFI_BENCH_PIN=a,b pins the initiator's polling thread to CPU a and the
// peer's to CPU b. GOFI_BENCH_ALT_DUPLEX=1 adds three bare duplex
// layouts, where one cache line carries a round trip's request and its
// reply, so that a ping-pong moves one line like the flag instead of two
// like a pair of one-way rings: dup, one line for every round trip (two
// words of it, one per side); dupslot, 64 lines in turn, round trip k in
// line k mod 64 (the request with a sequence stamp and an 8-byte payload
// in the line's first 32 bytes, the reply in its last 32: the bare
// protocol of a duplex ring with one record per line and direction); and
// duplog, one log of 16-byte slots (stamp and payload) both sides write
// in turn, round trip k's request in slot 2k and its reply in slot 2k+1,
// two round trips a line: within a line each side writes next into the
// line it has just read, and only every other round trip starts a line
// the poller touched first. Reported as dup-ns, dupslot-ns,
// dupslot/flag, dupslot/ring4k, duplog-ns, duplog/flag and
// duplog/ring4k. (Measured 2026-11-25 04:48, pinned, 16 runs: dupslot
// 0.76-1.46x the flag far, but near 149-370 ns against ring4k's 125-205;
// 07:41, pinned, under chrt -f 50, load 8-9.6, in the ~52 ns placement
// (5 runs): flag 49.5-54.6 ns, ring4k 102-127 (1.95-2.24x), duplog 74-84
// (1.41-1.54x, 0.69-0.73 of ring4k), dupslot 1.71-2.11x; far (6 runs,
// flag 305-348): ring4k 1.31-1.42x, duplog 1.15-1.23x (0.80-0.96 of
// ring4k). A pair of one-way rings cannot come within 1.5x of the flag
// where two one-way lines cost twice one shared line; a log both
// directions share can.)
func BenchmarkShmPingPongAlternated(b *testing.B) {
	rt := placementRT()
	path, m := createShm(b, altSize)
	ra, err := ring.Init(m[altRingA:altRingB], ppRingCap)
	if err != nil {
		b.Fatal(err)
	}
	rb, err := ring.Init(m[altRingB:altSmallA], ppRingCap)
	if err != nil {
		b.Fatal(err)
	}
	sa, err := ring.Init(m[altSmallA:altSmallB], altSmallCap)
	if err != nil {
		b.Fatal(err)
	}
	sb, err := ring.Init(m[altSmallB:], altSmallCap)
	if err != nil {
		b.Fatal(err)
	}
	checkAltDxSize(b)
	dx, err := ring.InitDuplex(m[altDx:], altSmallCap)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ppPeerMax)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRingPingPongAltPeer$", "-test.bench=^$", "-test.count=1")
	cmd.Env = append(os.Environ(), envAltPeerFile+"="+path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	a := newAltSide(m, [altRings][2]*ring.Ring{{ra, rb}, {sa, sb}}, dx)
	defer pinFromEnv(b, 0)()
	deadline := time.Now().Add(30 * time.Second)
	rounds := (b.N + altBatch - 1) / altBatch
	times := make([][altModes]float64, rounds)
	ok := true
	modes := altDup // the bare duplex layouts only with GOFI_BENCH_ALT_DUPLEX=1
	if os.Getenv("GOFI_BENCH_ALT_DUPLEX") == "1" {
		modes = altModes
	}
	for k := 0; k < modes && ok; k++ { // warm up: the peer starts, the rings' pages fault in
		ok = a.run(k, altWarm, deadline)
	}
	b.ResetTimer()
	for r := 0; r < rounds && ok; r++ {
		n := min(altBatch, b.N-r*altBatch)
		for k := 0; k < modes && ok; k++ {
			a.ctrl.Store(uint64(k + 1))
			st := time.Now()
			ok = a.run(k, n, deadline)
			times[r][k] = float64(time.Since(st).Nanoseconds()) / float64(n)
		}
	}
	b.StopTimer()
	a.ctrl.Store(altStop)
	if err := cmd.Wait(); err != nil || !ok {
		b.Fatalf("peer: %v (answered: %v)\n%s", err, ok, out.Bytes())
	}
	med := func(f func(t [altModes]float64) float64) float64 {
		v := make([]float64, len(times))
		for i, t := range times {
			v[i] = f(t)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	flag := func(t [altModes]float64) float64 { return min(t[altFlag], t[altFlagB]) } // the faster copy (ring_flag_loops_test.go)
	b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altRing] }), "ns/op")
	b.ReportMetric(med(flag), "flag-ns")
	b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altFlag] }), "flagA-ns")
	b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altFlagB] }), "flagB-ns")
	b.ReportMetric(float64(flagLoops[0].at%64), "flagA-at")
	b.ReportMetric(float64(flagLoops[1].at%64), "flagB-at")
	b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altFlag2] }), "flag2-ns")
	b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altRing] / flag(t) }), "ring/flag")
	b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altRing] / t[altFlag2] }), "ring/flag2")
	b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altRing4k] }), "ring4k-ns")
	b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altRing4k] / flag(t) }), "ring4k/flag")
	b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altRing4k] / t[altFlag2] }), "ring4k/flag2")
	b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altDuplex] }), "duplex-ns")
	b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altDuplex] / flag(t) }), "duplex/flag")
	b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altDuplex] / t[altRing4k] }), "duplex/ring4k")
	if modes == altModes {
		b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altDup] }), "dup-ns")
		b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altDupSlot] }), "dupslot-ns")
		b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altDupSlot] / flag(t) }), "dupslot/flag")
		b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altDupSlot] / t[altRing4k] }), "dupslot/ring4k")
		b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altDupLog] }), "duplog-ns")
		b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altDupLog] / flag(t) }), "duplog/flag")
		b.ReportMetric(med(func(t [altModes]float64) float64 { return t[altDupLog] / t[altRing4k] }), "duplog/ring4k")
	}
	b.ReportMetric(rt, "rt-ns")
}

const (
	envAltPeerFile = "GOFI_BENCH_PINGPONG_ALT_FILE"

	altFlag, altFlag2, altRing, altRing4k, altFlagB, altDuplex, altDup, altDupSlot, altDupLog, altModes = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9
	altRings                                                                                            = altRing4k - altRing + 1

	altSmallCap = shm.DefaultMinRingSize

	altBatch = 2000 // round trips per batch
	altWarm  = 5000 // round trips per variant before timing (more than a lap of each ring)
	altStop  = 1 << 32

	// Layout: the control word, the flag, flag2's two words, each on its
	// own line, then the two rings as in BenchmarkShmPingPong, then the
	// two small rings (each region twice the capacity, as theirs).
	altCtrl   = 0
	altFlagW  = ring.LineSep
	altF2Out  = 2 * ring.LineSep
	altF2In   = 3 * ring.LineSep
	altFlagBW = 4 * ring.LineSep
	altRingA  = 5 * ring.LineSep
	altRingB  = altRingA + ppRingCap*2
	altSmallA = altRingB + ppRingCap*2
	altSmallB = altSmallA + altSmallCap*2
	altDupW   = altSmallB + altSmallCap*2
	altDupA   = altDupW + ring.LineSep
	altDupL   = altDupA + 4096
	altDx     = altDupL + 4096
	altSize   = altDx + altDxSize

	altDxSize = ring.DuplexHeaderSize + 2*(ring.HeaderSize+altSmallCap) // ring.DuplexSize(altSmallCap)
)

// Compile-time check: each small ring's region holds Size(altSmallCap).
var _ [altSmallCap*2 - (ring.HeaderSize + altSmallCap)]byte

// altDxSize is DuplexSize(altSmallCap) (checked at run time: not a constant).
func checkAltDxSize(tb testing.TB) {
	if n := ring.DuplexSize(altSmallCap); n != altDxSize {
		tb.Fatalf("DuplexSize(%d) = %d, layout has %d", altSmallCap, n, altDxSize)
	}
}

// altSide is one side's state: the shared words, the rings and the
// sequence numbers each variant has reached.
type altSide struct {
	ctrl, flag, f2out, f2in *atomic.Uint64
	flagB                   *atomic.Uint64          // the flag of altFlagB (flagLoops[1])
	rings                   [altRings][2]*ring.Ring // per ring variant: initiator -> peer, peer -> initiator
	dx                      *ring.Duplex            // altDuplex: the initiator's end 0, the peer's end 1
	seq                     [altModes]uint64
	buf                     []byte
	m                       []byte
}

func (a *altSide) w(off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&a.m[off])) }

func newAltSide(m []byte, rings [altRings][2]*ring.Ring, dx *ring.Duplex) *altSide {
	w := func(off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&m[off])) }
	return &altSide{ctrl: w(altCtrl), flag: w(altFlagW), f2out: w(altF2Out), f2in: w(altF2In), flagB: w(altFlagBW), rings: rings, dx: dx, buf: make([]byte, 64), m: m}
}

// run makes n round trips of variant k as the initiator; false if the
// peer stopped answering before deadline. Each variant has its own loop,
// as tight as BenchmarkShmPingPong's.
func (a *altSide) run(k, n int, deadline time.Time) bool {
	a.ctrl.Store(uint64(k + 1))
	late := func(idle int) bool { return idle&(1<<20-1) == 0 && time.Now().After(deadline) }
	s := a.seq[k]
	defer func() { a.seq[k] = s }()
	switch k {
	case altFlag:
		var ok bool
		s, ok = flagLoops[0].run(a.flag, s, n, deadline)
		return ok
	case altFlagB:
		var ok bool
		s, ok = flagLoops[1].run(a.flagB, s, n, deadline)
		return ok
	case altDuplex:
		d := a.dx
		var msg [8]byte
		for range n {
			s++
			msg[0] = byte(s)
			for d.TryWrite(1, msg[:]) != nil {
			}
			for idle := 0; ; {
				_, _, err := d.TryRead(a.buf)
				if err == nil {
					break
				}
				if err != ring.ErrEmpty {
					return false
				}
				if idle++; late(idle) {
					return false
				}
				spinPause(idle)
			}
		}
	case altDup:
		out, in := a.w(altDupW), a.w(altDupW+32)
		for range n {
			s++
			out.Store(s)
			for idle := 0; in.Load() != s; {
				if idle++; late(idle) {
					return false
				}
				spinPause(idle)
			}
		}
	case altDupSlot:
		for range n {
			s++
			l := altDupA + int(s&63)*64
			out, in := a.w(l), a.w(l+32)
			*(*uint64)(unsafe.Pointer(&a.m[l+8])) = s
			out.Store(s)
			for idle := 0; in.Load() != s; {
				if idle++; late(idle) {
					return false
				}
				spinPause(idle)
			}
			a.buf[0] = a.m[l+40]
		}
	case altDupLog:
		for range n {
			s++
			l := altDupL + int(s&127)*32 // request s in slot 2s, reply in 2s+1
			*(*uint64)(unsafe.Pointer(&a.m[l+8])) = s
			a.w(l).Store(s)
			for idle := 0; a.w(l+16).Load() != s; {
				if idle++; late(idle) {
					return false
				}
				spinPause(idle)
			}
			a.buf[0] = a.m[l+24]
		}
	case altFlag2:
		for range n {
			s++
			a.f2out.Store(s)
			for idle := 0; a.f2in.Load() != s; {
				if idle++; late(idle) {
					return false
				}
				spinPause(idle)
			}
		}
	default: // altRing, altRing4k
		ra, rb := a.rings[k-altRing][0], a.rings[k-altRing][1]
		var msg [8]byte
		for range n {
			s++
			msg[0] = byte(s)
			for ra.TryWrite(1, msg[:]) != nil {
			}
			for idle := 0; ; {
				_, _, err := rb.TryRead(a.buf)
				if err == nil {
					break
				}
				if err != ring.ErrEmpty {
					return false
				}
				if idle++; late(idle) {
					return false
				}
				spinPause(idle)
			}
		}
	}
	return true
}

// echo answers variant k until the control word changes; false on a
// corrupt ring or at deadline. Each variant has its own loop; the control
// word is read only on polls that find nothing.
func (a *altSide) echo(k int, deadline time.Time) bool {
	c := uint64(k + 1)
	late := func(idle int) bool { return idle&(1<<20-1) == 0 && time.Now().After(deadline) }
	switch k {
	case altFlag:
		return flagLoops[0].echo(a.flag, a.ctrl, c, deadline)
	case altFlagB:
		return flagLoops[1].echo(a.flagB, a.ctrl, c, deadline)
	case altDuplex:
		d := a.dx
		for idle := 0; ; {
			typ, n, err := d.TryRead(a.buf)
			if err == nil {
				for d.TryWrite(typ, a.buf[:n]) != nil {
				}
				idle = 0
				continue
			}
			if err != ring.ErrEmpty {
				return false
			}
			if a.ctrl.Load() != c {
				return true
			}
			if idle++; late(idle) {
				return false
			}
			spinPause(idle)
		}
	case altDup:
		out, in := a.w(altDupW), a.w(altDupW+32)
		for idle := 0; ; {
			if v := out.Load(); v != in.Load() {
				in.Store(v)
				idle = 0
				continue
			}
			if a.ctrl.Load() != c {
				return true
			}
			if idle++; late(idle) {
				return false
			}
			spinPause(idle)
		}
	case altDupSlot:
		s := a.seq[k]
		defer func() { a.seq[k] = s }()
		for idle := 0; ; {
			l := altDupA + int((s+1)&63)*64
			if a.w(l).Load() == s+1 {
				s++
				v := *(*uint64)(unsafe.Pointer(&a.m[l+8]))
				*(*uint64)(unsafe.Pointer(&a.m[l+40])) = v
				a.w(l + 32).Store(s)
				idle = 0
				continue
			}
			if a.ctrl.Load() != c {
				return true
			}
			if idle++; late(idle) {
				return false
			}
			spinPause(idle)
		}
	case altDupLog:
		s := a.seq[k]
		defer func() { a.seq[k] = s }()
		for idle := 0; ; {
			l := altDupL + int((s+1)&127)*32
			if a.w(l).Load() == s+1 {
				s++
				v := *(*uint64)(unsafe.Pointer(&a.m[l+8]))
				*(*uint64)(unsafe.Pointer(&a.m[l+24])) = v
				a.w(l + 16).Store(s)
				idle = 0
				continue
			}
			if a.ctrl.Load() != c {
				return true
			}
			if idle++; late(idle) {
				return false
			}
			spinPause(idle)
		}
	case altFlag2:
		for idle := 0; ; {
			if v := a.f2out.Load(); v != a.f2in.Load() {
				a.f2in.Store(v)
				idle = 0
				continue
			}
			if a.ctrl.Load() != c {
				return true
			}
			if idle++; late(idle) {
				return false
			}
			spinPause(idle)
		}
	default: // altRing, altRing4k
		ra, rb := a.rings[k-altRing][0], a.rings[k-altRing][1]
		for idle := 0; ; {
			typ, n, err := ra.TryRead(a.buf)
			if err == nil {
				for rb.TryWrite(typ, a.buf[:n]) != nil {
				}
				idle = 0
				continue
			}
			if err != ring.ErrEmpty {
				return false
			}
			if a.ctrl.Load() != c {
				return true
			}
			if idle++; late(idle) {
				return false
			}
			spinPause(idle)
		}
	}
}

// TestRingPingPongAltPeer is the echoing peer of
// BenchmarkShmPingPongAlternated; it does nothing unless re-executed by it.
func TestRingPingPongAltPeer(t *testing.T) {
	m := mapPeerFile(t, envAltPeerFile, "BenchmarkShmPingPongAlternated")
	ra, err := ring.Attach(m[altRingA:altRingB])
	if err != nil {
		t.Fatal(err)
	}
	rb, err := ring.Attach(m[altRingB:altSmallA])
	if err != nil {
		t.Fatal(err)
	}
	sa, err := ring.Attach(m[altSmallA:altSmallB])
	if err != nil {
		t.Fatal(err)
	}
	sb, err := ring.Attach(m[altSmallB:])
	if err != nil {
		t.Fatal(err)
	}
	dx, err := ring.AttachDuplex(m[altDx:])
	if err != nil {
		t.Fatal(err)
	}
	a := newAltSide(m, [altRings][2]*ring.Ring{{ra, rb}, {sa, sb}}, dx)
	defer pinFromEnv(t, 1)()
	deadline := time.Now().Add(ppPeerMax)
	for idle := 0; ; idle++ {
		c := a.ctrl.Load()
		switch {
		case c == altStop:
			return
		case c >= 1 && c <= altModes:
			if !a.echo(int(c-1), deadline) {
				t.Fatal("corrupt ring or timed out")
			}
			idle = 0
			continue
		}
		if idle&(1<<20-1) == 0 && time.Now().After(deadline) {
			t.Fatal("peer timed out")
		}
		spinPause(idle + 1)
	}
}

// pinFromEnv locks the calling goroutine to its thread and that thread to
// CPU i of GOFI_BENCH_PIN ("a,b": the initiator's CPU, the peer's), if
// set, and returns what undoes it. Pinned, the two polling threads stay on
// their CPUs for the whole run (the machine's rule for spinning pairs).
func pinFromEnv(tb testing.TB, i int) (undo func()) {
	cpus := strings.Split(os.Getenv("GOFI_BENCH_PIN"), ",")
	if len(cpus) != 2 {
		return func() {}
	}
	cpu, err := strconv.Atoi(cpus[i])
	if err != nil {
		tb.Fatalf("GOFI_BENCH_PIN: %v", err)
	}
	runtime.LockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		tb.Fatal(err)
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		tb.Fatal(err)
	}
	return func() {
		unix.SchedSetaffinity(0, &old)
		runtime.UnlockOSThread()
	}
}
