package engine

import (
	"os"
	"runtime"
	"sync"
	"syscall"
	"unsafe"
)

// Moving a busy-polling reader off a shared CPU.
//
// A reader whose yields say that another thread runs on its CPU naps so
// that the kernel places it again when it wakes (see CQ.idleRead). The
// kernel looks for an idle CPU then only when it thinks one is worth the
// search: with SIS_UTIL (on by default since Linux 5.20) a wake-up scans
// the last-level cache's CPUs only while their summed utilisation is
// below about 85%, and a CPU that a busy-polling process just left keeps
// its utilisation for tens of milliseconds (PELT halves it every 32 ms).
// On a 2-CPU host where both processes of a ping-pong polled until one
// was placed beside the other, the nap's wake-up therefore goes back to
// the shared CPU while the other idles, and the two hand one CPU over
// for the next 10-30 ms (perftest pingpong -S 4k, 10 000 iterations:
// 0.84-0.94 us per transfer, or 2-2.3 and more in runs that shared a
// CPU for a while).
//
// So napMove checks what the nap did: when the reader woke on the CPU it
// napped on, that CPU ran something else throughout the nap, and another
// CPU of its affinity mask spent at least moveIdleMin of the nap idle
// (the kernel's cpuidle counters), it moves itself there: sched_setaffinity to that CPU alone, which migrates the
// thread at once, then straight back to its own mask, so nothing stays
// bound. With every other CPU busy (a loaded host) it stays: moving
// would only trade the peer for another program. No other CPU in the
// mask, or no cpuidle counters (some containers), and it is the plain
// nap. It runs at most once per napGap, and only after a yield that ran
// another thread.
//
// Off unless GOFI_CQ_MOVE=on: the move has not yet been measured on a
// quiet host, the only place where it can act (on a loaded one no CPU
// idles through a nap: 4 KiB and 8 B x 10k ping-pongs at load 17-20
// alternated with and without it ran alike, 28-67 us per transfer).

// MoveEnv turns napMove's move on ("on"); otherwise the nap alone.
const MoveEnv = "GOFI_CQ_MOVE"

var moveOff = sync.OnceValue(func() bool { return os.Getenv(MoveEnv) != "on" })

const (
	// moveMaxCPUs bounds the other CPUs looked at (the nearest numbers
	// after the current one): on hosts with many CPUs the kernel's own
	// search finds idle ones.
	moveMaxCPUs = 8
	// moveIdleMin is how long a CPU must have idled during the nap
	// (about 55 us: 1 us stretched to the timer slack) to be free.
	moveIdleMin = 20 // microseconds
	// cpuStates bounds the cpuidle states summed per CPU.
	cpuStates = 10
)

// cpuMask is sched_getaffinity's buffer: 1024 CPUs.
type cpuMask [16]uint64

func (m *cpuMask) has(cpu int) bool { return cpu < 1024 && m[cpu/64]&(1<<(cpu%64)) != 0 }

// curCPU returns the CPU the thread runs on (getcpu(2)), or -1.
func curCPU() int {
	nr := sysGetcpu
	if nr < 0 {
		return -1
	}
	var c uint32
	if _, _, e := syscall.RawSyscall(uintptr(nr), uintptr(unsafe.Pointer(&c)), 0, 0); e != 0 {
		return -1
	}
	return int(c)
}

// idleUs returns how long cpu has been idle since boot, in microseconds
// (the sum of its cpuidle states' time), or -1 when the counters cannot
// be read. Raw calls and a path on the stack: no allocation.
func idleUs(cpu int) int64 {
	var path [64]byte
	n := copy(path[:], "/sys/devices/system/cpu/cpu")
	n += itoa(path[n:], cpu)
	n += copy(path[n:], "/cpuidle/state")
	total, found := int64(0), false
	for s := 0; s < cpuStates; s++ {
		k := n + itoa(path[n:], s)
		k += copy(path[k:], "/time\x00")
		fd, _, e := syscall.RawSyscall6(syscall.SYS_OPENAT, atFDCWD, uintptr(unsafe.Pointer(&path[0])),
			syscall.O_RDONLY|syscall.O_CLOEXEC, 0, 0, 0)
		if e != 0 {
			break // no such state: the states are numbered from 0
		}
		var b [24]byte
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		syscall.RawSyscall(syscall.SYS_CLOSE, fd, 0, 0)
		if e != 0 {
			return -1
		}
		v, ok := atoi(b[:r])
		if !ok {
			return -1
		}
		total, found = total+v, true
	}
	if !found {
		return -1
	}
	return total
}

// atFDCWD is AT_FDCWD (-100) as openat's first argument.
const atFDCWD = ^uintptr(99)

// itoa writes v (>= 0) in decimal at the start of b and returns its length.
func itoa(b []byte, v int) int {
	var t [20]byte
	i := len(t)
	for {
		i--
		t[i] = byte('0' + v%10)
		if v /= 10; v == 0 {
			break
		}
	}
	return copy(b, t[i:])
}

// atoi reads the decimal number b starts with (a newline may follow).
func atoi(b []byte) (int64, bool) {
	v, n := int64(0), 0
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		v, n = v*10+int64(c-'0'), n+1
	}
	return v, n > 0
}

// pickIdle returns the first of cand whose idle counter advanced by at
// least min between before and after (-1 entries: unknown), or -1.
func pickIdle(cand []int, before, after []int64, min int64) int {
	for i, c := range cand {
		if before[i] >= 0 && after[i] >= 0 && after[i]-before[i] >= min {
			return c
		}
	}
	return -1
}

// setAffinity sets the calling thread's CPU mask.
func setAffinity(m *cpuMask) bool {
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(*m), uintptr(unsafe.Pointer(m)))
	return e == 0
}

// moveTo migrates the calling thread to cpu and restores its mask orig.
func moveTo(cpu int, orig *cpuMask) bool {
	var one cpuMask
	one[cpu/64] = 1 << (cpu % 64)
	if !setAffinity(&one) {
		return false
	}
	for !setAffinity(orig) {
		// Cannot fail with the mask the kernel gave us, short of the
		// CPUs going offline meanwhile: then widen to every CPU rather
		// than leave the thread bound.
		var all cpuMask
		for i := range all {
			all[i] = ^uint64(0)
		}
		*orig = all
	}
	return true
}

// napMove naps (osNap) and moves the thread to another CPU of its mask
// when the nap left it where it was while that CPU idled (see above).
// It reports whether it moved the thread.
func napMove() bool {
	if moveOff() {
		osNap()
		return false
	}
	return napAndMove()
}

// napAndMove is napMove switched on.
func napAndMove() bool {
	// One thread throughout: the mask read is the one restored.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0 := curCPU()
	var orig cpuMask
	if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, unsafe.Sizeof(orig), uintptr(unsafe.Pointer(&orig))); c0 < 0 || e != 0 {
		osNap()
		return false
	}
	var cand [moveMaxCPUs]int
	var before, after [moveMaxCPUs]int64
	own := idleUs(c0)
	k := 0
	for i := 1; i < 1024 && k < moveMaxCPUs; i++ {
		if c := (c0 + i) % 1024; orig.has(c) {
			cand[k], before[k] = c, idleUs(c)
			k++
		}
	}
	osNap()
	if k == 0 || curCPU() != c0 {
		return false // alone in its mask, or the kernel placed it elsewhere
	}
	if own < 0 || idleUs(c0)-own >= moveIdleMin {
		// Our CPU idled while we slept: nothing else wanted it, the
		// yield that led here was a passing thread (or the peer napped
		// at the same time: moving both would swap them, or put one
		// beside the other).
		return false
	}
	for i := range k {
		if before[i] >= 0 {
			after[i] = idleUs(cand[i])
		} else {
			after[i] = -1
		}
	}
	c := pickIdle(cand[:k], before[:k], after[:k], moveIdleMin)
	return c >= 0 && moveTo(c, &orig)
}
