package shm

import (
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// futex operations; x/sys/unix has the syscall number but no wrapper. The
// PRIVATE flag is left out on purpose: waiter and waker are different
// processes sharing a file mapping.
const (
	futexWaitOp = 0 // FUTEX_WAIT
	futexWakeOp = 1 // FUTEX_WAKE
)

// DoorbellSize is the number of bytes a doorbell occupies: the sequence word
// at +0 and the waiter count at +4.
const DoorbellSize = 8

// Doorbell wakes a sleeping receiver from other processes: a futex on a
// shared 32-bit sequence word plus a shared count of sleeping waiters, so a
// sender pays for the FUTEX_WAKE system call only when someone sleeps.
//
// Protocol (no lost wake-up; all accesses sequentially consistent):
//
//	receiver Wait:  waiters++ ; s = seq ; if cond() { waiters-- ; done }
//	                futex_wait(&seq, s, timeout) ; waiters-- ; repeat
//	sender:         publish data ; Ring: if waiters != 0 { seq++ ; futex_wake }
//
// If the receiver's cond() missed the data, the sender's publish comes after
// it and so after waiters++: the sender sees the waiter, bumps seq after the
// receiver read s, and either futex_wait finds seq != s and returns at once,
// or the wake finds the receiver queued. Every wait has a timeout, so a
// sender that dies between publishing and ringing costs one timeout, never a
// hang.
//
// A Doorbell is safe for concurrent use by any number of ringing and waiting
// goroutines and processes. It refers to mapped memory: it is valid as long
// as the segment holding it is open.
type Doorbell struct {
	seq     *atomic.Uint32
	waiters *atomic.Uint32
}

// NewDoorbell places a doorbell at b[off:off+DoorbellSize]; off must be
// 8-byte aligned. The bytes must be zero (or a doorbell) and should sit on a
// cache line of their own. Region.Doorbell is the usual way to get one.
func NewDoorbell(b []byte, off int) (*Doorbell, error) {
	if off < 0 || off > len(b)-DoorbellSize || !aligned(b, off, 8) {
		return nil, fmt.Errorf("%w: doorbell at %d in %d bytes", ErrSize, off, len(b))
	}
	return &Doorbell{seq: word32(b, off), waiters: word32(b, off+4)}, nil
}

// Ring wakes the sleeping waiters, if any, after the caller has published
// what they wait for. Without sleepers it is one shared load. The error is
// the futex call's (EFAULT when the mapping vanished); waiters then wake by
// timeout.
//
// The caller's publish must be a sync/atomic store or read-modify-write
// (sequentially consistent), as package ring's are. Ring reads the
// receiver's mapping: a sender that must survive a receiver shrinking its
// file calls it within its own Guard.
func (d *Doorbell) Ring() error {
	fence()
	if d.waiters.Load() == 0 {
		return nil
	}
	d.seq.Add(1)
	_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(d.seq)), futexWakeOp, math.MaxInt32, 0, 0, 0)
	if e != 0 {
		return fmt.Errorf("shm: futex wake: %w", e)
	}
	return nil
}

// Sleepers returns how many waiters are asleep or about to sleep (all
// processes). For tests and diagnostics.
func (d *Doorbell) Sleepers() uint32 { return d.waiters.Load() }

// Wait sleeps until cond returns true or timeout passes, and reports which.
// cond is called before every sleep and after every wake-up, from the
// calling goroutine; it must be cheap and must not block. A timeout <= 0
// checks cond once. Spurious wake-ups are absorbed. The error reports an
// unexpected futex failure (EFAULT, EINVAL), never a timeout.
func (d *Doorbell) Wait(timeout time.Duration, cond func() bool) (bool, error) {
	if cond() {
		return true, nil
	}
	if timeout <= 0 {
		return false, nil
	}
	deadline := time.Now().Add(timeout)
	for {
		d.waiters.Add(1)
		s := d.seq.Load()
		if cond() {
			d.waiters.Add(^uint32(0))
			return true, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			d.waiters.Add(^uint32(0))
			return false, nil
		}
		err := futexWait(d.seq, s, left)
		d.waiters.Add(^uint32(0))
		if err != nil {
			return cond(), err
		}
	}
}

// futexWait sleeps while *w == val, at most timeout. Wake-ups, a changed
// value (EAGAIN), signals (EINTR) and timeouts all return nil.
func futexWait(w *atomic.Uint32, val uint32, timeout time.Duration) error {
	ts := unix.NsecToTimespec(int64(timeout))
	_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWaitOp, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
	switch e {
	case 0, unix.EAGAIN, unix.EINTR, unix.ETIMEDOUT:
		return nil
	}
	return fmt.Errorf("shm: futex wait: %w", e)
}

// Idle is an explicit idle strategy: poll cond Spins times, then Yields
// times with runtime.Gosched between polls, then sleep on a doorbell. The
// zero value sleeps at once. Idle is a plain value, safe to share.
type Idle struct {
	Spins  int // busy polls before yielding
	Yields int // polls separated by runtime.Gosched before sleeping
}

// DefaultIdle polls for about a microsecond (a responsive peer on another
// core answers within 0.1-0.4 us), yields twice for goroutines of this
// process, then sleeps: a futex wake-up costs about 3 us here, so only
// short gaps are worth polling. On an oversubscribed machine spinning
// delays the peer; the engine may tune this (BenchmarkShmDoorbellWake).
var DefaultIdle = Idle{Spins: 512, Yields: 2}

// Wait returns true as soon as cond does, false once timeout has passed
// (spinning and yielding count against it). It does not allocate.
func (p Idle) Wait(d *Doorbell, timeout time.Duration, cond func() bool) (bool, error) {
	for i := 0; i < p.Spins; i++ {
		if cond() {
			return true, nil
		}
	}
	start := time.Now()
	for i := 0; i < p.Yields; i++ {
		if cond() {
			return true, nil
		}
		runtime.Gosched()
	}
	return d.Wait(timeout-time.Since(start), cond)
}
