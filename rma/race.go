//go:build race

package rma

// raceOn: the race detector is on. The owner's table then also
// synchronises through a word on the Go heap (Table.hb), because the race
// runtime does not see edges made by atomics on a table in a shared
// mapping (outside the Go heap) — MR.Close, MR.Bytes and the executors of
// this process would otherwise be reported racing on the region's memory
// and the slot's private fields they order correctly.
const raceOn = true
