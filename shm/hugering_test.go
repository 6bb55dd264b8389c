package shm

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The ring's MADV_COLLAPSE (one P's asynchronous collapse) backs a block
// of 4 KiB pages with a huge page, its contents unchanged, and its
// completion is read (inflight back to 0) by the next reap.
func TestHugeRing_CollapsesABlock(t *testing.T) {
	startHugeRing()
	if !hugeRing.on.Load() {
		t.Skip("no io_uring here (the send collapses its blocks itself)")
	}
	// 4 MiB of fresh anonymous memory holds one aligned 2 MiB block.
	m, err := unix.Mmap(-1, 0, 2*hugeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	base := uintptr(unsafe.Pointer(&m[0]))
	lo := (base + hugeSize - 1) &^ (hugeSize - 1)
	blk := m[lo-base : lo-base+hugeSize]
	_ = unix.Madvise(blk, unix.MADV_NOHUGEPAGE) // faults take 4 KiB pages
	for i := range blk {
		blk[i] = byte(i*7 + i>>12)
	}
	if anonHuge(t, lo) != 0 {
		t.Skip("the block is already a huge page")
	}
	ok0, failed0 := hugeRing.ok.Load(), hugeRing.failed.Load()
	if !hugeCollapseAsync(lo, hugeSize) {
		t.Fatal("the ring took no request")
	}
	for deadline := time.Now().Add(20 * time.Second); hugeRing.inflight.Load() > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still in flight after 20 s", hugeRing.inflight.Load())
		}
		time.Sleep(time.Millisecond)
		reapHuge()
	}
	for i := range blk {
		if blk[i] != byte(i*7+i>>12) {
			t.Fatalf("byte %d changed", i)
		}
	}
	if hugeRing.failed.Load() != failed0 {
		t.Skip("the kernel did not collapse the block (a hint: no free huge page?)")
	}
	if hugeRing.ok.Load() == ok0 {
		t.Fatal("no successful completion read")
	}
	if kb := anonHuge(t, lo); kb != hugeSize>>10 {
		t.Fatalf("AnonHugePages %d kB in the block's mapping after the collapse, want %d", kb, hugeSize>>10)
	}
}

// anonHuge returns the AnonHugePages (kB) of the mapping holding addr.
func anonHuge(t *testing.T, addr uintptr) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	in := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		l := s.Text()
		if r, _, ok := strings.Cut(l, " "); ok && strings.Contains(r, "-") && !strings.HasSuffix(r, ":") {
			a, b, _ := strings.Cut(r, "-")
			x, err1 := strconv.ParseUint(a, 16, 64)
			y, err2 := strconv.ParseUint(b, 16, 64)
			in = err1 == nil && err2 == nil && uint64(addr) >= x && uint64(addr) < y
			continue
		}
		if in && strings.HasPrefix(l, "AnonHugePages:") {
			n, _ := strconv.Atoi(strings.Fields(l)[1])
			return n
		}
	}
	return 0
}
