//go:build !race

package main

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// After prefault, recording into every element of a fresh large slice
// takes no page fault per page (the timed loop's stores): 2048 without
// prefault for these 8 MiB. A handful may still come from outside the
// loop's stores (the thread's signal stack on a preemption, a huge-page
// collapse under the slice; CI once saw 6), so the bound is 1 in 32
// pages, far under one per page. Without -race (whose
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
	if n := minflt() - before; n > int64(len(s))/(4096/8)/32 {
		t.Fatalf("%d page faults while filling a prefaulted slice of %d pages, want (almost) none", n, len(s)/(4096/8))
	}
	runtime.KeepAlive(s)
}
