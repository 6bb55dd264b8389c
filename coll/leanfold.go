package coll

import (
	"unsafe"

	"github.com/gofi-dev/fi/dtype"
)

// inlineFold folds the inline operands of every local rank (buffer set
// set) into dst: the same left fold in rank order as the kernels,
// elementwise ((x0 op x1) op x2) ..., with the same comparisons for MIN
// and MAX, so the same bits; without the kernels' per-call set-up, which
// for the few elements an inline operation carries costs more than the
// arithmetic. It exists for the pairs small allreduces use most
// (inlineFoldOf). ps holds each local rank's operand (region.fin).
type inlineFold func(dst []byte, ps []unsafe.Pointer)

// inlineFoldOf returns the inline fold of (t, op), or nil (the kernel
// folds then).
func inlineFoldOf(t dtype.Type, op dtype.Op) inlineFold {
	switch t {
	case dtype.Int32:
		return foldOf[int32](op)
	case dtype.Uint32:
		return foldOf[uint32](op)
	case dtype.Int64:
		return foldOf[int64](op)
	case dtype.Uint64:
		return foldOf[uint64](op)
	case dtype.Float:
		return foldOf[float32](op)
	case dtype.Double:
		return foldOf[float64](op)
	}
	return nil
}

type foldNum interface {
	~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

func foldOf[T foldNum](op dtype.Op) inlineFold {
	switch op {
	case dtype.Sum:
		return foldSum[T]
	case dtype.Min:
		return foldMin[T]
	case dtype.Max:
		return foldMax[T]
	}
	return nil
}

// at is the element of type T at byte offset off of p.
func at[T foldNum](p unsafe.Pointer, off int) T { return *(*T)(unsafe.Add(p, off)) }

func foldSum[T foldNum](dst []byte, ps []unsafe.Pointer) {
	sz := int(unsafe.Sizeof(T(0)))
	for off := 0; off+sz <= len(dst) && off+sz <= inlineMax; off += sz {
		acc := at[T](ps[0], off)
		for _, p := range ps[1:] {
			acc += at[T](p, off)
		}
		*(*T)(unsafe.Pointer(&dst[off])) = acc
	}
}

// foldMin and foldMax compare as the kernels do (x < y ? x : y for MIN,
// x > y ? x : y for MAX, x the fold so far): for floats a NaN then
// propagates from the right-hand side only, as there.
func foldMin[T foldNum](dst []byte, ps []unsafe.Pointer) {
	sz := int(unsafe.Sizeof(T(0)))
	for off := 0; off+sz <= len(dst) && off+sz <= inlineMax; off += sz {
		acc := at[T](ps[0], off)
		for _, p := range ps[1:] {
			if y := at[T](p, off); !(acc < y) {
				acc = y
			}
		}
		*(*T)(unsafe.Pointer(&dst[off])) = acc
	}
}

func foldMax[T foldNum](dst []byte, ps []unsafe.Pointer) {
	sz := int(unsafe.Sizeof(T(0)))
	for off := 0; off+sz <= len(dst) && off+sz <= inlineMax; off += sz {
		acc := at[T](ps[0], off)
		for _, p := range ps[1:] {
			if y := at[T](p, off); !(acc > y) {
				acc = y
			}
		}
		*(*T)(unsafe.Pointer(&dst[off])) = acc
	}
}
