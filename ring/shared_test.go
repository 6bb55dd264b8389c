package ring_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gofi-dev/fi/ring"
)

func TestInitAttach_RingAtOffsetOfLargerRegion(t *testing.T) {
	const c = 1024
	region := alignedBuf(4096 + 2*ring.Size(c))
	// Two rings side by side at 64-byte-aligned offsets, as the shm
	// provider lays them out.
	offs := []int{64, 64 + ring.Size(c)}
	for i, off := range offs {
		mem := region[off : off+ring.Size(c)]
		w, err := ring.Init(mem, c)
		if err != nil {
			t.Fatalf("Init at %d: %v", off, err)
		}
		r, err := ring.Attach(mem)
		if err != nil {
			t.Fatalf("Attach at %d: %v", off, err)
		}
		if r.Cap() != c || r.Size() != ring.Size(c) {
			t.Fatalf("attached Cap %d Size %d", r.Cap(), r.Size())
		}
		if err := w.TryWrite(uint16(i), []byte("ping")); err != nil {
			t.Fatal(err)
		}
		dst := make([]byte, 16)
		typ, n, err := r.TryRead(dst)
		if err != nil || typ != uint16(i) || string(dst[:n]) != "ping" {
			t.Fatalf("ring %d: %d %q %v", i, typ, dst[:n], err)
		}
	}
}

func TestAttach_PicksUpIndicesOfALiveRing(t *testing.T) {
	mem := alignedBuf(ring.Size(256))
	w, _ := ring.Init(mem, 256)
	for i := 0; i < 5; i++ {
		w.TryWrite(uint16(i), []byte{byte(i)})
	}
	r, err := ring.Attach(mem)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 8)
	for i := 0; i < 5; i++ {
		typ, n, err := r.TryRead(dst)
		if err != nil || typ != uint16(i) || n != 1 || dst[0] != byte(i) {
			t.Fatalf("record %d: %d %d %v", i, typ, n, err)
		}
	}
}

// TestAttach_ProducerResumesAtThePublishedPosition: the tail word is only
// a hint (stored every quarter ring), so a producer attaching later must
// find the published position by walking the headers: behind the hint,
// past it across a wrap, and with the consumer ahead of the hint.
func TestAttach_ProducerResumesAtThePublishedPosition(t *testing.T) {
	const c = 256
	mem := alignedBuf(ring.Size(c))
	w, _ := ring.Init(mem, c)
	r, _ := ring.Attach(mem)
	dst := make([]byte, 64)
	want := 0 // next record number the consumer expects
	next := 0 // next record number to write
	for round := 0; round < 40; round++ {
		// A few records (fewer than a quarter ring, so the hint lags),
		// then a fresh producer handle takes over from the last one.
		for k := 0; k < 1+round%3; k++ {
			if err := w.TryWrite(uint16(next), make([]byte, 8+round%17)); err != nil {
				t.Fatalf("round %d: write %d: %v", round, next, err)
			}
			next++
		}
		if round%2 == 0 {
			if got := r.Len(); got == 0 {
				t.Fatalf("round %d: Len = 0 with records published", round)
			}
		}
		var err error
		if w, err = ring.Attach(mem); err != nil {
			t.Fatalf("round %d: Attach: %v", round, err)
		}
		for {
			typ, _, err := r.TryRead(dst)
			if err == ring.ErrEmpty {
				break
			}
			if err != nil || int(typ) != want {
				t.Fatalf("round %d: read type %d, %v; want %d", round, typ, err, want)
			}
			want++
		}
		if r.Len() != 0 {
			t.Fatalf("round %d: Len = %d after draining", round, r.Len())
		}
	}
	if want != next {
		t.Fatalf("read %d records, wrote %d", want, next)
	}
}

func TestAttach_RefusesForeignOrBrokenRegions(t *testing.T) {
	const c = 256
	fresh := func() []byte {
		mem := alignedBuf(ring.Size(c) + 64)
		if _, err := ring.Init(mem, c); err != nil {
			t.Fatal(err)
		}
		return mem
	}
	put64 := func(off int, v uint64) func([]byte) []byte {
		return func(m []byte) []byte { binary.NativeEndian.PutUint64(m[off:], v); return m }
	}
	put32 := func(off int, v uint32) func([]byte) []byte {
		return func(m []byte) []byte { binary.NativeEndian.PutUint32(m[off:], v); return m }
	}
	tests := []struct {
		name   string
		break_ func([]byte) []byte
		want   error
	}{
		{"zero region", func(m []byte) []byte { clear(m); return m }, ring.ErrBadRegion},
		{"bad magic", put64(0, 42), ring.ErrBadRegion},
		{"other version", put32(ring.OffVersion, ring.Version+1), ring.ErrBadRegion},
		{"other line separation", put32(ring.OffLineSep, 64), ring.ErrBadRegion},
		{"capacity not power of two", put64(ring.OffCapacity, 300), ring.ErrBadRegion},
		{"capacity beyond region", put64(ring.OffCapacity, 1<<20), ring.ErrBadRegion},
		{"huge capacity", put64(ring.OffCapacity, 1<<63), ring.ErrBadRegion},
		{"moved data offset", put64(ring.OffDataOff, 512), ring.ErrBadRegion},
		{"too short", func(m []byte) []byte { return m[:100] }, ring.ErrBadRegion},
		{"misaligned", func(m []byte) []byte { return m[8:] }, ring.ErrBadRegion},
		{"head more than the capacity beyond the tail hint", put64(ring.OffHead, 1024), ring.ErrCorrupt},
		{"forged record header", put64(ring.OffData, 1<<63|8), ring.ErrCorrupt},
		{"tail beyond capacity", put64(ring.OffTail, 1024), ring.ErrCorrupt},
		{"unaligned tail", put64(ring.OffTail, 3), ring.ErrCorrupt},
		{"marked corrupt", put32(ring.OffCorrupt, 1), ring.ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ring.Attach(tt.break_(fresh())); !errors.Is(err, tt.want) {
				t.Fatalf("Attach = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestInit_RefusesSmallOrMisalignedRegion(t *testing.T) {
	mem := alignedBuf(ring.Size(1024))
	if _, err := ring.Init(mem[:ring.Size(1024)-1], 1024); !errors.Is(err, ring.ErrBadRegion) {
		t.Errorf("short region: %v", err)
	}
	if _, err := ring.Init(mem[8:], 256); !errors.Is(err, ring.ErrBadRegion) {
		t.Errorf("misaligned region: %v", err)
	}
	if _, err := ring.Init(mem, 1000); !errors.Is(err, ring.ErrBadCapacity) {
		t.Errorf("bad capacity: %v", err)
	}
}

// TestCorruptSharedState_ErrCorruptIsStickyAndSeenByPeer writes impossible
// values where the peer would, and checks the reader fails cleanly.
func TestCorruptSharedState_ErrCorruptIsStickyAndSeenByPeer(t *testing.T) {
	const c = 256
	hdr := func(n uint32, typ, kind uint16) uint64 {
		return uint64(n) | uint64(typ)<<32 | uint64(kind)<<48
	}
	tests := []struct {
		name string
		// mutate runs after one 8-byte record was published at offset 0.
		mutate func(mem []byte, r *ring.Ring)
		reader bool // exercise the consumer (else the producer)
	}{
		{"record length beyond max payload", func(m []byte, _ *ring.Ring) {
			binary.NativeEndian.PutUint64(m[ring.OffData:], hdr(1<<31, 1, ring.KindData))
		}, true},
		{"unknown record kind", func(m []byte, _ *ring.Ring) {
			binary.NativeEndian.PutUint64(m[ring.OffData:], hdr(8, 1, 7))
		}, true},
		{"kind 0 with a length (neither empty nor a record)", func(m []byte, _ *ring.Ring) {
			binary.NativeEndian.PutUint64(m[ring.OffData:], hdr(8, 1, 0))
		}, true},
		{"padding not reaching the end", func(m []byte, _ *ring.Ring) {
			binary.NativeEndian.PutUint64(m[ring.OffData:], hdr(8, 0, ring.KindPad))
		}, true},
		{"padding filling the whole data area", func(m []byte, _ *ring.Ring) {
			binary.NativeEndian.PutUint64(m[ring.OffData:], hdr(c-8, 0, ring.KindPad))
		}, true},
		{"record running past the end of the data area", func(m []byte, r *ring.Ring) {
			// Move the read position to offset 200 (56 bytes before
			// the end), then forge a record of 100 bytes there: within
			// MaxPayload, but past the end.
			w, _ := ring.Attach(m)
			for i := 0; i < 11; i++ { // 24 (first record) + 11*16 = 200
				if _, _, err := r.TryRead(make([]byte, 64)); err != nil && err != ring.ErrEmpty {
					panic(err)
				}
				if err := w.TryWrite(1, make([]byte, 8)); err != nil {
					panic(err)
				}
			}
			if _, _, err := r.TryRead(make([]byte, 64)); err != nil {
				panic(err)
			}
			binary.NativeEndian.PutUint64(m[ring.OffData+200:], hdr(100, 1, ring.KindData))
		}, true},
		{"head beyond published tail", func(m []byte, _ *ring.Ring) {
			binary.NativeEndian.PutUint64(m[ring.OffHead:], 4096)
		}, false},
		{"unaligned head", func(m []byte, _ *ring.Ring) {
			binary.NativeEndian.PutUint64(m[ring.OffHead:], 5)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := alignedBuf(ring.Size(c))
			w, err := ring.Init(mem, c)
			if err != nil {
				t.Fatal(err)
			}
			r, err := ring.Attach(mem)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.TryWrite(1, make([]byte, 16)); err != nil {
				t.Fatal(err)
			}
			tt.mutate(mem, r)
			var got error
			if tt.reader {
				_, _, got = r.Peek()
			} else {
				// Fill until the producer must look at the head.
				for got == nil {
					got = w.TryWrite(1, make([]byte, 16))
				}
			}
			if got != ring.ErrCorrupt {
				t.Fatalf("got %v, want ErrCorrupt", got)
			}
			side, peer := r, w
			if !tt.reader {
				side, peer = w, r
			}
			if !side.Corrupt() || !peer.Corrupt() {
				t.Fatalf("Corrupt() = %v (side), %v (peer), want both true", side.Corrupt(), peer.Corrupt())
			}
			if _, _, err := side.Peek(); err != ring.ErrCorrupt {
				t.Fatalf("Peek after corruption = %v", err)
			}
			if err := side.TryWrite(1, nil); err != ring.ErrCorrupt {
				t.Fatalf("TryWrite after corruption = %v", err)
			}
		})
	}
}
