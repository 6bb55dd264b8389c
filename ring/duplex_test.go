package ring_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gofi-dev/fi/ring"
)

func mustDuplex(t testing.TB, c int) (*ring.Duplex, *ring.Duplex) {
	t.Helper()
	a, b, err := ring.NewDuplex(c)
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

// dxSize is the payload size of record seq in the duplex tests: mostly
// slot-sized (8 bytes above all), some just over the slot, some larger,
// capped at max.
func dxSize(seq uint64, max int) int {
	sizes := [...]int{8, 8, 8, 0, 1, 7, 16, 17, 24, 40, 8, 15}
	return min(sizes[(seq*2654435761>>7)%uint64(len(sizes))], max)
}

// dxPayload fills p with the bytes of record seq.
func dxPayload(p []byte, seq uint64) []byte {
	for k := range p {
		p[k] = byte(seq*31 + uint64(k))
	}
	return p
}

func TestDuplex_PingPongGoesThroughTheSlots(t *testing.T) {
	a, b := mustDuplex(t, 4096)
	dst := make([]byte, 64)
	pa, pb := ring.ProducerPos(a.Out()), ring.ProducerPos(b.Out())
	for i := range 1000 {
		msg := binary.LittleEndian.AppendUint64(nil, uint64(i))
		if err := a.TryWrite(1, msg); err != nil {
			t.Fatal(err)
		}
		typ, n, err := b.TryRead(dst)
		if err != nil || typ != 1 || !bytes.Equal(dst[:n], msg) {
			t.Fatalf("round trip %d: request %d %q %v", i, typ, dst[:n], err)
		}
		if err := b.TryWrite(2, dst[:n]); err != nil {
			t.Fatal(err)
		}
		typ, n, err = a.TryRead(dst)
		if err != nil || typ != 2 || !bytes.Equal(dst[:n], msg) {
			t.Fatalf("round trip %d: reply %d %q %v", i, typ, dst[:n], err)
		}
		for _, d := range []*ring.Duplex{a, b} {
			if _, _, err := d.TryRead(dst); err != ring.ErrEmpty {
				t.Fatalf("round trip %d: %v after the reply, want ErrEmpty", i, err)
			}
		}
	}
	if ring.ProducerPos(a.Out()) != pa || ring.ProducerPos(b.Out()) != pb {
		t.Fatalf("a ping-pong of 8-byte records moved the rings: %d -> %d, %d -> %d", pa, ring.ProducerPos(a.Out()), pb, ring.ProducerPos(b.Out()))
	}
}

// TestDuplex_BackToTheSlotsAfterABurst: records sent before the other end
// has received the last one go through the ring, in order behind the
// slot's; once each end has received everything, the exchanges go through
// the slots again within two round trips, also after bursts both ways
// (then only the ack word, stored with a record that goes through the
// ring, tells an end that the other has received everything).
func TestDuplex_BackToTheSlotsAfterABurst(t *testing.T) {
	for _, both := range []bool{false, true} {
		for _, burst := range []int{1, 2, 5, 40} {
			a, b := mustDuplex(t, 4096)
			dst := make([]byte, 64)
			senders := []*ring.Duplex{a}
			if both {
				senders = append(senders, b)
			}
			for _, d := range senders {
				for seq := range uint64(burst) {
					if err := d.TryWrite(uint16(seq), dxPayload(make([]byte, 8), seq)); err != nil {
						t.Fatal(err)
					}
				}
				if burst > 1 && ring.ProducerPos(d.Out()) == 0 {
					t.Fatalf("burst %d: nothing went through the ring", burst)
				}
			}
			for _, d := range []*ring.Duplex{b, a}[:len(senders)] {
				for want := range uint64(burst) {
					typ, n, err := d.TryRead(dst)
					if err != nil || uint64(typ) != want || !bytes.Equal(dst[:n], dxPayload(make([]byte, 8), want)) {
						t.Fatalf("burst %d (both %v): record %d: %d %x %v", burst, both, want, typ, dst[:n], err)
					}
				}
			}
			exchange := func() {
				t.Helper()
				if err := a.TryWrite(7, []byte("12345678")); err != nil {
					t.Fatal(err)
				}
				if _, _, err := b.TryRead(dst); err != nil {
					t.Fatal(err)
				}
				if err := b.TryWrite(7, []byte("87654321")); err != nil {
					t.Fatal(err)
				}
				if _, _, err := a.TryRead(dst); err != nil {
					t.Fatal(err)
				}
			}
			exchange() // may go through the rings
			exchange()
			pa, pb := ring.ProducerPos(a.Out()), ring.ProducerPos(b.Out())
			for range 3 {
				exchange()
			}
			if ring.ProducerPos(a.Out()) != pa || ring.ProducerPos(b.Out()) != pb {
				t.Fatalf("burst %d (both %v): exchanges after the second still went through the rings", burst, both)
			}
		}
	}
}

// TestDuplex_PropertyOrderThroughSlotAndRing drives both ends from one
// goroutine in a random schedule of sends (sizes in and over the slot)
// and receives, with rings small enough to wrap and fill: each end
// receives the other's records whole and in order, ErrEmpty only when it
// has received everything sent, ErrFull only from the ring, and both the
// slots and the rings carry records.
func TestDuplex_PropertyOrderThroughSlotAndRing(t *testing.T) {
	for _, c := range []int{64, 128, 256, 4096} {
		for seed := range uint64(12) {
			a, b := mustDuplex(t, c)
			ends := [2]*ring.Duplex{a, b}
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			var next, want [2]uint64 // next record end i sends; next record end i expects
			slot, viaRing := 0, 0
			dst := make([]byte, 64)
			buf := make([]byte, 64)
			for range 20000 {
				i := rng.IntN(2)
				d := ends[i]
				if rng.IntN(2) == 0 {
					p := dxPayload(buf[:dxSize(next[i], d.MaxPayload())], next[i])
					pos := ring.ProducerPos(d.Out())
					err := d.TryWrite(uint16(next[i]), p)
					if err == ring.ErrFull && ring.ProducerPos(d.Out()) == pos {
						continue
					}
					if err != nil {
						t.Fatalf("cap %d seed %d: end %d send %d: %v", c, seed, i, next[i], err)
					}
					if ring.ProducerPos(d.Out()) == pos {
						slot++
					} else {
						viaRing++
					}
					next[i]++
					continue
				}
				typ, n, err := d.TryRead(dst)
				if err == ring.ErrEmpty {
					if want[i] != next[1-i] {
						t.Fatalf("cap %d seed %d: end %d: ErrEmpty with records %d..%d sent", c, seed, i, want[i], next[1-i]-1)
					}
					continue
				}
				w := want[i]
				if err != nil || typ != uint16(w) || n != dxSize(w, d.MaxPayload()) || !bytes.Equal(dst[:n], dxPayload(buf[:n], w)) {
					t.Fatalf("cap %d seed %d: end %d: got %d (%d bytes, %v), want record %d", c, seed, i, typ, n, err, w)
				}
				want[i]++
			}
			if slot == 0 || viaRing == 0 {
				t.Fatalf("cap %d seed %d: %d records through the slots, %d through the rings: want both", c, seed, slot, viaRing)
			}
		}
	}
}

// TestDuplex_PropertyBatchedAndUnbatched is the property test with the
// batching API mixed in: sends by TryWrite or by Reserve, fill, Commit
// (published by a later Publish, CommitPublish or TryWrite; some
// reservations dropped), receives by TryRead or by Peek and Consume (and
// Release now and then). Records become visible in order when published,
// never before, and arrive whole and in order.
func TestDuplex_PropertyBatchedAndUnbatched(t *testing.T) {
	for _, c := range []int{64, 256, 4096} {
		for seed := range uint64(12) {
			a, b := mustDuplex(t, c)
			ends := [2]*ring.Duplex{a, b}
			rng := rand.New(rand.NewPCG(seed, uint64(c)+7))
			var next, pub, want [2]uint64 // committed (sent) by end i; published by end i; expected by end i
			slot, viaRing := 0, 0
			dst := make([]byte, 64)
			buf := make([]byte, 64)
			for range 30000 {
				i := rng.IntN(2)
				d := ends[i]
				switch op := rng.IntN(9); op {
				case 0, 1: // TryWrite
					p := dxPayload(buf[:dxSize(next[i], d.MaxPayload())], next[i])
					pos := ring.ProducerPos(d.Out())
					err := d.TryWrite(uint16(next[i]), p)
					if err == ring.ErrFull {
						continue // (committed records may have been published: not counted as such)
					}
					if err != nil {
						t.Fatalf("cap %d seed %d: end %d TryWrite %d: %v", c, seed, i, next[i], err)
					}
					if ring.ProducerPos(d.Out()) == pos {
						slot++
					} else {
						viaRing++
					}
					next[i]++
					pub[i] = next[i]
				case 2, 3: // Reserve, fill, Commit, maybe publish
					n := dxSize(next[i], d.MaxPayload())
					w, err := d.Reserve(min(n+rng.IntN(3), d.MaxPayload())) // commits n of it
					if err == ring.ErrFull {
						continue
					}
					if err != nil {
						t.Fatalf("cap %d seed %d: end %d Reserve %d: %v", c, seed, i, next[i], err)
					}
					dxPayload(w[:n], next[i])
					if rng.IntN(4) == 0 {
						continue // dropped
					}
					if rng.IntN(2) == 0 {
						err = d.CommitPublish(uint16(next[i]), n)
						next[i]++
						pub[i] = next[i]
					} else {
						err = d.Commit(uint16(next[i]), n)
						next[i]++
					}
					if err != nil {
						t.Fatalf("cap %d seed %d: end %d commit: %v", c, seed, i, err)
					}
				case 4:
					d.Publish()
					pub[i] = next[i]
				case 5, 6: // TryRead
					typ, n, err := d.TryRead(dst)
					if !dxCheck(t, c, seed, i, &want[i], pub[1-i], d, typ, dst[:max(n, 0)], err) {
						continue
					}
				default: // Peek, Consume, sometimes Release
					typ, p, err := d.Peek()
					if !dxCheck(t, c, seed, i, &want[i], pub[1-i], d, typ, p, err) {
						continue
					}
					if err := d.Consume(); err != nil {
						t.Fatal(err)
					}
					if rng.IntN(3) == 0 {
						d.Release()
					}
				}
			}
			if slot == 0 || viaRing == 0 {
				t.Fatalf("cap %d seed %d: %d TryWrite records through the slots, %d through the rings: want both", c, seed, slot, viaRing)
			}
		}
	}
}

// dxCheck checks what a read of end i returned against the next record
// it expects (*want, counted up when it matches) and the other end's
// published count; false when there was nothing to read.
func dxCheck(t *testing.T, c int, seed uint64, i int, want *uint64, published uint64, d *ring.Duplex, typ uint16, p []byte, err error) bool {
	t.Helper()
	if err == ring.ErrEmpty {
		if *want != published {
			t.Fatalf("cap %d seed %d: end %d: ErrEmpty with records %d..%d published", c, seed, i, *want, published-1)
		}
		return false
	}
	w := *want
	if w >= published {
		t.Fatalf("cap %d seed %d: end %d: got record %d (%v) before it was published", c, seed, i, typ, err)
	}
	if err != nil || typ != uint16(w) || len(p) != dxSize(w, d.MaxPayload()) || !bytes.Equal(p, dxPayload(make([]byte, len(p)), w)) {
		t.Fatalf("cap %d seed %d: end %d: got %d (%d bytes, %v), want record %d", c, seed, i, typ, len(p), err, w)
	}
	*want++
	return true
}

// TestDuplex_ConcurrentEnds runs each end in its own goroutine: each sends
// its records (in and over the slot's size, in bursts and one at a time)
// and receives the other's, checking each whole and in order. Under -race
// it also checks that every shared byte is ordered by the atomics.
func TestDuplex_ConcurrentEnds(t *testing.T) {
	n := uint64(200_000)
	if raceEnabled || testing.Short() {
		n = 20_000
	}
	for _, c := range []int{256, 4096} {
		a, b := mustDuplex(t, c)
		deadline := testDeadline(t)
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for i, d := range []*ring.Duplex{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- dxRun(d, uint64(i), n, i == 1, deadline)
			}()
		}
		wg.Wait()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("cap %d: %v", c, err)
			}
		}
	}
}

// dxRun is one end of TestDuplex_ConcurrentEnds: it sends n records and
// receives n, alternating bursts of 1-8 sends with reads until empty; with
// batch it sends by Reserve and Commit, publishing each burst once, and
// reads by Peek and Consume.
func dxRun(d *ring.Duplex, seed, n uint64, batch bool, deadline time.Time) error {
	rng := rand.New(rand.NewPCG(seed, 99))
	buf, dst := make([]byte, 64), make([]byte, 64)
	var sent, got uint64
	idle := 0
	for sent < n || got < n {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		k := 1 + rng.IntN(8)
		for ; k > 0 && sent < n; k-- {
			size := dxSize(sent, d.MaxPayload())
			if batch {
				w, err := d.Reserve(size)
				if err == ring.ErrFull {
					break
				} else if err != nil {
					return err
				}
				dxPayload(w, sent)
				if err := d.Commit(uint16(sent), size); err != nil {
					return err
				}
			} else if err := d.TryWrite(uint16(sent), dxPayload(buf[:size], sent)); err == ring.ErrFull {
				break
			} else if err != nil {
				return err
			}
			sent++
		}
		if batch {
			d.Publish()
		}
		progress := false
		for {
			var typ uint16
			var p []byte
			var err error
			if batch {
				typ, p, err = d.Peek()
			} else {
				var m int
				typ, m, err = d.TryRead(dst)
				p = dst[:max(m, 0)]
			}
			if err == ring.ErrEmpty {
				break
			}
			if err != nil {
				return err
			}
			if typ != uint16(got) || len(p) != dxSize(got, d.MaxPayload()) || !bytes.Equal(p, dxPayload(buf[:len(p)], got)) {
				return errSeq(uint64(typ), got)
			}
			if batch {
				d.Consume()
			}
			got++
			progress = true
		}
		if progress {
			idle = 0
		} else {
			idleWait(&idle)
		}
	}
	return nil
}

func TestDuplex_ShortBufferKeepsTheRecord(t *testing.T) {
	for _, size := range []int{8, 16, 24} { // slot, slot, ring
		a, b := mustDuplex(t, 4096)
		p := dxPayload(make([]byte, size), 3)
		if err := a.TryWrite(3, p); err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.TryRead(make([]byte, size-1)); err != ring.ErrShortBuffer {
			t.Fatalf("%d bytes into %d: %v, want ErrShortBuffer", size, size-1, err)
		}
		dst := make([]byte, size)
		if typ, n, err := b.TryRead(dst); err != nil || typ != 3 || !bytes.Equal(dst[:n], p) {
			t.Fatalf("%d bytes: %d %x %v", size, typ, dst[:n], err)
		}
	}
}

func TestDuplex_ReadyAndEmpty(t *testing.T) {
	for _, size := range []int{8, 40} { // through the slot, through the ring
		a, b := mustDuplex(t, 4096)
		if b.Ready() || !b.Empty() {
			t.Fatalf("%d bytes: fresh duplex: Ready %v Empty %v", size, b.Ready(), b.Empty())
		}
		a.TryWrite(1, make([]byte, size))
		if !b.Ready() || b.Empty() {
			t.Fatalf("%d bytes: one record: Ready %v Empty %v", size, b.Ready(), b.Empty())
		}
		b.TryRead(make([]byte, 64))
		if b.Ready() || !b.Empty() {
			t.Fatalf("%d bytes: read: Ready %v Empty %v", size, b.Ready(), b.Empty())
		}
	}
}

// dxRegion returns a region holding a fresh duplex of capacity c and its
// two ends.
func dxRegion(t *testing.T, c int) ([]byte, *ring.Duplex, *ring.Duplex) {
	t.Helper()
	mem := alignedBuf(ring.DuplexSize(c))
	a, err := ring.InitDuplex(mem, c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ring.AttachDuplex(mem)
	if err != nil {
		t.Fatal(err)
	}
	return mem, a, b
}

// TestDuplex_ForgedSlotIsCorrupt: what end 1 writes in its slot is
// untrusted: a stamp ahead of the record end 0 expects, a length over
// SlotPayload or reserved meta bits make end 0's read ErrCorrupt (and
// every later call, on both ends); nothing panics.
func TestDuplex_ForgedSlotIsCorrupt(t *testing.T) {
	slot1 := ring.DxOffTurn + ring.DxSlotSize
	tests := []struct {
		name        string
		stamp, meta uint64
	}{
		{"stamp ahead", 2, 8},
		{"stamp far ahead", 1 << 40, 8},
		{"length over the slot", 1, 17},
		{"length 255", 1, 255},
		{"reserved meta bits", 1, 8 | 1<<24},
	}
	for _, tt := range tests {
		for _, dstLen := range []int{64, 4} {
			mem, a, b := dxRegion(t, 256)
			binary.NativeEndian.PutUint64(mem[slot1+ring.SlotMetaOff:], tt.meta)
			binary.NativeEndian.PutUint64(mem[slot1:], tt.stamp)
			if _, _, err := a.TryRead(make([]byte, dstLen)); err != ring.ErrCorrupt {
				t.Fatalf("%s (dst %d): %v, want ErrCorrupt", tt.name, dstLen, err)
			}
			if _, _, err := a.TryRead(make([]byte, 64)); err != ring.ErrCorrupt {
				t.Fatalf("%s: second read %v, want ErrCorrupt", tt.name, err)
			}
			if err := a.TryWrite(1, make([]byte, 8)); err != ring.ErrCorrupt {
				t.Fatalf("%s: write %v, want ErrCorrupt", tt.name, err)
			}
			if !a.Corrupt() || !b.Corrupt() {
				t.Fatalf("%s: Corrupt %v %v, want both", tt.name, a.Corrupt(), b.Corrupt())
			}
		}
	}
}

// TestDuplex_ImpossibleAcksAreIgnored: a count of received records above
// what end 0 sent, in end 1's ack word or slot, could only keep end 0 on
// its ring: it is ignored, and records still arrive in order.
func TestDuplex_ImpossibleAcksAreIgnored(t *testing.T) {
	for _, where := range []string{"ack word", "slot meta"} {
		mem, a, b := dxRegion(t, 256)
		dst := make([]byte, 64)
		a.TryWrite(0, dxPayload(make([]byte, 8), 0)) // through the slot
		switch where {
		case "ack word":
			binary.NativeEndian.PutUint64(mem[ring.DxOffAck1:], 100)
		case "slot meta": // end 1's slot record: 8 bytes, acking 100
			slot1 := ring.DxOffTurn + ring.DxSlotSize
			binary.NativeEndian.PutUint64(mem[slot1+ring.SlotMetaOff:], 8|100<<32)
			binary.NativeEndian.PutUint64(mem[slot1:], 1)
			if _, _, err := a.TryRead(dst); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		}
		pos := ring.ProducerPos(a.Out())
		if err := a.TryWrite(1, dxPayload(make([]byte, 8), 1)); err != nil {
			t.Fatal(err)
		}
		if ring.ProducerPos(a.Out()) == pos {
			t.Fatalf("%s: record 1 went through the slot before end 1 received record 0", where)
		}
		if ring.DuplexSlotFree(a) {
			t.Fatalf("%s: end 0 believes end 1 received all its records", where)
		}
		for w := range uint64(2) {
			typ, n, err := b.TryRead(dst)
			if err != nil || uint64(typ) != w || !bytes.Equal(dst[:n], dxPayload(make([]byte, 8), w)) {
				t.Fatalf("%s: record %d: %d %x %v", where, w, typ, dst[:n], err)
			}
		}
	}
}

func TestAttachDuplex_Refuses(t *testing.T) {
	const c = 256
	size := ring.DuplexSize(c)
	put32 := func(off int, v uint32) func([]byte) []byte {
		return func(m []byte) []byte { binary.NativeEndian.PutUint32(m[off:], v); return m }
	}
	put64 := func(off int, v uint64) func([]byte) []byte {
		return func(m []byte) []byte { binary.NativeEndian.PutUint64(m[off:], v); return m }
	}
	tests := []struct {
		name  string
		mess  func([]byte) []byte
		wantE error
	}{
		{"no magic", put64(0, 0), ring.ErrBadRegion},
		{"version", put32(ring.DxOffVersion, 2), ring.ErrBadRegion},
		{"line separation", put32(ring.DxOffLineSep, 64), ring.ErrBadRegion},
		{"capacity not a power of two", put64(ring.DxOffCapacity, 300), ring.ErrBadRegion},
		{"capacity larger than the region", put64(ring.DxOffCapacity, 1<<20), ring.ErrBadRegion},
		{"capacity differs from the rings'", put64(ring.DxOffCapacity, 128), ring.ErrBadRegion},
		{"too short", func(m []byte) []byte { return m[:size-1] }, ring.ErrBadRegion},
		{"header only", func(m []byte) []byte { return m[:ring.DuplexHeaderSize-8] }, ring.ErrBadRegion},
		{"misaligned", func(m []byte) []byte { return alignedBuf(size + 8)[8:] }, ring.ErrBadRegion},
		{"end 1 sent before", put64(ring.DxOffTurn+ring.DxSlotSize, 1), ring.ErrBadRegion},
		{"end 1 acked before", put64(ring.DxOffAck1, 1), ring.ErrBadRegion},
		{"ring broken", put64(ring.DuplexHeaderSize, 0), ring.ErrBadRegion},
	}
	for _, tt := range tests {
		mem := alignedBuf(size)
		if _, err := ring.InitDuplex(mem, c); err != nil {
			t.Fatal(err)
		}
		if _, err := ring.AttachDuplex(tt.mess(mem)); !errors.Is(err, tt.wantE) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.wantE)
		}
	}
	if _, err := ring.InitDuplex(alignedBuf(size-1), c); !errors.Is(err, ring.ErrBadRegion) {
		t.Errorf("InitDuplex into %d bytes: %v", size-1, err)
	}
	if _, err := ring.InitDuplex(alignedBuf(size), 100); !errors.Is(err, ring.ErrBadCapacity) {
		t.Errorf("InitDuplex capacity 100: %v", err)
	}
	if _, _, err := ring.NewDuplex(3); !errors.Is(err, ring.ErrBadCapacity) {
		t.Errorf("NewDuplex capacity 3: %v", err)
	}
	if ring.DuplexSize(3) != -1 {
		t.Errorf("DuplexSize(3) = %d", ring.DuplexSize(3))
	}
}

// FuzzDuplex: end 1 is a hostile peer whose slot, ack word and ring
// header bytes come from the fuzzer, between legitimate sends and reads of
// both ends: end 0 returns records or errors, never panics, never reads
// outside the region.
func FuzzDuplex(f *testing.F) {
	f.Add([]byte{0, 2, 4, 5, 0, 1, 2, 3, 2}, make([]byte, 48))
	f.Add([]byte{3, 2, 2, 6, 0}, binary.NativeEndian.AppendUint64(binary.NativeEndian.AppendUint64(nil, 1), 8|3<<8))
	f.Add([]byte{0, 0, 0, 3, 2, 1, 2}, binary.NativeEndian.AppendUint64(binary.NativeEndian.AppendUint64(nil, 2), 17))
	f.Fuzz(func(t *testing.T, ops []byte, forge []byte) {
		mem, a, b := dxRegion(t, 128)
		slot1 := ring.DxOffTurn + ring.DxSlotSize
		dst := make([]byte, 70)
		for i, op := range ops {
			switch op % 7 {
			case 0:
				a.TryWrite(uint16(i), make([]byte, i%20))
			case 1:
				b.TryWrite(uint16(i), make([]byte, i%30))
			case 2:
				if _, n, err := a.TryRead(dst[:i%70]); err == nil && n > i%70 {
					t.Fatalf("read %d bytes into %d", n, i%70)
				}
			case 3: // forge end 1's slot
				copy(mem[slot1:slot1+ring.DxSlotSize], forge)
			case 4: // forge end 1's ack word
				if len(forge) >= 8 {
					copy(mem[ring.DxOffAck1:], forge[:8])
				}
			case 5: // forge the header of end 1's next ring record
				if len(forge) >= 16 {
					ring1 := ring.DuplexHeaderSize + ring.Size(128) + ring.OffData
					off := int(binary.NativeEndian.Uint64(forge[8:]) % 16 * 8)
					copy(mem[ring1+off:], forge[:8])
				}
			case 6:
				b.TryRead(dst)
			}
			a.Ready()
			a.Empty()
		}
	})
}
