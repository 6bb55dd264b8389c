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
// # Reductions (Reducer, for collectives)
//
// Reducer returns dst = a op b kernels for the collectives' reductions
// (package coll). Each has a portable Go loop (Portable) and, on amd64
// CPUs with AVX2 (cpuid, klauspost/cpuid/v2), an assembly body generated
// by reduce_gen.go that runs 128 bytes a turn and leaves the last partial
// 32 bytes to the Go loop: every integer and real operation, and complex
// sums (complex products stay in Go). Vectorising across elements changes
// no element's operations or operand order, so both give the same bits,
// NaN payloads included (tests compare them on every pair, length and
// offset). The purego build tag, or a CPU without AVX2, selects the Go
// loops. Measured (BenchmarkReducer, in place, float32 SUM): 13x the Go
// loop at 4 KiB, 6.7x at 256 KiB, 4.3x at 16 MiB.
// ReduceN folds many sources block by block (8 KiB), so the partial
// result stays in L1: eight 1 MiB float32 sources 3-4x faster than
// whole-buffer pairwise calls (BenchmarkReduceN).
//
// Widen16 and Narrow16 convert FLOAT16 and BFLOAT16 to and from float32
// for the collectives that reduce them in float32: F16C (VCVTPH2PS,
// VCVTPS2PH to nearest even) and AVX2 bodies where the CPU has them, the
// scalar HalfToFloat, FloatToHalf and FloatToBF16 otherwise, with the
// same bits (every 16-bit value widened, narrowing compared on edge cases
// and random values; GOFI_EXHAUSTIVE=1 compares all 2^32 inputs).
// Measured (BenchmarkHalf, 512 Ki values): FLOAT16 widening 32x the scalar
// loop, narrowing 18x; BFLOAT16 5.8x and 6.5x.
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
// kernel imports dtype, klauspost/cpuid/v2 and the standard library only,
// so that package rma (atomics) and package coll (reductions) can both use
// it. It carries no
// compatibility promise: only the root package fi is public.
package kernel
