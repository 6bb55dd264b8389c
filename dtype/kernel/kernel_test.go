package kernel

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gofi-dev/fi/dtype"
	"github.com/gofi-dev/fi/dtype/kernel/kref"
)

var ne = binary.NativeEndian

// TestExec_Differential runs every supported (datatype, op) on random
// and special operands against the reference, several elements at once,
// at every alignment the datatype allows, with guard bytes around.
func TestExec_Differential(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range kref.Types {
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
					e := kref.Special(dt, rng)
					s, c := kref.Special(dt, rng), kref.Special(dt, rng)
					if rng.IntN(4) == 0 { // equal compare operand
						copy(c, e)
					}
					copy(mem[i*sz:], e)
					copy(src[i*sz:], s)
					copy(cmp[i*sz:], c)
					copy(want[i*sz:], e)
					copy(wantOld[i*sz:], kref.Ref(dt, op, want[i*sz:(i+1)*sz], s, c))
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
					if !kref.SameBits(dt, g, w) {
						t.Fatalf("%s %s elem %d: target %x, want %x (src %x cmp %x old %x)", dt.Name(), op.Name(), i, g, w,
							src[i*sz:(i+1)*sz], cmp[i*sz:(i+1)*sz], wantOld[i*sz:(i+1)*sz])
					}
					if !kref.SameBits(dt, res[i*sz:(i+1)*sz], wantOld[i*sz:(i+1)*sz]) {
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
						if !kref.SameBits(dt, dst[i*sz:(i+1)*sz], want[i*sz:(i+1)*sz]) {
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
