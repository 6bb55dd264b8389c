//go:build race

package shm

import "sync/atomic"

// fence orders the caller's earlier stores before Ring's load of the waiter
// count. Without the race detector every sync/atomic store is sequentially
// consistent (XCHG on amd64, STLR before LDAR on arm64), which is all the
// doorbell protocol needs, so fence is empty there. Under -race, atomics on
// memory outside the Go heap (our mappings) run through the race runtime as
// release stores and acquire loads, which x86 may reorder (store buffer):
// the sender could miss a sleeping waiter. A locked RMW on a private word
// restores the full barrier. This is not a race-only fix of a bug: it
// re-creates under the race runtime the ordering the shipped build has.
func fence() {
	var w atomic.Uint32
	w.Add(1)
}
