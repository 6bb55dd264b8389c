package shm

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Huge pages for large rendezvous send buffers.
//
// A receiver takes a rendezvous payload with one process_vm_readv from
// the sender's buffer, and the kernel pins the sender's pages for it 4 KiB
// at a time (see rmathp.go): with the buffer backed by transparent huge
// pages the copy ran 2.2-2.4x faster at 256 KiB (single copy, perftest
// latency p50 32-35 us against 14-16, both placements, load 8-9), while at
// 32-128 KiB the difference stayed within the noise. So the first time a
// send buffer of at least MsgHugeMin bytes goes by rendezvous, the sender
// asks the kernel to back the 2 MiB blocks holding it with huge pages
// (HugePages' madvise pair), once per block: the blocks handled are
// remembered (the last hugeSeenN), so a buffer sent again costs a few
// compares. Collapsing takes about a millisecond per block, once; a
// 1 MiB message saves more than that within its first ten or so sends.
// A hint: errors leave the memory as it was, and the block is not tried
// again.
//
// The collapse runs on a goroutine of its own (hugeWorker, started with
// the first transport), not on the send: it took 0.25 ms per block on a
// quiet host but 11-80 ms when the kernel had to compact memory for the
// huge page, and all of it landed on the first message of the size (a
// 100-message run of 1 MiB lasts 15-20 ms). The kernel allocates the
// huge page without the address space's lock, so the receiver's copies
// from the block go on meanwhile (in 4 KiB pages); only the final copy
// into the huge page (about 0.1-0.3 ms) holds them up. A block whose
// hand-over finds the queue full is not advised (a hint).
//
// Except with one P (GOMAXPROCS 1, as a busy-polling program runs): the
// worker then runs only when the sending goroutine gives the P up (a
// poller yields every few ms), and its madvise keeps the P while in the
// kernel until it returns or sysmon takes the P back (sysmon sleeps up to
// 10 ms in a busy process), so the sender stalls for the collapse anyway,
// only later, after its first copies went from 4 KiB pages, and sometimes
// for a sysmon period more. The send advises the block itself then
// (perftest pingpong -S 1m, 100 iterations, client's round trips: worker
// started 1.9-2.2 ms into the run and its collapse took 1-2.5 ms, with
// the round trips before at 4 KiB cost), handing the collapse to an
// io_uring request run by a kernel thread that needs no P where the
// kernel has io_uring (hugering.go), else collapsing inline: the stall
// then comes once, at the first message.

// MsgHugeMinEnv sets MsgHugeMin: the smallest rendezvous send buffer whose
// memory the sender backs with huge pages (a size), or "off". Default 256k.
const MsgHugeMinEnv = "GOFI_SHM_MSG_HUGE_MIN"

const (
	msgHugeMinDefault = 256 << 10
	hugeSeenN         = 32 // blocks remembered
)

var msgHugeMin struct {
	once sync.Once
	n    int
}

// MsgHugeMin returns the smallest send buffer the sender backs with huge
// pages, 0 when off.
func MsgHugeMin() int {
	msgHugeMin.once.Do(func() { msgHugeMin.n = parseHugeSize(os.Getenv(MsgHugeMinEnv), msgHugeMinDefault) })
	return msgHugeMin.n
}

// hugeSeen remembers the 2 MiB blocks already advised (a ring).
type hugeSeen struct {
	blk     [hugeSeenN]uintptr
	i       int
	advised int // blocks advised, for tests
	inline  int // of which advised by the send itself (one P), for tests
	async   int // of which handed to the ring by the send itself (one P), for tests
}

// sendHuge backs the blocks of b with huge pages unless done before.
func (t *Transport) sendHuge(b []byte) {
	reapHuge()
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := addr &^ (hugeSize - 1)
	hi := (addr + uintptr(len(b)) + hugeSize - 1) &^ (hugeSize - 1)
	oneP := -1              // whether GOMAXPROCS is 1, read once a block is new
	var first, last uintptr // the new blocks advised here (one P)
	for blk := lo; blk < hi; blk += hugeSize {
		if t.huge.has(blk) {
			continue
		}
		t.huge.blk[t.huge.i] = blk
		t.huge.i = (t.huge.i + 1) % hugeSeenN
		t.huge.advised++
		if oneP < 0 {
			oneP = 0
			if runtime.GOMAXPROCS(0) == 1 {
				oneP = 1
			}
		}
		if oneP == 1 {
			if first == 0 {
				first = blk
			}
			last = blk
			t.huge.inline++
			continue
		}
		queueHuge(blk)
	}
	if first != 0 {
		// One call over the new blocks (a block between them done before
		// costs the kernel a look): the kernel's LRU drain, which waits
		// for the peer's busy CPU, comes once per call (hugeAdvise). On
		// the ring's kernel worker when there is one (hugering.go), the
		// send going on meanwhile.
		if hugeCollapseAsync(first, last+hugeSize-first) {
			t.huge.async += int((last + hugeSize - first) / hugeSize)
		} else {
			hugeAdvise(first, last+hugeSize-first)
		}
	}
}

// RecvPrepareMin is MsgHugeMin, or 0 when huge pages are off
// (transport.RecvPreparer).
func (t *Transport) RecvPrepareMin() int { return t.hugeMin }

// PrepareRecv backs a posted receive buffer of at least MsgHugeMin bytes
// with huge pages as sendHuge does a send buffer (the same blocks
// remembered: a block done for one is not done again for the other). The
// sender's process_vm_writev of a split's tail (split.go) pins the
// receive buffer's pages, 4 KiB at a time until then. Done at the post,
// which a ping-pong makes before the peer sends, the collapse does not
// land on a message: fetchSplit advised the buffer at the first split
// copy, and not at all with one P, where the collapse would have run on
// the receive (perftest pingpong -S 1m with one P left its receive
// buffers in 4 KiB pages unless they shared a block with the send
// buffer).
func (t *Transport) PrepareRecv(b []byte) {
	if t.hugeMin > 0 && len(b) >= t.hugeMin {
		t.sendHuge(b)
	}
}

// hugeWork hands blocks from sendHuge to hugeWorker: a fixed queue under
// a mutex and a futex word the worker sleeps on. The sender wakes the
// worker's thread with a raw futex call, not through the Go scheduler: a
// goroutine woken by a channel could make the runtime start a thread for
// it, allocating on the first large send (seen as 6 allocations in
// TestFirstRendezvous_DoesNotAllocate).
var hugeWork struct {
	once   sync.Once
	mu     sync.Mutex
	q      [hugeSeenN]uintptr
	n      int
	word   atomic.Uint32 // 1: blocks queued; the worker sleeps while 0
	on     atomic.Bool   // the worker runs
	queued atomic.Uint64 // blocks handed over, for tests
	done   atomic.Uint64 // blocks advised, for tests
}

// startHugeWorker starts the goroutine that advises the blocks sendHuge
// hands over (once per process; it lives as long as the process, asleep
// in the kernel while there is nothing to do).
func startHugeWorker() {
	hugeWork.once.Do(func() {
		hugeWork.on.Store(true)
		go hugeWorker()
		startHugeRing()
	})
}

// queueHuge hands blk to the worker; without one, or with its queue full,
// the block is not advised (a hint).
func queueHuge(blk uintptr) {
	if !hugeWork.on.Load() {
		return
	}
	hugeWork.mu.Lock()
	ok := hugeWork.n < len(hugeWork.q)
	if ok {
		hugeWork.q[hugeWork.n] = blk
		hugeWork.n++
		hugeWork.queued.Add(1)
	}
	hugeWork.mu.Unlock()
	if ok {
		hugeWork.word.Store(1)
		_, _, _ = unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&hugeWork.word)), futexWakeOp, 1, 0, 0, 0)
	}
}

func hugeWorker() {
	var blks [hugeSeenN]uintptr
	for {
		if hugeWork.word.Swap(0) == 0 {
			_ = futexWait(&hugeWork.word, 0, time.Hour)
			continue
		}
		hugeWork.mu.Lock()
		k := copy(blks[:], hugeWork.q[:hugeWork.n])
		hugeWork.n = 0
		hugeWork.mu.Unlock()
		// Adjacent blocks (a buffer's, queued by one send or post) in
		// one call: one LRU drain for them all (hugeAdvise).
		for i := 0; i < k; {
			j := i + 1
			for j < k && blks[j] == blks[j-1]+hugeSize {
				j++
			}
			hugeAdvise(blks[i], uintptr(j-i)*hugeSize)
			hugeWork.done.Add(uint64(j - i))
			i = j
		}
	}
}

func (s *hugeSeen) has(blk uintptr) bool {
	for _, v := range s.blk {
		if v == blk {
			return true
		}
	}
	return false
}
