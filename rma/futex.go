package rma

import (
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// futex operations without FUTEX_PRIVATE: waiter and waker may be
// different processes sharing a file mapping.
const (
	futexWaitOp = 0
	futexWakeOp = 1
)

// futexWait sleeps while *w == val, at most timeout (negative: no limit).
// Wake-ups, a changed value, signals and timeouts all just return.
func futexWait(w *atomic.Uint32, val uint32, timeout time.Duration) {
	var tsp unsafe.Pointer
	var ts unix.Timespec
	if timeout >= 0 {
		ts = unix.NsecToTimespec(int64(timeout))
		tsp = unsafe.Pointer(&ts)
	}
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWaitOp, uintptr(val), uintptr(tsp), 0, 0)
}

// futexWake wakes every waiter sleeping on w.
func futexWake(w *atomic.Uint32) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWakeOp, math.MaxInt32, 0, 0, 0)
}

// fullFence orders the caller's earlier stores before its later loads, as
// a locked read-modify-write does on amd64. The protocols here use
// read-modify-writes (Swap, CompareAndSwap) for every store that a later
// load of another word must not overtake, so that they hold under the race
// runtime too, where a plain atomic store to memory outside the Go heap is
// only a release store.
func fullFence() {
	var w atomic.Uint32
	w.Add(1)
}
