package shm

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Asynchronous collapse with one P: io_uring's IORING_OP_MADVISE.
//
// With one P (GOMAXPROCS 1, as a busy-polling program runs) the send
// collapsed its new blocks itself (sendHuge), because a worker goroutine
// would run only when the sender gave the P up and then keep it through
// the collapse. The collapse then lands on the first message of the size:
// the kernel's own work (0.3-0.45 ms for 2 MiB) plus the wait for a
// kernel worker on every other CPU with batched pages (lru_add_drain_all,
// which waits for the peer's CPU, held by its busy poller for up to a
// time slice: median 1.6 ms, 0.3-8.9 ms in a 1 MiB ping-pong's first
// round trip, both sides in turn).
//
// An io_uring MADVISE request is always run by one of the ring's kernel
// worker threads (io-wq), never in the submitting call: the sender hands
// MADV_COLLAPSE over with one io_uring_enter and goes on at once, its
// first copies from 4 KiB pages, while the kernel collapses the blocks
// on a thread that needs no P. The ring is the process's (hugeRing: 8
// requests, a few KiB of memory), made with the first transport; where
// io_uring is missing or refused (an old kernel, io_uring_disabled,
// a seccomp filter), or a request fails as unsupported, the send
// collapses its blocks itself as before.
//
// Completions are read at the next large send or post (sendHuge): a
// collapse that found a page busy (EAGAIN: the receiver's copy had it
// pinned at that moment) is submitted again, at most hugeRingTries times.

const (
	ioringOpMadvise   = 25 // IORING_OP_MADVISE
	iosqeAsync        = 1 << 4
	ioringOffSQRing   = 0
	ioringOffCQRing   = 0x8000000
	ioringOffSQEs     = 0x10000000
	ioringFeatSingle  = 1 << 0 // IORING_FEAT_SINGLE_MMAP
	hugeRingEntries   = 8
	hugeRingTries     = 3
	hugeRingTryShift  = 16 // user_data: block address | tries<<16 | blocks
	hugeRingBlockMask = 1<<hugeRingTryShift - 1
)

// ioParams is struct io_uring_params.
type ioParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  struct {
		head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
		userAddr                                                        uint64
	}
	cqOff struct {
		head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
		userAddr                                                        uint64
	}
}

// ioSQE is struct io_uring_sqe (64 bytes) as a MADVISE request uses it.
type ioSQE struct {
	opcode, flags uint8
	ioprio        uint16
	fd            int32
	off           uint64
	addr          uint64
	len           uint32
	advice        uint32 // fadvise_advice
	userData      uint64
	bufIndex      uint16
	personality   uint16
	spliceFdIn    int32
	addr3, pad    uint64
}

// ioCQE is struct io_uring_cqe.
type ioCQE struct {
	userData uint64
	res      int32
	flags    uint32
}

var hugeRing struct {
	once     sync.Once
	mu       sync.Mutex
	on       atomic.Bool // the ring works (made, nothing refused as unsupported)
	fd       int
	sqTail   *uint32
	sqHead   *uint32
	sqMask   uint32
	sqArray  unsafe.Pointer
	sqes     unsafe.Pointer
	cqHead   *uint32
	cqTail   *uint32
	cqMask   uint32
	cqes     unsafe.Pointer
	inflight atomic.Int32
	// for tests: requests submitted, completed with success, failed
	submitted, ok, failed atomic.Uint64
}

// startHugeRing makes the process's ring once; on any error it stays off.
func startHugeRing() {
	hugeRing.once.Do(func() {
		var p ioParams
		fd, _, e := unix.RawSyscall(unix.SYS_IO_URING_SETUP, hugeRingEntries, uintptr(unsafe.Pointer(&p)), 0)
		if e != 0 {
			return
		}
		if p.features&ioringFeatSingle == 0 {
			_ = unix.Close(int(fd))
			return
		}
		sqLen := uintptr(p.sqOff.array) + uintptr(p.sqEntries)*4
		cqLen := uintptr(p.cqOff.cqes) + uintptr(p.cqEntries)*unsafe.Sizeof(ioCQE{})
		ringLen := max(sqLen, cqLen)
		ring, err := unix.Mmap(int(fd), ioringOffSQRing, int(ringLen), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			_ = unix.Close(int(fd))
			return
		}
		sqes, err := unix.Mmap(int(fd), ioringOffSQEs, int(p.sqEntries)*int(unsafe.Sizeof(ioSQE{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			_ = unix.Munmap(ring)
			_ = unix.Close(int(fd))
			return
		}
		base := unsafe.Pointer(&ring[0])
		r := &hugeRing
		r.fd = int(fd)
		r.sqHead = (*uint32)(unsafe.Add(base, p.sqOff.head))
		r.sqTail = (*uint32)(unsafe.Add(base, p.sqOff.tail))
		r.sqMask = *(*uint32)(unsafe.Add(base, p.sqOff.ringMask))
		r.sqArray = unsafe.Add(base, p.sqOff.array)
		r.sqes = unsafe.Pointer(&sqes[0])
		r.cqHead = (*uint32)(unsafe.Add(base, p.cqOff.head))
		r.cqTail = (*uint32)(unsafe.Add(base, p.cqOff.tail))
		r.cqMask = *(*uint32)(unsafe.Add(base, p.cqOff.ringMask))
		r.cqes = unsafe.Add(base, p.cqOff.cqes)
		r.on.Store(true)
	})
}

// hugeCollapseAsync hands MADV_COLLAPSE of the blocks [lo, lo+n) (2 MiB
// aligned) to the ring's kernel worker, after MADV_HUGEPAGE on them here
// (a flag on the mapping, microseconds). It reports false, having done
// nothing, when the ring is off or full: the caller collapses them itself.
func hugeCollapseAsync(lo, n uintptr) bool {
	r := &hugeRing
	if !r.on.Load() || n > 1<<31 { // the request's length is 32 bits
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	reapHugeLocked()
	if !r.on.Load() || r.inflight.Load() >= hugeRingEntries {
		return false
	}
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, lo, n, unix.MADV_HUGEPAGE)
	return submitHugeLocked(lo, n, 0)
}

// submitHugeLocked queues one MADV_COLLAPSE request and enters it.
func submitHugeLocked(lo, n uintptr, tries uint64) bool {
	r := &hugeRing
	tail := atomic.LoadUint32(r.sqTail)
	if tail-atomic.LoadUint32(r.sqHead) > r.sqMask {
		return false
	}
	i := tail & r.sqMask
	sqe := (*ioSQE)(unsafe.Add(r.sqes, uintptr(i)*unsafe.Sizeof(ioSQE{})))
	*sqe = ioSQE{
		opcode:   ioringOpMadvise,
		flags:    iosqeAsync,
		fd:       -1,
		addr:     uint64(lo),
		len:      uint32(n), // off 0: kernels before 6.x take the length from len only
		advice:   unix.MADV_COLLAPSE,
		userData: uint64(lo) | tries<<hugeRingTryShift | uint64(n/hugeSize),
	}
	*(*uint32)(unsafe.Add(r.sqArray, uintptr(i)*4)) = i
	atomic.StoreUint32(r.sqTail, tail+1)
	_, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 1, 0, 0, 0, 0)
	for k := 0; e == unix.EINTR && k < 3; k++ {
		_, _, e = unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 1, 0, 0, 0, 0)
	}
	if e != 0 {
		// Not consumed (or not known to be): the ring is not used again.
		r.on.Store(false)
		return false
	}
	r.inflight.Add(1)
	r.submitted.Add(1)
	return true
}

// reapHuge reads the ring's completions (see reapHugeLocked).
func reapHuge() {
	if hugeRing.inflight.Load() == 0 {
		return
	}
	hugeRing.mu.Lock()
	reapHugeLocked()
	hugeRing.mu.Unlock()
}

// reapHugeLocked reads the completions: a collapse that found a page busy
// goes again (at most hugeRingTries in all), one the kernel refused as
// unknown (EINVAL: no MADV_COLLAPSE or no MADVISE request) turns the ring
// off; other errors leave the blocks as they are (a hint).
func reapHugeLocked() {
	r := &hugeRing
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	for ; head != tail; head++ {
		c := *(*ioCQE)(unsafe.Add(r.cqes, uintptr(head&r.cqMask)*unsafe.Sizeof(ioCQE{})))
		atomic.StoreUint32(r.cqHead, head+1)
		r.inflight.Add(-1)
		lo := uintptr(c.userData) &^ (hugeSize - 1)
		n := uintptr(c.userData&hugeRingBlockMask) * hugeSize
		tries := (c.userData & (hugeSize - 1)) >> hugeRingTryShift
		switch e := unix.Errno(-c.res); {
		case c.res >= 0:
			r.ok.Add(1)
		case e == unix.EAGAIN && tries+1 < hugeRingTries:
			if !submitHugeLocked(lo, n, tries+1) {
				r.failed.Add(1)
			}
		case e == unix.EINVAL || e == unix.EOPNOTSUPP:
			r.failed.Add(1)
			r.on.Store(false)
		default:
			r.failed.Add(1)
		}
	}
}
