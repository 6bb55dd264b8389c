package coll

import (
	"github.com/gofi-dev/fi/dtype"
	"github.com/gofi-dev/fi/dtype/kernel"
)

// Conversions between the 16-bit floating-point types and float32, done
// by package dtype/kernel (F16C and AVX2 where the CPU has them, the same
// bits otherwise). Widening is exact; narrowing rounds to nearest, ties
// to even, overflows to infinity, makes NaNs quiet NaNs (with the
// payload's top bits) and produces subnormals where the value calls for
// them.

// widen converts n elements of t (FLOAT16 or BFLOAT16) in src to float32
// in dst (len(dst) >= 4n, len(src) >= 2n).
func widen(t dtype.Type, dst, src []byte) { kernel.Widen16(t, dst, src) }

// narrow converts float32 elements in src to t (FLOAT16 or BFLOAT16) in
// dst, one rounding per element.
func narrow(t dtype.Type, dst, src []byte) { kernel.Narrow16(t, dst, src) }

// The scalar conversions, for the tests.
var (
	halfToFloat = kernel.HalfToFloat
	floatToHalf = kernel.FloatToHalf
	floatToBF16 = kernel.FloatToBF16
)
