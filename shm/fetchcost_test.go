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

// TestFetchCostPicks: single copy first, segments second (a try that
// grew the ring is repeated); the faster method wins, and the slower is
// tried again less often the slower it is.
func TestFetchCostPicks(t *testing.T) {
	pick := func(c *fetchCost, cmaCost, segCost time.Duration) (cma, explore bool) {
		cma, explore = c.pickCMA()
		d := segCost
		if cma {
			d = cmaCost
		}
		c.note(cma, explore, d)
		return cma, explore
	}
	var c fetchCost
	if cma, ex := pick(&c, 10*time.Microsecond, 5*time.Microsecond); !cma || ex {
		t.Fatalf("first fetch: cma %v explore %v, want single copy", cma, ex)
	}
	// The first try of segments grows the ring: it does not count.
	if cma, ex := c.pickCMA(); cma || !ex {
		t.Fatalf("second fetch: cma %v explore %v, want the first try of segments", cma, ex)
	}
	c.retry()
	if cma, ex := pick(&c, 10*time.Microsecond, 5*time.Microsecond); cma || !ex {
		t.Fatalf("third fetch: cma %v explore %v, want segments tried again", cma, ex)
	}
	// Segments are twice as fast: they are used, and single copy tried
	// every 2*exploreEvery fetches.
	tries := 0
	for range 10 * exploreEvery {
		if cma, ex := pick(&c, 10*time.Microsecond, 5*time.Microsecond); cma {
			if !ex {
				t.Fatal("single copy used without exploring while segments are faster")
			}
			tries++
		}
	}
	if tries < 4 || tries > 6 {
		t.Errorf("single copy tried %d times in %d fetches, want about 5", tries, 10*exploreEvery)
	}
	// The placement changes: segments become 7x slower. Single copy is
	// back within a few fetches, and segments are then tried only every
	// 7*exploreEvery fetches.
	seg := 0
	for range 30 * exploreEvery {
		if cma, _ := pick(&c, 10*time.Microsecond, 70*time.Microsecond); !cma {
			seg++
		}
	}
	if seg < 4 || seg > 7+5 {
		t.Errorf("segments used %d times in %d fetches after they became 7x slower", seg, 30*exploreEvery)
	}
	// Far from the start: segments 7x slower are tried once, then not
	// for 7*exploreEvery fetches.
	var f fetchCost
	seg = 0
	for range 110 {
		if cma, _ := pick(&f, 75*time.Microsecond, 520*time.Microsecond); !cma {
			seg++
		}
	}
	if seg != 1 {
		t.Errorf("far placement: segments used %d times in a 110-message run, want 1", seg)
	}
	// Tries dropped for ring growth: two in a row at most.
	var g fetchCost
	g.pickCMA()
	g.note(true, false, 10*time.Microsecond)
	for i := range 3 {
		if cma, ex := g.pickCMA(); cma || !ex {
			t.Fatalf("try %d: cma %v explore %v, want segments", i, cma, ex)
		}
		if got := g.retry(); got != (i < 2) {
			t.Fatalf("retry %d = %v", i, got)
		}
	}
}
