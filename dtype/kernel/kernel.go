package kernel

import (
	"unsafe"

	"github.com/gofi-dev/fi/dtype"
)

type integer interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64
}

type float interface{ ~float32 | ~float64 }

type cplx interface{ ~complex64 | ~complex128 }

type elem interface{ integer | float | cplx }

// family computes one operation on one element: the new value d takes
// from d (the target), s (the operand) and c (the compare operand), and
// whether it is written at all. AtomicRead never writes.
type family[T any] interface {
	apply(op dtype.Op, d, s, c T) (T, bool)
}

type intFam[T integer] struct{}

func (intFam[T]) apply(op dtype.Op, d, s, c T) (T, bool) {
	switch op {
	case dtype.Min:
		return s, s < d
	case dtype.Max:
		return s, s > d
	case dtype.Sum:
		return d + s, true
	case dtype.Prod:
		return d * s, true
	case dtype.LOr:
		return truth[T](d != 0 || s != 0), true
	case dtype.LAnd:
		return truth[T](d != 0 && s != 0), true
	case dtype.BOr:
		return d | s, true
	case dtype.BAnd:
		return d & s, true
	case dtype.LXor:
		return truth[T]((d != 0) != (s != 0)), true
	case dtype.BXor:
		return d ^ s, true
	case dtype.AtomicWrite:
		return s, true
	case dtype.CSwap:
		return s, c == d
	case dtype.CSwapNE:
		return s, c != d
	case dtype.CSwapLE:
		return s, c <= d
	case dtype.CSwapLT:
		return s, c < d
	case dtype.CSwapGE:
		return s, c >= d
	case dtype.CSwapGT:
		return s, c > d
	case dtype.MSwap:
		return s&c | d&^c, true
	}
	return d, false
}

type floatFam[T float] struct{}

func (floatFam[T]) apply(op dtype.Op, d, s, c T) (T, bool) {
	switch op {
	case dtype.Min:
		return s, s < d
	case dtype.Max:
		return s, s > d
	case dtype.Sum:
		return d + s, true
	case dtype.Prod:
		return d * s, true
	case dtype.LOr:
		return truthF[T](d != 0 || s != 0), true
	case dtype.LAnd:
		return truthF[T](d != 0 && s != 0), true
	case dtype.LXor:
		return truthF[T]((d != 0) != (s != 0)), true
	case dtype.AtomicWrite:
		return s, true
	case dtype.CSwap:
		return s, c == d
	case dtype.CSwapNE:
		return s, c != d
	case dtype.CSwapLE:
		return s, c <= d
	case dtype.CSwapLT:
		return s, c < d
	case dtype.CSwapGE:
		return s, c >= d
	case dtype.CSwapGT:
		return s, c > d
	}
	return d, false
}

type cplxFam[T cplx] struct{}

func (cplxFam[T]) apply(op dtype.Op, d, s, c T) (T, bool) {
	switch op {
	case dtype.Sum:
		return d + s, true
	case dtype.Prod:
		return d * s, true
	case dtype.LOr:
		return truthC[T](d != 0 || s != 0), true
	case dtype.LAnd:
		return truthC[T](d != 0 && s != 0), true
	case dtype.LXor:
		return truthC[T]((d != 0) != (s != 0)), true
	case dtype.AtomicWrite:
		return s, true
	case dtype.CSwap:
		return s, c == d
	case dtype.CSwapNE:
		return s, c != d
	}
	return d, false
}

func truth[T integer](b bool) T {
	if b {
		return 1
	}
	return 0
}

func truthF[T float](b bool) T {
	if b {
		return 1
	}
	return 0
}

func truthC[T cplx](b bool) T {
	if b {
		return 1
	}
	return 0
}

// Operation sets by family, as libfabric's util provider defines them
// (ofi_atomic: "all" types for SUM, PROD, the logical ops, READ, WRITE,
// CSWAP and CSWAP_NE; integers and reals for MIN, MAX and the ordered
// CSWAPs; integers only for the bitwise ops and MSWAP).
const (
	opsInt = 1<<(dtype.MSwap+1) - 1
	opsAll = 1<<dtype.Sum | 1<<dtype.Prod | 1<<dtype.LOr | 1<<dtype.LAnd | 1<<dtype.LXor |
		1<<dtype.AtomicRead | 1<<dtype.AtomicWrite | 1<<dtype.CSwap | 1<<dtype.CSwapNE
	opsReal = opsAll | 1<<dtype.Min | 1<<dtype.Max | 1<<dtype.CSwapLE | 1<<dtype.CSwapLT |
		1<<dtype.CSwapGE | 1<<dtype.CSwapGT
)

// kern is one datatype's kernels.
type kern struct {
	ops    uint32 // operations supported
	exec   func(op dtype.Op, mem, src, cmp, res []byte)
	reduce func(op dtype.Op, dst, src []byte)
}

var kernels [dtype.Float8E5M2 + 1]kern

func init() {
	kernels[dtype.Int8] = intKern[int8]()
	kernels[dtype.Uint8] = intKern[uint8]()
	kernels[dtype.Int16] = intKern[int16]()
	kernels[dtype.Uint16] = intKern[uint16]()
	kernels[dtype.Int32] = intKern[int32]()
	kernels[dtype.Uint32] = intKern[uint32]()
	kernels[dtype.Int64] = intKern[int64]()
	kernels[dtype.Uint64] = intKern[uint64]()
	kernels[dtype.Float] = kern{opsReal, execCAS[float32, floatFam[float32]], reduce[float32, floatFam[float32]]}
	kernels[dtype.Double] = kern{opsReal, execCAS[float64, floatFam[float64]], reduce[float64, floatFam[float64]]}
	kernels[dtype.FloatComplex] = kern{opsAll, execCAS[complex64, cplxFam[complex64]], reduce[complex64, cplxFam[complex64]]}
	kernels[dtype.DoubleComplex] = kern{opsAll, execPlain[complex128, cplxFam[complex128]], reduce[complex128, cplxFam[complex128]]}
	kernels[dtype.Int128] = kern{opsInt, execPlain[int128, i128Fam], reduce[int128, i128Fam]}
	kernels[dtype.Uint128] = kern{opsInt, execPlain[uint128, u128Fam], reduce[uint128, u128Fam]}
	// LongDouble and LongDoubleComplex (x87 extended precision) have no
	// exact Go arithmetic; the 2.x AI types are collective-only: no
	// kernels, Supported is false.
}

func intKern[T integer]() kern {
	return kern{opsInt, execInt[T], reduce[T, intFam[T]]}
}

// Supported reports whether op is defined on t for the call family kind
// (dtype.KindBase, KindFetch, KindCompare) and computed here.
func Supported(t dtype.Type, op dtype.Op, kind dtype.Kind) bool {
	if t < 0 || int(t) >= len(kernels) || op < 0 || op > dtype.MSwap {
		return false
	}
	return kernels[t].ops&(1<<op) != 0 && op.Kinds()&kind != 0
}

// Locked reports whether Exec on t needs a lock shared by every executor
// to be atomic (the 16-byte types).
func Locked(t dtype.Type) bool { return t.Size() == 16 }

// Align is the address alignment Exec needs for elements of t.
func Align(t dtype.Type) int { return min(t.Size(), 8) }

// Exec applies op atomically to each element of mem, a target buffer of
// len(mem)/t.Size() elements aligned to Align(t): src holds the operands
// (ignored by AtomicRead), cmp the compare operands (compare operations),
// res receives the values mem held before (nil: not wanted). Operand
// buffers need no alignment and must be at least len(mem) long. It
// returns false, touching nothing, when the combination is not Supported
// in any call family, a buffer is too short or mem is misaligned. See the
// package doc for what is atomic.
func Exec(t dtype.Type, op dtype.Op, mem, src, cmp, res []byte) bool {
	if (t == dtype.Uint64 || t == dtype.Int64) && exec8(op, mem, src, cmp, res) {
		return true
	}
	if !Supported(t, op, dtype.KindBase|dtype.KindFetch|dtype.KindCompare) {
		return false
	}
	sz := t.Size()
	n := len(mem)
	if n%sz != 0 || (src != nil && len(src) < n) || (cmp != nil && len(cmp) < n) || (res != nil && len(res) < n) {
		return false
	}
	if op != dtype.AtomicRead && src == nil || op.Kinds() == dtype.KindCompare && cmp == nil {
		return false
	}
	if n > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%uintptr(Align(t)) != 0 {
		return false
	}
	kernels[t].exec(op, mem, src, cmp, res)
	return true
}

// Reduce computes dst[i] = dst[i] op src[i] over len(dst)/t.Size()
// elements with plain loads and stores (no atomicity: a collective's
// buffers), for the base operations (MIN to BXOR, ATOMIC_WRITE) Supported
// for t. Buffers need no alignment; src must be at least as long as dst.
// It returns false, touching nothing, for an unsupported combination or
// bad lengths.
func Reduce(t dtype.Type, op dtype.Op, dst, src []byte) bool {
	if !Supported(t, op, dtype.KindBase) {
		return false
	}
	if sz := t.Size(); len(dst)%sz != 0 || len(src) < len(dst) {
		return false
	}
	kernels[t].reduce(op, dst, src)
	return true
}

// get reads an element from b (any alignment).
func get[T any](b []byte) T {
	var v T
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v)), b)
	return v
}

// put writes v into b (any alignment).
func put[T any](b []byte, v T) {
	copy(b, unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v)))
}

func reduce[T any, F family[T]](op dtype.Op, dst, src []byte) {
	var f F
	var zero T
	sz := int(unsafe.Sizeof(zero))
	for i := 0; i+sz <= len(dst); i += sz {
		if v, ok := f.apply(op, get[T](dst[i:]), get[T](src[i:]), zero); ok {
			put(dst[i:], v)
		}
	}
}
