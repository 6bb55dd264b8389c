//go:build !race

package engine

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// This file builds without the race detector only, whose allocator leaves
// a fresh large allocation resident (all 6240 pages past the first entries
// of the ring below were resident under -race), so nothing could be told
// from mincore there. The test's name says Alloc so that .ci/run's
// non-race pass (go test -run Alloc ./...) runs it.

// A CQ opened with a large size (a bound it may never reach) has only its
// first faultInMax entries written in advance: the rest of its ring stays
// untouched until completions fill it, as a fresh allocation does. The
// ring comes from the heap, which may hand out reused (zeroed, so
// resident) pages: with go test -count the previous run's ring was free
// heap and all 6240 pages were resident in runs 2-30 (GOMAXPROCS 1 and
// 2). So the heap's free pages go back to the OS first, and the test fails
// only when three CQs in a row, each kept while the next is made (fresh
// address space), are resident past their first entries: a NewCQ that
// writes its whole ring fails every try.
func TestNewCQ_LargeAllocFaultsInOnlyItsFirstEntries(t *testing.T) {
	const size = 1 << 18 // 26 MiB of ring
	var kept []*CQ
	defer runtime.KeepAlive(&kept)
	resident, pages := 0, 0
	for range 3 {
		debug.FreeOSMemory()
		cq := NewCQ(size, nil)
		kept = append(kept, cq)
		if missing, pages := ringResidency(t, cq.ring[:faultInMax]); missing != 0 {
			t.Fatalf("%d of the first %d pages not resident", missing, pages)
		}
		// A fresh 26 MiB allocation comes from the OS untouched; allow
		// for part of it being reused (zeroed, so resident) heap.
		var missing int
		missing, pages = ringResidency(t, cq.ring[faultInMax:])
		if resident = pages - missing; missing >= pages/2 {
			return
		}
	}
	t.Errorf("%d of the %d pages past the first %d entries resident, three CQs in a row", resident, pages, faultInMax)
}
