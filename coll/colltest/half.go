package colltest

import "math"

// Reference 16-bit float conversions, by arithmetic on float64 rather than
// on bits (package coll works on bits).

func halfToFloatRef(h uint16) float32 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	switch {
	case e == 0x1f && m == 0:
		return float32(math.Inf(int(sign)))
	case e == 0x1f:
		return float32(math.NaN())
	case e == 0:
		return float32(sign * m * math.Pow(2, -24))
	}
	return float32(sign * (1 + m/1024) * math.Pow(2, float64(e-15)))
}

// roundBits returns the encoding of x (finite) in a binary format with
// mbits stored mantissa bits and exponent bias bias, rounded to nearest
// even; ok false on overflow.
func roundBits(x float64, mbits, bias int) (bits uint32, ok bool) {
	ax := math.Abs(x)
	if ax == 0 {
		return 0, true
	}
	e := int(math.Floor(math.Log2(ax)))
	if math.Pow(2, float64(e)) > ax { // log2 rounding guard
		e--
	} else if math.Pow(2, float64(e+1)) <= ax {
		e++
	}
	emin := 1 - bias
	if e < emin {
		e = emin
	}
	q := math.Pow(2, float64(e-mbits))
	m := math.RoundToEven(ax / q)
	if m >= math.Pow(2, float64(mbits+1)) {
		m /= 2
		e++
	}
	if e+bias >= 1<<(bits32(mbits, bias))-1 {
		return 0, false
	}
	if m < math.Pow(2, float64(mbits)) { // subnormal (or rounded to zero)
		return uint32(m), true
	}
	return uint32(e+bias)<<mbits | (uint32(m) - 1<<mbits), true
}

// bits32 returns the exponent width of the format (5 for binary16, 8 for
// bfloat16).
func bits32(mbits, bias int) int {
	if bias == 15 {
		return 5
	}
	return 8
}

func floatToHalfRef(x float64) uint16 {

	sign := uint16(0)
	if math.Signbit(x) {
		sign = 0x8000
	}
	switch {
	case math.IsNaN(x):
		return sign | 0x7e00
	case math.IsInf(x, 0):
		return sign | 0x7c00
	}
	b, ok := roundBits(x, 10, 15)
	if !ok {
		return sign | 0x7c00
	}
	return sign | uint16(b)
}

func floatToBF16Ref(x float64) uint16 {

	sign := uint16(0)
	if math.Signbit(x) {
		sign = 0x8000
	}
	switch {
	case math.IsNaN(x):
		return sign | 0x7fc0
	case math.IsInf(x, 0):
		return sign | 0x7f80
	}
	b, ok := roundBits(x, 7, 127)
	if !ok {
		return sign | 0x7f80
	}
	return sign | uint16(b)
}

// HalfToFloat widens a binary16 value (reference).
func HalfToFloat(h uint16) float32 { return halfToFloatRef(h) }

// FloatToHalf rounds x to binary16, to nearest even (reference).
func FloatToHalf(x float32) uint16 { return floatToHalfRef(float64(x)) }

// FloatToBF16 rounds x to bfloat16, to nearest even (reference).
func FloatToBF16(x float32) uint16 { return floatToBF16Ref(float64(x)) }
