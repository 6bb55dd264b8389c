package kref

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"
	"math/rand/v2"
	"unsafe"

	"github.com/gofi-dev/fi/dtype"
)

// The reference: an independent, plain computation of one element per
// datatype family, integers through math/big (then wrapped to the width),
// reals and complex numbers with Go's own operators on typed values.

var ne = binary.NativeEndian

var littleEndian = func() bool {
	var x uint16 = 1
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

type refInt struct {
	bits   int
	signed bool
}

func (r refInt) val(b []byte) *big.Int {
	u := new(big.Int)
	switch r.bits {
	case 8:
		u.SetUint64(uint64(b[0]))
	case 16:
		u.SetUint64(uint64(ne.Uint16(b)))
	case 32:
		u.SetUint64(uint64(ne.Uint32(b)))
	case 64:
		u.SetUint64(ne.Uint64(b))
	case 128:
		lo, hi := ne.Uint64(b), ne.Uint64(b[8:])
		if !littleEndian {
			lo, hi = hi, lo
		}
		u.SetUint64(hi)
		u.Lsh(u, 64)
		u.Or(u, new(big.Int).SetUint64(lo))
	}
	if r.signed && u.Bit(r.bits-1) == 1 {
		u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(r.bits)))
	}
	return u
}

func (r refInt) put(b []byte, v *big.Int) {
	m := new(big.Int).Lsh(big.NewInt(1), uint(r.bits))
	u := new(big.Int).Mod(v, m) // two's complement wrap
	var raw [16]byte
	ub := u.FillBytes(make([]byte, 16)) // big endian
	for i := 0; i < 16; i++ {
		raw[i] = ub[15-i] // little endian
	}
	n := r.bits / 8
	if littleEndian {
		copy(b, raw[:n])
		return
	}
	switch n {
	case 16:
		ne.PutUint64(b, binary.LittleEndian.Uint64(raw[8:]))
		ne.PutUint64(b[8:], binary.LittleEndian.Uint64(raw[:8]))
	default:
		for i := 0; i < n; i++ {
			b[i] = raw[n-1-i]
		}
	}
}

func b01(x bool) int64 {
	if x {
		return 1
	}
	return 0
}

// refIntOp computes (new target, write?) for integers.
func refIntOp(r refInt, op dtype.Op, d, s, c *big.Int) (*big.Int, bool) {
	switch op {
	case dtype.Min:
		return s, s.Cmp(d) < 0
	case dtype.Max:
		return s, s.Cmp(d) > 0
	case dtype.Sum:
		return new(big.Int).Add(d, s), true
	case dtype.Prod:
		return new(big.Int).Mul(d, s), true
	case dtype.LOr:
		return big.NewInt(b01(d.Sign() != 0 || s.Sign() != 0)), true
	case dtype.LAnd:
		return big.NewInt(b01(d.Sign() != 0 && s.Sign() != 0)), true
	case dtype.LXor:
		return big.NewInt(b01((d.Sign() != 0) != (s.Sign() != 0))), true
	case dtype.BOr, dtype.BAnd, dtype.BXor, dtype.MSwap:
		m := new(big.Int).Lsh(big.NewInt(1), uint(r.bits))
		du, su, cu := new(big.Int).Mod(d, m), new(big.Int).Mod(s, m), new(big.Int).Mod(c, m)
		switch op {
		case dtype.BOr:
			return du.Or(du, su), true
		case dtype.BAnd:
			return du.And(du, su), true
		case dtype.BXor:
			return du.Xor(du, su), true
		}
		keep := new(big.Int).AndNot(du, cu)
		return keep.Or(keep, new(big.Int).And(su, cu)), true
	case dtype.AtomicWrite:
		return s, true
	case dtype.CSwap:
		return s, c.Cmp(d) == 0
	case dtype.CSwapNE:
		return s, c.Cmp(d) != 0
	case dtype.CSwapLE:
		return s, c.Cmp(d) <= 0
	case dtype.CSwapLT:
		return s, c.Cmp(d) < 0
	case dtype.CSwapGE:
		return s, c.Cmp(d) >= 0
	case dtype.CSwapGT:
		return s, c.Cmp(d) > 0
	}
	return d, false
}

func refFloat[T float32 | float64](op dtype.Op, d, s, c T) (T, bool) {
	t := func(x bool) T {
		if x {
			return 1
		}
		return 0
	}
	switch op {
	case dtype.Min:
		if s < d {
			return s, true
		}
	case dtype.Max:
		if s > d {
			return s, true
		}
	case dtype.Sum:
		return d + s, true
	case dtype.Prod:
		return d * s, true
	case dtype.LOr:
		return t(d != 0 || s != 0), true
	case dtype.LAnd:
		return t(d != 0 && s != 0), true
	case dtype.LXor:
		return t((d != 0) != (s != 0)), true
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

func refCplx[T complex64 | complex128](op dtype.Op, d, s, c T) (T, bool) {
	t := func(x bool) T {
		if x {
			return 1
		}
		return 0
	}
	switch op {
	case dtype.Sum:
		return d + s, true
	case dtype.Prod:
		return d * s, true
	case dtype.LOr:
		return t(d != 0 || s != 0), true
	case dtype.LAnd:
		return t(d != 0 && s != 0), true
	case dtype.LXor:
		return t((d != 0) != (s != 0)), true
	case dtype.AtomicWrite:
		return s, true
	case dtype.CSwap:
		return s, c == d
	case dtype.CSwapNE:
		return s, c != d
	}
	return d, false
}

func ld[T any](b []byte) T {
	var v T
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v)), b)
	return v
}

func st[T any](b []byte, v T) { copy(b, unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v))) }

// Ref applies op to one element of type t: mem is the target element
// (updated in place) and the old value is returned as bytes.
func Ref(t dtype.Type, op dtype.Op, mem, src, cmp []byte) (old []byte) {
	old = append([]byte(nil), mem...)
	if op == dtype.AtomicRead {
		return old
	}
	switch t {
	case dtype.Float:
		if v, ok := refFloat(op, ld[float32](mem), ld[float32](src), ld[float32](cmp)); ok {
			st(mem, v)
		}
	case dtype.Double:
		if v, ok := refFloat(op, ld[float64](mem), ld[float64](src), ld[float64](cmp)); ok {
			st(mem, v)
		}
	case dtype.FloatComplex:
		if v, ok := refCplx(op, ld[complex64](mem), ld[complex64](src), ld[complex64](cmp)); ok {
			st(mem, v)
		}
	case dtype.DoubleComplex:
		if v, ok := refCplx(op, ld[complex128](mem), ld[complex128](src), ld[complex128](cmp)); ok {
			st(mem, v)
		}
	default:
		r := refInt{bits: 8 * t.Size(), signed: t.IsSigned()}
		if v, ok := refIntOp(r, op, r.val(mem), r.val(src), r.val(cmp)); ok {
			r.put(mem, v)
		}
	}
	return old
}

// Special returns interesting operand bytes for t: zero, one, -1, extremes,
// NaN, -0, infinities; random ones otherwise.
func Special(t dtype.Type, rng *rand.Rand) []byte {
	sz := t.Size()
	b := make([]byte, sz)
	switch t {
	case dtype.Float, dtype.Double, dtype.FloatComplex, dtype.DoubleComplex:
		vals := []float64{0, math.Copysign(0, -1), 1, -1, math.NaN(), math.Inf(1), math.Inf(-1),
			math.MaxFloat32, math.SmallestNonzeroFloat64, 3.5, -2.25, 1e300}
		pick := func() float64 {
			if rng.IntN(3) == 0 {
				return rng.NormFloat64() * 1e3
			}
			return vals[rng.IntN(len(vals))]
		}
		switch t {
		case dtype.Float:
			st(b, float32(pick()))
		case dtype.Double:
			st(b, pick())
		case dtype.FloatComplex:
			st(b, complex(float32(pick()), float32(pick())))
		case dtype.DoubleComplex:
			st(b, complex(pick(), pick()))
		}
		return b
	}
	switch rng.IntN(6) {
	case 0: // zero
	case 1:
		b[0] = 1
		if !littleEndian {
			b[0], b[sz-1] = 0, 1
		}
	case 2:
		for i := range b {
			b[i] = 0xff // -1 / max unsigned
		}
	case 3: // the sign bit alone: most negative
		if littleEndian {
			b[sz-1] = 0x80
		} else {
			b[0] = 0x80
		}
	default:
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	return b
}

// Types lists every datatype with atomic kernels.
var Types = []dtype.Type{dtype.Int8, dtype.Uint8, dtype.Int16, dtype.Uint16, dtype.Int32, dtype.Uint32,
	dtype.Int64, dtype.Uint64, dtype.Float, dtype.Double, dtype.FloatComplex, dtype.DoubleComplex,
	dtype.Int128, dtype.Uint128}

// SameBits compares element bytes, treating two NaNs of the same type as
// equal (Go's arithmetic may give any NaN payload).
func SameBits(t dtype.Type, a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	isNaN := func(x []byte) bool {
		switch t {
		case dtype.Float:
			return math.IsNaN(float64(ld[float32](x)))
		case dtype.Double:
			return math.IsNaN(ld[float64](x))
		case dtype.FloatComplex:
			c := ld[complex64](x)
			return math.IsNaN(float64(real(c))) || math.IsNaN(float64(imag(c)))
		case dtype.DoubleComplex:
			c := ld[complex128](x)
			return math.IsNaN(real(c)) || math.IsNaN(imag(c))
		}
		return false
	}
	if t == dtype.FloatComplex || t == dtype.DoubleComplex {
		h := len(a) / 2
		return SameBits(map[dtype.Type]dtype.Type{dtype.FloatComplex: dtype.Float, dtype.DoubleComplex: dtype.Double}[t], a[:h], b[:h]) &&
			SameBits(map[dtype.Type]dtype.Type{dtype.FloatComplex: dtype.Float, dtype.DoubleComplex: dtype.Double}[t], a[h:], b[h:])
	}
	return isNaN(a) && isNaN(b)
}
