package benchmarks

import (
	"os"
	"runtime"
	"strconv"
	"unsafe"
)

func sizeOf[T any](v T) uintptr { return unsafe.Sizeof(v) }

// backoff is the idle strategy of the benchmark loops: spin, and yield to
// the scheduler every 64th empty or full poll (a yield on every poll costs
// more in scheduler locks than the ring operation it waits for).
func backoff(idle *int) {
	if *idle++; *idle&63 == 0 {
		runtime.Gosched()
	}
}

func yield() { runtime.Gosched() }

// rounds is how many times each benchmark alternates its baseline and the
// gofi variant inside one run (GOFI_BENCH_ROUNDS, default 1). go test's
// -count repeats each sub-benchmark back to back, which on this bimodal
// machine can put the baseline and gofi in different vCPU placements;
// rounds interleave them: baseline, gofi, baseline, gofi, ...
func rounds() int {
	if n, err := strconv.Atoi(os.Getenv("GOFI_BENCH_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 1
}
