package kernel

import (
	"math/bits"

	"github.com/gofi-dev/fi/dtype"
)

// 128-bit integers (FI_INT128, FI_UINT128) in host byte order: the low
// 64 bits first on little-endian hosts, as C's __int128 lays them out.
// Arithmetic wraps modulo 2^128 like C's.

type u128 struct{ w [2]uint64 } // w in memory order

type (
	int128  u128
	uint128 u128
)

func (a u128) lo() uint64 {
	if littleEndian {
		return a.w[0]
	}
	return a.w[1]
}

func (a u128) hi() uint64 {
	if littleEndian {
		return a.w[1]
	}
	return a.w[0]
}

func mk128(hi, lo uint64) u128 {
	if littleEndian {
		return u128{[2]uint64{lo, hi}}
	}
	return u128{[2]uint64{hi, lo}}
}

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(ptrOf(&x)) == 1
}()

func (a u128) isZero() bool { return a.w[0]|a.w[1] == 0 }

func add128(a, b u128) u128 {
	lo, c := bits.Add64(a.lo(), b.lo(), 0)
	hi, _ := bits.Add64(a.hi(), b.hi(), c)
	return mk128(hi, lo)
}

func mul128(a, b u128) u128 {
	hi, lo := bits.Mul64(a.lo(), b.lo())
	hi += a.lo()*b.hi() + a.hi()*b.lo()
	return mk128(hi, lo)
}

// cmp128 compares a and b as signed or unsigned numbers: -1, 0, 1.
func cmp128(a, b u128, signed bool) int {
	ah, bh := a.hi(), b.hi()
	if signed {
		ah ^= 1 << 63
		bh ^= 1 << 63
	}
	switch {
	case ah < bh:
		return -1
	case ah > bh:
		return 1
	case a.lo() < b.lo():
		return -1
	case a.lo() > b.lo():
		return 1
	}
	return 0
}

func truth128(b bool) u128 {
	if b {
		return mk128(0, 1)
	}
	return u128{}
}

func apply128(op dtype.Op, d, s, c u128, signed bool) (u128, bool) {
	switch op {
	case dtype.Min:
		return s, cmp128(s, d, signed) < 0
	case dtype.Max:
		return s, cmp128(s, d, signed) > 0
	case dtype.Sum:
		return add128(d, s), true
	case dtype.Prod:
		return mul128(d, s), true
	case dtype.LOr:
		return truth128(!d.isZero() || !s.isZero()), true
	case dtype.LAnd:
		return truth128(!d.isZero() && !s.isZero()), true
	case dtype.BOr:
		return u128{[2]uint64{d.w[0] | s.w[0], d.w[1] | s.w[1]}}, true
	case dtype.BAnd:
		return u128{[2]uint64{d.w[0] & s.w[0], d.w[1] & s.w[1]}}, true
	case dtype.LXor:
		return truth128(d.isZero() != s.isZero()), true
	case dtype.BXor:
		return u128{[2]uint64{d.w[0] ^ s.w[0], d.w[1] ^ s.w[1]}}, true
	case dtype.AtomicWrite:
		return s, true
	case dtype.CSwap:
		return s, c == d
	case dtype.CSwapNE:
		return s, c != d
	case dtype.CSwapLE:
		return s, cmp128(c, d, signed) <= 0
	case dtype.CSwapLT:
		return s, cmp128(c, d, signed) < 0
	case dtype.CSwapGE:
		return s, cmp128(c, d, signed) >= 0
	case dtype.CSwapGT:
		return s, cmp128(c, d, signed) > 0
	case dtype.MSwap:
		return u128{[2]uint64{s.w[0]&c.w[0] | d.w[0]&^c.w[0], s.w[1]&c.w[1] | d.w[1]&^c.w[1]}}, true
	}
	return d, false
}

type i128Fam struct{}

func (i128Fam) apply(op dtype.Op, d, s, c int128) (int128, bool) {
	v, ok := apply128(op, u128(d), u128(s), u128(c), true)
	return int128(v), ok
}

type u128Fam struct{}

func (u128Fam) apply(op dtype.Op, d, s, c uint128) (uint128, bool) {
	v, ok := apply128(op, u128(d), u128(s), u128(c), false)
	return uint128(v), ok
}
