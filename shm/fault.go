package shm

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Guard runs f with the runtime's panic-on-fault mode on for the calling
// goroutine and turns a memory fault inside f (SIGBUS on a page of a mapped
// file a peer truncated, SIGSEGV on an unmapped address) into an error
// wrapping ErrFault. Any other panic propagates unchanged. Use it around
// every access to a peer's mapping that the peer could have shrunk; the
// cost is a defer and two runtime calls, so guard a batch of work rather
// than each word.
//
// Guard does not allocate unless f faults. Safe for concurrent use.
func Guard(f func()) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = faultError(r)
		}
	}()
	f()
	return nil
}

// faultError turns a value recovered under panic-on-fault into the error
// Guard returns. Any other panic is re-raised. Hot loops inline Guard's
// pattern (SetPanicOnFault, a deferred recover calling this) to avoid the
// closure call.
func faultError(r any) error {
	re, ok := r.(runtime.Error)
	fa, hasAddr := r.(interface{ Addr() uintptr })
	if !ok || !hasAddr {
		panic(r)
	}
	return fmt.Errorf("%w at address %#x: %v", ErrFault, fa.Addr(), re)
}

// GuardedCopy copies src into dst like copy, under Guard.
func GuardedCopy(dst, src []byte) (n int, err error) {
	err = Guard(func() { n = copy(dst, src) })
	return n, err
}
