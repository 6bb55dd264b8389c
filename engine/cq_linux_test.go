package engine

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestNewCQ_FaultsItsRingIn: a new CQ's ring is resident when NewCQ
// returns (a fresh large allocation is not: the runtime knows the OS's
// pages are zero and leaves them untouched), so the first lap of
// completions takes no page faults. mincore(2) reports residency page by
// page.
func TestNewCQ_FaultsItsRingIn(t *testing.T) {
	for _, size := range []int{DefaultCQSize, faultInMax} {
		cq := NewCQ(size, nil)
		if missing, pages := ringResidency(t, cq.ring); missing != 0 {
			t.Errorf("CQ of %d entries: %d of %d pages of its ring not resident", size, missing, pages)
		}
	}
}

// A CQ opened with a large size (a bound it may never reach) has only its
// first faultInMax entries written in advance: the rest of its ring stays
// untouched until completions fill it, as a fresh allocation does.
func TestNewCQ_FaultsInOnlyItsFirstEntries(t *testing.T) {
	const size = 1 << 18 // 26 MiB of ring
	cq := NewCQ(size, nil)
	if missing, pages := ringResidency(t, cq.ring[:faultInMax]); missing != 0 {
		t.Errorf("%d of the first %d pages not resident", missing, pages)
	}
	// A fresh 26 MiB allocation comes from the OS untouched; allow for
	// part of it being reused (zeroed, so resident) heap.
	if missing, pages := ringResidency(t, cq.ring[faultInMax:]); missing < pages/2 {
		t.Errorf("%d of the %d pages past the first %d entries resident", pages-missing, pages, faultInMax)
	}
}

// ringResidency reports how many of the whole pages r spans are not
// resident (mincore(2)), and how many there are.
func ringResidency(t *testing.T, r []Entry) (missing, pages int) {
	t.Helper()
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(r))), len(r)*int(unsafe.Sizeof(Entry{})))
	ps := os.Getpagesize()
	skip := (ps - int(uintptr(unsafe.Pointer(unsafe.SliceData(b))))%ps) % ps
	n := (len(b) - skip) / ps * ps
	vec := make([]byte, n/ps)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[skip])), uintptr(n), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	for _, v := range vec {
		if v&1 == 0 {
			missing++
		}
	}
	return missing, len(vec)
}
