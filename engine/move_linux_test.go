package engine

import (
	"runtime"
	"syscall"
	"testing"
	"unsafe"
)

func TestPickIdle(t *testing.T) {
	cand := []int{3, 5, 7}
	for _, c := range []struct {
		before, after []int64
		want          int
	}{
		{[]int64{100, 100, 100}, []int64{110, 150, 200}, 5}, // the first that idled long enough
		{[]int64{100, 100, 100}, []int64{119, 119, 119}, -1},
		{[]int64{-1, 100, 100}, []int64{900, 100, 130}, 7}, // unknown counters are skipped
		{[]int64{100, -1, 100}, []int64{100, 900, -1}, -1},
	} {
		if got := pickIdle(cand, c.before, c.after, 20); got != c.want {
			t.Errorf("pickIdle(%v, %v) = %d, want %d", c.before, c.after, got, c.want)
		}
	}
}

func TestItoaAtoi(t *testing.T) {
	var b [20]byte
	for _, v := range []int{0, 7, 10, 1023, 123456789} {
		n := itoa(b[:], v)
		if got, ok := atoi(append(b[:n:n], '\n')); !ok || got != int64(v) {
			t.Errorf("itoa/atoi %d: %q -> %d %v", v, b[:n], got, ok)
		}
	}
	if _, ok := atoi([]byte("x1")); ok {
		t.Error("atoi of a non-number")
	}
}

// The cpuidle counters read back as a count that does not go down.
func TestIdleUs(t *testing.T) {
	c := curCPU()
	if c < 0 {
		t.Skip("no getcpu here")
	}
	a := idleUs(c)
	if a < 0 {
		t.Skip("no cpuidle counters here")
	}
	if b := idleUs(c); b < a {
		t.Fatalf("idle time of CPU %d went from %d to %d us", c, a, b)
	}
	if idleUs(1<<20) != -1 {
		t.Fatal("a CPU that does not exist: want -1")
	}
}

func affinity(t *testing.T) cpuMask {
	var m cpuMask
	if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, unsafe.Sizeof(m), uintptr(unsafe.Pointer(&m))); e != 0 {
		t.Fatal(e)
	}
	return m
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
	to := -1
	for c := 0; c < 1024; c++ {
		if c != c0 && orig.has(c) {
			to = c
			break
		}
	}
	if to < 0 {
		t.Skip("one CPU allowed")
	}
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

// napMove leaves the thread's mask as it was, whether it moved or not.
func TestNapMove_KeepsTheMask(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig := affinity(t)
	for range 3 {
		napAndMove()
		if got := affinity(t); got != orig {
			t.Fatalf("mask after napMove %x, want %x", got[:1], orig[:1])
		}
	}
	if n := testing.AllocsPerRun(5, func() { napAndMove(); napMove() }); n != 0 {
		t.Fatalf("napMove: %v allocations", n)
	}
}
