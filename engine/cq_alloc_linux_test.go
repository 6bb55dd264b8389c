//go:build !race

package engine

import "testing"

// This file builds without the race detector only, whose allocator leaves
// a fresh large allocation resident (all 6240 pages past the first entries
// of the ring below were resident under -race), so nothing could be told
// from mincore there. The test's name says Alloc so that .ci/run's
// non-race pass (go test -run Alloc ./...) runs it.

// A CQ opened with a large size (a bound it may never reach) has only its
// first faultInMax entries written in advance: the rest of its ring stays
// untouched until completions fill it, as a fresh allocation does.
func TestNewCQ_LargeAllocFaultsInOnlyItsFirstEntries(t *testing.T) {
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
