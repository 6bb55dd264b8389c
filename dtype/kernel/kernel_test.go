package kernel

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gofi-dev/fi/dtype"
)

// The reference: an independent, plain computation of one element per
// datatype family, integers through math/big (then wrapped to the width),
// reals and complex numbers with Go's own operators on typed values.

var ne = binary.NativeEndian

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

// special returns interesting operand bytes for t: zero, one, -1, extremes,
// NaN, -0, infinities; random ones otherwise.
func special(t dtype.Type, rng *rand.Rand) []byte {
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

var allTypes = []dtype.Type{dtype.Int8, dtype.Uint8, dtype.Int16, dtype.Uint16, dtype.Int32, dtype.Uint32,
	dtype.Int64, dtype.Uint64, dtype.Float, dtype.Double, dtype.FloatComplex, dtype.DoubleComplex,
	dtype.Int128, dtype.Uint128}

// sameBits compares element bytes, treating two NaNs of the same type as
// equal (Go's arithmetic may give any NaN payload).
func sameBits(t dtype.Type, a, b []byte) bool {
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
		return sameBits(map[dtype.Type]dtype.Type{dtype.FloatComplex: dtype.Float, dtype.DoubleComplex: dtype.Double}[t], a[:h], b[:h]) &&
			sameBits(map[dtype.Type]dtype.Type{dtype.FloatComplex: dtype.Float, dtype.DoubleComplex: dtype.Double}[t], a[h:], b[h:])
	}
	return isNaN(a) && isNaN(b)
}

// TestExec_Differential runs every supported (datatype, op) on random
// and special operands against the reference, several elements at once,
// at every alignment the datatype allows, with guard bytes around.
func TestExec_Differential(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range allTypes {
		for op := dtype.Min; op <= dtype.MSwap; op++ {
			if !Supported(dt, op, dtype.KindBase|dtype.KindFetch|dtype.KindCompare) {
				continue
			}
			sz := dt.Size()
			for round := 0; round < 200; round++ {
				n := 1 + rng.IntN(5)
				buf := make([]byte, 64+n*sz+64)
				for i := range buf {
					buf[i] = 0xa5
				}
				at := 16 + Align(dt)*rng.IntN(4)
				mem := buf[at : at+n*sz]
				src := make([]byte, n*sz)
				cmp := make([]byte, n*sz)
				want := make([]byte, n*sz)
				wantOld := make([]byte, n*sz)
				for i := 0; i < n; i++ {
					e := special(dt, rng)
					s, c := special(dt, rng), special(dt, rng)
					if rng.IntN(4) == 0 { // equal compare operand
						copy(c, e)
					}
					copy(mem[i*sz:], e)
					copy(src[i*sz:], s)
					copy(cmp[i*sz:], c)
					copy(want[i*sz:], e)
					copy(wantOld[i*sz:], Ref(dt, op, want[i*sz:(i+1)*sz], s, c))
				}
				res := make([]byte, n*sz)
				var cmpArg []byte
				if op.Kinds() == dtype.KindCompare {
					cmpArg = cmp
				}
				if !Exec(dt, op, mem, src, cmpArg, res) {
					t.Fatalf("%s %s: Exec refused", dt.Name(), op.Name())
				}
				for i := 0; i < n; i++ {
					g, w := mem[i*sz:(i+1)*sz], want[i*sz:(i+1)*sz]
					if !sameBits(dt, g, w) {
						t.Fatalf("%s %s elem %d: target %x, want %x (src %x cmp %x old %x)", dt.Name(), op.Name(), i, g, w,
							src[i*sz:(i+1)*sz], cmp[i*sz:(i+1)*sz], wantOld[i*sz:(i+1)*sz])
					}
					if !sameBits(dt, res[i*sz:(i+1)*sz], wantOld[i*sz:(i+1)*sz]) {
						t.Fatalf("%s %s elem %d: old %x, want %x", dt.Name(), op.Name(), i, res[i*sz:(i+1)*sz], wantOld[i*sz:(i+1)*sz])
					}
				}
				for i, b := range buf {
					if (i < at || i >= at+n*sz) && b != 0xa5 {
						t.Fatalf("%s %s: guard byte %d changed", dt.Name(), op.Name(), i)
					}
				}
				// Reduce: the same result with plain stores.
				if op.Kinds()&dtype.KindBase != 0 {
					dst := append([]byte(nil), want...) // anything; recompute from the start values
					for i := 0; i < n; i++ {
						copy(dst[i*sz:], wantOld[i*sz:(i+1)*sz])
					}
					if !Reduce(dt, op, dst, src) {
						t.Fatalf("%s %s: Reduce refused", dt.Name(), op.Name())
					}
					for i := 0; i < n; i++ {
						if !sameBits(dt, dst[i*sz:(i+1)*sz], want[i*sz:(i+1)*sz]) {
							t.Fatalf("%s %s: Reduce elem %d %x, want %x", dt.Name(), op.Name(), i, dst[i*sz:(i+1)*sz], want[i*sz:(i+1)*sz])
						}
					}
				}
			}
		}
	}
}

// TestSupported_Table pins the validity table to libfabric's.
func TestSupported_Table(t *testing.T) {
	cases := []struct {
		dt   dtype.Type
		op   dtype.Op
		kind dtype.Kind
		want bool
	}{
		{dtype.Uint64, dtype.Sum, dtype.KindBase, true},
		{dtype.Uint64, dtype.Sum, dtype.KindCompare, false},
		{dtype.Uint64, dtype.AtomicRead, dtype.KindBase, false},
		{dtype.Uint64, dtype.AtomicRead, dtype.KindFetch, true},
		{dtype.Int8, dtype.MSwap, dtype.KindCompare, true},
		{dtype.Double, dtype.BOr, dtype.KindBase, false},
		{dtype.Double, dtype.Min, dtype.KindFetch, true},
		{dtype.Double, dtype.CSwapGE, dtype.KindCompare, true},
		{dtype.Double, dtype.MSwap, dtype.KindCompare, false},
		{dtype.FloatComplex, dtype.Min, dtype.KindBase, false},
		{dtype.DoubleComplex, dtype.Prod, dtype.KindBase, true},
		{dtype.DoubleComplex, dtype.CSwapNE, dtype.KindCompare, true},
		{dtype.DoubleComplex, dtype.CSwapLT, dtype.KindCompare, false},
		{dtype.LongDouble, dtype.Sum, dtype.KindBase, false},
		{dtype.LongDoubleComplex, dtype.Sum, dtype.KindBase, false},
		{dtype.Uint128, dtype.BXor, dtype.KindBase, true},
		{dtype.Float16, dtype.Sum, dtype.KindBase, false},
		{dtype.Type(99), dtype.Sum, dtype.KindBase, false},
		{dtype.Uint64, dtype.Op(99), dtype.KindBase, false},
		{dtype.Uint64, dtype.Diff, dtype.KindBase, false},
	}
	for _, c := range cases {
		if got := Supported(c.dt, c.op, c.kind); got != c.want {
			t.Errorf("Supported(%s, %s, %d) = %v", c.dt.Name(), c.op.Name(), c.kind, got)
		}
	}
}

func TestExec_Refusals(t *testing.T) {
	mem := make([]byte, 32)
	if Exec(dtype.Uint64, dtype.Sum, mem[1:9], make([]byte, 8), nil, nil) {
		t.Error("misaligned target accepted")
	}
	if Exec(dtype.Uint64, dtype.Sum, mem[:7], make([]byte, 8), nil, nil) {
		t.Error("partial element accepted")
	}
	if Exec(dtype.Uint64, dtype.Sum, mem[:16], make([]byte, 8), nil, nil) {
		t.Error("short operand accepted")
	}
	if Exec(dtype.Uint64, dtype.CSwap, mem[:8], make([]byte, 8), nil, nil) {
		t.Error("compare without compare operand accepted")
	}
	if Exec(dtype.LongDouble, dtype.Sum, mem[:16], make([]byte, 16), nil, nil) {
		t.Error("long double accepted")
	}
	for _, b := range mem {
		if b != 0 {
			t.Fatal("a refused Exec touched memory")
		}
	}
}

// TestExec_ConcurrentWithSyncAtomic has goroutines fetch-add through Exec
// while others use sync/atomic on the same word, and neighbouring bytes
// of a sub-word element change under CAS loops: nothing is lost.
func TestExec_ConcurrentWithSyncAtomic(t *testing.T) {
	var w struct {
		_ [8]byte
		a atomic.Uint64
		b [8]byte // four uint16 elements, updated by different goroutines
	}
	const per = 2000
	var wg sync.WaitGroup
	one := make([]byte, 8)
	ne.PutUint64(one, 1)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&w.a)), 8)
	for g := 0; g < 4; g++ {
		wg.Add(3)
		go func() {
			defer wg.Done()
			res := make([]byte, 8)
			for range per {
				Exec(dtype.Uint64, dtype.Sum, mem, one, nil, res)
			}
		}()
		go func() {
			defer wg.Done()
			for range per {
				w.a.Add(1)
			}
		}()
		go func() {
			defer wg.Done()
			el := w.b[2*g : 2*g+2]
			s := []byte{1, 0}
			if !littleEndian {
				s = []byte{0, 1}
			}
			for range per {
				Exec(dtype.Uint16, dtype.Sum, el, s, nil, nil)
			}
		}()
	}
	wg.Wait()
	if got := w.a.Load(); got != 8*per {
		t.Fatalf("word = %d, want %d", got, 8*per)
	}
	for g := 0; g < 4; g++ {
		if v := ne.Uint16(w.b[2*g:]); v != per {
			t.Fatalf("uint16 element %d = %d, want %d", g, v, per)
		}
	}
}

func TestExec_NoAllocs(t *testing.T) {
	mem := make([]byte, 8)
	src := make([]byte, 8)
	res := make([]byte, 8)
	for _, c := range []struct {
		dt dtype.Type
		op dtype.Op
	}{{dtype.Uint64, dtype.Sum}, {dtype.Int64, dtype.Min}, {dtype.Double, dtype.Sum}, {dtype.Uint8, dtype.BXor}} {
		if n := testing.AllocsPerRun(100, func() { Exec(c.dt, c.op, mem[:c.dt.Size()], src, nil, res) }); n != 0 {
			t.Errorf("%s %s: %v allocs", c.dt.Name(), c.op.Name(), n)
		}
	}
}

func BenchmarkExec(b *testing.B) {
	mem := make([]byte, 16)
	src := make([]byte, 16)
	cmp := make([]byte, 16)
	res := make([]byte, 16)
	for _, c := range []struct {
		name string
		dt   dtype.Type
		op   dtype.Op
	}{
		{"u64-sum", dtype.Uint64, dtype.Sum}, {"u64-cswap", dtype.Uint64, dtype.CSwap},
		{"i32-max", dtype.Int32, dtype.Max}, {"u8-sum", dtype.Uint8, dtype.Sum},
		{"f64-sum", dtype.Double, dtype.Sum}, {"c128-prod", dtype.DoubleComplex, dtype.Prod},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var cm []byte
			if c.op.Kinds() == dtype.KindCompare {
				cm = cmp
			}
			for b.Loop() {
				Exec(c.dt, c.op, mem[:c.dt.Size()], src, cm, res)
			}
		})
	}
}
