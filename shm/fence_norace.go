//go:build !race

package shm

// fence is empty: see fence_race.go.
func fence() {}
