package shm

import (
	"os"
	"sync"
	"unsafe"
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
}

// sendHuge backs the blocks of b with huge pages unless done before.
func (t *Transport) sendHuge(b []byte) {
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := addr &^ (hugeSize - 1)
	hi := (addr + uintptr(len(b)) + hugeSize - 1) &^ (hugeSize - 1)
	for blk := lo; blk < hi; blk += hugeSize {
		if t.huge.has(blk) {
			continue
		}
		t.huge.blk[t.huge.i] = blk
		t.huge.i = (t.huge.i + 1) % hugeSeenN
		t.huge.advised++
		hugeAdvise(blk, hugeSize)
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
