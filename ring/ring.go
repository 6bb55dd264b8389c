package ring

import (
	"sync/atomic"
	"unsafe"
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
// (Peek, Consume, Release, TryRead, Empty, Ready, Len) by one other
// goroutine at a time; the two sides may run concurrently, in one process
// or in two processes attached to the same region. Accessors (Cap,
// MaxPayload, Corrupt, Size) are safe for concurrent use.
type Ring struct {
	// Read-only after construction.
	mem        []byte
	data       []byte         // the data area, len == capacity
	base       unsafe.Pointer // &data[0], for the header words
	capacity   uint64
	mask       uint64
	maxPayload int
	tail       *atomic.Uint64 // shared: producer-written hint (see Publish)
	head       *atomic.Uint64 // shared: consumer-written
	corruptW   *atomic.Uint32 // shared: corrupt flag
	corrupt    atomic.Bool    // local copy of the flag, checked on each call
	_          [pad]byte

	// Producer-private.
	p struct {
		tail  uint64 // next write position (committed, maybe unpublished)
		pub   uint64 // position of the first unpublished record
		first uint64 // header of the record at pub, stored by Publish
		head  uint64 // cached consumer head
		hint  uint64 // last value stored to the shared tail word
		zero  uint64 // every word in [tail, zero) is known to be 0 (see zeroAhead)
		resv  int    // payload bytes reserved at tail, -1 if none
	}
	_ [pad]byte

	// Consumer-private.
	c struct {
		head uint64 // next read position (consumed, maybe unreleased)
		pub  uint64 // last head stored to the shared word
		peek uint64 // size of the peeked record incl. header, 0 if none
	}
	_ [pad]byte
}

func align8(n uint64) uint64 { return (n + 7) &^ 7 }

// hdr returns the header word at data offset off. Every offset used is a
// position masked by capacity-1 and positions are multiples of 8, so off
// is in bounds and 8-byte aligned (the data area is Align-aligned).
func (r *Ring) hdr(off uint64) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Add(r.base, off))
}

// putHdr writes the header word at data offset off with a plain store:
// for words the consumer cannot be reading (see the package doc).
func (r *Ring) putHdr(off, w uint64) {
	*(*uint64)(unsafe.Add(r.base, off)) = w
}

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
	// Fast path (the slow one is a separate function, called last, to keep
	// this one short): the record fits before the end of the data area,
	// and it and the empty word after it fit within the cached head.
	pos := r.p.tail
	off := pos & r.mask
	need := RecordHeader + align8(uint64(n))
	if uint(n) > uint(r.maxPayload) || need > r.capacity-off || pos+need+RecordHeader-r.p.head > r.capacity || r.p.resv >= 0 || r.corrupt.Load() {
		return r.reserveSlow(n)
	}
	r.p.resv = n
	return unsafe.Slice((*byte)(unsafe.Add(r.base, off+RecordHeader)), n), nil
}

func (r *Ring) reserveSlow(n int) ([]byte, error) {
	if r.corrupt.Load() {
		return nil, ErrCorrupt
	}
	if n < 0 || n > r.maxPayload {
		return nil, ErrTooLarge
	}
	if r.p.resv >= 0 {
		// The dropped reservation's bytes may have been written past
		// where the next record will end: forget what was zero.
		r.p.zero = r.p.tail
	}
	need := RecordHeader + align8(uint64(n))
	pos := r.p.tail
	off := pos & r.mask
	padding := uint64(0)
	if room := r.capacity - off; need > room {
		padding = room
	}
	if end := pos + padding + need + RecordHeader; end-r.p.head > r.capacity {
		h := r.head.Load()
		if h < r.p.head || h > r.p.pub || h&7 != 0 {
			return nil, r.markCorrupt()
		}
		r.p.head = h
		if end-h > r.capacity {
			return nil, ErrFull
		}
	}
	if padding != 0 {
		// Close the tail end with a padding record; it is committed
		// now and published with the record that follows it.
		r.put(padding, header(padding-RecordHeader, 0, kindPad))
		off = 0
	}
	r.p.resv = n
	start := off + RecordHeader
	return r.data[start : start+uint64(n) : start+uint64(n)], nil
}

func header(n uint64, typ uint16, kind uint16) uint64 {
	return n | uint64(typ)<<32 | uint64(kind)<<48
}

// put commits a record of size bytes (header included) with header word w
// at the producer's tail: it writes the header, unless the record is the
// first unpublished one, whose header Publish stores (after zeroing the
// word behind the last record, where the consumer will look next).
func (r *Ring) put(size, w uint64) {
	pos := r.p.tail
	if pos == r.p.pub {
		r.p.first = w
	} else {
		r.putHdr(pos&r.mask, w)
	}
	r.p.tail = pos + size
}

// Commit finishes the reserved record with the given type and payload
// length n (at most the reserved length). The record is not visible to the
// consumer until Publish; committing several records and publishing once
// batches them behind one shared store.
func (r *Ring) Commit(typ uint16, n int) error {
	if r.p.resv < 0 || uint(n) > uint(r.p.resv) {
		return ErrNotReserved
	}
	r.put(RecordHeader+align8(uint64(n)), header(uint64(n), typ, kindData))
	if n != r.p.resv {
		r.p.zero = r.p.tail // the reserved bytes past the record may be written
	}
	r.p.resv = -1
	return nil
}

// Publish makes every committed record visible to the consumer: it zeroes
// the word after the last one, then stores the header of the first (the
// others were written at Commit, behind it).
func (r *Ring) Publish() {
	if e := r.p.tail; e != r.p.pub {
		if e+RecordHeader > r.p.zero {
			r.putHdr(e&r.mask, 0)
		}
		r.hdr(r.p.pub & r.mask).Store(r.p.first)
		r.p.pub = e
		r.zeroAhead(e)
		r.storeHint()
	}
}

// CommitPublish is Commit followed by Publish, in one call: the reserved
// record, with the given type and payload length n, and every record
// committed before it become visible to the consumer.
func (r *Ring) CommitPublish(typ uint16, n int) error {
	if r.p.resv < 0 || uint(n) > uint(r.p.resv) {
		return ErrNotReserved
	}
	pos := r.p.tail
	end := pos + RecordHeader + align8(uint64(n))
	off, w := pos&r.mask, header(uint64(n), typ, kindData)
	if n != r.p.resv {
		r.p.zero = end // the reserved bytes past the record may be written
	}
	if end+RecordHeader > r.p.zero {
		r.putHdr(end&r.mask, 0)
	}
	if pos != r.p.pub { // committed records wait: this one goes behind them
		r.putHdr(off, w)
		off, w = r.p.pub&r.mask, r.p.first
	}
	r.hdr(off).Store(w)
	r.p.tail, r.p.pub, r.p.resv = end, end, -1
	r.zeroAhead(end)
	r.storeHint()
	return nil
}

// zeroAhead runs after a publication that ended at e (the word at e is 0):
// it zeroes the free space from e to the end of the cache line after e's,
// so that the zero word the next publications need is already there. The
// consumer still holds last lap's copy of that next line; the first store
// into it must invalidate that copy, a round trip between the cores that a
// store made just before a publication waits for (the locked store drains
// the store buffer). Made here, after the publication, it overlaps the
// consumer's work instead. Only space within the cached head is zeroed
// (the consumer has released it); when that runs out, publishing zeroes
// its one word itself, as it always may.
func (r *Ring) zeroAhead(e uint64) {
	if end := e&^(zeroLine-1) + 2*zeroLine; end > r.p.zero {
		r.zeroTo(e, end)
	}
}

// zeroTo is zeroAhead's work, once a line: end is the end of the line
// after the one e is in. What is not zero yet starts in e's line (after a
// batch, or when the mark was dropped) or at the next line (the step of a
// stream of small records): the rest of e's line goes word by word, the
// next line in one store.
//
//go:noinline
func (r *Ring) zeroTo(e, end uint64) {
	if end-r.p.head > r.capacity {
		return // not released yet (as far as the cached head says)
	}
	next := end - zeroLine
	for z := max(r.p.zero, e+RecordHeader); z < next; z += RecordHeader {
		r.putHdr(z&r.mask, 0)
	}
	*(*[zeroLine]byte)(unsafe.Add(r.base, next&r.mask)) = [zeroLine]byte{}
	r.p.zero = end
}

// zeroLine is the cache line size zeroAhead works in: 64 bytes, x86-64's
// and most arm64 parts' line. (On 128-byte lines it zeroes half lines:
// still correct, less effective.)
const zeroLine = 64

// storeHint stores the published position to the shared tail word once
// the producer has moved a quarter of the ring past the last store. No one
// polls that word (the consumer polls headers): it tells Attach and Len
// where to start walking headers, so it only needs to be close, and not
// storing it on every Publish saves one locked store per message.
func (r *Ring) storeHint() {
	if r.p.pub-r.p.hint >= r.capacity/4 {
		r.tail.Store(r.p.pub)
		r.p.hint = r.p.pub
	}
}

// TryWrite copies p into the ring as one record of type typ and publishes
// it. It returns ErrFull, ErrTooLarge or ErrCorrupt as Reserve does; it
// never blocks and never allocates.
func (r *Ring) TryWrite(typ uint16, p []byte) error {
	// Fast path: Reserve, Commit and Publish in one, for a record that
	// fits before the end of the data area and within the cached head,
	// with nothing committed before it waiting. Everything else is
	// tryWriteSlow, called last so that no value here lives across a call
	// but the copy's (none at 8 bytes, a word move).
	n := uint64(len(p))
	pos := r.p.tail
	off := pos & r.mask
	size := RecordHeader + align8(n)
	if n > uint64(r.maxPayload) || size > r.capacity-off || pos+size+RecordHeader-r.p.head > r.capacity || pos != r.p.pub || r.p.resv >= 0 || r.corrupt.Load() {
		return r.tryWriteSlow(typ, p)
	}
	dst := unsafe.Add(r.base, off+RecordHeader)
	if n == 8 {
		*(*[8]byte)(dst) = *(*[8]byte)(p) // the word move Copy makes, without its checks
	} else {
		copyAny(unsafe.Slice((*byte)(dst), n), p)
	}
	pos += size
	if pos+RecordHeader > r.p.zero {
		r.putHdr(pos&r.mask, 0)
	}
	r.hdr(off).Store(header(n, typ, kindData))
	r.p.tail, r.p.pub, r.p.resv = pos, pos, -1
	r.zeroAhead(pos)
	r.storeHint()
	return nil
}

// tryWriteSlow is TryWrite where the fast path does not apply: a record
// that wraps, a cached head that says full, records committed and not yet
// published, or a corrupt ring.
func (r *Ring) tryWriteSlow(typ uint16, p []byte) error {
	buf, err := r.Reserve(len(p))
	if err != nil {
		return err
	}
	Copy(buf, p)
	return r.CommitPublish(typ, len(p))
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
	return int(r.capacity - RecordHeader - (r.p.tail - h))
}

// TailAligned reports whether the producer's next record starts at a
// multiple of boundary (a power of two) bytes into the data area. A
// producer method.
func (r *Ring) TailAligned(boundary int) bool {
	return r.p.tail&uint64(boundary-1) == 0
}

// ---- consumer ----

// Peek returns the next record's type and payload without consuming it.
// The payload stays valid until the record is released (Consume, then
// Release or a Peek that reports ErrEmpty). Peeking twice returns the same
// record. On an empty ring it first releases whatever was consumed, so a
// consumer that stops at ErrEmpty never starves the producer, then returns
// ErrEmpty. A record header that cannot be right returns ErrCorrupt.
func (r *Ring) Peek() (typ uint16, payload []byte, err error) {
	// Fast path (the slow one is a separate function, called last, to keep
	// this one short): one load of the header word at the read position
	// finds nothing (the polling case, first and short) or a published data
	// record whose length fits.
	off := r.c.head & r.mask
	w := r.hdr(off).Load()
	if w == 0 {
		if r.corrupt.Load() {
			return 0, nil, ErrCorrupt
		}
		r.Release()
		return 0, nil, ErrEmpty
	}
	n := w & 0xffff_ffff
	size := RecordHeader + align8(n)
	if w>>48 != kindData || n > uint64(r.maxPayload) || size > r.capacity-off || r.corrupt.Load() {
		return r.peekSlow()
	}
	r.c.peek = size
	return uint16(w >> 32), unsafe.Slice((*byte)(unsafe.Add(r.base, off+RecordHeader)), n), nil
}

func (r *Ring) peekSlow() (typ uint16, payload []byte, err error) {
	if r.corrupt.Load() {
		return 0, nil, ErrCorrupt
	}
	// At most two rounds: a padding record ends the data area, and the
	// one at offset 0 cannot be padding (padding is shorter than half the
	// capacity), so this cannot spin on forged headers.
	for range 2 {
		off := r.c.head & r.mask
		w := r.hdr(off).Load()
		if w == 0 {
			r.Release()
			return 0, nil, ErrEmpty
		}
		size, pad, ok := r.record(off, w)
		if !ok {
			return 0, nil, r.markCorrupt()
		}
		if !pad {
			r.c.peek = size
			n := w & 0xffff_ffff
			start := off + RecordHeader
			return uint16(w >> 32), r.data[start : start+n : start+n], nil
		}
		r.c.head += size
		r.c.peek = 0
	}
	return 0, nil, r.markCorrupt()
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
	// Fast path: Peek and Consume in one, for a data record that fits dst.
	// The polling case (a zero header) comes first and stays short;
	// everything else is tryReadSlow, called last so that no value here
	// lives across a call but the copy's (none at 8 bytes, a word move).
	h := r.c.head
	off := h & r.mask
	w := r.hdr(off).Load()
	if w == 0 {
		if r.corrupt.Load() {
			return 0, 0, ErrCorrupt
		}
		r.Release()
		return 0, 0, ErrEmpty
	}
	ln := w & 0xffff_ffff
	size := RecordHeader + align8(ln)
	if w>>48 != kindData || ln > uint64(len(dst)) || ln > uint64(r.maxPayload) || size > r.capacity-off || r.corrupt.Load() {
		return r.tryReadSlow(dst)
	}
	src := unsafe.Add(r.base, off+RecordHeader)
	if ln == 8 {
		*(*[8]byte)(dst) = *(*[8]byte)(src) // the word move Copy makes, without its checks
	} else {
		copyAny(dst[:ln], unsafe.Slice((*byte)(src), ln))
	}
	h += size
	r.c.head, r.c.peek = h, 0
	if h-r.c.pub >= r.capacity/4 {
		r.Release()
	}
	return uint16(w >> 32), int(ln), nil
}

func (r *Ring) tryReadSlow(dst []byte) (typ uint16, n int, err error) {
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

// Empty reports whether the consumer has nothing left to read: the header
// word at its read position is still zero (one atomic load, of the line
// the next record will be written to). It is the check a receiver makes
// before sleeping on a doorbell: if the producer publishes and then rings,
// a consumer that checks Empty after arming the doorbell cannot miss the
// record. False can also mean "only a padding record", which the next Peek
// skips before reporting ErrEmpty, or a corrupt header, which Peek
// reports. When it returns true it also releases everything consumed.
func (r *Ring) Empty() bool {
	if r.hdr(r.c.head&r.mask).Load() != 0 {
		return false
	}
	r.Release()
	return true
}

// Ready reports whether Peek may find a record: the header word at the
// consumer's read position is set (one atomic load of a line that stays in
// the consumer's cache until the producer writes it). It changes nothing,
// so a poller can ask many rings cheaply and drain only those that answer
// true.
func (r *Ring) Ready() bool {
	return r.hdr(r.c.head&r.mask).Load() != 0
}

// Len returns the bytes of published, unconsumed records (headers and
// padding included) as seen by the consumer. It walks the record headers
// from the read position, so it costs one load per record; it is meant for
// diagnostics and tests, not for polling (use Ready or Empty).
func (r *Ring) Len() int {
	t, err := r.walk(r.c.head)
	if err != nil {
		return 0
	}
	return int(t - r.c.head)
}

// walk follows published record headers from position from (a record
// boundary) to the first zero header word and returns that position: the
// producer's published position, or a lower bound of it if the producer
// publishes meanwhile. A header that cannot be right, or a walk of more
// than the capacity, marks the ring corrupt.
func (r *Ring) walk(from uint64) (uint64, error) {
	pos := from
	for pos-from <= r.capacity-RecordHeader {
		off := pos & r.mask
		w := r.hdr(off).Load()
		if w == 0 {
			return pos, nil
		}
		size, _, ok := r.record(off, w)
		if !ok {
			return 0, r.markCorrupt()
		}
		pos += size
	}
	return 0, r.markCorrupt()
}

// record checks the non-zero header word w found at data offset off and
// returns the record's size (header included) and whether it is padding.
// A data record must fit MaxPayload and end within the data area; padding
// must run exactly to the end of the data area, be shorter than half the
// capacity (so it is never at offset 0) and carry type 0. Anything else,
// kind 0 with other bits set included, is not ok.
func (r *Ring) record(off, w uint64) (size uint64, pad, ok bool) {
	n := w & 0xffff_ffff
	size = RecordHeader + align8(n)
	room := r.capacity - off
	switch uint16(w >> 48) {
	case kindData:
		return size, false, n <= uint64(r.maxPayload) && size <= room
	case kindPad:
		return size, true, size == room && size < r.capacity/2 && uint16(w>>32) == 0
	}
	return 0, false, false
}

// (NoteHead and Released come last in the file: placed among the
// producer's and consumer's methods they moved the hot ones, and an
// 8-byte ping-pong ran 6% slower near with no more instructions.)

// NoteHead tells the producer that the consumer has released the ring up
// to position h, as the consumer said in a message of its own: the
// producer then needs no read of the shared head word (a cache line the
// consumer writes) to find that space free. A position the producer
// already knew of, one beyond what it published, or a misaligned one is
// ignored. It reports whether the cached head moved. The caller must
// know h to be a position the consumer released in this ring (the
// consumer's Released, stored before the message carrying it was
// published): a larger value would let the producer overwrite records
// not yet read.
func (r *Ring) NoteHead(h uint64) bool {
	if h <= r.p.head || h > r.p.pub || h&7 != 0 {
		return false
	}
	r.p.head = h
	return true
}

// Released returns the position up to which the consumer has released
// the ring (the last value stored to the shared head word): a value the
// producer may be told (NoteHead).
func (r *Ring) Released() uint64 { return r.c.pub }

// TailToBoundary returns the bytes from the producer's next record to the
// next multiple of boundary (a power of two) into the data area: boundary
// itself when the tail is on one. A producer method.
func (r *Ring) TailToBoundary(boundary int) int {
	return boundary - int(r.p.tail&uint64(boundary-1))
}
