package net

import (
	"encoding/binary"
	"sync/atomic"
)

// handoff is the single-producer (the gnet loop) single-consumer (Poll)
// ring of variable-length records that carries inbound messages to the
// engine. Records are 8-byte aligned, never split at the end of the buffer
// (the producer pads to the end and starts over), and published in batches:
// the loop commits every frame of one read and publishes once.
//
// Layout: the producer's and consumer's shared words sit on their own
// 128-byte lines; each side caches the other's index and rereads the shared
// one only when its cached copy says full (producer) or empty (consumer).
// Ordering comes from sync/atomic: a record's bytes are written before the
// tail store that publishes them and read after the tail load that sees
// them; the consumer's head store follows its reads, and the producer
// reuses space only after loading that head.
//
// This is a local stand-in for package ring (branch ring), which has the
// same Reserve/Commit/Publish, Peek/Consume/Release shape.
type handoff struct {
	buf  []byte
	mask uint64
	_    [128]byte
	tail atomic.Uint64 // written by the producer
	_    [120]byte
	head atomic.Uint64 // written by the consumer
	_    [120]byte

	// producer-private
	ptail, phead uint64
	_            [112]byte
	// consumer-private
	chead, ctail uint64
	clen         uint64 // size of the record last returned by peek
}

const (
	recHdr    = 8 // u32 length, u32 type
	recPad    = 2
	recData   = 1
	msgRecHdr = 48 // peer, epoch, op, flags, kind, tag, data, len, cookie
)

func newHandoff(capacity int) *handoff {
	c := 1 << 16
	for c < capacity {
		c <<= 1
	}
	return &handoff{buf: make([]byte, c), mask: uint64(c - 1)}
}

func align8(n uint64) uint64 { return (n + 7) &^ 7 }

// reserve returns n bytes to fill, or nil when the ring has no room now.
func (r *handoff) reserve(n int) []byte {
	size := uint64(len(r.buf))
	need := recHdr + align8(uint64(n))
	pos := r.ptail & r.mask
	total := need
	if pos+need > size {
		total += size - pos // pad to the end, start over at 0
	}
	if total > size {
		return nil
	}
	if size-(r.ptail-r.phead) < total {
		r.phead = r.head.Load()
		if size-(r.ptail-r.phead) < total {
			return nil
		}
	}
	if pos+need > size {
		binary.LittleEndian.PutUint32(r.buf[pos:], uint32(size-pos-recHdr))
		binary.LittleEndian.PutUint32(r.buf[pos+4:], recPad)
		r.ptail += size - pos
		pos = 0
	}
	return r.buf[pos+recHdr : pos+recHdr+uint64(n)]
}

// commit finishes the record reserved last, n bytes long.
func (r *handoff) commit(n int) {
	pos := r.ptail & r.mask
	binary.LittleEndian.PutUint32(r.buf[pos:], uint32(n))
	binary.LittleEndian.PutUint32(r.buf[pos+4:], recData)
	r.ptail += recHdr + align8(uint64(n))
}

// publish makes committed records visible to the consumer.
func (r *handoff) publish() { r.tail.Store(r.ptail) }

// peek returns the next record without consuming it, or nil.
func (r *handoff) peek() []byte {
	for {
		if r.chead == r.ctail {
			r.ctail = r.tail.Load()
			if r.chead == r.ctail {
				return nil
			}
		}
		pos := r.chead & r.mask
		n := uint64(binary.LittleEndian.Uint32(r.buf[pos:]))
		if binary.LittleEndian.Uint32(r.buf[pos+4:]) == recPad {
			r.chead += recHdr + n
			continue
		}
		r.clen = recHdr + align8(n)
		return r.buf[pos+recHdr : pos+recHdr+n]
	}
}

// consume drops the record peek returned.
func (r *handoff) consume() { r.chead += r.clen }

// release gives consumed space back to the producer.
func (r *handoff) release() { r.head.Store(r.chead) }

// empty reports whether nothing is published and unconsumed; safe from any
// goroutine.
func (r *handoff) empty() bool { return r.head.Load() == r.tail.Load() }
