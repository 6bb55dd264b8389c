package rma

// The only file of the package that turns bytes into atomic words.
// Callers pass offsets computed from a validated layout; the indexing
// below still bounds-checks them, and alignment holds because tables start
// page-aligned (mappings) or 64-byte aligned (NewTable checks) and every
// layout offset is a multiple of 8.

import (
	"sync/atomic"
	"unsafe"
)

// The slicing bounds-checks without reading a byte (a read would be a
// plain access the race detector pairs with the atomic ones).
func word32(b []byte, off int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(unsafe.SliceData(b[off : off+4])))
}

func word64(b []byte, off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(unsafe.SliceData(b[off : off+8])))
}

// aligned reports whether &b[0] is aligned to n bytes (n a power of two).
func aligned(b []byte, n int) bool {
	return len(b) > 0 && uintptr(unsafe.Pointer(&b[0]))&uintptr(n-1) == 0
}

// Addr returns the address of b's first byte (0 for an empty slice), as a
// process_vm_writev peer needs it.
func Addr(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&b[0])))
}
