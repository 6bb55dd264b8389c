package coll

import (
	"math"

	"github.com/gofi-dev/fi/dtype"
)

// Conversions between the 16-bit floating-point types and float32. Widening
// is exact; narrowing rounds to nearest, ties to even, overflows to
// infinity, keeps NaNs quiet NaNs (with the payload's top bits) and
// produces subnormals where the value calls for them.

// widen converts n elements of t (FLOAT16 or BFLOAT16) in src to float32
// in dst (len(dst) >= 4n, len(src) >= 2n).
func widen(t dtype.Type, dst, src []byte) {
	d := view[float32](dst)
	s := view[uint16](src)
	d = d[:len(s)]
	if t == dtype.BFloat16 {
		for i, h := range s {
			d[i] = math.Float32frombits(uint32(h) << 16)
		}
		return
	}
	for i, h := range s {
		d[i] = halfToFloat(h)
	}
}

// narrow converts float32 elements in src to t (FLOAT16 or BFLOAT16) in
// dst, one rounding per element.
func narrow(t dtype.Type, dst, src []byte) {
	d := view[uint16](dst)
	s := view[float32](src)[:len(d)]
	if t == dtype.BFloat16 {
		for i, f := range s {
			d[i] = floatToBF16(f)
		}
		return
	}
	for i, f := range s {
		d[i] = floatToHalf(f)
	}
}

// halfToFloat widens an IEEE 754 binary16 value exactly.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf, NaN
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
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

// floatToHalf rounds a float32 to binary16, to nearest even.
func floatToHalf(f float32) uint16 {
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

// floatToBF16 rounds a float32 to bfloat16, to nearest even.
func floatToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep it quiet
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
