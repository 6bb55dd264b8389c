package ring_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gofi-dev/fi/ring"
)

func mustNew(t testing.TB, c int) *ring.Ring {
	t.Helper()
	r, err := ring.New(c)
	if err != nil {
		t.Fatalf("New(%d): %v", c, err)
	}
	return r
}

// alignedBuf returns n zero bytes starting at a 64-byte boundary.
func alignedBuf(n int) []byte {
	b := make([]byte, n+ring.Align)
	off := 0
	if m := int(uintptr(unsafe.Pointer(&b[0])) % ring.Align); m != 0 {
		off = ring.Align - m
	}
	return b[off : off+n : off+n]
}

func TestNew_RejectsBadCapacity(t *testing.T) {
	for _, c := range []int{0, -64, 32, 100, 1000, ring.MaxCapacity * 2} {
		if _, err := ring.New(c); !errors.Is(err, ring.ErrBadCapacity) {
			t.Errorf("New(%d) = %v, want ErrBadCapacity", c, err)
		}
		if s := ring.Size(c); s != -1 {
			t.Errorf("Size(%d) = %d, want -1", c, s)
		}
	}
	if s := ring.Size(4096); s != ring.HeaderSize+4096 {
		t.Errorf("Size(4096) = %d", s)
	}
}

func TestTryWriteTryRead_RoundTripKeepsTypeAndBytes(t *testing.T) {
	r := mustNew(t, 1024)
	dst := make([]byte, r.MaxPayload())
	for i, n := range []int{0, 1, 7, 8, 9, 100, r.MaxPayload()} {
		p := bytes.Repeat([]byte{byte(i + 1)}, n)
		if err := r.TryWrite(uint16(i+10), p); err != nil {
			t.Fatalf("TryWrite(%d bytes): %v", n, err)
		}
		typ, got, err := r.TryRead(dst)
		if err != nil {
			t.Fatalf("TryRead: %v", err)
		}
		if typ != uint16(i+10) || !bytes.Equal(dst[:got], p) {
			t.Fatalf("record %d: type %d len %d, want type %d len %d", i, typ, got, i+10, n)
		}
	}
}

func TestEmptyRing_PeekAndTryReadReturnErrEmpty(t *testing.T) {
	r := mustNew(t, 256)
	if !r.Empty() {
		t.Fatal("new ring not Empty")
	}
	if _, _, err := r.Peek(); err != ring.ErrEmpty {
		t.Fatalf("Peek = %v, want ErrEmpty", err)
	}
	if _, _, err := r.TryRead(make([]byte, 8)); err != ring.ErrEmpty {
		t.Fatalf("TryRead = %v, want ErrEmpty", err)
	}
	if err := r.Consume(); err != ring.ErrNotPeeked {
		t.Fatalf("Consume without Peek = %v, want ErrNotPeeked", err)
	}
}

func TestFullRing_ErrFullUntilReleased(t *testing.T) {
	r := mustNew(t, 256)
	p := make([]byte, 24) // 32 bytes per record
	// 7 records: 224 bytes, plus the zero word the next record's header
	// will overwrite; an 8th does not fit, a smaller one still does.
	for i := 0; i < 7; i++ {
		if err := r.TryWrite(1, p); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if err := r.TryWrite(1, p); err != ring.ErrFull {
		t.Fatalf("write into full ring = %v, want ErrFull", err)
	}
	if r.Free() != 24 {
		t.Fatalf("Free = %d, want 24", r.Free())
	}
	if err := r.TryWrite(1, p[:16]); err != nil {
		t.Fatalf("write of a record of Free bytes: %v", err)
	}
	if r.Free() != 0 {
		t.Fatalf("Free = %d, want 0", r.Free())
	}
	if err := r.TryWrite(1, nil); err != ring.ErrFull {
		t.Fatalf("empty record into full ring = %v, want ErrFull", err)
	}
	// Consumed but not released: still full.
	if _, _, err := r.Peek(); err != nil {
		t.Fatal(err)
	}
	if err := r.Consume(); err != nil {
		t.Fatal(err)
	}
	// The 32 bytes freed hold the 8 bytes of padding to the end and a
	// 24-byte record at offset 0.
	if err := r.TryWrite(1, p[:16]); err != ring.ErrFull {
		t.Fatalf("write before Release = %v, want ErrFull", err)
	}
	r.Release()
	if err := r.TryWrite(1, p[:16]); err != nil {
		t.Fatalf("write after Release: %v", err)
	}
}

func TestTooLarge_IsAnErrorNotAWait(t *testing.T) {
	r := mustNew(t, 256)
	if _, err := r.Reserve(r.MaxPayload() + 1); err != ring.ErrTooLarge {
		t.Fatalf("Reserve(max+1) = %v, want ErrTooLarge", err)
	}
	if err := r.TryWrite(1, make([]byte, 1000)); err != ring.ErrTooLarge {
		t.Fatalf("TryWrite(1000) = %v, want ErrTooLarge", err)
	}
	if _, err := r.Reserve(-1); err != ring.ErrTooLarge {
		t.Fatalf("Reserve(-1) = %v, want ErrTooLarge", err)
	}
}

func TestMaxPayload_AlwaysFitsOnceDrained(t *testing.T) {
	// Whatever the index, a MaxPayload record fits into a drained ring.
	for start := 0; start < 256; start += 8 {
		r := mustNew(t, 256)
		for i := 0; i < start/8; i++ { // empty records move the index by 8
			if err := r.TryWrite(0, nil); err != nil {
				t.Fatal(err)
			}
			if _, _, err := r.TryRead(nil); err != nil {
				t.Fatal(err)
			}
		}
		if !r.Empty() { // drained: the consumer has seen the ring empty
			t.Fatal("not empty")
		}
		if err := r.TryWrite(2, make([]byte, r.MaxPayload())); err != nil {
			t.Fatalf("start %d: %v", start, err)
		}
	}
}

func TestWrapAround_RecordsNeverSplitAndPaddingIsInvisible(t *testing.T) {
	r := mustNew(t, 128)
	dst := make([]byte, 128)
	seq := byte(0)
	for i := 0; i < 200; i++ {
		n := 1 + i%r.MaxPayload()
		p := bytes.Repeat([]byte{seq}, n)
		if err := r.TryWrite(uint16(n), p); err != nil {
			t.Fatalf("write %d (%d bytes): %v", i, n, err)
		}
		typ, got, err := r.TryRead(dst)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if int(typ) != n || !bytes.Equal(dst[:got], p) {
			t.Fatalf("read %d: typ %d len %d", i, typ, got)
		}
		seq++
	}
}

func TestBatch_CommitIsInvisibleUntilPublish(t *testing.T) {
	r := mustNew(t, 1024)
	for i := 0; i < 3; i++ {
		b, err := r.Reserve(16)
		if err != nil {
			t.Fatal(err)
		}
		binary.LittleEndian.PutUint64(b, uint64(i))
		if err := r.Commit(uint16(i), 8); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := r.Peek(); err != ring.ErrEmpty {
		t.Fatalf("Peek before Publish = %v, want ErrEmpty", err)
	}
	r.Publish()
	for i := 0; i < 3; i++ {
		typ, p, err := r.Peek()
		if err != nil || typ != uint16(i) || len(p) != 8 || binary.LittleEndian.Uint64(p) != uint64(i) {
			t.Fatalf("record %d: typ %d len %d err %v", i, typ, len(p), err)
		}
		if err := r.Consume(); err != nil {
			t.Fatal(err)
		}
	}
	r.Release()
	if !r.Empty() {
		t.Fatal("not empty after reading the batch")
	}
}

// TestZeroAhead_DirtyBytesNeverReadAsRecords: bytes written into a
// reservation beyond what was committed lie where the next headers go;
// the zeroing ahead after a publication must cover them, or a later
// record whose following header falls there (an empty payload) would be
// followed by garbage.
func TestZeroAhead_DirtyBytesNeverReadAsRecords(t *testing.T) {
	for _, capacity := range []int{64, 256, 4096} {
		r := mustNew(t, capacity)
		dst := make([]byte, r.MaxPayload())
		for lap := 0; lap < 4*capacity/16; lap++ {
			b, err := r.Reserve(24)
			if err != nil {
				t.Fatalf("cap %d lap %d: Reserve: %v", capacity, lap, err)
			}
			for i := range b {
				b[i] = 0xff
			}
			if err := r.CommitPublish(1, 0); err != nil {
				t.Fatal(err)
			}
			if err := r.TryWrite(2, nil); err != nil {
				t.Fatalf("cap %d lap %d: TryWrite: %v", capacity, lap, err)
			}
			for _, want := range []uint16{1, 2} {
				if typ, n, err := r.TryRead(dst); err != nil || typ != want || n != 0 {
					t.Fatalf("cap %d lap %d: TryRead = %d, %d, %v; want %d, 0, nil", capacity, lap, typ, n, err, want)
				}
			}
			if _, _, err := r.TryRead(dst); err != ring.ErrEmpty {
				t.Fatalf("cap %d lap %d: third TryRead = %v, want ErrEmpty", capacity, lap, err)
			}
		}
	}
}

func TestCommit_MisuseReturnsErrNotReserved(t *testing.T) {
	r := mustNew(t, 256)
	if err := r.Commit(1, 0); err != ring.ErrNotReserved {
		t.Fatalf("Commit without Reserve = %v", err)
	}
	if _, err := r.Reserve(8); err != nil {
		t.Fatal(err)
	}
	if err := r.Commit(1, 9); err != ring.ErrNotReserved {
		t.Fatalf("Commit beyond reservation = %v", err)
	}
	if err := r.Commit(1, 4); err != nil {
		t.Fatalf("Commit shorter than reservation: %v", err)
	}
	if err := r.Commit(1, 4); err != ring.ErrNotReserved {
		t.Fatalf("second Commit = %v", err)
	}
	if err := r.CommitPublish(1, 0); err != ring.ErrNotReserved {
		t.Fatalf("CommitPublish without Reserve = %v", err)
	}
	if _, err := r.Reserve(8); err != nil {
		t.Fatal(err)
	}
	if err := r.CommitPublish(1, 9); err != ring.ErrNotReserved {
		t.Fatalf("CommitPublish beyond reservation = %v", err)
	}
	if err := r.CommitPublish(1, 8); err != nil {
		t.Fatalf("CommitPublish: %v", err)
	}
	if err := r.CommitPublish(1, 8); err != ring.ErrNotReserved {
		t.Fatalf("second CommitPublish = %v", err)
	}
}

func TestShortBuffer_RecordStaysInRing(t *testing.T) {
	r := mustNew(t, 256)
	if err := r.TryWrite(3, []byte("hello world")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.TryRead(make([]byte, 4)); err != ring.ErrShortBuffer {
		t.Fatalf("TryRead short = %v", err)
	}
	dst := make([]byte, 64)
	typ, n, err := r.TryRead(dst)
	if err != nil || typ != 3 || string(dst[:n]) != "hello world" {
		t.Fatalf("TryRead = %d %q %v", typ, dst[:n], err)
	}
}

// TestProperty_RandomOpsMatchModel drives random reserves, commits,
// publishes, peeks, consumes and releases against a model FIFO that also
// tracks the bytes in use, so ErrFull must appear exactly when the model
// says the record (plus padding at the wrap point) does not fit.
func TestProperty_RandomOpsMatchModel(t *testing.T) {
	for _, capacity := range []int{64, 256, 4096} {
		rng := rand.New(rand.NewPCG(uint64(capacity), 7))
		r := mustNew(t, capacity)
		type rec struct {
			typ  uint16
			data []byte
			pad  int // padding record before it (skipped by the Peek that finds it)
			size int // bytes incl. header
		}
		var (
			committed     []rec
			pos, released int // producer position, released position
			consumedBytes int
		)
		var model []rec // published, not consumed
		ops := 20000
		if testing.Short() {
			ops = 4000
		}
		for op := 0; op < ops; op++ {
			switch rng.IntN(6) {
			case 0, 1: // write one record, maybe not published
				n := rng.IntN(r.MaxPayload() + 1)
				need := 8 + (n+7)&^7
				off := pos % capacity
				padding := 0
				if need > capacity-off {
					padding = capacity - off
				}
				fits := pos+padding+need+8-released <= capacity // + the zero word after it
				if m := rng.IntN(r.MaxPayload() + 1); rng.IntN(3) == 0 && 8+(m+7)&^7 <= capacity-off {
					// A reservation dropped after filling (one that needs
					// no padding, which would be committed): its bytes must
					// not read as records later.
					if d, err := r.Reserve(m); err == nil {
						for i := range d {
							d[i] = 0xff
						}
					}
				}
				if rng.IntN(4) == 0 { // TryWrite: Reserve, Commit, Publish in one
					data := make([]byte, n)
					for i := range data {
						data[i] = byte(rng.Uint32())
					}
					typ := uint16(rng.Uint32())
					err := r.TryWrite(typ, data)
					if fits != (err == nil) || (!fits && err != ring.ErrFull) {
						t.Fatalf("cap %d op %d: TryWrite(%d) = %v, model fits=%v", capacity, op, n, err, fits)
					}
					if err == nil {
						pos += padding + need
						model = append(model, committed...)
						model = append(model, rec{typ, data, padding, need})
						committed = committed[:0]
					}
					continue
				}
				b, err := r.Reserve(n)
				if fits != (err == nil) || (!fits && err != ring.ErrFull) {
					t.Fatalf("cap %d op %d: Reserve(%d) = %v, model fits=%v", capacity, op, n, err, fits)
				}
				if err != nil {
					continue
				}
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
				typ := uint16(rng.Uint32())
				k := n
				if rng.IntN(3) == 0 { // commit less than reserved
					k = rng.IntN(n + 1)
				}
				publish := rng.IntN(4) == 0 // CommitPublish
				if publish {
					err = r.CommitPublish(typ, k)
				} else {
					err = r.Commit(typ, k)
				}
				if err != nil {
					t.Fatal(err)
				}
				pos += padding + 8 + (k+7)&^7
				committed = append(committed, rec{typ, bytes.Clone(b[:k]), padding, 8 + (k+7)&^7})
				if publish {
					model = append(model, committed...)
					committed = committed[:0]
				}
			case 2: // publish
				r.Publish()
				model = append(model, committed...)
				committed = committed[:0]
			case 3, 4: // peek + consume
				typ, p, err := r.Peek()
				if len(model) == 0 {
					if err != ring.ErrEmpty {
						t.Fatalf("op %d: Peek on empty model = %v", op, err)
					}
					released = consumedBytes // Peek at empty releases
					continue
				}
				if err != nil || typ != model[0].typ || !bytes.Equal(p, model[0].data) {
					t.Fatalf("op %d: Peek = %d, %d bytes, %v; want %d, %d bytes", op, typ, len(p), err, model[0].typ, len(model[0].data))
				}
				consumedBytes += model[0].pad
				model[0].pad = 0
				if rng.IntN(4) != 0 {
					if err := r.Consume(); err != nil {
						t.Fatal(err)
					}
					consumedBytes += model[0].size
					model = model[1:]
				}
			case 5:
				r.Release()
				released = consumedBytes
			}
		}
	}
}

// TestConcurrent_InProcessNoLossDupOrReorder runs a producer and a consumer
// goroutine over one ring with sequence numbers and checksums.
func TestConcurrent_InProcessNoLossDupOrReorder(t *testing.T) {
	n := 200000
	if testing.Short() || raceEnabled {
		n = 50000
	}
	r := mustNew(t, 4096)
	var stop atomic.Bool // set when the consumer gives up, so the producer ends
	var wg sync.WaitGroup
	defer func() { stop.Store(true); wg.Wait() }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		batch := 0
		var tmp [256]byte
		for seq := uint64(0); seq < uint64(n) && !stop.Load(); {
			size := 12 + rng.IntN(200)
			if seq%7 == 3 {
				// TryWrite behind committed, unpublished records:
				// it publishes them and itself.
				fillRecord(tmp[:size], seq)
				if err := r.TryWrite(uint16(seq), tmp[:size]); err == ring.ErrFull {
					r.Publish()
					batch = 0
					spin()
					continue
				} else if err != nil {
					t.Error(err)
					stop.Store(true)
					return
				}
				seq++
				batch = 0
				continue
			}
			b, err := r.Reserve(size)
			if err == ring.ErrFull {
				r.Publish()
				batch = 0
				spin()
				continue
			}
			if err != nil {
				t.Error(err)
				stop.Store(true)
				return
			}
			fillRecord(b, seq)
			r.Commit(uint16(seq), size)
			seq++
			if batch++; batch == 4 {
				r.Publish()
				batch = 0
			}
		}
		r.Publish()
	}()
	deadline := testDeadline(t)
	dst := make([]byte, 256)
	for seq, idle := uint64(0), 0; seq < uint64(n); {
		var (
			typ uint16
			p   []byte
			err error
		)
		viaTryRead := seq%3 == 1
		if viaTryRead {
			var k int
			typ, k, err = r.TryRead(dst)
			p = dst[:k]
		} else {
			typ, p, err = r.Peek()
		}
		if err == ring.ErrEmpty {
			if idle++; idle&1023 == 0 && (stop.Load() || time.Now().After(deadline)) {
				t.Fatalf("stopped waiting at record %d of %d", seq, n)
			}
			spin()
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := checkRecord(p, seq); err != nil || typ != uint16(seq) {
			t.Fatalf("record %d: %v (type %d)", seq, err, typ)
		}
		if !viaTryRead {
			r.Consume()
		}
		seq++
		if seq%8 == 0 {
			r.Release()
		}
	}
	wg.Wait()
	if !r.Empty() {
		t.Fatal("records left after the last one")
	}
}

// fillRecord writes seq, a pseudo-random body derived from seq, and a
// CRC32 of both into b (len(b) >= 12).
func fillRecord(b []byte, seq uint64) {
	binary.LittleEndian.PutUint64(b, seq)
	x := seq*0x9e3779b97f4a7c15 + 1
	body := b[8 : len(b)-4]
	// Whole words where possible: under -race each store is a call into
	// the race runtime, so word stores keep the stress test fast there.
	for len(body) >= 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(body, x)
		body = body[8:]
	}
	for i := range body {
		body[i] = byte(x >> (8 * i))
	}
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
}

var errBadRecord = errors.New("bad record")

func checkRecord(b []byte, seq uint64) error {
	if len(b) < 12 {
		return errBadRecord
	}
	if got := binary.LittleEndian.Uint64(b); got != seq {
		return errors.Join(errBadRecord, errSeq(got, seq))
	}
	if crc32.ChecksumIEEE(b[:len(b)-4]) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return errors.Join(errBadRecord, errors.New("checksum mismatch"))
	}
	return nil
}

func TestTryRead_ReleasesAtAQuarterOrWhenEmpty(t *testing.T) {
	r := mustNew(t, 256)
	p := make([]byte, 8) // 16 bytes per record
	for i := 0; i < 8; i++ {
		if err := r.TryWrite(1, p); err != nil {
			t.Fatal(err)
		}
	}
	dst := make([]byte, 8)
	r.TryRead(dst)
	const usable = 256 - 8 // the zero word after the last record
	if got := r.Free(); got != usable-8*16 {
		t.Fatalf("Free after one TryRead = %d, want %d (not yet released)", got, usable-8*16)
	}
	for i := 1; i < 4; i++ {
		r.TryRead(dst)
	}
	if got := r.Free(); got != usable-4*16 {
		t.Fatalf("Free after a quarter read = %d, want %d", got, usable-4*16)
	}
	for {
		if _, _, err := r.TryRead(dst); err == ring.ErrEmpty {
			break
		}
	}
	if got := r.Free(); got != usable {
		t.Fatalf("Free after reading to ErrEmpty = %d, want %d", got, usable)
	}
}

// NoteHead moves the producer's cached head to a position the consumer
// released and ignores any other: one it knew, one past what was
// published, a misaligned one. The producer then writes into the space
// without reading the shared head, and nothing the consumer has not
// read is overwritten.
func TestNoteHead(t *testing.T) {
	r := mustNew(t, 1024)
	rec := make([]byte, 200)
	for i := range 4 { // 4 x 208 of the 1024 bytes
		rec[0] = byte(i)
		if err := r.TryWrite(1, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.TryWrite(1, rec); !errors.Is(err, ring.ErrFull) {
		t.Fatalf("a fifth record: %v, want ErrFull", err)
	}
	buf := make([]byte, 256)
	for range 2 {
		if _, _, err := r.TryRead(buf); err != nil {
			t.Fatal(err)
		}
	}
	r.Release()
	h := r.Released()
	if h != 2*208 {
		t.Fatalf("released %d, want %d", h, 2*208)
	}
	for _, bad := range []uint64{0, 4*208 + 8, 4 * 208 * 2, 207} {
		if r.NoteHead(bad) {
			t.Fatalf("NoteHead(%d) took it", bad)
		}
	}
	if !r.NoteHead(h) || r.NoteHead(h) || r.NoteHead(208) {
		t.Fatalf("NoteHead(%d): want it taken once, and 208 after it never", h)
	}
	rec[0] = 4
	if err := r.TryWrite(1, rec); err != nil {
		t.Fatalf("after NoteHead: %v", err)
	}
	for i := 2; i <= 4; i++ {
		if _, n, err := r.TryRead(buf); err != nil || n != 200 || buf[0] != byte(i) {
			t.Fatalf("record %d: %d bytes, first %d, %v", i, n, buf[0], err)
		}
	}
}
