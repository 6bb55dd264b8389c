//go:build !amd64 && !386

package coll

import "sync/atomic"

// storeRel stores v into *p with release ordering (see store_tso.go);
// without total store order it is an atomic store.
func storeRel(p *atomic.Uint64, v uint64) { p.Store(v) }
