package ring

import (
	"encoding/binary"
	"sync/atomic"
)

// pad keeps the producer's and the consumer's private fields on different
// cache lines when one Ring value is shared by two goroutines. It is a
// compile-time constant, so it cannot come from cpuid: 128 covers 64-byte
// lines plus the adjacent-line prefetcher of x86-64, and the 128-byte lines
// of some arm64 parts. CacheLine() reports the runtime value.
const pad = 128

// Ring is a single-producer single-consumer ring of variable-length
// records over a byte region (see the package doc for the layout).
//
// Concurrency: the producer methods (Reserve, Commit, Publish, TryWrite,
// Free) may be called by one goroutine at a time and the consumer methods
// (Peek, Consume, Release, TryRead, Empty, Len) by one other goroutine at a
// time; the two sides may run concurrently, in one process or in two
// processes attached to the same region. Accessors (Cap, MaxPayload,
// Corrupt, Size) are safe for concurrent use.
type Ring struct {
	// Read-only after construction.
	mem        []byte
	data       []byte // the data area, len == capacity
	capacity   uint64
	mask       uint64
	maxPayload int
	tail       *atomic.Uint64 // shared: producer-written
	head       *atomic.Uint64 // shared: consumer-written
	corruptW   *atomic.Uint32 // shared: corrupt flag
	corrupt    atomic.Bool    // local copy of the flag, checked on each call
	speculate  bool           // read the next header while polling (Init/Attach)
	_          [pad]byte

	// Producer-private.
	p struct {
		tail uint64 // next write position (committed, maybe unpublished)
		pub  uint64 // last tail stored to the shared word
		head uint64 // cached consumer head
		resv int    // payload bytes reserved at tail, -1 if none
	}
	_ [pad]byte

	// Consumer-private.
	c struct {
		head uint64 // next read position (consumed, maybe unreleased)
		pub  uint64 // last head stored to the shared word
		tail uint64 // cached producer tail
		peek uint64 // size of the peeked record incl. header, 0 if none
	}
	_ [pad]byte
}

func align8(n uint64) uint64 { return (n + 7) &^ 7 }

func (r *Ring) markCorrupt() error {
	r.corrupt.Store(true)
	r.corruptW.Store(1)
	return ErrCorrupt
}

// Cap returns the capacity of the data area in bytes.
func (r *Ring) Cap() int { return int(r.capacity) }

// MaxPayload returns the largest payload a record may carry.
func (r *Ring) MaxPayload() int { return r.maxPayload }

// Size returns the bytes the ring occupies in its region.
func (r *Ring) Size() int { return len(r.mem) }

// Corrupt reports whether the ring has seen impossible shared state, here
// or (through the shared flag) in the peer.
func (r *Ring) Corrupt() bool {
	if r.corrupt.Load() {
		return true
	}
	if r.corruptW.Load() != 0 {
		r.corrupt.Store(true)
		return true
	}
	return false
}

// ---- producer ----

// Reserve returns n bytes of ring memory to fill with a record's payload.
// The slice stays valid until Commit; the record becomes visible to the
// consumer at the next Publish. Reserving again before Commit drops the
// previous reservation. It returns ErrFull when the consumer has not yet
// released enough space, ErrTooLarge when n > MaxPayload (never fits), and
// ErrCorrupt when the shared head cannot be right.
func (r *Ring) Reserve(n int) ([]byte, error) {
	// Fast path (the slow one is a separate function, to keep this one
	// short): the record fits before the end of the data
	// area and within the cached head.
	pos := r.p.tail
	off := pos & r.mask
	need := RecordHeader + align8(uint64(n))
	if uint(n) <= uint(r.maxPayload) && need <= r.capacity-off && pos+need-r.p.head <= r.capacity && !r.corrupt.Load() {
		r.p.resv = n
		return r.data[off+RecordHeader : off+RecordHeader+uint64(n) : off+RecordHeader+uint64(n)], nil
	}
	return r.reserveSlow(n)
}

func (r *Ring) reserveSlow(n int) ([]byte, error) {
	if r.corrupt.Load() {
		return nil, ErrCorrupt
	}
	if n < 0 || n > r.maxPayload {
		return nil, ErrTooLarge
	}
	need := RecordHeader + align8(uint64(n))
	pos := r.p.tail
	off := pos & r.mask
	padding := uint64(0)
	if room := r.capacity - off; need > room {
		padding = room
	}
	if pos+padding+need-r.p.head > r.capacity {
		h := r.head.Load()
		if h < r.p.head || h > r.p.pub || h&7 != 0 {
			return nil, r.markCorrupt()
		}
		r.p.head = h
		if pos+padding+need-h > r.capacity {
			return nil, ErrFull
		}
	}
	if padding != 0 {
		// Close the tail end with a padding record; it is committed
		// now and published with the record that follows it.
		binary.LittleEndian.PutUint64(r.data[off:off+8], header(padding-RecordHeader, 0, kindPad))
		pos += padding
		r.p.tail = pos
		off = 0
	}
	r.p.resv = n
	start := off + RecordHeader
	return r.data[start : start+uint64(n) : start+uint64(n)], nil
}

func header(n uint64, typ uint16, kind uint16) uint64 {
	return n | uint64(typ)<<32 | uint64(kind)<<48
}

// Commit finishes the reserved record with the given type and payload
// length n (at most the reserved length). The record is not visible to the
// consumer until Publish; committing several records and publishing once
// batches them behind one shared store.
func (r *Ring) Commit(typ uint16, n int) error {
	if r.p.resv < 0 || n < 0 || n > r.p.resv {
		return ErrNotReserved
	}
	off := r.p.tail & r.mask
	binary.LittleEndian.PutUint64(r.data[off:off+8], header(uint64(n), typ, kindData))
	r.p.tail += RecordHeader + align8(uint64(n))
	r.p.resv = -1
	return nil
}

// Publish makes every committed record visible to the consumer.
func (r *Ring) Publish() {
	if r.p.tail != r.p.pub {
		r.tail.Store(r.p.tail)
		r.p.pub = r.p.tail
	}
}

// TryWrite copies p into the ring as one record of type typ and publishes
// it. It returns ErrFull, ErrTooLarge or ErrCorrupt as Reserve does; it
// never blocks and never allocates.
func (r *Ring) TryWrite(typ uint16, p []byte) error {
	buf, err := r.Reserve(len(p))
	if err != nil {
		return err
	}
	Copy(buf, p)
	r.commitReserved(typ, len(p))
	r.Publish()
	return nil
}

func (r *Ring) commitReserved(typ uint16, n int) {
	off := r.p.tail & r.mask
	binary.LittleEndian.PutUint64(r.data[off:off+8], header(uint64(n), typ, kindData))
	r.p.tail += RecordHeader + align8(uint64(n))
	r.p.resv = -1
}

// Free returns the bytes the producer can still commit, as of its last
// look at the consumer's head (refreshed here). Padding at the wrap point
// makes the largest single record possibly smaller.
func (r *Ring) Free() int {
	h := r.head.Load()
	if h < r.p.head || h > r.p.pub || h&7 != 0 {
		r.markCorrupt()
		return 0
	}
	r.p.head = h
	return int(r.capacity - (r.p.tail - h))
}

// ---- consumer ----

// Peek returns the next record's type and payload without consuming it.
// The payload stays valid until the record is released (Consume, then
// Release or a Peek that reports ErrEmpty). Peeking twice returns the same
// record. On an empty ring it first releases whatever was consumed, so a
// consumer that stops at ErrEmpty never starves the producer, then returns
// ErrEmpty. A record header that cannot be right returns ErrCorrupt.
func (r *Ring) Peek() (typ uint16, payload []byte, err error) {
	// Fast path (the slow one is a separate function, to keep this one
	// short): a data record below the cached tail whose
	// header is plausible.
	h := r.c.head
	if h != r.c.tail && !r.corrupt.Load() {
		off := h & r.mask
		w := binary.LittleEndian.Uint64(r.data[off : off+8 : off+8])
		n := w & 0xffff_ffff
		size := RecordHeader + align8(n)
		if w>>48 == kindData && n <= uint64(r.maxPayload) && size <= r.c.tail-h && size <= r.capacity-off {
			r.c.peek = size
			return uint16(w >> 32), r.data[off+RecordHeader : off+RecordHeader+n : off+RecordHeader+n], nil
		}
	}
	return r.peekSlow()
}

func (r *Ring) peekSlow() (typ uint16, payload []byte, err error) {
	if r.corrupt.Load() {
		return 0, nil, ErrCorrupt
	}
	for {
		h := r.c.head
		off := h & r.mask
		var w uint64
		read := false
		if h == r.c.tail {
			t := r.tail.Load()
			if r.speculate {
				// Read the next header now, before knowing whether
				// it is published, so the CPU fetches the tail's line
				// and the record's line in parallel rather than one
				// after the other (half the latency of a ping-pong).
				// The read follows the tail load in program order,
				// so when t > h it is the published header; when
				// t == h it is discarded. Only rings in a shared
				// mapping do this: there the race detector does not
				// look, while on Go memory (New) it would rightly
				// report this deliberate read of a word the producer
				// may be writing.
				w = binary.LittleEndian.Uint64(r.data[off : off+8])
				read = true
			}
			if t < r.c.tail || t-r.c.pub > r.capacity || t&7 != 0 {
				return 0, nil, r.markCorrupt()
			}
			r.c.tail = t
			if t == h {
				r.Release()
				return 0, nil, ErrEmpty
			}
		}
		avail := r.c.tail - h
		if !read {
			w = binary.LittleEndian.Uint64(r.data[off : off+8])
		}
		n := w & 0xffff_ffff
		size := RecordHeader + align8(n)
		room := r.capacity - off
		switch uint16(w >> 48) {
		case kindData:
			if n > uint64(r.maxPayload) || size > avail || size > room {
				return 0, nil, r.markCorrupt()
			}
			r.c.peek = size
			start := off + RecordHeader
			return uint16(w >> 32), r.data[start : start+n : start+n], nil
		case kindPad:
			if size != room || size > avail || uint16(w>>32) != 0 {
				return 0, nil, r.markCorrupt()
			}
			r.c.head = h + size
			r.c.peek = 0
		default:
			return 0, nil, r.markCorrupt()
		}
	}
}

// Consume drops the record returned by the last Peek. Its space goes back
// to the producer at the next Release; consuming several records and
// releasing once batches them behind one shared store.
func (r *Ring) Consume() error {
	if r.c.peek == 0 {
		return ErrNotPeeked
	}
	r.c.head += r.c.peek
	r.c.peek = 0
	return nil
}

// Release hands the space of every consumed record back to the producer.
func (r *Ring) Release() {
	if r.c.head != r.c.pub {
		r.head.Store(r.c.head)
		r.c.pub = r.c.head
	}
}

// TryRead copies the next record's payload into dst, consumes it, and
// returns its type and length. It returns ErrEmpty, ErrCorrupt, or
// ErrShortBuffer (the record stays in the ring) and never allocates.
//
// TryRead releases space lazily, off the latency path: when a quarter of
// the ring has been consumed without release, or when a TryRead, Peek or
// Empty finds the ring empty. A consumer that reads until ErrEmpty (or
// Empty) therefore never holds back the producer.
func (r *Ring) TryRead(dst []byte) (typ uint16, n int, err error) {
	typ, p, err := r.Peek()
	if err != nil {
		return 0, 0, err
	}
	if len(p) > len(dst) {
		return 0, 0, ErrShortBuffer
	}
	n = Copy(dst, p)
	r.c.head += r.c.peek
	r.c.peek = 0
	if r.c.head-r.c.pub >= r.capacity/4 {
		r.Release()
	}
	return typ, n, nil
}

// Empty reports whether the consumer has nothing left to read: its read
// position equals the producer's published tail (one atomic load). It is
// the check a receiver makes before sleeping on a doorbell: if the producer
// publishes and then rings, a consumer that checks Empty after arming the
// doorbell cannot miss the record. False can also mean "only a padding
// record", which the next Peek skips before reporting ErrEmpty. When it
// returns true it also releases everything consumed.
func (r *Ring) Empty() bool {
	if r.c.head != r.c.tail {
		return false
	}
	if r.tail.Load() != r.c.head {
		return false
	}
	r.Release()
	return true
}

// Ready reports whether Peek may find a record: the consumer has records
// below its cached tail, or the producer published past the consumer's
// position (one atomic load of the shared tail, which stays in the
// consumer's cache until the producer writes it). It changes nothing, so a
// poller can ask many rings cheaply and drain only those that answer true.
func (r *Ring) Ready() bool {
	return r.c.head != r.c.tail || r.tail.Load() != r.c.head
}

// Len returns the bytes of published, unconsumed records (headers and
// padding included) as seen by the consumer.
func (r *Ring) Len() int {
	t := r.tail.Load()
	if t < r.c.head || t-r.c.head > r.capacity {
		r.markCorrupt()
		return 0
	}
	return int(t - r.c.head)
}
