package benchmarks

import (
	"runtime"
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
