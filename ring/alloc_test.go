//go:build !race

package ring_test

import (
	"testing"

	"github.com/gofi-dev/fi/ring"
)

func TestHotPath_AllocatesNothing(t *testing.T) {
	r := mustNew(t, 4096)
	p := make([]byte, 100)
	dst := make([]byte, 100)
	b, _ := ring.NewBitmap(alignedBuf(64), 100)
	idx := make([]int, 0, 100)
	da, dz := mustDuplex(t, 4096)
	tests := []struct {
		name string
		fn   func()
	}{
		{"TryWrite+TryRead", func() {
			r.TryWrite(1, p)
			r.TryRead(dst)
		}},
		{"Reserve+Commit+Publish+Peek+Consume+Release", func() {
			buf, _ := r.Reserve(64)
			buf[0] = 1
			r.Commit(2, 64)
			r.Publish()
			r.Peek()
			r.Consume()
			r.Release()
		}},
		{"ErrFull and ErrEmpty", func() {
			for r.TryWrite(1, p) == nil {
			}
			for {
				if _, _, err := r.TryRead(dst); err != nil {
					break
				}
			}
		}},
		{"Duplex TryWrite+TryRead (slot, ring)", func() {
			da.TryWrite(1, p[:8])
			dz.TryRead(dst)
			dz.TryWrite(1, p[:8])
			da.TryRead(dst)
			da.TryWrite(1, p)
			dz.TryRead(dst)
		}},
		{"Duplex Reserve+Commit+Publish+Peek+Consume+Release", func() {
			for _, n := range []int{8, 8, 64} {
				buf, _ := da.Reserve(n)
				buf[0] = 1
				da.Commit(2, n)
			}
			da.Publish()
			for range 3 {
				dz.Peek()
				dz.Consume()
			}
			dz.Release()
		}},
		{"Bitmap Set+Drain", func() {
			b.Set(3)
			b.Set(99)
			idx = b.Drain(idx[:0])
		}},
		{"Copy 1 MiB", func() {
			big := bigSrc
			ring.Copy(bigDst, big)
		}},
	}
	for _, tt := range tests {
		if a := testing.AllocsPerRun(100, tt.fn); a != 0 {
			t.Errorf("%s: %v allocs per run, want 0", tt.name, a)
		}
	}
}

var bigSrc, bigDst = make([]byte, 1<<20), make([]byte, 1<<20)
