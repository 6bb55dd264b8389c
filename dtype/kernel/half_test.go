package kernel

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gofi-dev/fi/dtype"
)

var halfTypes = []dtype.Type{dtype.Float16, dtype.BFloat16}

// TestWiden16_EveryValue widens all 65536 encodings of each type at once
// (the vector body where the CPU has one) and compares every bit with the
// scalar conversion, at several offsets and lengths (tails).
func TestWiden16_EveryValue(t *testing.T) {
	for _, typ := range halfTypes {
		src := make([]byte, 2<<16+2)
		for h := range 1 << 16 {
			binary.NativeEndian.PutUint16(src[2*h+2:], uint16(h))
		}
		for _, off := range []int{0, 2} {
			for _, n := range []int{1 << 16, 1<<16 - 1, 15, 8, 7, 0} {
				s := src[off : off+2*n]
				dst := make([]byte, 4*n+2)[off:]
				Widen16(typ, dst, s)
				for i := range n {
					h := binary.NativeEndian.Uint16(s[2*i:])
					want := uint32(h) << 16
					if typ == dtype.Float16 {
						want = math.Float32bits(HalfToFloat(h))
					}
					if got := binary.NativeEndian.Uint32(dst[4*i:]); got != want {
						t.Fatalf("%s %#04x (n=%d): got %#08x, want %#08x", typ.Name(), h, n, got, want)
					}
				}
			}
		}
	}
}

// narrowInputs are float32 encodings every rounding path meets: zeros,
// subnormals, ties at every exponent, overflow, infinities, NaNs of every
// kind, and random bits.
func narrowInputs(r *rand.Rand, n int) []uint32 {
	var v []uint32
	for e := uint32(0); e < 256; e++ {
		for _, m := range []uint32{0, 1, 0x1000, 0x1001, 0x0fff, 0x3000, 0x2000, 0x8000, 0x7fff, 0x18000, 0x400000, 0x7fffff, 0x7fe000, 0x401000} {
			v = append(v, e<<23|m, 1<<31|e<<23|m)
		}
	}
	for len(v) < n {
		v = append(v, r.Uint32())
	}
	return v
}

// TestNarrow16_SameBits compares the vector narrowing with the scalar one
// bit for bit, at lengths around the vector block.
func TestNarrow16_SameBits(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	in := narrowInputs(r, 1<<18)
	src := make([]byte, 4*len(in))
	for i, b := range in {
		binary.NativeEndian.PutUint32(src[4*i:], b)
	}
	for _, typ := range halfTypes {
		for _, n := range []int{len(in), len(in) - 1, 17, 16, 15, 1, 0} {
			s := src[4*(len(in)-n):]
			dst := make([]byte, 2*n)
			Narrow16(typ, dst, s)
			for i := range n {
				f := math.Float32frombits(binary.NativeEndian.Uint32(s[4*i:]))
				want := FloatToBF16(f)
				if typ == dtype.Float16 {
					want = FloatToHalf(f)
				}
				if got := binary.NativeEndian.Uint16(dst[2*i:]); got != want {
					t.Fatalf("%s of %#08x (n=%d): got %#04x, want %#04x", typ.Name(), math.Float32bits(f), n, got, want)
				}
			}
		}
	}
}

// TestNarrow16_Exhaustive narrows all 2^32 float32 encodings both ways
// (tens of seconds: GOFI_EXHAUSTIVE=1 runs it).
func TestNarrow16_Exhaustive(t *testing.T) {
	if os.Getenv("GOFI_EXHAUSTIVE") == "" {
		t.Skip("GOFI_EXHAUSTIVE=1 runs it")
	}
	const chunk = 1 << 16
	src := make([]byte, 4*chunk)
	dst := make([]byte, 2*chunk)
	for _, typ := range halfTypes {
		for base := uint64(0); base < 1<<32; base += chunk {
			for i := range chunk {
				binary.NativeEndian.PutUint32(src[4*i:], uint32(base)+uint32(i))
			}
			Narrow16(typ, dst, src)
			for i := range chunk {
				f := math.Float32frombits(uint32(base) + uint32(i))
				want := FloatToBF16(f)
				if typ == dtype.Float16 {
					want = FloatToHalf(f)
				}
				if got := binary.NativeEndian.Uint16(dst[2*i:]); got != want {
					t.Fatalf("%s of %#08x: got %#04x, want %#04x", typ.Name(), math.Float32bits(f), got, want)
				}
			}
		}
	}
}

func TestHalf_NoAlloc(t *testing.T) {
	src := make([]byte, 4096)
	dst := make([]byte, 8192)
	if a := testing.AllocsPerRun(50, func() {
		Widen16(dtype.Float16, dst, src)
		Narrow16(dtype.BFloat16, src, dst)
	}); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}

// BenchmarkHalf: the conversions of a 1 MiB (of 16-bit values) buffer,
// vector body against the scalar loop.
func BenchmarkHalf(b *testing.B) {
	const n = 512 << 10
	h := make([]byte, 2*n)
	f := make([]byte, 4*n)
	for _, typ := range halfTypes {
		for _, impl := range []string{"go", "vec"} {
			b.Run(fmt.Sprintf("widen/%s/%s", typ.Name()[3:], impl), func(b *testing.B) {
				b.SetBytes(2 * n)
				for b.Loop() {
					if impl == "go" {
						widenPortable(typ, f, h)
					} else {
						Widen16(typ, f, h)
					}
				}
			})
			b.Run(fmt.Sprintf("narrow/%s/%s", typ.Name()[3:], impl), func(b *testing.B) {
				b.SetBytes(2 * n)
				for b.Loop() {
					if impl == "go" {
						narrowPortable(typ, h, f)
					} else {
						Narrow16(typ, h, f)
					}
				}
			})
		}
	}
}
