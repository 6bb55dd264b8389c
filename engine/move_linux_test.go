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

// onThread locks the test to its thread (until the test ends) and returns
// that thread's mask, the CPU it runs on and another CPU of the mask,
// skipping the test without getcpu or a second CPU.
func onThread(t *testing.T) (orig cpuMask, cpu, other int) {
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	orig = affinity(t)
	if cpu = curCPU(); cpu < 0 {
		t.Skip("no getcpu here")
	}
	return orig, cpu, otherCPU(t, orig, cpu)
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
	orig, _, to := onThread(t)
	// The kernel may move the thread again right after the mask is back
	// (a loaded host): one of a few tries must find it where it went.
	got := -1
	for try := 0; try < 20 && got != to; try++ {
		o := orig
		if !moveTo(to, &o) {
			t.Fatal("moveTo failed")
		}
		got = curCPU()
		if m := affinity(t); m != orig {
			t.Fatalf("mask after the move %x, want %x", m[:1], orig[:1])
		}
	}
	if got != to {
		t.Fatalf("on CPU %d after moving to %d", got, to)
	}
}

// moveAway leaves the CPU it is given for another of the mask, keeps the
// mask, does nothing when the thread is not on that CPU, and allocates
// nothing.
func TestMoveAway(t *testing.T) {
	orig, c0, _ := onThread(t)
	// As above: the kernel may move the thread between two calls, so a
	// few tries.
	moved := false
	for try := 0; try < 20 && !moved; try++ {
		c0 = curCPU()
		moved = moveAway(c0) && curCPU() != c0
		if got := affinity(t); got != orig {
			t.Fatalf("mask after moveAway %x, want %x", got[:1], orig[:1])
		}
	}
	if !moved {
		t.Fatalf("moveAway never left the CPU it was on (last %d)", c0)
	}
	for c := 1023; c >= 0; c-- {
		if !orig.has(c) { // a CPU the thread cannot be on
			if moveAway(c) {
				t.Fatalf("moved although not on CPU %d", c)
			}
			break
		}
	}
	if n := testing.AllocsPerRun(5, func() { moveAway(curCPU()) }); n != 0 {
		t.Fatalf("moveAway: %v allocations", n)
	}
}
