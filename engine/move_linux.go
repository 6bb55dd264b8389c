package engine

import (
	"os"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"github.com/gofi-dev/fi/internal/getcpu"
)

// Moving a busy-polling reader off the CPU its peer polls on.
//
// A reader whose yields say that another thread runs on its CPU naps so
// that the kernel places it again when it wakes (see CQ.idleRead). The
// kernel often puts it back where it was: its wake-up looks for an idle
// CPU only when it thinks one is worth the search (with SIS_UTIL, on by
// default since Linux 5.20, not while the last-level cache's CPUs were
// recently busy, and busy-polling keeps them so), and on a loaded host
// there is none. Two processes of a ping-pong that a wake-up put on one
// CPU then hand it back and forth at every message, each hand-off a
// yield, until the load balancer parts them: perftest pingpong -S 8
// -I 10000 at load 12-13 napped 50-85 times per process and ran 34-57 us
// per transfer, about two context switches per message.
//
// When the transport knows where its peers poll (transport.CPUSharer:
// shm's regions carry each owner's CPU) the reader does not leave it to
// the kernel: if a peer polls on the reader's CPU, the reader moves to
// the next CPU of its affinity mask (moveAway): sched_setaffinity to
// that CPU alone, which migrates the thread at once, then straight back
// to its own mask, so nothing stays bound. Of the two processes only
// one moves (the transport's order: shm, the smaller pid), so that they
// do not both jump to the other CPU, and only while the traffic is eager
// (shm.Transport.PeerShares: a large payload is mostly its copy, and on
// a loaded host the other CPU's programs then cost more than the peer).
// Even when the other CPU is busy with other programs a pair of small
// messages does better apart: pinned pairs at load 15 ran 8 B at 0.8-9.5
// us per transfer apart against 22-83 together, and unpinned ones
// alternated with the move off and on (load 8-12, far placement mostly)
// 8 B x 10k 0.7-9.0 against 5.5-73 (9 of 10 rounds faster), 4 KiB x 10k
// 13.8-50.6 against 36-92 (4 of 4), 64 KiB x 1k alike (10 rounds, no
// move: rendezvous traffic). GOFI_CQ_MOVE=off keeps the nap.

// MoveEnv turns the move off ("off"): the nap alone.
const MoveEnv = "GOFI_CQ_MOVE"

var moveOff = sync.OnceValue(func() bool { return os.Getenv(MoveEnv) == "off" })

// cpuMask is sched_getaffinity's buffer: 1024 CPUs.
type cpuMask [16]uint64

func (m *cpuMask) has(cpu int) bool {
	return cpu >= 0 && cpu < 1024 && m[cpu/64]&(1<<(cpu%64)) != 0
}

// curCPU returns the CPU the thread runs on (internal/getcpu), or -1
// (also when moving is off, so that nobody asks the transports).
func curCPU() int {
	if moveOff() {
		return -1
	}
	return getcpu.Current()
}

// setAffinity sets the calling thread's CPU mask.
func setAffinity(m *cpuMask) bool {
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(*m), uintptr(unsafe.Pointer(m)))
	return e == 0
}

// getAffinity reads the calling thread's CPU mask.
func getAffinity(m *cpuMask) bool {
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, unsafe.Sizeof(*m), uintptr(unsafe.Pointer(m)))
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
		// Cannot fail with the mask the kernel gave us, short of its
		// CPUs going offline meanwhile: then widen to every CPU rather
		// than leave the thread bound.
		for i := range orig {
			orig[i] = ^uint64(0)
		}
	}
	return true
}

// nextCPU returns the first CPU of m after from (wrapping), or -1.
func nextCPU(m *cpuMask, from int) int {
	for i := 1; i < 1024; i++ {
		if c := (from + i) % 1024; m.has(c) {
			return c
		}
	}
	return -1
}

// moveAway moves the calling thread from cpu to the next CPU of its mask
// (see above) and reports whether it did: not when the thread no longer
// runs on cpu, or its mask has no other CPU.
func moveAway(cpu int) bool {
	// One thread throughout: the mask read is the one restored.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var m cpuMask
	if curCPU() != cpu || !getAffinity(&m) {
		return false
	}
	to := nextCPU(&m, cpu)
	return to >= 0 && to != cpu && moveTo(to, &m)
}
