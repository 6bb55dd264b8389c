package net

import (
	"testing"

	"github.com/gofi-dev/fi/transport"
)

// orderSink records send completions in the order the engine sees them.
type orderSink struct {
	*fakeSink
	order []transport.Op
}

func (s *orderSink) SendDone(op transport.Op, c transport.Code) {
	s.fakeSink.SendDone(op, c)
	s.order = append(s.order, op)
}

// Send completions reach the engine in send order: sends queued while the
// connection was being set up complete through Poll, and an eager send
// written straight to the socket after the queue drained must not
// complete at once, ahead of them (fi_cq(3): the CQ yields completions in
// order; the conformance row FullCQLosesNothing saw entry 39 first).
func TestSendDone_InSendOrderAfterQueueDrains(t *testing.T) {
	a := listen(t, Config{})
	b := listen(t, Config{})
	as := &orderSink{fakeSink: newSink()}
	bs := newSink()
	p, _ := a.Resolve(b.Name())
	const queued = 10
	send := func(i int) bool {
		h := &transport.Header{Kind: transport.KindMsg, Len: 8}
		done, c := a.Send(p, h, [][]byte{pattern(8, byte(i))}, transport.Op(i+1))
		if c != transport.OK {
			t.Fatalf("Send %d: code %d", i, c)
		}
		return done
	}
	for i := range queued { // no connection yet: these are queued
		if send(i) {
			t.Fatalf("send %d completed at once before the connection was up", i)
		}
	}
	// Poll only the receiver: the sender's loop writes the queue and
	// leaves the completions in t.done for the sender's next Poll.
	pollUntil(t, "queued messages", func() bool { return len(bs.arrivals) == queued }, b, bs)
	if send(queued) {
		as.order = append(as.order, transport.Op(queued+1))
	}
	pollUntil(t, "every send completion", func() bool { return len(as.order) == queued+1 }, a, as, b, bs)
	for i, op := range as.order {
		if op != transport.Op(i+1) {
			t.Fatalf("completion %d is op %d: order %v", i, op, as.order)
		}
	}
}
