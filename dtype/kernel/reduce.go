package kernel

import (
	"unsafe"

	"github.com/gofi-dev/fi/dtype"
)

// Func is a reduction kernel: for every element i, dst[i] = a[i] op b[i].
// The three slices have the same length, a whole number of elements in
// host byte order; dst may be the same slice as a or as b (element-wise
// aliasing), never a shifted overlap. Buffers need no alignment (amd64
// and arm64 load unaligned words). A Func allocates nothing.
//
// The operand order is part of the result for floating point (NaN
// payloads, and MIN/MAX of equal-comparing values such as -0 and +0), so
// callers that need the same bits everywhere pass the same operands in
// the same order (collectives: the lower ranks' data as a).
//
// MIN and MAX of floating-point values follow the SSE/AVX instructions,
// which the vector kernels use: MIN(a, b) is a if a < b, else b; MAX(a, b)
// is a if a > b, else b (so a NaN in b, or in a, yields b).
//
// Every element is computed on its own (vectorising across elements does
// not change any element's operations), so the CPU-tuned kernels and the
// portable ones give the same bits; the tests check it.
type Func func(dst, a, b []byte)

// Reducer returns the reduction kernel of (t, op), or nil when there is
// none: MIN, MAX, SUM, PROD, LOR, LAND, LXOR, BOR, BAND and BXOR on the 8-
// to 64-bit integers; MIN, MAX, SUM and PROD on FLOAT and DOUBLE; SUM and
// PROD on FLOAT_COMPLEX and DOUBLE_COMPLEX. The kernel is the CPU-tuned
// one when this CPU has it (Vector says which), else the portable one.
func Reducer(t dtype.Type, op dtype.Op) Func {
	if t < 0 || int(t) >= len(reducers) || op < 0 || int(op) >= len(reducers[t]) {
		return nil
	}
	return reducers[t][op]
}

// Portable returns the pure-Go kernel of (t, op), or nil: the reference
// the CPU-tuned kernels are tested and measured against.
func Portable(t dtype.Type, op dtype.Op) Func {
	if t < 0 || int(t) >= len(portables) || op < 0 || int(op) >= len(portables[t]) {
		return nil
	}
	return portables[t][op]
}

// Vector reports whether Reducer(t, op) is a CPU-tuned kernel on this
// machine, and names the instruction set ("avx2"), or "" when it is the
// portable one.
func Vector(t dtype.Type, op dtype.Op) string {
	if Reducer(t, op) == nil || vectorBody(t, op) == nil {
		return ""
	}
	return vectorISA
}

// ReduceN sets dst[i] = ((srcs[0][i] op srcs[1][i]) op srcs[2][i]) ...
// for every element i, left to right, with fn (a Func of the datatype):
// the same bits as calling fn pairwise over whole buffers, but in blocks
// of ReduceBlock bytes so the partial result stays in the L1 cache while
// every source streams through it once. dst may be srcs[0] (exactly,
// never a shifted overlap) but no other source; every source is at least
// len(dst) long. With one source, dst receives a copy; with none, dst is
// left alone.
func ReduceN(fn Func, dst []byte, srcs [][]byte) {
	if len(srcs) == 0 {
		return
	}
	if len(srcs) == 1 {
		copy(dst, srcs[0][:len(dst)])
		return
	}
	for off := 0; off < len(dst); off += ReduceBlock {
		end := min(off+ReduceBlock, len(dst))
		d := dst[off:end]
		fn(d, srcs[0][off:end], srcs[1][off:end])
		for _, s := range srcs[2:] {
			fn(d, d, s[off:end])
		}
	}
}

// ReduceBlock is ReduceN's block in bytes: a multiple of every element
// size, small enough that the block of dst and one of a source sit in a
// 32 KiB L1 data cache together.
const ReduceBlock = 8 << 10

// reducers is Reducer's table and portables Portable's, filled once:
// building a kernel allocates (a closure of a generic function carries its
// dictionary), looking one up must not.
var portables, reducers = func() (p, r [dtype.Float8E5M2 + 1][dtype.BXor + 1]Func) {
	for t := range p {
		for op := range p[t] {
			tt, oo := dtype.Type(t), dtype.Op(op)
			p[t][op] = portable(tt, oo)
			r[t][op] = p[t][op]
			if body := vectorBody(tt, oo); body != nil && p[t][op] != nil {
				r[t][op] = vectorKernel(body, p[t][op])
			}
		}
	}
	return p, r
}()

// vectorKernel runs body over the whole 32-byte blocks of the buffers and
// tail, the portable kernel, over the rest.
func vectorKernel(body func(dst, a, b *byte, n int), tail Func) Func {
	return func(dst, a, b []byte) {
		n := len(dst)
		a, b = a[:n], b[:n] // the portable kernel's bounds, checked once
		if v := n &^ (vectorBlock - 1); v > 0 {
			body(unsafe.SliceData(dst), unsafe.SliceData(a), unsafe.SliceData(b), v)
			if v == n {
				return
			}
			dst, a, b = dst[v:], a[v:], b[v:]
		}
		tail(dst, a, b)
	}
}

// vectorBlock is the granule of the assembly bodies: one 256-bit register.
const vectorBlock = 32

// portable returns the pure-Go kernel of (t, op), or nil.
func portable(t dtype.Type, op dtype.Op) Func {
	switch t {
	case dtype.Int8:
		return intReducer[int8](op)
	case dtype.Uint8:
		return intReducer[uint8](op)
	case dtype.Int16:
		return intReducer[int16](op)
	case dtype.Uint16:
		return intReducer[uint16](op)
	case dtype.Int32:
		return intReducer[int32](op)
	case dtype.Uint32:
		return intReducer[uint32](op)
	case dtype.Int64:
		return intReducer[int64](op)
	case dtype.Uint64:
		return intReducer[uint64](op)
	case dtype.Float:
		return floatReducer[float32](op)
	case dtype.Double:
		return floatReducer[float64](op)
	case dtype.FloatComplex:
		return complexReducer[float32](op)
	case dtype.DoubleComplex:
		return complexReducer[float64](op)
	}
	return nil
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

// three returns dst, a and b as equal-length []T (the bounds checks of the
// loops below are then eliminated).
func three[T any](dst, a, b []byte) ([]T, []T, []T) {
	d := view[T](dst)
	x := view[T](a)[:len(d)]
	y := view[T](b)[:len(d)]
	return d, x, y
}

func intReducer[T integer](op dtype.Op) Func {
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
				d[i] = truth[T](x[i] != 0 || y[i] != 0)
			}
		}
	case dtype.LAnd:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := range d {
				d[i] = truth[T](x[i] != 0 && y[i] != 0)
			}
		}
	case dtype.LXor:
		return func(dst, a, b []byte) {
			d, x, y := three[T](dst, a, b)
			for i := range d {
				d[i] = truth[T]((x[i] != 0) != (y[i] != 0))
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

func floatReducer[T float](op dtype.Op) Func {
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

// complexReducer works on (real, imaginary) pairs of T. The product rounds
// each partial product before adding (explicit conversions forbid fused
// multiply-add), so it is the same on every CPU.
func complexReducer[T float](op dtype.Op) Func {
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
