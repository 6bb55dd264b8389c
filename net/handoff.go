package net

import (
	"sync/atomic"

	"github.com/gofi-dev/fi/ring"
)

// handoff carries inbound messages from the gnet loop (or from Poll while
// it owns the loop) to Poll: a ring.Ring in Go memory, single producer,
// single consumer, records published in batches (the loop commits every
// frame of one read and publishes once).
//
// The ring's own Empty is a consumer-side call; Wait, which may run on any
// goroutine, needs a check of its own, so the wrapper counts records
// published and released (one atomic add per batch on each side).
type handoff struct {
	r         *ring.Ring
	staged    uint64        // producer: committed, not yet published
	published atomic.Uint64 // records published
	_         [120]byte
	taken     uint64        // consumer: consumed, not yet released
	released  atomic.Uint64 // records released
}

const (
	recData   = 1
	msgRecHdr = 48 // peer, epoch, op, flags, kind, pad, group, tag, data, len, cookie
)

func newHandoff(capacity int) (*handoff, error) {
	c := 1 << 16
	for c < capacity {
		c <<= 1
	}
	r, err := ring.New(c)
	if err != nil {
		return nil, err
	}
	return &handoff{r: r}, nil
}

// reserve returns n bytes to fill, or nil when the ring has no room now.
func (h *handoff) reserve(n int) []byte {
	b, err := h.r.Reserve(n)
	if err != nil {
		return nil
	}
	return b
}

// commit finishes the record reserved last, n bytes long.
func (h *handoff) commit(n int) {
	if h.r.Commit(recData, n) == nil {
		h.staged++
	}
}

// publish makes committed records visible to the consumer.
func (h *handoff) publish() {
	h.r.Publish()
	if h.staged != 0 {
		h.published.Add(h.staged)
		h.staged = 0
	}
}

// peek returns the next record without consuming it, or nil.
func (h *handoff) peek() []byte {
	_, p, err := h.r.Peek()
	if err != nil {
		return nil
	}
	return p
}

// consume drops the record peek returned.
func (h *handoff) consume() {
	if h.r.Consume() == nil {
		h.taken++
	}
}

// consumed is the number of records consumed so far (consumer only).
func (h *handoff) consumed() uint64 { return h.released.Load() + h.taken }

// release gives consumed space back to the producer.
func (h *handoff) release() {
	h.r.Release()
	if h.taken != 0 {
		h.released.Add(h.taken)
		h.taken = 0
	}
}

// empty reports whether every published record was released; safe from
// any goroutine.
func (h *handoff) empty() bool { return h.released.Load() == h.published.Load() }
