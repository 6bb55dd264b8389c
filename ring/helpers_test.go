package ring_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

func spin() { runtime.Gosched() }

// idleWait is the idle strategy of the polling loops that may run long
// (the stress test): yield to the Go scheduler for the first 256 empty or
// full polls, then sleep 20µs, so that on an overloaded machine the other
// process gets the CPU instead of both spinning. The caller resets idle on
// progress.
func idleWait(idle *int) {
	if *idle++; *idle < 256 {
		runtime.Gosched()
		return
	}
	time.Sleep(20 * time.Microsecond)
}

func errSeq(got, want uint64) error { return fmt.Errorf("sequence %d, want %d", got, want) }

// testDeadline is when a polling loop in a test gives up: a minute from
// now, or shortly before the test binary's own deadline.
func testDeadline(t *testing.T) time.Time {
	d := time.Now().Add(time.Minute)
	if td, ok := t.Deadline(); ok && td.Add(-5*time.Second).Before(d) {
		d = td.Add(-5 * time.Second)
	}
	return d
}
