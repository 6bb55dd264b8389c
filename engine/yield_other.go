//go:build !linux

package engine

import (
	"runtime"
	"time"
)

// osYield yields to other goroutines where sched_yield is not at hand.
func osYield() { runtime.Gosched() }

// osNap blocks briefly where nanosleep is not called directly.
func osNap() { time.Sleep(time.Microsecond) }

// curCPU: unknown here, so the reader never moves (move_linux.go).
func curCPU() int { return -1 }

// moveAway moves nothing here.
func moveAway(int) bool { return false }
