package coll

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gofi-dev/fi/coll/colltest"
)

func TestHalfWidenAll(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		got, want := halfToFloat(uint16(h)), colltest.HalfToFloat(uint16(h))
		if math.IsNaN(float64(want)) {
			if !math.IsNaN(float64(got)) {
				t.Fatalf("half %#04x: got %v, want NaN", h, got)
			}
			continue
		}
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("half %#04x: got %v, want %v", h, got, want)
		}
		if back := floatToHalf(got); back != uint16(h) {
			t.Fatalf("half %#04x: round trip gave %#04x", h, back)
		}
	}
}

// TestNarrowMatchesReference: rounding float32 to binary16 and bfloat16
// agrees with the arithmetic reference on edge cases (ties, subnormals,
// overflow) and on random values of every magnitude.
func TestNarrowMatchesReference(t *testing.T) {
	vals := []float32{0, -0, 1, -1, 65504, 65519.99, 65520, 65536, 1e-8, 2.98e-8, 2.9802322e-8, 5.96e-8,
		6.1035156e-05, 6.097555e-05, 1.0009766, 1.0004883, 1.0014648, 3.3895314e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), math.SmallestNonzeroFloat32, math.MaxFloat32}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		vals = append(vals, math.Float32frombits(rng.Uint32()))
	}
	for _, f := range vals {
		if math.IsNaN(float64(f)) {
			if h := floatToHalf(f); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
				t.Fatalf("NaN %#08x -> half %#04x is not a NaN", math.Float32bits(f), h)
			}
			if b := floatToBF16(f); b&0x7f80 != 0x7f80 || b&0x7f == 0 {
				t.Fatalf("NaN %#08x -> bf16 %#04x is not a NaN", math.Float32bits(f), b)
			}
			continue
		}
		if got, want := floatToHalf(f), colltest.FloatToHalf(f); got != want {
			t.Fatalf("half(%g = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
		if got, want := floatToBF16(f), colltest.FloatToBF16(f); got != want {
			t.Fatalf("bf16(%g = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
}
