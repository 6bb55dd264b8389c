package shm

// The only file of the package that turns mapped bytes into atomic words.
// Callers pass offsets validated against the layout (ParseHeader); the
// indexing below still bounds-checks them, and alignment holds because
// mappings are page-aligned and every layout offset is a multiple of 8.

import (
	"sync/atomic"
	"unsafe"
)

func word32(b []byte, off int) *atomic.Uint32 {
	_ = b[off+3]
	return (*atomic.Uint32)(unsafe.Pointer(&b[off]))
}

func word64(b []byte, off int) *atomic.Uint64 {
	_ = b[off+7]
	return (*atomic.Uint64)(unsafe.Pointer(&b[off]))
}

// aligned reports whether &b[off] is aligned to n bytes (n a power of two).
func aligned(b []byte, off, n int) bool {
	return uintptr(unsafe.Pointer(&b[off]))&uintptr(n-1) == 0
}
