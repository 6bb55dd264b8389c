package benchmarks

import (
	"sync/atomic"
	"time"
	"unsafe"
)

// The one-line flag of BenchmarkShmPingPongAlternated, in copies.
//
// Near, the flag's round trip depends on where its loops' code falls
// against the CPU's 64-byte fetch blocks: two builds of the benchmark whose
// code differed only in an unrelated function before it, which moved the
// loops by 32 bytes, measured 98.4 and 82.7 ns (medians of 21 alternated
// pairs of runs, 2026-11-25 02:54-02:58 UTC, near, load 3.5-6.6) while the
// 4 KiB ring in the same runs measured the same (132.5 ns both). A reference
// that moves by 16% with code layout is no reference, so the flag runs from
// two copies of its loops that start 32 bytes apart modulo 64 (Go aligns
// functions to 32 bytes on amd64) and the faster copy is the flag.
//
// The copies below are the same code, written out three times with a small
// function between the first and the second: whatever a copy's size,
// copy 0 and one of copies 1 and 2 start on different halves of a 64-byte
// block; pickFlagLoops finds which (the addresses are in the report).

// flagLoop is one copy: run makes n round trips as the initiator from
// sequence s and returns the sequence reached (false: no answer by
// deadline); echo answers until the control word is no longer c.
type flagLoop struct {
	run  func(f *atomic.Uint64, s uint64, n int, deadline time.Time) (uint64, bool)
	echo func(f, ctrl *atomic.Uint64, c uint64, deadline time.Time) bool
	at   uintptr // run's entry address
}

// flagLoops are the two copies the benchmark alternates (altFlag,
// altFlagB).
var flagLoops = pickFlagLoops()

func pickFlagLoops() [2]flagLoop {
	flagPad() // linked, so in its place
	c := [3]flagLoop{
		{run: flagRun0, echo: flagEcho0},
		{run: flagRun1, echo: flagEcho1},
		{run: flagRun2, echo: flagEcho2},
	}
	for i := range c {
		c[i].at = funcAddr(c[i].run)
	}
	score := func(j int) int {
		n := 0
		if c[j].at%64 != c[0].at%64 {
			n += 2
		}
		if funcAddr(c[j].echo)%64 != funcAddr(c[0].echo)%64 {
			n++
		}
		return n
	}
	if score(2) > score(1) {
		return [2]flagLoop{c[0], c[2]}
	}
	return [2]flagLoop{c[0], c[1]}
}

// funcAddr is the entry address of the function f holds (a func value
// points to a word holding it).
func funcAddr[F any](f F) uintptr {
	return **(**uintptr)(unsafe.Pointer(&f))
}

//go:noinline
func flagRun0(f *atomic.Uint64, s uint64, n int, deadline time.Time) (uint64, bool) {
	for range n {
		s++
		f.Store(2*s - 1)
		for idle := 0; f.Load() != 2*s; {
			if idle++; idle&(1<<20-1) == 0 && time.Now().After(deadline) {
				return s, false
			}
			spinPause(idle)
		}
	}
	return s, true
}

//go:noinline
func flagEcho0(f, ctrl *atomic.Uint64, c uint64, deadline time.Time) bool {
	for last, idle := uint64(0), 0; ; {
		if v := f.Load(); v&1 == 1 && v != last {
			f.Store(v + 1)
			last, idle = v, 0
			continue
		}
		if ctrl.Load() != c {
			return true
		}
		if idle++; idle&(1<<20-1) == 0 && time.Now().After(deadline) {
			return false
		}
		spinPause(idle)
	}
}

// flagPad moves the copies after it by 32 bytes (see above).
//
//go:noinline
func flagPad() {}

//go:noinline
func flagRun1(f *atomic.Uint64, s uint64, n int, deadline time.Time) (uint64, bool) {
	for range n {
		s++
		f.Store(2*s - 1)
		for idle := 0; f.Load() != 2*s; {
			if idle++; idle&(1<<20-1) == 0 && time.Now().After(deadline) {
				return s, false
			}
			spinPause(idle)
		}
	}
	return s, true
}

//go:noinline
func flagEcho1(f, ctrl *atomic.Uint64, c uint64, deadline time.Time) bool {
	for last, idle := uint64(0), 0; ; {
		if v := f.Load(); v&1 == 1 && v != last {
			f.Store(v + 1)
			last, idle = v, 0
			continue
		}
		if ctrl.Load() != c {
			return true
		}
		if idle++; idle&(1<<20-1) == 0 && time.Now().After(deadline) {
			return false
		}
		spinPause(idle)
	}
}

//go:noinline
func flagRun2(f *atomic.Uint64, s uint64, n int, deadline time.Time) (uint64, bool) {
	for range n {
		s++
		f.Store(2*s - 1)
		for idle := 0; f.Load() != 2*s; {
			if idle++; idle&(1<<20-1) == 0 && time.Now().After(deadline) {
				return s, false
			}
			spinPause(idle)
		}
	}
	return s, true
}

//go:noinline
func flagEcho2(f, ctrl *atomic.Uint64, c uint64, deadline time.Time) bool {
	for last, idle := uint64(0), 0; ; {
		if v := f.Load(); v&1 == 1 && v != last {
			f.Store(v + 1)
			last, idle = v, 0
			continue
		}
		if ctrl.Load() != c {
			return true
		}
		if idle++; idle&(1<<20-1) == 0 && time.Now().After(deadline) {
			return false
		}
		spinPause(idle)
	}
}
