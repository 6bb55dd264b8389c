package ring_test

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/ring"
)

// TestNew_FaultsItsPagesIn: New's region is resident when New returns (a
// fresh large allocation is not: the runtime knows the OS's pages are zero
// and leaves them untouched), so the first lap of records takes no page
// faults. mincore(2) reports residency page by page.
func TestNew_FaultsItsPagesIn(t *testing.T) {
	r := mustNew(t, 16<<20)
	d := ring.DataOf(r)
	ps := os.Getpagesize()
	skip := (ps - int(uintptr(unsafe.Pointer(unsafe.SliceData(d))))%ps) % ps
	n := (len(d) - skip) / ps * ps
	vec := make([]byte, n/ps)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&d[skip])), uintptr(n), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	missing := 0
	for _, v := range vec {
		if v&1 == 0 {
			missing++
		}
	}
	if missing != 0 {
		t.Fatalf("%d of %d pages of a new ring's data area not resident", missing, len(vec))
	}
}
