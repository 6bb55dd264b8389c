package shm

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cmaChunk bounds one process_vm_readv or process_vm_writev. The calls are
// raw (the Go scheduler is not told of them): a system call the scheduler
// knows of that outlasts sysmon's 20 us check has its P handed to another
// thread (a futex wake-up or a new thread, and sysmon back to 20 us sleeps
// for the next millisecond), which on a host with no spare CPU takes the
// CPU from the peer's polling thread, and the goroutine moves between
// threads (perf trace of 20 000 64 KiB round trips: the copies spread over
// five threads per process, 2000-2600 sysmon wake-ups). A copy is short
// work; chunks bound how long the P is held unseen (a stop-the-world
// waits for it): 256 KiB is 15-40 us here.
const cmaChunk = 256 << 10

// ReadPeer copies len(dst) bytes from address addr of process pid into dst
// with process_vm_readv (one copy, no ring). It returns the bytes read and
// an error wrapping:
//   - ErrPeerDenied when the kernel refuses (EPERM, EACCES, ENOSYS, or a
//     seccomp filter): fall back to copying through the ring in segments
//     for this peer from now on;
//   - ErrPeerGone when the process no longer exists (ESRCH);
//   - ErrFault when the range is not (or no longer) mapped in the peer
//     (EFAULT, or a short read).
//
// The peer must keep the source memory alive and unchanged until told the
// read is done (a Go sender: a heap buffer kept reachable, e.g. with
// runtime.KeepAlive, never a stack buffer, which can move). ReadPeer does
// not allocate when it succeeds. Safe for concurrent use.
func ReadPeer(pid int, dst []byte, addr uintptr) (int, error) {
	done := 0
	for done < len(dst) {
		k := min(len(dst)-done, cmaChunk)
		local := unix.Iovec{Base: &dst[done]}
		local.SetLen(k)
		remote := unix.RemoteIovec{Base: addr + uintptr(done), Len: k}
		n, _, e := unix.RawSyscall6(unix.SYS_PROCESS_VM_READV, uintptr(pid),
			uintptr(unsafe.Pointer(&local)), 1, uintptr(unsafe.Pointer(&remote)), 1, 0)
		if e != 0 {
			return done, cmaError(pid, e)
		}
		if n == 0 {
			return done, fmt.Errorf("%w: process_vm_readv from pid %d at %#x: short read", ErrFault, pid, addr+uintptr(done))
		}
		done += int(n)
	}
	return done, nil
}

// WritePeer copies src to address addr of process pid with
// process_vm_writev, the mirror of ReadPeer (same errors). The caller must
// know the destination is memory the peer gave for it (a registered
// region, checked against its key table).
func WritePeer(pid int, src []byte, addr uintptr) (int, error) {
	done := 0
	for done < len(src) {
		k := min(len(src)-done, cmaChunk)
		local := unix.Iovec{Base: &src[done]}
		local.SetLen(k)
		remote := unix.RemoteIovec{Base: addr + uintptr(done), Len: k}
		n, _, e := unix.RawSyscall6(unix.SYS_PROCESS_VM_WRITEV, uintptr(pid),
			uintptr(unsafe.Pointer(&local)), 1, uintptr(unsafe.Pointer(&remote)), 1, 0)
		if e != 0 {
			return done, cmaError(pid, e)
		}
		if n == 0 {
			return done, fmt.Errorf("%w: process_vm_writev to pid %d at %#x: short write", ErrFault, pid, addr+uintptr(done))
		}
		done += int(n)
	}
	return done, nil
}

func cmaError(pid int, e unix.Errno) error {
	switch e {
	case unix.EPERM, unix.EACCES, unix.ENOSYS:
		return fmt.Errorf("%w: process_vm_readv from pid %d: %w", ErrPeerDenied, pid, e)
	case unix.ESRCH:
		return fmt.Errorf("%w: process_vm_readv from pid %d: %w", ErrPeerGone, pid, e)
	case unix.EFAULT:
		return fmt.Errorf("%w: process_vm_readv from pid %d: %w", ErrFault, pid, e)
	}
	return fmt.Errorf("shm: process_vm_readv from pid %d: %w", pid, e)
}

// CMAInfo is the result of the start-up probe of process_vm_readv. A plain
// value.
type CMAInfo struct {
	// Available is false when the kernel refused even a read of our own
	// memory (no CONFIG_CROSS_MEMORY_ATTACH, seccomp); then never use it.
	// A refusal for a particular peer shows later as ErrPeerDenied.
	Available bool
	// Err is the probe's error when not Available.
	Err error
	// CallCost is the fixed cost of one call (the fastest of a few 64-byte
	// reads).
	CallCost time.Duration
	// Rate is process_vm_readv's rate in bytes per second (1 MiB reads).
	Rate float64
	// CopyRate is copy()'s rate in bytes per second (1 MiB, cache-warm).
	CopyRate float64
	// Threshold is the smallest power of two from 16 KiB to 64 MiB at which
	// one process_vm_readv (CallCost + size/Rate) is cheaper than the two
	// copies of the ring path (2 x size/CopyRate), or 0 when it never is
	// on this machine. A hint: the ring path also costs synchronisation per
	// segment, so the engine's benchmarks decide.
	Threshold int
}

var cmaProbe struct {
	once sync.Once
	info CMAInfo
}

// ProbeCMA probes process_vm_readv once per process (against our own pid,
// which the kernel always allows when the call exists; about a millisecond)
// and returns the cached result. Safe for concurrent use.
func ProbeCMA() CMAInfo {
	cmaProbe.once.Do(func() { cmaProbe.info = probeCMA() })
	return cmaProbe.info
}

func probeCMA() CMAInfo {
	const big = 1 << 20
	src := make([]byte, big)
	dst := make([]byte, big)
	for i := range src {
		src[i] = byte(i * 7)
	}
	pid := os.Getpid()
	addr := uintptr(unsafe.Pointer(&src[0]))
	if _, err := ReadPeer(pid, dst, addr); err != nil {
		return CMAInfo{Err: err}
	}
	for i := range dst {
		if dst[i] != src[i] {
			return CMAInfo{Err: errors.New("shm: process_vm_readv probe read wrong bytes")}
		}
	}
	best := func(n int, f func() error) (time.Duration, error) {
		b := time.Duration(1<<63 - 1)
		for range n {
			t := time.Now()
			if err := f(); err != nil {
				return 0, err
			}
			b = min(b, time.Since(t))
		}
		return max(b, time.Nanosecond), nil
	}
	call, err := best(16, func() error { _, err := ReadPeer(pid, dst[:64], addr); return err })
	if err != nil {
		return CMAInfo{Err: err}
	}
	bulk, err := best(4, func() error { _, err := ReadPeer(pid, dst, addr); return err })
	if err != nil {
		return CMAInfo{Err: err}
	}
	cp, _ := best(4, func() error { copy(dst, src); return nil })
	info := CMAInfo{Available: true, CallCost: call,
		Rate: float64(big) / bulk.Seconds(), CopyRate: float64(big) / cp.Seconds()}
	for s := 16 << 10; s <= 64<<20; s <<= 1 {
		if call.Seconds()+float64(s)/info.Rate < 2*float64(s)/info.CopyRate {
			info.Threshold = s
			break
		}
	}
	return info
}

// EnablePeerAccess lets processes of this user read this process's memory
// with process_vm_readv under the Yama LSM (ptrace_scope 1), where only
// ancestors may otherwise; it is prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY)
// and affects ptrace too. It is a no-op without Yama. This package never
// calls it: the engine opts in when its configuration says so; without it
// a refused read falls back to segments (ErrPeerDenied).
func EnablePeerAccess() error {
	err := unix.Prctl(unix.PR_SET_PTRACER, unix.PR_SET_PTRACER_ANY, 0, 0, 0)
	if err == nil || errors.Is(err, unix.EINVAL) {
		return nil
	}
	return fmt.Errorf("shm: prctl PR_SET_PTRACER: %w", err)
}
