package kernel

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gofi-dev/fi/dtype"
)

// reducible lists every (datatype, op) Reducer serves.
func reducible() (ts []dtype.Type, ops []dtype.Op) {
	for t := dtype.Type(0); t <= dtype.Float8E5M2; t++ {
		for op := dtype.Min; op <= dtype.BXor; op++ {
			if Reducer(t, op) != nil {
				ts, ops = append(ts, t), append(ops, op)
			}
		}
	}
	return ts, ops
}

// fillSpecial fills b with elements of t drawn from the values kernels get
// wrong: NaNs with payloads (quiet and signalling, both signs), zeros of
// both signs, infinities, subnormals, extremes, small integers; or random
// bits.
func fillSpecial(r *rand.Rand, t dtype.Type, b []byte) {
	sz := t.Size()
	if t == dtype.FloatComplex {
		t, sz = dtype.Float, 4
	} else if t == dtype.DoubleComplex {
		t, sz = dtype.Double, 8
	}
	for i := 0; i+sz <= len(b); i += sz {
		var v uint64
		switch t {
		case dtype.Float:
			f32 := []uint32{0x7fc00000, 0x7fc00001, 0xffc12345, 0x7f800001, 0xff812345, 0, 0x80000000,
				0x7f800000, 0xff800000, 1, 0x80000001, 0x007fffff, 0x7f7fffff, 0x3f800000, 0xbf800000}
			if r.IntN(3) == 0 {
				v = uint64(f32[r.IntN(len(f32))])
			} else {
				v = uint64(math.Float32bits(float32(r.NormFloat64() * 100)))
			}
		case dtype.Double:
			f64 := []uint64{0x7ff8000000000000, 0x7ff8000000000001, 0xfff8000000012345, 0x7ff0000000000001,
				0, 1 << 63, 0x7ff0000000000000, 0xfff0000000000000, 1, 0x000fffffffffffff, 0x7fefffffffffffff,
				math.Float64bits(1), math.Float64bits(-1)}
			if r.IntN(3) == 0 {
				v = f64[r.IntN(len(f64))]
			} else {
				v = math.Float64bits(r.NormFloat64() * 1e6)
			}
		default:
			switch r.IntN(4) {
			case 0:
				v = uint64(r.IntN(3)) // 0, 1, 2: the logical ops' cases
			case 1:
				v = []uint64{1 << (8*sz - 1), 1<<(8*sz-1) - 1, ^uint64(0)}[r.IntN(3)]
			default:
				v = r.Uint64()
			}
		}
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], v)
		copy(b[i:i+sz], w[:sz])
	}
}

// TestReducer_SameBitsAsPortable runs every CPU-tuned kernel against the
// portable loop at lengths 0 to 300 elements, at every offset of a 32-byte
// block in each buffer, in place (dst = a, dst = b) and not, and checks
// every bit, guard bytes included.
func TestReducer_SameBitsAsPortable(t *testing.T) {
	ts, ops := reducible()
	r := rand.New(rand.NewPCG(1, 2))
	vec := 0
	for k, dt := range ts {
		op := ops[k]
		if Vector(dt, op) == "" {
			continue
		}
		vec++
		fast, ref := Reducer(dt, op), Portable(dt, op)
		sz := dt.Size()
		for n := 0; n <= 300; n += 1 + n/16 {
			nb := n * sz
			off := r.IntN(32)
			a := make([]byte, nb+64)
			b := make([]byte, nb+64)
			fillSpecial(r, dt, a)
			fillSpecial(r, dt, b)
			av, bv := a[off:off+nb], b[(off+7)%32:(off+7)%32+nb]
			want := make([]byte, nb)
			ref(want, av, bv)
			for mode := 0; mode < 3; mode++ {
				got := make([]byte, nb+64)
				for i := range got {
					got[i] = 0xa5
				}
				d := got[(off+13)%32 : (off+13)%32+nb]
				x, y := append([]byte(nil), av...), append([]byte(nil), bv...)
				switch mode {
				case 0:
					fast(d, x, y)
				case 1:
					copy(d, x)
					fast(d, d, y)
				case 2:
					copy(d, y)
					fast(d, x, d)
				}
				if !bytes.Equal(d, want) {
					for i := 0; i < n; i++ {
						if !bytes.Equal(d[i*sz:(i+1)*sz], want[i*sz:(i+1)*sz]) {
							t.Fatalf("%s %s n=%d mode %d elem %d: a %x b %x: got %x, want %x", dt.Name(), op.Name(), n, mode, i,
								av[i*sz:(i+1)*sz], bv[i*sz:(i+1)*sz], d[i*sz:(i+1)*sz], want[i*sz:(i+1)*sz])
						}
					}
				}
				for i, c := range got {
					if (i < (off+13)%32 || i >= (off+13)%32+nb) && c != 0xa5 {
						t.Fatalf("%s %s n=%d: guard byte %d changed", dt.Name(), op.Name(), n, i)
					}
				}
			}
		}
	}
	t.Logf("%d of %d kernels CPU-tuned (%q)", vec, len(ts), vectorISA)
}

// TestPortable_Table checks the portable kernels on hand-computed values,
// so that the reference itself is right.
func TestPortable_Table(t *testing.T) {
	f32 := func(v ...float32) []byte {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return b
	}
	nan := float32(math.NaN())
	negz := float32(math.Copysign(0, -1))
	cases := []struct {
		t       dtype.Type
		op      dtype.Op
		a, b, w []byte
	}{
		{dtype.Int8, dtype.Sum, []byte{127, 1}, []byte{1, 255}, []byte{128, 0}},
		{dtype.Int8, dtype.Min, []byte{0x80, 5}, []byte{0x7f, 4}, []byte{0x80, 4}},
		{dtype.Uint8, dtype.Min, []byte{0x80, 5}, []byte{0x7f, 4}, []byte{0x7f, 4}},
		{dtype.Uint8, dtype.Prod, []byte{16, 3}, []byte{16, 7}, []byte{0, 21}},
		{dtype.Uint8, dtype.LOr, []byte{0, 0, 7, 9}, []byte{0, 3, 0, 9}, []byte{0, 1, 1, 1}},
		{dtype.Uint8, dtype.LAnd, []byte{0, 0, 7, 9}, []byte{0, 3, 0, 9}, []byte{0, 0, 0, 1}},
		{dtype.Uint8, dtype.LXor, []byte{0, 0, 7, 9}, []byte{0, 3, 0, 9}, []byte{0, 1, 1, 0}},
		{dtype.Float, dtype.Min, f32(negz, 0, nan, 1), f32(0, negz, 1, nan), f32(0, negz, 1, nan)},
		{dtype.Float, dtype.Max, f32(negz, 2, nan, 1), f32(0, 1, 1, nan), f32(0, 2, 1, nan)},
		{dtype.Float, dtype.Sum, f32(1, 1e30), f32(2, -1e30), f32(3, 0)},
		{dtype.FloatComplex, dtype.Prod, f32(1, 2), f32(3, 4), f32(-5, 10)},
	}
	for _, c := range cases {
		for _, f := range []Func{Portable(c.t, c.op), Reducer(c.t, c.op)} {
			got := make([]byte, len(c.w))
			f(got, c.a, c.b)
			if !bytes.Equal(got, c.w) {
				t.Errorf("%s %s(%x, %x) = %x, want %x", c.t.Name(), c.op.Name(), c.a, c.b, got, c.w)
			}
		}
	}
}

// TestReducer_Coverage pins which pairs have kernels, and, on an AVX2
// machine, which are CPU-tuned.
func TestReducer_Coverage(t *testing.T) {
	ts, ops := reducible()
	if len(ts) != 8*10+2*4+2*2 {
		t.Fatalf("%d kernels, want %d", len(ts), 8*10+2*4+2*2)
	}
	if vectorISA == "" {
		t.Skip("no CPU-tuned kernels on this machine")
	}
	for k, dt := range ts {
		vec := Vector(dt, ops[k]) != ""
		want := !(dt == dtype.FloatComplex || dt == dtype.DoubleComplex) || ops[k] == dtype.Sum
		if vec != want {
			t.Errorf("%s %s: CPU-tuned %t, want %t", dt.Name(), ops[k].Name(), vec, want)
		}
	}
}

// TestReduceN checks ReduceN against pairwise calls, across block edges.
func TestReduceN(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, dt := range []dtype.Type{dtype.Float, dtype.Double, dtype.Int32, dtype.Uint8} {
		fn := Reducer(dt, dtype.Sum)
		for _, n := range []int{0, 1, 3, ReduceBlock/dt.Size() - 1, ReduceBlock/dt.Size() + 5, 3*ReduceBlock/dt.Size() + 7} {
			for _, k := range []int{1, 2, 3, 8} {
				srcs := make([][]byte, k)
				for i := range srcs {
					srcs[i] = make([]byte, n*dt.Size())
					fillSpecial(r, dt, srcs[i])
				}
				want := append([]byte(nil), srcs[0]...)
				for _, s := range srcs[1:] {
					fn(want, want, s)
				}
				got := make([]byte, len(want))
				ReduceN(fn, got, srcs)
				if !bytes.Equal(got, want) {
					t.Fatalf("%s n=%d k=%d: differs from pairwise", dt.Name(), n, k)
				}
				ReduceN(fn, srcs[0], srcs) // in place into the first source
				if !bytes.Equal(srcs[0], want) {
					t.Fatalf("%s n=%d k=%d in place: differs from pairwise", dt.Name(), n, k)
				}
			}
		}
	}
}

// TestReducer_NoAlloc: a kernel call allocates nothing.
func TestReducer_NoAlloc(t *testing.T) {
	fn := Reducer(dtype.Float, dtype.Sum)
	buf := make([]byte, 4099)
	srcs := [][]byte{buf, buf, buf}
	if a := testing.AllocsPerRun(100, func() {
		fn(buf[:4096], buf[1:4097], buf[3:4099])
		ReduceN(fn, buf[:4096], srcs)
	}); a != 0 {
		t.Fatalf("%v allocations per call", a)
	}
}

// FuzzReducer: any bytes, any pair, any length and offsets: the CPU-tuned
// kernel and the portable one agree bit for bit.
func FuzzReducer(f *testing.F) {
	f.Add(uint8(10), uint8(2), []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"))
	f.Add(uint8(6), uint8(1), bytes.Repeat([]byte{0xff, 0x7f, 0x80, 0}, 40))
	ts, ops := reducible()
	f.Fuzz(func(t *testing.T, pick, offs uint8, data []byte) {
		k := int(pick) % len(ts)
		dt, op := ts[k], ops[k]
		sz := dt.Size()
		o := int(offs) % 8
		if len(data) < o+2 {
			return
		}
		n := (len(data) - o) / 2 / sz * sz
		x, y := data[o:o+n], data[len(data)-n:]
		got, want := make([]byte, n), make([]byte, n)
		Portable(dt, op)(want, x, y)
		Reducer(dt, op)(got, x, y)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s %s on %d bytes: got %x, want %x", dt.Name(), op.Name(), n, got, want)
		}
	})
}

// BenchmarkReducer measures each CPU-tuned kernel against the portable
// loop, in place (dst = a, as collectives accumulate) at sizes in L1, L2
// and memory: compare go and vec of one size for the ratio.
func BenchmarkReducer(b *testing.B) {
	pairs := []struct {
		t  dtype.Type
		op dtype.Op
	}{
		{dtype.Float, dtype.Sum}, {dtype.Double, dtype.Sum}, {dtype.Float, dtype.Max},
		{dtype.Int32, dtype.Sum}, {dtype.Int64, dtype.Prod}, {dtype.Uint8, dtype.BXor},
	}
	for _, p := range pairs {
		for _, size := range []int{4 << 10, 256 << 10, 16 << 20} {
			x := make([]byte, size)
			y := make([]byte, size)
			fillSpecial(rand.New(rand.NewPCG(5, 6)), p.t, y)
			for _, impl := range []struct {
				name string
				fn   Func
			}{{"go", Portable(p.t, p.op)}, {"vec", Reducer(p.t, p.op)}} {
				b.Run(fmt.Sprintf("%s/%s/%dKiB/%s", p.t.Name()[3:], p.op.Name()[3:], size>>10, impl.name), func(b *testing.B) {
					b.SetBytes(int64(size))
					for b.Loop() {
						impl.fn(x, x, y)
					}
				})
			}
		}
	}
}

// BenchmarkReduceN: eight 1 MiB float32 sources folded into one, in
// ReduceBlock blocks (ReduceN) against whole-buffer pairwise calls, whose
// partial result leaves the L1 and L2 between passes.
func BenchmarkReduceN(b *testing.B) {
	const size, k = 1 << 20, 8
	fn := Reducer(dtype.Float, dtype.Sum)
	srcs := make([][]byte, k)
	for i := range srcs {
		srcs[i] = make([]byte, size)
	}
	dst := make([]byte, size)
	b.Run("blocked", func(b *testing.B) {
		b.SetBytes(size * k)
		for b.Loop() {
			ReduceN(fn, dst, srcs)
		}
	})
	b.Run("pairwise", func(b *testing.B) {
		b.SetBytes(size * k)
		for b.Loop() {
			fn(dst, srcs[0], srcs[1])
			for _, s := range srcs[2:] {
				fn(dst, dst, s)
			}
		}
	})
}
