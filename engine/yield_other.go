//go:build !linux

package engine

import "runtime"

// osYield yields to other goroutines where sched_yield is not at hand.
func osYield() { runtime.Gosched() }
