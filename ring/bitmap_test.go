package ring_test

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofi-dev/fi/ring"
)

func TestBitmap_SetDrainReturnsEachIndexOnceAndClears(t *testing.T) {
	const n = 130
	b, err := ring.NewBitmap(alignedBuf(ring.BitmapSize(n)), n)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{0, 5, 63, 64, 127, 129}
	for _, i := range want {
		if err := b.Set(i); err != nil {
			t.Fatal(err)
		}
		b.Set(i) // setting twice is one bit
	}
	if !b.IsSet(63) || b.IsSet(62) {
		t.Fatal("IsSet wrong")
	}
	got := b.Drain(make([]int, 0, 8))
	if !slices.Equal(got, want) {
		t.Fatalf("Drain = %v, want %v", got, want)
	}
	if got := b.Drain(nil); len(got) != 0 {
		t.Fatalf("second Drain = %v, want nothing", got)
	}
}

func TestBitmap_RejectsOutOfRangeAndBadRegion(t *testing.T) {
	b, _ := ring.NewBitmap(alignedBuf(8), 10)
	for _, i := range []int{-1, 10, 64} {
		if err := b.Set(i); err != ring.ErrRange {
			t.Errorf("Set(%d) = %v, want ErrRange", i, err)
		}
	}
	if _, err := ring.NewBitmap(alignedBuf(8), 65); !errors.Is(err, ring.ErrBadRegion) {
		t.Errorf("short region: %v", err)
	}
	if _, err := ring.NewBitmap(alignedBuf(16)[4:], 10); !errors.Is(err, ring.ErrBadRegion) {
		t.Errorf("misaligned: %v", err)
	}
	if _, err := ring.NewBitmap(alignedBuf(8), 0); !errors.Is(err, ring.ErrBadRegion) {
		t.Errorf("zero bits: %v", err)
	}
}

func TestBitmap_BitsBeyondLenFromACorruptPeerAreDropped(t *testing.T) {
	mem := alignedBuf(8)
	for i := range mem {
		mem[i] = 0xff
	}
	b, _ := ring.NewBitmap(mem, 3)
	if got := b.Drain(nil); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("Drain = %v", got)
	}
}

// TestBitmap_NoLostWakeup runs producers that publish a record then Set,
// and a consumer that only drains rings whose bit it took: every record
// must be read.
func TestBitmap_NoLostWakeup(t *testing.T) {
	const rings, per = 4, 5000
	b, _ := ring.NewBitmap(alignedBuf(ring.BitmapSize(rings)), rings)
	rs := make([]*ring.Ring, rings)
	for i := range rs {
		rs[i] = mustNew(t, 1024)
	}
	var stop atomic.Bool // set if the consumer gives up, so producers end
	var wg sync.WaitGroup
	defer func() { stop.Store(true); wg.Wait() }()
	for i := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < per && !stop.Load(); {
				if err := rs[i].TryWrite(uint16(i), []byte{byte(k)}); err == ring.ErrFull {
					b.Set(i)
					spin()
					continue
				}
				b.Set(i)
				k++
			}
		}()
	}
	got := make([]int, rings)
	dst := make([]byte, 8)
	idx := make([]int, 0, rings)
	deadline := testDeadline(t)
	for total, idle := 0, 0; total < rings*per; {
		idx = b.Drain(idx[:0])
		if len(idx) == 0 {
			if idle++; idle&1023 == 0 && time.Now().After(deadline) {
				t.Fatalf("stopped waiting after %d of %d records", total, rings*per)
			}
			spin()
		}
		for _, i := range idx {
			for {
				_, _, err := rs[i].TryRead(dst)
				if err == ring.ErrEmpty {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if dst[0] != byte(got[i]) {
					t.Fatalf("ring %d: record %d out of order", i, got[i])
				}
				got[i]++
				total++
			}
		}
	}
}
