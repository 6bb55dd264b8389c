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

// napMove naps; moving the thread to an idle CPU is Linux's (move_linux.go).
func napMove() bool { osNap(); return false }
