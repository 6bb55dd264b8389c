//go:build !race

package fi

import "testing"

//go:noinline
func hotPathErr(k int) error {
	switch k {
	case 0:
		return ErrAgain
	case 1:
		return ErrAvail
	case 2:
		return ErrTrunc
	}
	return nil
}

// TestErrno_SentinelsDoNotAllocate: returning an Errno constant as an
// error is free, so hot paths (cq.Read's ErrAgain/ErrAvail, truncation)
// allocate nothing.
func TestErrno_SentinelsDoNotAllocate(t *testing.T) {
	var sink error
	allocs := testing.AllocsPerRun(1000, func() {
		for k := 0; k < 3; k++ {
			sink = hotPathErr(k)
		}
	})
	if allocs != 0 {
		t.Fatalf("returning Errno sentinels allocates %.1f times per run", allocs)
	}
	if sink != ErrTrunc {
		t.Fatal("unexpected sentinel")
	}
}
