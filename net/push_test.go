package net

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// postSink stands in for an engine with posted receives: each message
// takes the next posted buffer; a rendezvous or pushed message is fetched
// from inside Arrive, as the engine does when a receive matches. With no
// buffer posted the message is left unexpected (kept for fetchLater).
type postSink struct {
	*fakeSink
	tr     *Transport
	posted [][]byte
	got    []postGot
	ux     []arrival // unexpected rendezvous / pushed messages
}

// postGot is one completed receive.
type postGot struct {
	hdr  transport.Header
	data []byte // the buffer's bytes, len = bytes written
	code transport.Code
}

const postOp = 1 << 20 // fetch ops: postOp + index into got

func (s *postSink) Arrive(p transport.Peer, h *transport.Header, eager []byte, cookie uint64) bool {
	if s.refuse != nil && s.refuse() {
		s.refused++
		return false
	}
	if len(s.posted) == 0 {
		a := arrival{peer: p, hdr: *h, cookie: cookie}
		if eager != nil {
			a.eager = append([]byte{}, eager...)
		}
		s.ux = append(s.ux, a)
		return true
	}
	buf := s.posted[0]
	s.posted = s.posted[1:]
	if eager != nil {
		n := copy(buf, eager)
		s.got = append(s.got, postGot{hdr: *h, data: buf[:n]})
		return true
	}
	i := len(s.got)
	s.got = append(s.got, postGot{hdr: *h, data: buf, code: -1})
	done, n, c := s.tr.Fetch(p, cookie, [][]byte{buf}, transport.Op(postOp+i))
	if done {
		s.got[i].data, s.got[i].code = buf[:n], c
	}
	return true
}

func (s *postSink) FetchDone(op transport.Op, n int, c transport.Code) {
	if op >= postOp && int(op-postOp) < len(s.got) {
		g := &s.got[op-postOp]
		g.data, g.code = g.data[:n], c
		return
	}
	s.fakeSink.FetchDone(op, n, c)
}

func (s *postSink) pending() bool {
	for _, g := range s.got {
		if g.code == -1 {
			return true
		}
	}
	return false
}

// parkedPair gives two transports whose receiver b has borrowed its loop
// (owner polling), so headers are decoded inside Poll.
func parkedPair(t *testing.T, cfg Config) (a, b *Transport, as *fakeSink, bs *postSink, p transport.Peer) {
	a = listen(t, cfg)
	b = listen(t, cfg)
	as = newSink()
	bs = &postSink{fakeSink: newSink(), tr: b}
	p, _ = a.Resolve(b.Name())
	bs.posted = append(bs.posted, make([]byte, 8))
	sendAll(t, a, as, b, bs, p, &transport.Header{Kind: transport.KindMsg, Len: 8}, pattern(8, 0), 1)
	pollUntil(t, "the first message", func() bool { return len(bs.got) == 1 }, a, as, b, bs)
	bs.got = bs.got[:0]
	if !cfg.LoopOnly {
		repark(t, a, as, b, bs)
	}
	return
}

// repark polls (without Wait, which hands the loop back) until b has
// borrowed its loop.
func repark(t *testing.T, a *Transport, as transport.Sink, b *Transport, bs transport.Sink) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !b.parked.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the receiver never borrowed its loop")
		}
		b.Poll(bs)
		a.Poll(as)
	}
}

// Messages above MaxEager up to PushMax go as PUSH: with a receive posted
// the payload is read straight into it (no copy through the handoff ring,
// no clear-to-send round trip), in order with eager and rendezvous
// messages around it, and truncated to a shorter buffer.
func TestPush_PostedReceiveGetsThePayloadDirectly(t *testing.T) {
	for _, loopOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("loopOnly=%v", loopOnly), func(t *testing.T) {
			// PushMax 256 KiB: the two largest go by rendezvous.
			a, b, as, bs, p := parkedPair(t, Config{LoopOnly: loopOnly, Window: 1 << 20, PushMax: 256 << 10})
			sizes := []int{8, 16<<10 + 1, 64 << 10, 5, 256 << 10, 256<<10 + 1, 100 << 10, 1 << 20}
			bufLen := func(i, size int) int {
				if i == 6 {
					return size / 2 // truncated
				}
				return size
			}
			var want [][]byte
			pushes0, direct0, now0 := b.pushes.Load(), b.pushDirect.Load(), b.arrivedNow.Load()
			for i, size := range sizes {
				bs.posted = append(bs.posted, make([]byte, bufLen(i, size)))
				if !loopOnly {
					repark(t, a, as, b, bs)
				}
				msg := pattern(size, byte(i+1))
				want = append(want, msg[:bufLen(i, size)])
				h := &transport.Header{Kind: transport.KindTagged, Tag: uint64(i), Len: uint64(size)}
				if sendAll(t, a, as, b, bs, p, h, msg, transport.Op(100+i)) {
					as.sendDone[transport.Op(100+i)] = transport.OK
				}
				// one message at a time, so each PUSH finds its receive posted
				pollUntil(t, "the message", func() bool { return len(bs.got) == i+1 && !bs.pending() }, b, bs, a, as)
			}
			pollUntil(t, "send completions", func() bool { return doneAll(as, 100, len(sizes)) }, a, as, b, bs)
			for i, g := range bs.got {
				if g.code != transport.OK || g.hdr.Tag != uint64(i) || !bytes.Equal(g.data, want[i]) {
					t.Fatalf("message %d (%d bytes): code %d tag %d, %d bytes, equal %v", i, sizes[i], g.code, g.hdr.Tag, len(g.data), bytes.Equal(g.data, want[i]))
				}
			}
			pushed, direct := b.pushes.Load()-pushes0, b.pushDirect.Load()-direct0
			if pushed != 4 { // 16K+1, 64K, 256K, 100K
				t.Fatalf("%d messages pushed, want 4", pushed)
			}
			// The parked loop runs its queue every millisecond (own.go); a
			// header arriving just then is decoded by the loop and buffered.
			if !loopOnly && direct == 0 {
				t.Fatalf("none of %d pushes read straight into the posted receive", pushed)
			}
			if loopOnly && direct != 0 {
				t.Fatalf("the loop decoded %d pushes straight into receives", direct)
			}
			// eager and RTS frames: handed over from inside the decoder
			// (no handoff ring) when Poll reads the socket
			if now := b.arrivedNow.Load() - now0; loopOnly != (now == 0) {
				t.Fatalf("%d eager/RTS frames handed over by the decoder (loop only: %v)", now, loopOnly)
			}
		})
	}
}

// An unexpected pushed message waits in the transport's buffer: a later
// Fetch copies it out (at once when complete), Discard drops it, and its
// credit comes back either way (the sender is not blocked for good).
func TestPush_UnexpectedIsBufferedFetchedOrDiscarded(t *testing.T) {
	a, b, as, bs, p := parkedPair(t, Config{Window: 1 << 20, PushMax: 256 << 10})
	const size = 200 << 10
	const n = 12 // more than the window holds at once: credit must return
	for i := range n {
		h := &transport.Header{Kind: transport.KindMsg, Len: size}
		if sendAll(t, a, as, b, bs, p, h, pattern(size, byte(i)), transport.Op(10+i)) {
			as.sendDone[transport.Op(10+i)] = transport.OK
		}
		pollUntil(t, "the unexpected message", func() bool { return len(bs.ux) == i+1 }, b, bs, a, as)
		ar := bs.ux[i]
		if ar.eager != nil {
			t.Fatalf("message %d came eagerly", i)
		}
		if i%3 == 2 {
			b.Discard(ar.peer, ar.cookie)
			continue
		}
		dst := make([]byte, size)
		if i%3 == 1 {
			dst = dst[:size/3] // truncated
		}
		done, got, c := b.Fetch(ar.peer, ar.cookie, [][]byte{dst}, transport.Op(500+i))
		if !done {
			pollUntil(t, "FetchDone", func() bool { _, ok := bs.fetchDone[transport.Op(500+i)]; return ok }, b, bs, a, as)
			r := bs.fetchDone[transport.Op(500+i)]
			got, c = r.n, r.code
		}
		if c != transport.OK || got != len(dst) || !bytes.Equal(dst, pattern(size, byte(i))[:len(dst)]) {
			t.Fatalf("message %d: fetched %d of %d bytes, code %d, equal %v", i, got, len(dst), c, bytes.Equal(dst, pattern(size, byte(i))[:len(dst)]))
		}
	}
	pollUntil(t, "send completions", func() bool { return doneAll(as, 10, n) }, a, as, b, bs)
	if b.pushes.Load() == 0 {
		t.Fatal("no message was pushed")
	}
}

// A pushed message the engine refuses (its queues are full) is offered
// again later, in order, and nothing is lost.
func TestPush_RefusedIsOfferedAgainInOrder(t *testing.T) {
	a, b, as, bs, p := parkedPair(t, Config{})
	refusing := true
	bs.refuse = func() bool { return refusing }
	sizes := []int{100, 64 << 10, 300, 128 << 10, 2 << 20}
	for i, size := range sizes {
		bs.posted = append(bs.posted, make([]byte, size))
		h := &transport.Header{Kind: transport.KindMsg, Tag: uint64(i), Len: uint64(size)}
		if sendAll(t, a, as, b, bs, p, h, pattern(size, byte(i)), transport.Op(10+i)) {
			as.sendDone[transport.Op(10+i)] = transport.OK
		}
	}
	pollUntil(t, "refusals", func() bool { return bs.refused > 0 }, b, bs, a, as)
	refusing = false
	pollUntil(t, "every message", func() bool { return len(bs.got) == len(sizes) && !bs.pending() }, b, bs, a, as)
	for i, g := range bs.got {
		if g.code != transport.OK || !bytes.Equal(g.data, pattern(sizes[i], byte(i))) {
			t.Fatalf("message %d: code %d, %d bytes", i, g.code, len(g.data))
		}
	}
	pollUntil(t, "send completions", func() bool { return doneAll(as, 10, len(sizes)) }, a, as, b, bs)
}

// doneAll reports whether ops first .. first+n-1 completed successfully.
func doneAll(s *fakeSink, first, n int) bool {
	for i := range n {
		if c, ok := s.sendDone[transport.Op(first+i)]; !ok || c != transport.OK {
			return false
		}
	}
	return true
}

// A sender whose credit is low sends RTS instead of pushing: unexpected
// pushes never hold more than half the window, so a small message sent
// after them still goes (a receiver waiting for it does not deadlock).
func TestPush_LowCreditFallsBackToRendezvous(t *testing.T) {
	a, b, as, bs, p := parkedPair(t, Config{Window: 1 << 20, PushMax: 256 << 10})
	const size = 200 << 10
	for i := range 6 { // 1.2 MiB unexpected, never fetched: above the 1 MiB window
		h := &transport.Header{Kind: transport.KindMsg, Len: size}
		sendAll(t, a, as, b, bs, p, h, pattern(size, byte(i)), transport.Op(10+i))
	}
	h := &transport.Header{Kind: transport.KindMsg, Tag: 99, Len: 8}
	sendAll(t, a, as, b, bs, p, h, pattern(8, 9), 99)
	pollUntil(t, "the small message behind them", func() bool { return len(bs.ux) == 7 }, b, bs, a, as)
	if got := bs.ux[6]; got.hdr.Tag != 99 || !bytes.Equal(got.eager, pattern(8, 9)) {
		t.Fatalf("last arrival %+v", got.hdr)
	}
	if pushed := b.pushes.Load(); pushed == 0 || pushed == 6 {
		t.Fatalf("%d of 6 large messages pushed: want some pushed, the rest by rendezvous", pushed)
	}
}

// A peer that dies in the middle of a pushed payload fails the receive
// it was going into; nothing more is written there.
func TestPush_PeerDeathMidPayloadFailsTheReceive(t *testing.T) {
	a, b, as, bs, p := parkedPair(t, Config{})
	const size = 1 << 20
	cfgPush := a.cfg.PushMax
	if cfgPush < 64<<10 {
		t.Fatalf("PushMax %d", cfgPush)
	}
	bs.posted = append(bs.posted, make([]byte, cfgPush))
	// Write a PUSH header and half its payload by hand, then close.
	a.peer(p).mu.Lock()
	tc := a.peer(p).tx
	var hb [hdrSize]byte
	putHeader(hb[:], &frame{op: opPush, kind: uint8(transport.KindMsg), length: uint64(cfgPush)})
	a.peer(p).credit -= int64(hdrSize + cfgPush)
	_, err := tc.writeDirect(hb[:], [][]byte{pattern(cfgPush/2, 1)})
	a.peer(p).mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the push to start", func() bool { return len(bs.got) == 1 }, b, bs)
	a.Close()
	pollUntil(t, "the receive to fail", func() bool { return !bs.pending() }, b, bs)
	if g := bs.got[0]; g.code == transport.OK {
		t.Fatalf("half a pushed payload completed the receive (%d bytes)", len(g.data))
	}
	_ = size
	_ = as
}

// An unexpected pushed message whose payload arrived is the receiver's,
// as an eager one in the engine's buffer is: the sender may finish and
// close before the receive is posted, and the receive still gets it.
func TestPush_UnexpectedOutlivesTheSender(t *testing.T) {
	a, b, as, bs, p := parkedPair(t, Config{})
	const size = 100 << 10
	h := &transport.Header{Kind: transport.KindMsg, Len: size}
	if !sendAll(t, a, as, b, bs, p, h, pattern(size, 7), 10) {
		pollUntil(t, "the send", func() bool { _, ok := as.sendDone[10]; return ok }, a, as, b, bs)
	}
	pollUntil(t, "the unexpected message", func() bool { return len(bs.ux) == 1 }, b, bs)
	a.Close()
	pollUntil(t, "the peer's end", func() bool { return len(bs.downs) > 0 || b.connsTo(bs.ux[0].peer) == 0 }, b, bs)
	ar := bs.ux[0]
	dst := make([]byte, size)
	done, n, c := b.Fetch(ar.peer, ar.cookie, [][]byte{dst}, 500)
	if !done || c != transport.OK || n != size || !bytes.Equal(dst, pattern(size, 7)) {
		t.Fatalf("Fetch after the sender closed: done %v n %d code %d equal %v", done, n, c, bytes.Equal(dst, pattern(size, 7)))
	}
}

// Credit owed for a quarter of the window rides in front of the next frame
// the receiver writes to the sender (no CREDIT frame of its own), and the
// sender gets its whole window back with it.
func TestPush_CreditRidesOnTheAnswer(t *testing.T) {
	a, b, as, bs, p := parkedPair(t, Config{})
	const size = 64 << 10
	n := int(a.cfg.Window)/4/size + 1 // past a quarter, short of a half
	for i := range n {
		bs.posted = append(bs.posted, make([]byte, size))
		if sendAll(t, a, as, b, bs, p, &transport.Header{Kind: transport.KindMsg, Len: size}, pattern(size, byte(i)), transport.Op(10+i)) {
			as.sendDone[transport.Op(10+i)] = transport.OK
		}
	}
	pollUntil(t, "the messages", func() bool { return len(bs.got) == n && !bs.pending() }, b, bs, a, as)
	pa := a.peer(p)
	q, _ := b.Resolve(a.Name())
	pb := b.peer(q)
	pb.mu.Lock()
	owed := pb.owed
	pb.mu.Unlock()
	if owed < b.creditSoon() {
		t.Fatalf("receiver owes %d bytes of credit after %d messages, want at least %d held for a ride", owed, n, b.creditSoon())
	}
	frames := b.creditFrames.Load()
	if sendAll(t, b, bs, a, as, q, &transport.Header{Kind: transport.KindMsg, Len: 8}, pattern(8, 9), 99) {
		bs.sendDone[99] = transport.OK
	}
	pollUntil(t, "the credit", func() bool {
		pa.mu.Lock()
		defer pa.mu.Unlock()
		return pa.credit == pa.peerWindow
	}, a, as, b, bs)
	if got := b.creditFrames.Load(); got != frames {
		t.Fatalf("the receiver wrote %d CREDIT frames of their own", got-frames)
	}
}

// With the default window a 1 MiB message goes as one PUSH (no
// clear-to-send round trip; TestPush_PostedReceiveGetsThePayloadDirectly
// covers the read straight into the posted receive, which a parked
// loop's tick can preempt by decoding the header itself).
func TestPush_DefaultsPushOneMiB(t *testing.T) {
	a, b, as, bs, p := parkedPair(t, Config{})
	const size = 1 << 20
	pushes0 := b.pushes.Load()
	for i := range 3 {
		bs.posted = append(bs.posted, make([]byte, size))
		repark(t, a, as, b, bs)
		msg := pattern(size, byte(i))
		h := &transport.Header{Kind: transport.KindMsg, Len: size}
		sendAll(t, a, as, b, bs, p, h, msg, transport.Op(10+i))
		pollUntil(t, "the message", func() bool { return len(bs.got) == i+1 && !bs.pending() }, b, bs, a, as)
		if g := bs.got[i]; g.code != transport.OK || !bytes.Equal(g.data, msg) {
			t.Fatalf("message %d: code %d, %d bytes", i, g.code, len(g.data))
		}
		// The first goes as PUSH; the next ones only once the first's
		// credit came back (here, riding on a clear-to-send), as half the
		// window must stay free after a push.
		if i == 0 && b.pushes.Load()-pushes0 != 1 {
			t.Fatal("the first 1 MiB message was not pushed")
		}
	}
}
