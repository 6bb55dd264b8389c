//go:build amd64 && !purego

package kernel

import (
	"github.com/klauspost/cpuid/v2"

	"github.com/gofi-dev/fi/dtype"
)

var (
	hasF16C = cpuid.CPU.Supports(cpuid.AVX, cpuid.F16C)
	hasAVX2 = cpuid.CPU.Supports(cpuid.AVX2)
)

// widenBody returns the vector body widening t, n elements a multiple of
// 8, or nil.
func widenBody(t dtype.Type) func(dst, src *byte, n int) {
	switch {
	case t == dtype.Float16 && hasF16C:
		return widenF16F16C
	case t == dtype.BFloat16 && hasAVX2:
		return widenBF16AVX2
	}
	return nil
}

// narrowBody returns the vector body narrowing to t, n elements a
// multiple of 16, or nil.
func narrowBody(t dtype.Type) func(dst, src *byte, n int) {
	switch {
	case t == dtype.Float16 && hasF16C:
		return narrowF16F16C
	case t == dtype.BFloat16 && hasAVX2:
		return narrowBF16AVX2
	}
	return nil
}

//go:noescape
func widenF16F16C(dst, src *byte, n int)

//go:noescape
func narrowF16F16C(dst, src *byte, n int)

//go:noescape
func widenBF16AVX2(dst, src *byte, n int)

//go:noescape
func narrowBF16AVX2(dst, src *byte, n int)
