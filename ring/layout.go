package ring

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// Shared layout. Every line is LineSep bytes so that the producer-written
// and consumer-written words never share a cache line, nor an adjacent-line
// prefetch pair, whatever the CPU reports: the layout is a wire format two
// processes must agree on, so it cannot depend on a runtime cpuid value.
// The cpuid line size (CacheLine) is checked to be no larger at start-up.
// Every word, record headers included, is in the host's byte order: a
// region never leaves the host, and the words are accessed atomically.
//
//	offset  size  field                           written by
//	     0     8  magic                           creator (last, atomically)
//	     8     4  version                         creator
//	    12     4  line separation (LineSep)       creator
//	    16     8  capacity of the data area       creator
//	    24     8  offset of the tail word         creator
//	    32     8  offset of the head word         creator
//	    40     8  offset of the data area         creator
//	    48     4  corrupt flag (0 or 1)           either side
//	    52    76  reserved, zero                  -
//	   128     8  tail hint (see below)           producer
//	   136   120  padding                         -
//	   256     8  head: bytes ever released       consumer
//	   264   120  padding                         -
//	   384   cap  data area                       producer, read by consumer
//	total = HeaderSize + capacity = 384 + capacity
//
// The consumer learns that a record is published from its header word
// (see the package doc), so the producer stores its position to the tail
// word only as a hint, at least once every quarter of the ring; Attach and
// Len walk the record headers from there.
const (
	// LineSep is the separation between the shared lines of the layout.
	LineSep = 128
	// HeaderSize is the bytes in front of the data area.
	HeaderSize = 3 * LineSep
	// Magic identifies a gofi ring region ("gofiRING" little-endian).
	Magic uint64 = 0x474e4952_69666f67
	// Version of the shared layout; Attach refuses any other.
	Version = 2
	// MinCapacity and MaxCapacity bound the data area size.
	MinCapacity = 64
	MaxCapacity = 1 << 30
	// RecordHeader is the size of a record header.
	RecordHeader = 8
	// Align is the alignment the region's start must have, so the index
	// words are 8-byte aligned and the lines do not straddle cache lines.
	Align = 64

	offMagic    = 0
	offVersion  = 8
	offLineSep  = 12
	offCapacity = 16
	offTailOff  = 24
	offHeadOff  = 32
	offDataOff  = 40
	offCorrupt  = 48
	offTail     = LineSep
	offHead     = 2 * LineSep
	offData     = HeaderSize
)

// Compile-time checks of the layout: the config fields fit in line 0 and
// the data area starts after the head line.
var (
	_ [LineSep - (offCorrupt + 4)]byte
	_ [offData - (offHead + 8)]byte
	_ [LineSep - RecordHeader*16]byte
)

// Record kinds (bits 48..63 of a record header). Neither is 0: a zero
// header word means "nothing published here yet".
const (
	kindData = 1
	kindPad  = 2
)

// Size returns the bytes a ring of the given capacity occupies in a region
// (header plus data area), or -1 if the capacity is invalid.
func Size(capacity int) int {
	if !validCapacity(capacity) {
		return -1
	}
	return HeaderSize + capacity
}

// MaxPayloadFor returns the largest payload a ring of the given capacity
// accepts. It is half the capacity minus a record header, which guarantees
// that a record of that size always fits once the consumer has drained the
// ring, wherever the indices stand.
func MaxPayloadFor(capacity int) int { return capacity/2 - RecordHeader }

func validCapacity(c int) bool {
	return c >= MinCapacity && c <= MaxCapacity && bits.OnesCount(uint(c)) == 1
}

// word64 returns the 8 bytes at mem[off:] as an atomic word. The caller
// has checked bounds and 8-byte alignment of the region start.
func word64(mem []byte, off int) *atomic.Uint64 {
	_ = mem[off+7]
	return (*atomic.Uint64)(unsafe.Pointer(&mem[off]))
}

func word32(mem []byte, off int) *atomic.Uint32 {
	_ = mem[off+3]
	return (*atomic.Uint32)(unsafe.Pointer(&mem[off]))
}

func aligned(mem []byte, a uintptr) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(mem)))&(a-1) == 0
}

func checkRegion(mem []byte) error {
	if len(mem) < HeaderSize+MinCapacity {
		return fmt.Errorf("%w: %d bytes, need at least %d", ErrBadRegion, len(mem), HeaderSize+MinCapacity)
	}
	if !aligned(mem, Align) {
		return fmt.Errorf("%w: region start not %d-byte aligned", ErrBadRegion, Align)
	}
	return nil
}

// New returns a ring over ordinary Go memory, for two goroutines of one
// process. The region is aligned to the CPU's cache line, and its pages
// are faulted in here (see prefault), not by the first lap of records.
func New(capacity int) (*Ring, error) {
	if !validCapacity(capacity) {
		return nil, fmt.Errorf("%w: %d", ErrBadCapacity, capacity)
	}
	size := HeaderSize + capacity
	a := max(CacheLine(), Align)
	buf := make([]byte, size+a)
	prefault(buf)
	skip := 0
	if m := int(uintptr(unsafe.Pointer(unsafe.SliceData(buf))) & uintptr(a-1)); m != 0 {
		skip = a - m
	}
	return Init(buf[skip:skip+size:skip+size], capacity)
}

// prefault writes one byte of every page of buf (a zero over a zero), so
// that the kernel maps them now. A large make gets pages straight from the
// OS, which the runtime knows are zero and does not touch: without this
// the first lap of records takes a page fault every 4 KiB. Measured
// 2026-11-25 in this guest (one goroutine, a fresh 64 MiB ring, 4 Mi
// TryWrite+TryRead of 8 bytes, load 4.9, 3 runs each): the first lap took
// 16.5k faults and 127-219 ms; prefaulted, New took the faults in 49-108
// ms and the lap 0-1 faults and 58-90 ms. A buffered channel pays the
// same at make, which clears its buffer.
func prefault(buf []byte) {
	for i := 0; i < len(buf); i += pageStride {
		buf[i] = 0
	}
}

// pageStride is the smallest page size of the supported platforms; where
// pages are larger, prefault writes some pages more than once.
const pageStride = 4096

// Init lays out a new ring at the start of mem (which must be at least
// Size(capacity) bytes and Align-aligned; it may be a slice of a larger
// shared mapping) and returns it. Any previous content is overwritten (the
// data area needs only its first word zeroed: records are published by
// writing their header over the zero word the previous record left). The
// magic is stored last, so a peer attaching concurrently sees either no
// ring or a complete header.
func Init(mem []byte, capacity int) (*Ring, error) {
	if !validCapacity(capacity) {
		return nil, fmt.Errorf("%w: %d", ErrBadCapacity, capacity)
	}
	if err := checkRegion(mem); err != nil {
		return nil, err
	}
	if len(mem) < HeaderSize+capacity {
		return nil, fmt.Errorf("%w: %d bytes, capacity %d needs %d", ErrBadRegion, len(mem), capacity, HeaderSize+capacity)
	}
	mem = mem[:HeaderSize+capacity]
	word64(mem, offMagic).Store(0)
	clear(mem[8:HeaderSize])
	word32(mem, offVersion).Store(Version)
	word32(mem, offLineSep).Store(LineSep)
	word64(mem, offCapacity).Store(uint64(capacity))
	word64(mem, offTailOff).Store(offTail)
	word64(mem, offHeadOff).Store(offHead)
	word64(mem, offDataOff).Store(offData)
	word64(mem, offData).Store(0)
	word64(mem, offMagic).Store(Magic)
	return newRing(mem, capacity, 0, 0), nil
}

// Attach opens the ring that a peer laid out with Init at the start of mem.
// It validates magic, version, line separation, capacity, offsets, the
// head and the tail hint, then walks the published record headers to find
// the producer's position; it refuses anything else with ErrBadRegion (or
// ErrCorrupt for impossible indices or headers). mem may be longer than the
// ring.
func Attach(mem []byte) (*Ring, error) {
	if err := checkRegion(mem); err != nil {
		return nil, err
	}
	if m := word64(mem, offMagic).Load(); m != Magic {
		return nil, fmt.Errorf("%w: magic %#x, want %#x", ErrBadRegion, m, Magic)
	}
	if v := word32(mem, offVersion).Load(); v != Version {
		return nil, fmt.Errorf("%w: layout version %d, want %d", ErrBadRegion, v, Version)
	}
	if s := word32(mem, offLineSep).Load(); s != LineSep {
		return nil, fmt.Errorf("%w: line separation %d, want %d", ErrBadRegion, s, LineSep)
	}
	c := word64(mem, offCapacity).Load()
	if c > MaxCapacity || !validCapacity(int(c)) {
		return nil, fmt.Errorf("%w: capacity %d", ErrBadRegion, c)
	}
	capacity := int(c)
	if len(mem) < HeaderSize+capacity {
		return nil, fmt.Errorf("%w: %d bytes, ring of capacity %d needs %d", ErrBadRegion, len(mem), capacity, HeaderSize+capacity)
	}
	if word64(mem, offTailOff).Load() != offTail || word64(mem, offHeadOff).Load() != offHead ||
		word64(mem, offDataOff).Load() != offData {
		return nil, fmt.Errorf("%w: offsets do not match layout version %d", ErrBadRegion, Version)
	}
	mem = mem[:HeaderSize+capacity]
	if word32(mem, offCorrupt).Load() != 0 {
		return nil, ErrCorrupt
	}
	head := word64(mem, offHead).Load()
	tail := word64(mem, offTail).Load()
	if !validIndices(head, tail, uint64(capacity)) {
		return nil, ErrCorrupt
	}
	// The tail word is a hint at most a quarter ring plus a record behind
	// the published position, and it may be behind the head (the consumer
	// read past it): walk the headers from the later of the two.
	r := newRing(mem, capacity, head, head)
	t, err := r.walk(max(head, tail))
	if err != nil {
		return nil, err
	}
	r.p.tail, r.p.pub, r.p.hint = t, t, tail
	return r, nil
}

// validIndices checks the head and the tail hint read from a region: both
// 8-byte aligned and no more than the capacity apart, either way round.
func validIndices(head, tail, capacity uint64) bool {
	return head&7 == 0 && tail&7 == 0 && (tail-head <= capacity || head-tail <= capacity)
}

func newRing(mem []byte, capacity int, head, tail uint64) *Ring {
	r := &Ring{
		mem:        mem,
		data:       mem[offData : offData+capacity : offData+capacity],
		base:       unsafe.Pointer(&mem[offData]),
		capacity:   uint64(capacity),
		mask:       uint64(capacity - 1),
		maxPayload: MaxPayloadFor(capacity),
		tail:       word64(mem, offTail),
		head:       word64(mem, offHead),
		corruptW:   word32(mem, offCorrupt),
	}
	r.p.tail, r.p.pub, r.p.head, r.p.hint, r.p.zero = tail, tail, head, tail, tail
	r.p.resv = -1
	r.c.head, r.c.pub = head, head
	return r
}
