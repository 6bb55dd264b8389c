package ring

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Duplex is one end of a two-way channel between two parties: a Ring each
// way plus a turn line, one cache line in which each end has a slot for one
// small record (up to SlotPayload bytes). See the package doc ("Duplex")
// for the protocol and why.
//
// Concurrency: an end's methods may be called by one goroutine at a time
// (its sends and receives share state); the two ends may run concurrently,
// in one process or in two processes attached to the same region.
type Duplex struct {
	// Read-only after construction.
	out, in  *Ring
	mine     unsafe.Pointer // this end's slot in the turn line
	theirs   unsafe.Pointer // the other end's slot
	myAck    *atomic.Uint64 // this end's ack word (see TryWrite)
	theirAck *atomic.Uint64 // the other end's ack word
	_        [pad]byte

	// Private to the end (one goroutine at a time).
	sent  uint64 // records sent (slot and ring)
	recvd uint64 // records received (slot and ring)
	ackd  uint32 // the other end's latest count of our records it has received (low 32 bits)
	spin  uint64 // pollPause's state (kept here: a shared variable would be a line both ends write)
	shown uint64 // the last count of received records shown to the other end
	resv  int    // Reserve: payload bytes reserved in the slot, -1 if the reservation (if any) is the ring's
	pend  uint64 // the sequence number of a record committed in the slot that waits for Publish, or 0
	peek  bool   // Peek returned the slot's record
	_     [pad]byte
}

// Duplex layout (a wire format, like the ring's): four LineSep lines, then
// the ring from end 0 to end 1 and the ring from end 1 to end 0.
//
//	offset     size  field                          written by
//	     0        8  magic                          creator (last, atomically)
//	     8        4  version                        creator
//	    12        4  line separation (LineSep)      creator
//	    16        8  capacity of each ring          creator
//	   128       32  end 0's slot (the turn line)   end 0, read by end 1
//	   160       32  end 1's slot                   end 1, read by end 0
//	   256        8  end 0's ack word               end 0
//	   384        8  end 1's ack word               end 1
//	   512  Size(c)  ring, end 0 -> end 1
//	   ...  Size(c)  ring, end 1 -> end 0
//
// A slot: the stamp (the sequence number, from 1, of the record in it, in
// its direction; 0 before the first), the meta word (payload length in
// bits 0-7, type in bits 8-23, bits 24-31 zero, and in bits 32-63 the low
// 32 bits of the count of records its writer had received when it wrote
// it), then SlotPayload bytes of payload.
const (
	// DuplexMagic identifies a gofi duplex region ("gofiDUPX" little-endian).
	DuplexMagic uint64 = 0x5850_5544_6966_6f67
	// DuplexVersion of the duplex layout; AttachDuplex refuses any other.
	DuplexVersion = 1
	// DuplexHeaderSize is the bytes in front of the first ring.
	DuplexHeaderSize = 4 * LineSep
	// SlotPayload is the largest payload a record sent through the turn
	// line may carry; longer records always go through the ring.
	SlotPayload = 16

	dxOffMagic    = 0
	dxOffVersion  = 8
	dxOffLineSep  = 12
	dxOffCapacity = 16
	dxOffTurn     = LineSep
	dxSlotSize    = 32
	dxOffAck0     = 2 * LineSep
	dxOffAck1     = 3 * LineSep

	slotMeta    = 8
	slotPayload = 16
)

// Compile-time checks: both slots fit in one 64-byte line, a slot holds
// its payload, the length fits bits 0-7 of the meta word.
var (
	_ [64 - 2*dxSlotSize]byte
	_ [dxSlotSize - (slotPayload + SlotPayload)]byte
	_ [0xff - SlotPayload]byte
)

// DuplexSize returns the bytes a duplex with rings of the given capacity
// occupies in a region, or -1 if the capacity is invalid.
func DuplexSize(capacity int) int {
	if !validCapacity(capacity) {
		return -1
	}
	return DuplexHeaderSize + 2*Size(capacity)
}

// NewDuplex returns the two ends of a duplex over ordinary Go memory, for
// two goroutines of one process (each end used by one of them).
func NewDuplex(capacity int) (end0, end1 *Duplex, err error) {
	if !validCapacity(capacity) {
		return nil, nil, fmt.Errorf("%w: %d", ErrBadCapacity, capacity)
	}
	size := DuplexSize(capacity)
	a := max(CacheLine(), Align)
	buf := make([]byte, size+a)
	prefault(buf)
	skip := 0
	if m := int(uintptr(unsafe.Pointer(unsafe.SliceData(buf))) & uintptr(a-1)); m != 0 {
		skip = a - m
	}
	mem := buf[skip : skip+size : skip+size]
	if end0, err = InitDuplex(mem, capacity); err != nil {
		return nil, nil, err
	}
	if end1, err = AttachDuplex(mem); err != nil {
		return nil, nil, err
	}
	return end0, end1, nil
}

// InitDuplex lays out a new duplex at the start of mem (at least
// DuplexSize(capacity) bytes, Align-aligned; it may be a slice of a larger
// shared mapping) and returns end 0. The magic is stored last, so a peer
// attaching concurrently sees either no duplex or a complete one.
func InitDuplex(mem []byte, capacity int) (*Duplex, error) {
	if !validCapacity(capacity) {
		return nil, fmt.Errorf("%w: %d", ErrBadCapacity, capacity)
	}
	size := DuplexSize(capacity)
	if err := checkRegion(mem); err != nil {
		return nil, err
	}
	if len(mem) < size {
		return nil, fmt.Errorf("%w: %d bytes, duplex of capacity %d needs %d", ErrBadRegion, len(mem), capacity, size)
	}
	mem = mem[:size]
	word64(mem, dxOffMagic).Store(0)
	clear(mem[8:DuplexHeaderSize])
	word32(mem, dxOffVersion).Store(DuplexVersion)
	word32(mem, dxOffLineSep).Store(LineSep)
	word64(mem, dxOffCapacity).Store(uint64(capacity))
	r01, err := Init(mem[DuplexHeaderSize:], capacity)
	if err != nil {
		return nil, err
	}
	r10, err := Init(mem[DuplexHeaderSize+Size(capacity):], capacity)
	if err != nil {
		return nil, err
	}
	word64(mem, dxOffMagic).Store(DuplexMagic)
	return newDuplex(mem, 0, r01, r10), nil
}

// AttachDuplex opens end 1 of the duplex a peer laid out with InitDuplex
// at the start of mem, which must not have been attached before: it
// validates the header and both rings (as Attach does), and refuses a
// duplex whose end 1 has already sent or acknowledged anything, with
// ErrBadRegion (or ErrCorrupt).
func AttachDuplex(mem []byte) (*Duplex, error) {
	if err := checkRegion(mem); err != nil {
		return nil, err
	}
	if len(mem) < DuplexHeaderSize {
		return nil, fmt.Errorf("%w: %d bytes, need at least %d", ErrBadRegion, len(mem), DuplexHeaderSize)
	}
	if m := word64(mem, dxOffMagic).Load(); m != DuplexMagic {
		return nil, fmt.Errorf("%w: duplex magic %#x, want %#x", ErrBadRegion, m, DuplexMagic)
	}
	if v := word32(mem, dxOffVersion).Load(); v != DuplexVersion {
		return nil, fmt.Errorf("%w: duplex layout version %d, want %d", ErrBadRegion, v, DuplexVersion)
	}
	if s := word32(mem, dxOffLineSep).Load(); s != LineSep {
		return nil, fmt.Errorf("%w: line separation %d, want %d", ErrBadRegion, s, LineSep)
	}
	c := word64(mem, dxOffCapacity).Load()
	if c > MaxCapacity || !validCapacity(int(c)) {
		return nil, fmt.Errorf("%w: duplex capacity %d", ErrBadRegion, c)
	}
	capacity := int(c)
	size := DuplexSize(capacity)
	if len(mem) < size {
		return nil, fmt.Errorf("%w: %d bytes, duplex of capacity %d needs %d", ErrBadRegion, len(mem), capacity, size)
	}
	mem = mem[:size]
	r01, err := Attach(mem[DuplexHeaderSize : DuplexHeaderSize+Size(capacity)])
	if err != nil {
		return nil, err
	}
	r10, err := Attach(mem[DuplexHeaderSize+Size(capacity):])
	if err != nil {
		return nil, err
	}
	if r01.Cap() != capacity || r10.Cap() != capacity {
		return nil, fmt.Errorf("%w: ring capacities %d and %d in a duplex of %d", ErrBadRegion, r01.Cap(), r10.Cap(), capacity)
	}
	if word64(mem, dxOffTurn+dxSlotSize).Load() != 0 || word64(mem, dxOffAck1).Load() != 0 || r10.p.tail != 0 {
		return nil, fmt.Errorf("%w: end 1 of this duplex was attached before", ErrBadRegion)
	}
	return newDuplex(mem, 1, r10, r01), nil
}

func newDuplex(mem []byte, end int, out, in *Ring) *Duplex {
	turn := unsafe.Pointer(&mem[dxOffTurn])
	d := &Duplex{out: out, in: in, resv: -1}
	acks := [2]*atomic.Uint64{word64(mem, dxOffAck0), word64(mem, dxOffAck1)}
	d.mine = unsafe.Add(turn, end*dxSlotSize)
	d.theirs = unsafe.Add(turn, (1-end)*dxSlotSize)
	d.myAck, d.theirAck = acks[end], acks[1-end]
	return d
}

// Out and In return the rings under the end (outbound, inbound), for
// their accessors (Cap, MaxPayload, Corrupt); records must go through the
// Duplex's methods, which keep the order between slot and ring.
func (d *Duplex) Out() *Ring { return d.out }
func (d *Duplex) In() *Ring  { return d.in }

// MaxPayload returns the largest payload a record may carry (the ring's).
func (d *Duplex) MaxPayload() int { return d.out.maxPayload }

// Corrupt reports whether either ring (and so the duplex) has seen
// impossible shared state, here or in the peer.
func (d *Duplex) Corrupt() bool { return d.out.Corrupt() || d.in.Corrupt() }

// markCorrupt marks both rings corrupt (and so both ends, through the
// rings' shared flags): whatever this end found wrong, every later call
// of either end fails.
func (d *Duplex) markCorrupt() error {
	d.out.markCorrupt()
	return d.in.markCorrupt()
}

func stampOf(slot unsafe.Pointer) *atomic.Uint64 { return (*atomic.Uint64)(slot) }

// TryWrite sends p as one record of type typ: through this end's slot in
// the turn line when p fits (SlotPayload bytes or fewer) and the other end
// has received every record sent so far (so the slot is free and nothing
// in the ring goes before it), else through the outbound ring. It returns
// ErrFull, ErrTooLarge or ErrCorrupt as Ring.TryWrite does; it never
// blocks and never allocates.
func (d *Duplex) TryWrite(typ uint16, p []byte) error {
	// Fast path: the slot, free as far as we know (ackd is refreshed
	// from the other end's records; the slow path also reads its ack word).
	// (A pending slot record counts in sent, so it fails the first test.)
	n := uint64(len(p))
	if n > SlotPayload || d.ackd != uint32(d.sent) || d.resv >= 0 || d.out.p.resv >= 0 || d.out.corrupt.Load() {
		return d.tryWriteSlow(typ, p)
	}
	d.slotWrite(typ, p)
	return nil
}

// slotWrite fills this end's slot and publishes it with one store of the
// stamp. The other end reads the slot only once the stamp names the record
// it expects, and we write the slot only once it has said (its ack) that it
// received the record the slot held.
func (d *Duplex) slotWrite(typ uint16, p []byte) {
	s := d.mine
	n := uint64(len(p))
	if n == 8 {
		*(*[8]byte)(unsafe.Add(s, slotPayload)) = *(*[8]byte)(p)
	} else {
		copy(unsafe.Slice((*byte)(unsafe.Add(s, slotPayload)), n), p)
	}
	d.commitSlot(typ, n)
	stampOf(s).Store(d.sent)
}

// commitSlot writes the meta word of the record filled in the slot (n
// bytes of type typ) and counts it sent; its stamp, d.sent, is stored by
// the caller.
func (d *Duplex) commitSlot(typ uint16, n uint64) {
	*(*uint64)(unsafe.Add(d.mine, slotMeta)) = n | uint64(typ)<<8 | uint64(uint32(d.recvd))<<32
	d.sent++
	d.shown = d.recvd
}

func (d *Duplex) tryWriteSlow(typ uint16, p []byte) error {
	if d.Corrupt() {
		return d.markCorrupt()
	}
	// As Ring.TryWrite: a reservation is dropped; committed records are
	// published with this one (the slot's first: it goes before them),
	// and none if this one does not fit.
	d.dropReservation()
	if len(p) <= SlotPayload && d.slotFree() {
		d.slotWrite(typ, p)
		return nil
	}
	d.showAck()
	buf, err := d.out.Reserve(len(p))
	if err != nil {
		if err == ErrCorrupt {
			d.markCorrupt()
		}
		return err
	}
	Copy(buf, p)
	d.publishSlot()
	d.out.CommitPublish(typ, len(p))
	d.sent++
	return nil
}

// slotFree reports whether this end may fill its slot: the other end has
// received every record sent, as it said in its last slot record or, if
// that does not say so, in its ack word. A count is the low 32 bits of
// one: we have fewer than 2^32 records outstanding (a ring holds fewer,
// and the slot one), so a count the other end gave, old or new, equals
// ours only if it has received them all. (A lying peer can only make us
// overwrite its own slot while it reads it.)
func (d *Duplex) slotFree() bool {
	if d.ackd != uint32(d.sent) {
		d.ackd = uint32(d.theirAck.Load())
	}
	return d.ackd == uint32(d.sent)
}

// showAck runs before a record goes through the ring: if this end has
// received everything the other end has sent and not yet told it so, it
// tells it now, through its ack word (before the record, so the other end
// knows when it reads the record): the other end may then use its slot.
// Only then: a receiver that lags stores nothing, so two streams crossing
// do not also pass a shared line back and forth.
func (d *Duplex) showAck() {
	if d.recvd != d.shown && d.drained() {
		d.myAck.Store(d.recvd)
		d.shown = d.recvd
	}
}

// dropReservation forgets a reservation not committed, in the slot or in
// the ring (whose bytes past the tail may have been written: as
// Ring.Reserve does when it drops one, the zero mark goes).
func (d *Duplex) dropReservation() {
	d.resv = -1
	if d.out.p.resv >= 0 {
		d.out.p.zero = d.out.p.tail
		d.out.p.resv = -1
	}
}

// publishSlot stores the stamp of a record committed in the slot and not
// yet published (records committed to the ring after it may wait too).
func (d *Duplex) publishSlot() {
	if d.pend != 0 {
		stampOf(d.mine).Store(d.pend)
		d.pend = 0
	}
}

// drained reports whether this end has received every record the other
// end has published: its slot holds none we expect and the inbound ring's
// next header is zero.
func (d *Duplex) drained() bool {
	return stampOf(d.theirs).Load() != d.recvd+1 && !d.in.Ready()
}

// Reserve returns n bytes to fill with a record's payload: in this end's
// slot when n fits it and the slot is free (as for TryWrite), else in the
// outbound ring (Ring.Reserve, whose errors it returns). The slice stays
// valid until Commit; the record becomes visible at the next Publish (or
// CommitPublish, or TryWrite). Reserving again before Commit drops the
// previous reservation.
func (d *Duplex) Reserve(n int) ([]byte, error) {
	// The ring's case first, with Ring.Reserve's fast path written out
	// (a stream reserves through here once a record: the call and the
	// checks of a Ring.Reserve under a Duplex.Reserve cost a stream of
	// 8-byte records a third more instructions).
	r := d.out
	pos := r.p.tail
	off := pos & r.mask
	need := RecordHeader + align8(uint64(n))
	if uint(n) <= SlotPayload && (d.ackd == uint32(d.sent) || d.theirAck.Load() == d.sent) || uint(n) > uint(r.maxPayload) || need > r.capacity-off || pos+need+RecordHeader-r.p.head > r.capacity ||
		r.p.resv >= 0 || d.resv >= 0 || d.recvd != d.shown || r.corrupt.Load() {
		return d.reserveSlow(n)
	}
	r.p.resv = n
	return unsafe.Slice((*byte)(unsafe.Add(r.base, off+RecordHeader)), n), nil
}

func (d *Duplex) reserveSlow(n int) ([]byte, error) {
	d.resv = -1
	if uint(n) <= SlotPayload && d.slotFree() && !d.out.corrupt.Load() {
		d.dropReservation()
		d.resv = n
		return unsafe.Slice((*byte)(unsafe.Add(d.mine, slotPayload)), n), nil
	}
	if d.recvd != d.shown {
		d.showAck()
	}
	buf, err := d.out.Reserve(n) // (it drops a ring reservation itself)
	if err == ErrCorrupt {
		d.markCorrupt()
	}
	return buf, err
}

// Commit finishes the reserved record with type typ and payload length n
// (at most the reserved length); it is published by the next Publish,
// behind the records committed before it.
func (d *Duplex) Commit(typ uint16, n int) error {
	if d.resv >= 0 {
		if uint(n) > uint(d.resv) {
			return ErrNotReserved
		}
		d.resv = -1
		d.commitSlot(typ, uint64(n))
		d.pend = d.sent
		return nil
	}
	// Ring.Commit, written out (see Reserve).
	r := d.out
	if r.p.resv < 0 || uint(n) > uint(r.p.resv) {
		return ErrNotReserved
	}
	r.put(RecordHeader+align8(uint64(n)), header(uint64(n), typ, kindData))
	if n != r.p.resv {
		r.p.zero = r.p.tail // the reserved bytes past the record may be written
	}
	r.p.resv = -1
	d.sent++
	return nil
}

// Publish makes every committed record visible to the other end: the
// slot's first (it goes before any committed to the ring after it), then
// the ring's.
func (d *Duplex) Publish() {
	d.publishSlot()
	d.out.Publish()
}

// CommitPublish is Commit followed by Publish, in one call.
func (d *Duplex) CommitPublish(typ uint16, n int) error {
	if d.resv >= 0 {
		if err := d.Commit(typ, n); err != nil {
			return err
		}
		d.publishSlot()
		return nil
	}
	d.publishSlot()
	if err := d.out.CommitPublish(typ, n); err != nil {
		return err
	}
	d.sent++
	return nil
}

// Peek returns the next record's type and payload without consuming it:
// the other end's slot record if it is the next one, else the inbound
// ring's (Ring.Peek, whose errors it returns). The payload stays valid
// until the record is consumed (the slot's) or released (the ring's).
func (d *Duplex) Peek() (typ uint16, payload []byte, err error) {
	r := d.in
	if r.corrupt.Load() {
		return 0, nil, ErrCorrupt
	}
	// The order of TryRead: the ring's header, then the stamp.
	h := r.hdr(r.c.head & r.mask).Load()
	w := stampOf(d.theirs).Load()
	e := d.recvd + 1
	switch {
	case w > e:
		return 0, nil, d.markCorrupt()
	case w == e:
		meta := *(*uint64)(unsafe.Add(d.theirs, slotMeta))
		ln := meta & 0xff
		if ln > SlotPayload || meta&0xff00_0000 != 0 {
			return 0, nil, d.markCorrupt()
		}
		d.peek = true
		return uint16(meta >> 8), unsafe.Slice((*byte)(unsafe.Add(d.theirs, slotPayload)), ln), nil
	case h == 0:
		r.Release()
		return 0, nil, ErrEmpty
	}
	// The ring's record, by Ring.Peek's fast path (the header is loaded).
	off := r.c.head & r.mask
	n := h & 0xffff_ffff
	size := RecordHeader + align8(n)
	d.peek = false
	if h>>48 == kindData && n <= uint64(r.maxPayload) && size <= r.capacity-off {
		r.c.peek = size
		return uint16(h >> 32), unsafe.Slice((*byte)(unsafe.Add(r.base, off+RecordHeader)), n), nil
	}
	typ, payload, err = r.peekSlow()
	if err == ErrCorrupt {
		d.markCorrupt()
	}
	return typ, payload, err
}

// Consume drops the record returned by the last Peek. A ring record's
// space goes back to the other end at the next Release.
func (d *Duplex) Consume() error {
	if d.peek {
		d.peek = false
		d.recvd++
		d.ackd = uint32(*(*uint64)(unsafe.Add(d.theirs, slotMeta)) >> 32)
		return nil
	}
	r := d.in // Ring.Consume, written out (see Reserve)
	if r.c.peek == 0 {
		return ErrNotPeeked
	}
	r.c.head += r.c.peek
	r.c.peek = 0
	d.recvd++
	return nil
}

// Release hands the space of every consumed ring record back to the other
// end.
func (d *Duplex) Release() { d.in.Release() }

// TryRead copies the next record's payload into dst, consumes it, and
// returns its type and length: the record in the other end's slot if it
// is the next one, else the inbound ring's next. It returns ErrEmpty,
// ErrCorrupt or ErrShortBuffer (the record stays) and never allocates.
func (d *Duplex) TryRead(dst []byte) (typ uint16, n int, err error) {
	// The ring's header first, then the slot's stamp: the other end fills
	// its slot only when we have received everything before, so a slot
	// record precedes every ring record we have not read; if the ring's
	// record is there, the slot record published before it is visible too.
	r := d.in
	off := r.c.head & r.mask
	h := r.hdr(off).Load()
	w := stampOf(d.theirs).Load()
	e := d.recvd + 1
	if w == e {
		meta := *(*uint64)(unsafe.Add(d.theirs, slotMeta))
		ln := meta & 0xff
		if ln != 8 || len(dst) < 8 || meta&0xff00_0000 != 0 || r.corrupt.Load() {
			return d.tryReadSlow(dst) // (slotRead: any other length)
		}
		// slotRead for 8 bytes, written out: this is the latency path of a
		// ping-pong, which pays for every instruction between the stamp's
		// arrival and the reply's.
		*(*[8]byte)(dst) = *(*[8]byte)(unsafe.Add(d.theirs, slotPayload))
		d.recvd, d.peek, d.ackd = e, false, uint32(meta>>32)
		return uint16(meta >> 8), 8, nil
	}
	if h == 0 {
		if w > e || r.corrupt.Load() {
			return d.tryReadSlow(dst)
		}
		r.Release()
		d.spin = pollPause(d.spin)
		return 0, 0, ErrEmpty
	}
	ln := h & 0xffff_ffff
	size := RecordHeader + align8(ln)
	if w > e || h>>48 != kindData || ln > uint64(len(dst)) || ln > uint64(r.maxPayload) || size > r.capacity-off || r.corrupt.Load() {
		return d.tryReadSlow(dst)
	}
	src := unsafe.Add(r.base, off+RecordHeader)
	if ln == 8 {
		*(*[8]byte)(dst) = *(*[8]byte)(src)
	} else {
		copyAny(dst[:ln], unsafe.Slice((*byte)(src), ln))
	}
	hd := r.c.head + size
	r.c.head, r.c.peek = hd, 0
	if hd-r.c.pub >= r.capacity/4 {
		r.Release()
	}
	d.recvd, d.peek = e, false
	return uint16(h >> 32), int(ln), nil
}

// slotRead takes the record in the other end's slot, whose meta word
// (read once) has been checked: its length fits SlotPayload and dst.
func (d *Duplex) slotRead(dst []byte, meta uint64) (typ uint16, n int, err error) {
	ln := meta & 0xff
	src := unsafe.Add(d.theirs, slotPayload)
	if ln == 8 {
		*(*[8]byte)(dst) = *(*[8]byte)(src)
	} else {
		copy(dst[:ln], unsafe.Slice((*byte)(src), ln))
	}
	d.recvd++
	d.peek = false
	d.ackd = uint32(meta >> 32) // the other end's count of ours it had received (see slotFree)
	return uint16(meta >> 8), int(ln), nil
}

// tryReadSlow is TryRead where the fast path does not apply: a slot
// record that does not fit dst or cannot be right, a stamp ahead of the
// record expected, a ring record the ring's slow path handles (padding,
// short buffer, corrupt header), or a corrupt duplex. It reads the ring's
// header and the stamp again, in the same order.
func (d *Duplex) tryReadSlow(dst []byte) (typ uint16, n int, err error) {
	r := d.in
	if d.Corrupt() {
		return 0, 0, d.markCorrupt()
	}
	h := r.hdr(r.c.head & r.mask).Load()
	w := stampOf(d.theirs).Load()
	e := d.recvd + 1
	switch {
	case w > e:
		return 0, 0, d.markCorrupt()
	case w == e:
		meta := *(*uint64)(unsafe.Add(d.theirs, slotMeta))
		ln := meta & 0xff
		if ln > SlotPayload || meta&0xff00_0000 != 0 {
			return 0, 0, d.markCorrupt()
		}
		if ln > uint64(len(dst)) {
			return 0, 0, ErrShortBuffer
		}
		return d.slotRead(dst, meta)
	case h == 0:
		r.Release()
		return 0, 0, ErrEmpty
	}
	// The record at the ring's read position was published before the
	// stamp was read, so it is the one expected (a padding record is
	// published with the record after it).
	typ, n, err = r.TryRead(dst)
	switch err {
	case nil:
		d.recvd, d.peek = e, false
	case ErrCorrupt:
		d.markCorrupt()
	}
	return typ, n, err
}

// Ready reports whether TryRead may find a record (two loads: the inbound
// ring's next header and the other end's stamp). It changes nothing.
func (d *Duplex) Ready() bool {
	return d.in.Ready() || stampOf(d.theirs).Load() == d.recvd+1
}

// Empty reports whether this end has nothing left to read (the checks of
// Ready, the ring's first: a receiver arming a doorbell checks Empty after
// arming it); when true it also releases the inbound ring's consumed space.
func (d *Duplex) Empty() bool {
	if d.in.Ready() || stampOf(d.theirs).Load() == d.recvd+1 {
		return false
	}
	d.in.Release()
	return true
}

// pollPause is a short wait (eight dependent multiply-adds, a few
// nanoseconds) after a TryRead that found nothing, so that a receiver
// polling in a tight loop does not load the turn line as fast as it can.
// Near, in some minutes an 8-byte ping-pong without it ran at a median
// 2.18x the flag's round trip, with it 1.09 (alternated, 24 runs each);
// in others 1.08 without and 1.13 with it; far 1.05-1.08 either way (the
// README's "The ring against a flag"). The caller keeps the result, so
// the wait is not optimised away and writes nothing shared.
//
//go:noinline
func pollPause(x uint64) uint64 {
	for range 8 {
		x = x*5 + 1
	}
	return x
}
