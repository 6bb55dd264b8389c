package shm

import (
	"os"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Huge pages for registered Go memory.
//
// A write or read into a target's registered Go memory is one
// process_vm_writev/readv, and the kernel pins the target's pages for it
// one 4 KiB page at a time (get_user_pages, page-table walk, unpin): at
// 1 MiB that costs about as much as the copy itself. Backed by a
// transparent huge page the region is pinned in 2 MiB steps, and the same
// call ran 2-3x faster here (6.18 kernel, 1 MiB into Go memory in another
// process). So when a region of at least HugeMin bytes is registered,
// HugePages asks the kernel to back the 2 MiB blocks that hold it with
// huge pages (madvise MADV_HUGEPAGE, then MADV_COLLAPSE, which copies the
// present pages into a huge page now; the contents do not change). Blocks
// are rounded outward, so neighbouring Go objects share them: at most
// 2 x 2 MiB more resident memory per region. A hint: any error (an old
// kernel, THP "never", no free huge page) leaves the memory as it was.

// HugeMinEnv sets HugeMin: the smallest registered region HugePages acts
// on (a size: "1m", "256k"), or "off" to never act. Default 1m.
const HugeMinEnv = "GOFI_SHM_RMA_HUGE_MIN"

// hugeMinDefault is the default of HugeMinEnv.
const hugeMinDefault = 1 << 20

const hugeSize = 2 << 20

var hugeMin struct {
	once sync.Once
	n    int // 0: off
}

// HugeMin returns the smallest region HugePages acts on, 0 when off.
func HugeMin() int {
	hugeMin.once.Do(func() { hugeMin.n = parseHugeMin(os.Getenv(HugeMinEnv)) })
	return hugeMin.n
}

// parseHugeMin reads HugeMinEnv's value: "" or a bad size -> the default,
// "off" or "0" -> 0.
func parseHugeMin(v string) int { return parseHugeSize(v, hugeMinDefault) }

// parseHugeSize reads a huge-page threshold: "" or a bad size -> def,
// "off" or "0" -> 0.
func parseHugeSize(v string, def int) int {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return def
	case strings.EqualFold(v, "off") || v == "0":
		return 0
	}
	n, err := parseSize(v)
	if err != nil {
		return def
	}
	return n
}

// HugePages backs the memory of b with transparent huge pages when b is at
// least HugeMin bytes (see above) and reports whether the kernel
// collapsed it. b must be memory of this process that stays mapped (a Go
// slice, kept alive by the caller). Safe for concurrent use; it takes
// about a millisecond per 2 MiB block.
func HugePages(b []byte) bool {
	m := HugeMin()
	if m == 0 || len(b) < m {
		return false
	}
	return hugeAdvise(uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
}

// hugeAdvise advises the 2 MiB blocks over [addr, addr+n). Raw system
// calls on addresses: the blocks reach past b, which no Go slice may.
func hugeAdvise(addr, n uintptr) bool {
	lo := addr &^ (hugeSize - 1)
	hi := (addr + n + hugeSize - 1) &^ (hugeSize - 1)
	// Later faults in the blocks take huge pages too, and khugepaged
	// mends a block the Go scavenger splits. An error here (a hole in the
	// blocks) still advised the mapped part.
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_HUGEPAGE)
	// All the blocks in one call: the kernel first drains the LRU batches
	// of every CPU that has some (lru_add_drain_all: a kernel worker on
	// each such CPU, which waits for a CPU a busy poller holds, a time
	// slice or more), once per call, where a call per block waited once
	// per block. A block the kernel cannot collapse (a hole, no free huge
	// page, a page busy for a moment) does not stop the others; EAGAIN
	// (some page busy) is tried once more, which passes quickly over the
	// blocks already done.
	_, _, e := unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_COLLAPSE)
	if e == unix.EAGAIN {
		_, _, e = unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_COLLAPSE)
	}
	return e == 0
}
