package engine

import (
	"runtime"
	"testing"
)

func affinity(t *testing.T) cpuMask {
	var m cpuMask
	if !getAffinity(&m) {
		t.Fatal("sched_getaffinity failed")
	}
	return m
}

// otherCPU returns a CPU of the mask other than c, skipping the test when
// there is none.
func otherCPU(t *testing.T, m cpuMask, c int) int {
	for o := 0; o < 1024; o++ {
		if o != c && m.has(o) {
			return o
		}
	}
	t.Skip("one CPU allowed")
	return -1
}

func TestNextCPU(t *testing.T) {
	var m cpuMask
	m[0] = 1<<1 | 1<<5
	m[1] = 1 << 3 // CPU 67
	for _, c := range []struct{ from, want int }{{0, 1}, {1, 5}, {5, 67}, {67, 1}, {1000, 1}} {
		if got := nextCPU(&m, c.from); got != c.want {
			t.Errorf("nextCPU after %d = %d, want %d", c.from, got, c.want)
		}
	}
	if nextCPU(&cpuMask{}, 0) != -1 {
		t.Error("empty mask: want -1")
	}
}

// moveTo puts the thread on the CPU asked for and leaves it with the mask
// it had: nothing stays bound.
func TestMoveTo_MigratesAndRestoresTheMask(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig := affinity(t)
	c0 := curCPU()
	if c0 < 0 {
		t.Skip("no getcpu here")
	}
	to := otherCPU(t, orig, c0)
	o := orig
	if !moveTo(to, &o) {
		t.Fatal("moveTo failed")
	}
	if got := curCPU(); got != to {
		t.Fatalf("on CPU %d after moving to %d", got, to)
	}
	if got := affinity(t); got != orig {
		t.Fatalf("mask after the move %x, want %x", got[:1], orig[:1])
	}
}

// moveAway leaves the CPU it is given for another of the mask, keeps the
// mask, does nothing when the thread is not on that CPU, and allocates
// nothing.
func TestMoveAway(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig := affinity(t)
	c0 := curCPU()
	if c0 < 0 {
		t.Skip("no getcpu here")
	}
	otherCPU(t, orig, c0)
	if !moveAway(c0) {
		t.Fatalf("moveAway(%d) did not move", c0)
	}
	if c := curCPU(); c == c0 {
		t.Fatalf("still on CPU %d", c)
	}
	if got := affinity(t); got != orig {
		t.Fatalf("mask after moveAway %x, want %x", got[:1], orig[:1])
	}
	if c := curCPU(); moveAway(c + 1) {
		t.Fatalf("moved although not on CPU %d", c+1)
	}
	if n := testing.AllocsPerRun(5, func() { moveAway(curCPU()) }); n != 0 {
		t.Fatalf("moveAway: %v allocations", n)
	}
}
