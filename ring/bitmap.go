package ring

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// Bitmap is a shared "non-empty" bitmap: bit i set means inbound ring i may
// hold records. It lives in a caller-provided region (typically the
// receiver's part of a shared mapping) of BitmapSize(n) bytes.
//
// Protocol (no lost wake-up, no lock):
//   - Producer of ring i: Publish the ring, then Set(i).
//   - Consumer: Take(w) swaps word w to zero and returns its bits; for each
//     bit, drain ring i. A record published before the producer's Set is
//     seen by that drain; a Set that lands after the swap leaves the bit
//     set for the next scan. A consumer that stops draining ring i early
//     (a budget) must Set(i) again itself.
//   - Set skips the atomic OR when the bit is already set: if the producer
//     saw the bit set, the consumer's swap comes later in the atomic order
//     than the producer's tail store, so the drain after it sees the record.
//
// Bitmap is safe for concurrent use by any number of producers (Set) and
// one consumer (Take, Drain).
type Bitmap struct {
	w []atomic.Uint64
	n int
}

// BitmapSize returns the bytes a bitmap of n bits occupies (whole 8-byte
// words).
func BitmapSize(n int) int { return (n + 63) / 64 * 8 }

// NewBitmap returns a bitmap of n bits over mem, which must be 8-byte
// aligned and at least BitmapSize(n) bytes. It does not clear mem: a fresh
// mapping is zero, and Reset clears explicitly.
func NewBitmap(mem []byte, n int) (*Bitmap, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: bitmap of %d bits", ErrBadRegion, n)
	}
	size := BitmapSize(n)
	if len(mem) < size {
		return nil, fmt.Errorf("%w: bitmap of %d bits needs %d bytes, have %d", ErrBadRegion, n, size, len(mem))
	}
	if !aligned(mem, 8) {
		return nil, fmt.Errorf("%w: bitmap region not 8-byte aligned", ErrBadRegion)
	}
	w := unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(unsafe.SliceData(mem))), size/8)
	return &Bitmap{w: w, n: n}, nil
}

// Len returns the number of bits.
func (b *Bitmap) Len() int { return b.n }

// Words returns the number of 64-bit words, for Take.
func (b *Bitmap) Words() int { return len(b.w) }

// Set marks ring i non-empty.
func (b *Bitmap) Set(i int) error {
	if uint(i) >= uint(b.n) {
		return ErrRange
	}
	w := &b.w[i>>6]
	bit := uint64(1) << (uint(i) & 63)
	if w.Load()&bit == 0 {
		w.Or(bit)
	}
	return nil
}

// IsSet reports whether bit i is set, without clearing it.
func (b *Bitmap) IsSet(i int) bool {
	if uint(i) >= uint(b.n) {
		return false
	}
	return b.w[i>>6].Load()&(1<<(uint(i)&63)) != 0
}

// Take clears word w and returns the bits that were set in it (bit k means
// index 64*w+k). Bits beyond Len, which only a corrupt peer could set, are
// dropped. A word of zero costs one load and no write.
func (b *Bitmap) Take(w int) uint64 {
	if uint(w) >= uint(len(b.w)) {
		return 0
	}
	x := &b.w[w]
	if x.Load() == 0 {
		return 0
	}
	v := x.Swap(0)
	if w == len(b.w)-1 && b.n&63 != 0 {
		v &= 1<<(uint(b.n)&63) - 1
	}
	return v
}

// Drain takes every set bit, appends its index to dst and returns dst.
// With a dst of enough capacity it does not allocate.
func (b *Bitmap) Drain(dst []int) []int {
	for w := range b.w {
		v := b.Take(w)
		for v != 0 {
			k := bits.TrailingZeros64(v)
			dst = append(dst, w*64+k)
			v &= v - 1
		}
	}
	return dst
}

// Reset clears every bit.
func (b *Bitmap) Reset() {
	for i := range b.w {
		b.w[i].Store(0)
	}
}
