//go:build !race

package main

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// After prefault, recording into every element of a fresh large slice
// takes no page fault (the timed loop's stores). Without -race (whose
// shadow memory faults on the stores), so named for go test -run Alloc
// like the allocation tests (TestNoRaceTestsAreNamedAlloc).
func TestPrefaultAlloc_LeavesNoPageFaultForTheTimedLoop(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	minflt := func() int64 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
			t.Fatal(err)
		}
		return ru.Minflt
	}
	s := make([]time.Duration, 1<<20) // 8 MiB: fresh from the OS
	prefault(s)
	before := minflt()
	for i := range s {
		s[i] = time.Duration(i)
	}
	if n := minflt() - before; n > 2 {
		t.Fatalf("%d page faults while filling a prefaulted slice, want none", n)
	}
	runtime.KeepAlive(s)
}
