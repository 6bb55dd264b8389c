// Package kernel computes gofi's element-wise operations: the atomic
// operations of fi_atomic(3) applied to target memory (Exec) and the same
// operations as plain reductions over buffers (Reduce, for collectives),
// for every datatype and operation libfabric defines that Go computes
// exactly (Supported says which).
//
// Kernels are generic over the element type, one per family (integers,
// reals, complex numbers, 128-bit integers), and dispatched through a
// table indexed by datatype: no per-(type, op) code is written by hand.
//
// # Atomicity (Exec)
//
//   - 4- and 8-byte integers: the processor's atomic instructions on the
//     element itself (add, and, or, swap, compare-and-swap), so Exec is
//     atomic with respect to any sync/atomic operation on the same word,
//     in this process or another that maps it.
//   - 1- and 2-byte integers, Float, Double and FloatComplex: a
//     compare-and-swap loop on the aligned 4- or 8-byte word holding the
//     element (neighbouring bytes are compared, never changed).
//   - 16-byte types (DoubleComplex, Int128, Uint128): plain loads and
//     stores. Exec is atomic for them only when every executor of that
//     memory holds a common lock (package rma serialises them per address
//     in the target process).
//
// Each element is one atomic operation; a multi-element call is not atomic
// as a whole (fi_atomic(3)). Comparisons are IEEE comparisons (NaN equals
// nothing, -0 equals +0), as fi_atomic(3)'s pseudo-code writes them.
//
// # Imports
//
// kernel imports dtype and the standard library only, so that package rma
// (atomics) and package coll (reductions) can both use it. It carries no
// compatibility promise: only the root package fi is public.
package kernel
