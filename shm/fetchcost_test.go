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

// TestFetchCostPicks: single copy first and alone for firstTry
// fetches, then one try of segments; the faster method wins, and the
// slower is tried again less often the slower it is.
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
	for i := 1; i <= firstTry; i++ {
		if cma, ex := pick(&c, 10*time.Microsecond, 5*time.Microsecond); !cma || ex {
			t.Fatalf("fetch %d: cma %v explore %v before segments were tried", i, cma, ex)
		}
	}
	if cma, ex := pick(&c, 10*time.Microsecond, 5*time.Microsecond); cma || !ex {
		t.Fatalf("fetch %d: cma %v explore %v, want the first try of segments", firstTry+1, cma, ex)
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
	// The placement changes: segments become 7x slower. The next try of
	// single copy switches back at once, and segments are then tried only
	// every 7*exploreEvery fetches.
	seg := 0
	for range 30 * exploreEvery {
		if cma, _ := pick(&c, 10*time.Microsecond, 70*time.Microsecond); !cma {
			seg++
		}
	}
	if seg < 4 || seg > 7+5 {
		t.Errorf("segments used %d times in %d fetches after they became 7x slower", seg, 30*exploreEvery)
	}
}
