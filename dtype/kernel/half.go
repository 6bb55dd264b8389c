package kernel

import (
	"math"

	"github.com/gofi-dev/fi/dtype"
)

// Conversions between the 16-bit floating-point types (FLOAT16, IEEE 754
// binary16; BFLOAT16, the top half of a binary32) and float32, for
// collectives that reduce them in float32. Widening is exact; narrowing
// rounds to nearest, ties to even, overflows to infinity and produces
// subnormals where the value calls for them. NaNs come out quiet, with the
// top bits of their payload (as the F16C instructions convert them).
//
// Widen16 and Narrow16 use F16C (FLOAT16) and AVX2 (BFLOAT16) where the
// CPU has them, the scalar functions below otherwise: the same bits.

// Widen16 converts len(src)/2 elements of t (FLOAT16 or BFLOAT16) in src
// to float32 in dst (len(dst) >= 2*len(src)); other types are ignored.
func Widen16(t dtype.Type, dst, src []byte) {
	n := len(src) / 2
	_ = dst[:4*n] // bounds, once
	done := 0
	if body := widenBody(t); body != nil && n >= 8 {
		done = n &^ 7
		body(&dst[0], &src[0], done)
	}
	widenPortable(t, dst[4*done:4*n], src[2*done:2*n])
}

// Narrow16 converts len(dst)/2 float32 elements of src to t (FLOAT16 or
// BFLOAT16) in dst (len(src) >= 2*len(dst)), one rounding per element;
// other types are ignored.
func Narrow16(t dtype.Type, dst, src []byte) {
	n := len(dst) / 2
	_ = src[:4*n]
	done := 0
	if body := narrowBody(t); body != nil && n >= 16 {
		done = n &^ 15
		body(&dst[0], &src[0], done)
	}
	narrowPortable(t, dst[2*done:2*n], src[4*done:4*n])
}

func widenPortable(t dtype.Type, dst, src []byte) {
	s := view[uint16](src)
	d := view[float32](dst)
	if len(s) == 0 {
		return
	}
	d = d[:len(s)]
	switch t {
	case dtype.BFloat16:
		for i, h := range s {
			d[i] = math.Float32frombits(uint32(h) << 16)
		}
	case dtype.Float16:
		for i, h := range s {
			d[i] = HalfToFloat(h)
		}
	}
}

func narrowPortable(t dtype.Type, dst, src []byte) {
	d := view[uint16](dst)
	if len(d) == 0 {
		return
	}
	s := view[float32](src)[:len(d)]
	switch t {
	case dtype.BFloat16:
		for i, f := range s {
			d[i] = FloatToBF16(f)
		}
	case dtype.Float16:
		for i, f := range s {
			d[i] = FloatToHalf(f)
		}
	}
}

// HalfToFloat widens an IEEE 754 binary16 value exactly (a signalling NaN
// comes out quiet).
func HalfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f && man == 0: // inf
		return math.Float32frombits(sign | 0xff<<23)
	case exp == 0x1f: // NaN, quiet
		return math.Float32frombits(sign | 0xff<<23 | 1<<22 | man<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
	case man == 0: // zero
		return math.Float32frombits(sign)
	}
	// subnormal: value = man * 2^-24
	f := float32(man) * (1.0 / (1 << 24))
	if sign != 0 {
		f = -f
	}
	return f
}

// FloatToHalf rounds a float32 to binary16, to nearest even.
func FloatToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff { // inf, NaN (kept quiet, payload's top bits kept)
		if man == 0 {
			return sign | 0x7c00
		}
		return sign | 0x7e00 | uint16(man>>13)
	}
	e := exp - 127 + 15
	if e >= 0x1f { // overflow
		return sign | 0x7c00
	}
	if e <= 0 { // subnormal or zero in binary16
		if e < -10 {
			return sign // rounds to zero (below half the smallest subnormal)
		}
		m := man | 0x800000 // implicit bit
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		r := m >> shift
		rest := m & (1<<shift - 1)
		if rest > half || (rest == half && r&1 != 0) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | man>>13
	rest := man & 0x1fff
	if rest > 0x1000 || (rest == 0x1000 && r&1 != 0) {
		r++ // may carry into the exponent, up to infinity: correct
	}
	return sign | uint16(r)
}

// FloatToBF16 rounds a float32 to bfloat16, to nearest even.
func FloatToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep it quiet
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
