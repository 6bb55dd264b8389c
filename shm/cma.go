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
		local := unix.Iovec{Base: &dst[done]}
		local.SetLen(len(dst) - done)
		remote := unix.RemoteIovec{Base: addr + uintptr(done), Len: len(dst) - done}
		n, _, e := unix.Syscall6(unix.SYS_PROCESS_VM_READV, uintptr(pid),
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
	// CallCost is the measured fixed cost of one call (the fastest of a few
	// 64-byte reads).
	CallCost time.Duration
	// CopyRate is the measured copy() rate in bytes per second (1 MiB).
	CopyRate float64
	// Threshold is the suggested message size from which single copy pays:
	// the smallest power of two, at least 16 KiB and at most 1 MiB, whose
	// ring copy costs more than one call. A hint; benchmarks decide.
	Threshold int
}

var cmaProbe struct {
	once sync.Once
	info CMAInfo
}

// ProbeCMA probes process_vm_readv once per process (against our own pid,
// which the kernel always allows when the call exists) and returns the
// cached result. Safe for concurrent use.
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
	if _, err := ReadPeer(pid, dst[:64], addr); err != nil {
		return CMAInfo{Err: err}
	}
	best := time.Duration(1<<63 - 1)
	for range 16 {
		t := time.Now()
		if _, err := ReadPeer(pid, dst[:64], addr); err != nil {
			return CMAInfo{Err: err}
		}
		best = min(best, time.Since(t))
	}
	if _, err := ReadPeer(pid, dst, addr); err != nil {
		return CMAInfo{Err: err}
	}
	for i := range dst {
		if dst[i] != src[i] {
			return CMAInfo{Err: errors.New("shm: process_vm_readv probe read wrong bytes")}
		}
	}
	copyBest := time.Duration(1<<63 - 1)
	for range 4 {
		t := time.Now()
		copy(dst, src)
		copyBest = min(copyBest, time.Since(t))
	}
	copyBest = max(copyBest, time.Microsecond)
	rate := float64(big) / copyBest.Seconds()
	th := 16 << 10
	for th < 1<<20 && float64(th)/rate < best.Seconds() {
		th <<= 1
	}
	return CMAInfo{Available: true, CallCost: best, CopyRate: rate, Threshold: th}
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
