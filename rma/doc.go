// Package rma is gofi's one-sided protocol: memory-region keys and the key
// table a domain publishes, the access and range checks every remote
// access passes, counters that peers may bump, the wire form of RMA and
// atomic requests and their answers, and the target-side execution of
// those requests against registered memory.
//
// # Who touches target memory
//
// A target's application never runs code for a one-sided operation. Its
// memory is reached by whichever of these is at hand, all following one
// discipline (Table, Acquire/Release):
//
//   - the tcp transport's event loop of the target, executing request
//     frames (package net);
//   - a shm initiator, copying with process_vm_writev/readv into the
//     target's registered Go memory, or with plain loads and stores into
//     memory from AllocMR that it maps itself (package shm);
//   - the target's shm executor goroutine, serving requests that came
//     through a shared-memory channel when the kernel refuses single copy,
//     and every atomic on memory the initiator cannot map (package shm);
//   - the target's shm Poll, when its application drives progress anyway,
//     serving small requests an initiator offered it first (package shm's
//     quick requests: Target.Run under the same checks).
//
// Each access first takes a holder cell of the region's slot in the key
// table (a word in the table's shared memory holding the accessor's pid),
// then checks that the slot is still live; MR.Close marks the slot closing
// and waits until no live process holds a cell. So an access racing Close
// either completes before Close returns or fails, and a holder that died
// (kill -9 in the middle of a copy) is recognised by its pid and does not
// wedge Close.
//
// # Atomics
//
// Element kernels come from package dtype/kernel: 4- and 8-byte integers
// use the hardware's atomic instructions on the element itself, so they
// are atomic with respect to the target's own sync/atomic operations on
// MR.Bytes(); 1- and 2-byte integers, floats and the 8-byte complex type
// use compare-and-swap loops on the aligned word that contains them;
// 16-byte types (DoubleComplex, Int128, Uint128) are executed only by the
// target process, under a lock striped by address shared by every table of
// the process (Table.Lock16), so memory served by several endpoints (a shm
// and a tcp one) is still serialised. Atomics on one location are
// therefore atomic with respect to each other whoever executes them: the
// tcp event loop, the shm executor, or a shm initiator on its mapping of
// AllocMR memory (never for 16-byte types). See package fi's Atomic
// documentation for the ordering promised between atomics and RMA writes.
//
// # Trust
//
// Everything a peer sends is untrusted: keys, offsets, lengths, counts,
// datatypes and operations are checked here (DecodeRequest, Check) before
// a byte of registered memory is touched; a request that fails a check
// gets an error answer and touches nothing. Everything a process reads
// from another process's table is untrusted too: OpenTable validates the
// header, and every slot read is bounds-checked and re-validated.
//
// # Imports
//
// rma imports dtype and dtype/kernel and the standard library (and x/sys
// for futexes); it imports neither the transports nor the engine, which
// import it. It carries no compatibility promise: only the root package fi
// is public.
package rma
