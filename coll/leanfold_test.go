package coll

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gofi-dev/fi/dtype"
)

// TestInlineFoldMatchesKernel checks that every inline fold gives the
// kernels' bits (the left fold in rank order), NaNs, zeros of both signs
// and infinities included, for 2 to 8 ranks and every inline length.
func TestInlineFoldMatchesKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	specials32 := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1, -1, 3.3e38}
	specials64 := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 1, -1, 1.7e308}
	fill := func(b []byte, tp dtype.Type) {
		switch tp {
		case dtype.Float:
			for i := 0; i+4 <= len(b); i += 4 {
				v := rng.Float32()*200 - 100
				if rng.IntN(3) == 0 {
					v = specials32[rng.IntN(len(specials32))]
				}
				binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v))
			}
		case dtype.Double:
			for i := 0; i+8 <= len(b); i += 8 {
				v := rng.Float64()*200 - 100
				if rng.IntN(3) == 0 {
					v = specials64[rng.IntN(len(specials64))]
				}
				binary.LittleEndian.PutUint64(b[i:], math.Float64bits(v))
			}
		default:
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
		}
	}
	for _, tp := range []dtype.Type{dtype.Int32, dtype.Uint32, dtype.Int64, dtype.Uint64, dtype.Float, dtype.Double} {
		for _, op := range []dtype.Op{dtype.Sum, dtype.Min, dtype.Max} {
			f, fn := inlineFoldOf(tp, op), Kernel(tp, op)
			if f == nil || fn == nil {
				t.Fatalf("%v %v: no inline fold or kernel", tp, op)
			}
			es := tp.Size()
			for n := 2; n <= 8; n++ {
				r := &region{n: n, mem: make([]byte, regionHdr+ctrlBytes(n))}
				r.index()
				for set := 0; set < 2; set++ {
					for nb := es; nb <= inlineMax; nb += es {
						for trial := 0; trial < 4; trial++ {
							for j := 0; j < n; j++ {
								fill(r.inline(j, set), tp)
							}
							want := make([]byte, nb)
							fn(want, r.inline(0, set)[:nb], r.inline(1, set)[:nb])
							for j := 2; j < n; j++ {
								fn(want, want, r.inline(j, set)[:nb])
							}
							got := make([]byte, nb+1) // one more: the fold writes nb bytes only
							got[nb] = 0xa5
							f(got[:nb], r.inl[set])
							if !bytes.Equal(got[:nb], want) || got[nb] != 0xa5 {
								t.Fatalf("%v %v n=%d set=%d %d bytes:\n got %x\nwant %x", tp, op, n, set, nb, got[:nb], want)
							}
						}
					}
				}
			}
		}
	}
}
