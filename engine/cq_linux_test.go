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
