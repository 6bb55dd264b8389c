package coll

import (
	"unsafe"

	"github.com/gofi-dev/fi/dtype"
	"github.com/gofi-dev/fi/dtype/kernel"
)

// Func is a reduction kernel: for every element i, dst[i] = a[i] op b[i]
// (kernel.Func, where the kernels live: portable Go and, where the CPU has
// it, AVX2 assembly giving the same bits). dst may be the same slice as a
// or as b, never a shifted overlap; buffers need no alignment.
//
// The operand order is part of the result for floating point (NaN
// payloads, and MIN/MAX of equal-comparing values such as -0 and +0), so
// every algorithm calls kernels with the lower ranks' data as a and the
// higher ranks' as b, and computes each element of a result once.
//
// MIN and MAX of floating-point values follow the SSE/AVX instructions:
// MIN(a, b) is a if a < b, else b; MAX(a, b) is a if a > b, else b (so a
// NaN in b, or in a, yields b).
type Func = kernel.Func

// Reducible reports whether collectives can reduce datatype t with op:
// MIN, MAX, SUM, PROD, LOR, LAND, BOR, BAND, LXOR and BXOR on the 8- to
// 64-bit integers; MIN, MAX, SUM and PROD on FLOAT and DOUBLE; SUM and
// PROD on FLOAT_COMPLEX and DOUBLE_COMPLEX; MIN, MAX and SUM on FLOAT16
// and BFLOAT16 (computed in float32, see Widen).
func Reducible(t dtype.Type, op dtype.Op) bool {
	if t == dtype.Float16 || t == dtype.BFloat16 {
		return op == dtype.Min || op == dtype.Max || op == dtype.Sum
	}
	return kernel.Reducer(t, op) != nil
}

// Movable reports whether collectives that move data without reducing it
// (broadcast, allgather, alltoall, scatter, gather) take datatype t: every
// datatype with a size, that is every one but VOID.
func Movable(t dtype.Type) bool { return t != dtype.Void && t.Size() > 0 }

// Widen returns the datatype reductions of t are computed in: FLOAT for
// FLOAT16 and BFLOAT16 (each element is widened exactly, the whole
// reduction runs in float32, and the result is rounded to t once, to
// nearest even), t itself otherwise.
func Widen(t dtype.Type) dtype.Type {
	if t == dtype.Float16 || t == dtype.BFloat16 {
		return dtype.Float
	}
	return t
}

// Kernel returns the reduction kernel of (t, op), or nil when Reducible
// says no or t is FLOAT16 / BFLOAT16 (reduce those in Widen(t)). It is
// kernel.Reducer: the CPU-tuned kernel when this CPU has one, else the
// portable one. Looking one up allocates nothing.
func Kernel(t dtype.Type, op dtype.Op) Func {
	if Widen(t) != t {
		return nil
	}
	return kernel.Reducer(t, op)
}

// view returns b as a []T of len(b)/sizeof(T) elements.
func view[T any](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}
