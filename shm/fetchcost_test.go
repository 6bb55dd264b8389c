package shm

import (
	"testing"
	"time"
)

func TestFetchClass(t *testing.T) {
	for _, c := range []struct{ n, class int }{
		{1, 0}, {16 << 10, 0}, {32 << 10, 0}, {32<<10 + 1, 1}, {64 << 10, 1},
		{100000, 2}, {256 << 10, 3}, {1 << 20, 5}, {2 << 20, 6}, {2<<20 + 1, 7}, {1 << 30, 7},
	} {
		if got := fetchClass(c.n); got != c.class {
			t.Errorf("fetchClass(%d) = %d, want %d", c.n, got, c.class)
		}
	}
}

// fetchRun drives a fetchCost as the transport does: the class's first
// fetch is not timed; cost(i, cma) is fetch i's time by the method picked.
// It returns how many fetches went by segments and how many explored.
func fetchRun(c *fetchCost, n int, cost func(i int, cma bool) time.Duration) (seg, explored int) {
	for i := range n {
		cma, ex := c.pickCMA()
		if !cma {
			seg++
		}
		if ex {
			explored++
		}
		if c.n > 1 {
			c.note(cma, ex, cost(i, cma))
		}
	}
	return seg, explored
}

func costs(cma, seg time.Duration) func(int, bool) time.Duration {
	return func(_ int, c bool) time.Duration {
		if c {
			return cma
		}
		return seg
	}
}

// TestFetchCostPicks: single copy first, then a burst of segments (a try
// that grew the ring is repeated) and a confirming burst; the faster
// method wins, and the slower is tried again less often the slower it is.
func TestFetchCostPicks(t *testing.T) {
	us := time.Microsecond
	var c fetchCost
	for i := range firstBurst - 1 {
		if cma, ex := c.pickCMA(); !cma || ex {
			t.Fatalf("fetch %d: cma %v explore %v, want single copy", i+1, cma, ex)
		}
		if i > 0 {
			c.note(true, false, 10*us)
		}
	}
	// The first try of segments grows the ring: it does not count.
	if cma, ex := c.pickCMA(); cma || !ex {
		t.Fatalf("fetch %d: cma %v explore %v, want the first try of segments", firstBurst, cma, ex)
	}
	if !c.retry() {
		t.Fatal("first try dropped: retry declined")
	}
	for i := range exploreBurst {
		if cma, ex := c.pickCMA(); cma || !ex {
			t.Fatalf("burst fetch %d: cma %v explore %v, want segments", i, cma, ex)
		}
		c.note(false, true, 5*us)
	}
	// Segments are twice as fast: they are used, single copy tried in
	// bursts costing about 1/exploreEvery of the time.
	seg, ex := fetchRun(&c, 100*exploreEvery, costs(10*us, 5*us))
	if n := 100 * exploreEvery; seg < n-n/20 || ex == 0 || ex > n/20 {
		t.Errorf("near: %d of %d fetches by segments, %d explored", seg, n, ex)
	}
	// One preempted segment fetch does not move the choice.
	c.note(false, false, 5*time.Millisecond)
	if cma, _ := c.pickCMA(); cma && c.burst == 0 {
		t.Error("one slow segment fetch moved the class to single copy")
	}
	// The placement changes: segments become 7x slower. Single copy is
	// back within costSamples fetches and segments tried rarely.
	seg, _ = fetchRun(&c, 30*exploreEvery, costs(10*us, 70*us))
	if seg > costSamples+exploreBurst+30*exploreEvery/50 {
		t.Errorf("segments used %d times in %d fetches after they became 7x slower", seg, 30*exploreEvery)
	}
	// Far from the start: segments 7x slower are tried in two bursts
	// (the second confirms), then not in a 110-message run.
	var f fetchCost
	if seg, _ := fetchRun(&f, 110, costs(75*us, 520*us)); seg != 2*exploreBurst {
		t.Errorf("far placement: segments used %d times in a 110-message run, want %d", seg, 2*exploreBurst)
	}
	// Near, but the messages of the first burst stall (the two
	// processes share a CPU for a while): the confirming burst finds
	// segments.
	var g fetchCost
	stall := func(i int, cma bool) time.Duration {
		switch {
		case i < firstBurst+exploreBurst+2:
			return 8 * time.Millisecond
		case cma:
			return 10 * us
		}
		return 5 * us
	}
	fetchRun(&g, 110, stall)
	if cma, _ := g.pickCMA(); cma {
		t.Errorf("near after a stalled start: single copy in use (cma %d seg %d ns)", g.cma.least(), g.seg.least())
	}
	// Tries dropped for ring growth: maxVoids in a row at most.
	var h fetchCost
	fetchRun(&h, firstBurst-1, costs(10*us, 5*us))
	for i := range maxVoids + 1 {
		if cma, ex := h.pickCMA(); cma || !ex {
			t.Fatalf("try %d: cma %v explore %v, want segments", i, cma, ex)
		}
		if got := h.retry(); got != (i < maxVoids) {
			t.Fatalf("retry %d = %v", i, got)
		}
	}
}
