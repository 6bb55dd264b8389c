package coll

import (
	"unsafe"

	"github.com/gofi-dev/fi/dtype"
)

// Func is a reduction kernel: for every element i, dst[i] = a[i] op b[i].
// The three slices have the same length, a whole number of elements in
// host byte order; dst may be the same slice as a or as b (element-wise
// aliasing), never a shifted overlap. Buffers need no alignment (amd64
// and arm64 load unaligned words).
//
// The operand order is part of the result for floating point (NaN
// payloads, and MIN/MAX of equal-comparing values such as -0 and +0), so
// every algorithm calls kernels with the lower ranks' data as a and the
// higher ranks' as b, and computes each element of a result once.
//
// MIN and MAX of floating-point values follow the SSE/AVX instructions,
// which the vector kernels use: MIN(a, b) is a if a < b, else b; MAX(a, b)
// is a if a > b, else b (so a NaN in b, or in a, yields b).
type Func func(dst, a, b []byte)

// Reducible reports whether collectives can reduce datatype t with op:
// MIN, MAX, SUM, PROD, LOR, LAND, BOR, BAND, LXOR and BXOR on the 8- to
// 64-bit integers; MIN, MAX, SUM and PROD on FLOAT and DOUBLE; SUM and
// PROD on FLOAT_COMPLEX and DOUBLE_COMPLEX; MIN, MAX and SUM on FLOAT16
// and BFLOAT16 (computed in float32, see Widen).
func Reducible(t dtype.Type, op dtype.Op) bool {
	switch {
	case t >= dtype.Int8 && t <= dtype.Uint64:
		return op >= dtype.Min && op <= dtype.BXor
	case t == dtype.Float || t == dtype.Double:
		return op >= dtype.Min && op <= dtype.Prod
	case t == dtype.FloatComplex || t == dtype.DoubleComplex:
		return op == dtype.Sum || op == dtype.Prod
	case t == dtype.Float16 || t == dtype.BFloat16:
		return op == dtype.Min || op == dtype.Max || op == dtype.Sum
	}
	return false
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
// says no or t is FLOAT16 / BFLOAT16 (reduce those in Widen(t)). The
// kernel is the CPU-tuned one when this CPU has it (see simd), else the
// portable one.
func Kernel(t dtype.Type, op dtype.Op) Func {
	if t < 0 || int(t) >= len(kernels) || op < 0 || int(op) >= len(kernels[t]) {
		return nil
	}
	return kernels[t][op]
}

// kernels is Kernel's table, filled once: building a kernel allocates (a
// closure of a generic function carries its dictionary), looking one up
// must not.
var kernels = func() (k [dtype.Float8E5M2 + 1][dtype.BXor + 1]Func) {
	for t := range k {
		for op := range k[t] {
			tt, oo := dtype.Type(t), dtype.Op(op)
			if !Reducible(tt, oo) || Widen(tt) != tt {
				continue
			}
			if f := simdKernel(tt, oo); f != nil {
				k[t][op] = f
			} else {
				k[t][op] = goKernel(tt, oo)
			}
		}
	}
	return k
}()

// goKernel returns the portable kernel of (t, op).
func goKernel(t dtype.Type, op dtype.Op) Func {
	switch t {
	case dtype.Int8:
		return intKernel[int8](op)
	case dtype.Uint8:
		return intKernel[uint8](op)
	case dtype.Int16:
		return intKernel[int16](op)
	case dtype.Uint16:
		return intKernel[uint16](op)
	case dtype.Int32:
		return intKernel[int32](op)
	case dtype.Uint32:
		return intKernel[uint32](op)
	case dtype.Int64:
		return intKernel[int64](op)
	case dtype.Uint64:
		return intKernel[uint64](op)
	case dtype.Float:
		return floatKernel[float32](op)
	case dtype.Double:
		return floatKernel[float64](op)
	case dtype.FloatComplex:
		return complexKernel[float32](op)
	case dtype.DoubleComplex:
		return complexKernel[float64](op)
	}
	return nil
}

type integer interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64
}

type float interface{ ~float32 | ~float64 }

// view returns b as a []T of len(b)/sizeof(T) elements.
func view[T any](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// three returns dst, a and b as equal-length []T (the bounds checks of the
// loops below are then eliminated).
func three[T any](dst, a, b []byte) ([]T, []T, []T) {
	d := view[T](dst)
	x := view[T](a)[:len(d)]
	y := view[T](b)[:len(d)]
	return d, x, y
}

func intKernel[T integer](op dtype.Op) Func {
	switch op {
	case dtype.Min:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := range d {
				d[i] = min(x[i], y[i])
			}
		}
	case dtype.Max:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := range d {
				d[i] = max(x[i], y[i])
			}
		}
	case dtype.Sum:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := range d {
				d[i] = x[i] + y[i]
			}
		}
	case dtype.Prod:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := range d {
				d[i] = x[i] * y[i]
			}
		}
	case dtype.LOr:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := range d {
				d[i] = bool01[T](x[i] != 0 || y[i] != 0)
			}
		}
	case dtype.LAnd:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := range d {
				d[i] = bool01[T](x[i] != 0 && y[i] != 0)
			}
		}
	case dtype.LXor:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := range d {
				d[i] = bool01[T]((x[i] != 0) != (y[i] != 0))
			}
		}
	case dtype.BOr:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := range d {
				d[i] = x[i] | y[i]
			}
		}
	case dtype.BAnd:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := range d {
				d[i] = x[i] & y[i]
			}
		}
	case dtype.BXor:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := range d {
				d[i] = x[i] ^ y[i]
			}
		}
	}
	return nil
}

func bool01[T integer](v bool) T {
	if v {
		return 1
	}
	return 0
}

func floatKernel[T float](op dtype.Op) Func {
	switch op {
	case dtype.Min:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := range d {
				if x[i] < y[i] {
					d[i] = x[i]
				} else {
					d[i] = y[i]
				}
			}
		}
	case dtype.Max:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := range d {
				if x[i] > y[i] {
					d[i] = x[i]
				} else {
					d[i] = y[i]
				}
			}
		}
	case dtype.Sum:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := range d {
				d[i] = x[i] + y[i]
			}
		}
	case dtype.Prod:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := range d {
				d[i] = x[i] * y[i]
			}
		}
	}
	return nil
}

// complexKernel works on (real, imaginary) pairs of T. The product rounds
// each partial product before adding (explicit conversions forbid fused
// multiply-add), so it is the same on every CPU.
func complexKernel[T float](op dtype.Op) Func {
	switch op {
	case dtype.Sum:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := range d {
				d[i] = x[i] + y[i]
			}
		}
	case dtype.Prod:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := 0; i+1 < len(d); i += 2 {
				ar, ai, br, bi := x[i], x[i+1], y[i], y[i+1]
				d[i] = T(ar*br) - T(ai*bi)
				d[i+1] = T(ar*bi) + T(ai*br)
			}
		}
	}
	return nil
}
