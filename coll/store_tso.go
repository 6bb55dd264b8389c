//go:build amd64 || 386

package coll

import (
	"sync/atomic"
	"unsafe"
)

// storeRel stores v into *p with release ordering: it becomes visible to
// other CPUs no earlier than this CPU's earlier stores. On x86 every
// store is ordered so (total store order), so it is a plain store: a
// locked one (atomic.Store) would also wait until the cache line is this
// CPU's own, which for a line other ranks are polling is a transfer
// between cores on every phase. Readers load with atomic.Load.
func storeRel(p *atomic.Uint64, v uint64) { *(*uint64)(unsafe.Pointer(p)) = v }
