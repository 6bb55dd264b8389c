package net

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// A sink that refuses messages makes the transport hold and redeliver them
// in order; once the window is spent the sender gets EAgain; nothing is lost.
// With the receiver's loop busy-polling (spin.go), the bytes a refused
// decode left in gnet's buffer must still come before newer ones.
func TestFlowControl_RefusingSinkLosesNothing(t *testing.T) {
	for _, spin := range []bool{false, true} {
		t.Run(fmt.Sprintf("spin=%v", spin), func(t *testing.T) { refusingSinkLosesNothing(t, spin) })
	}
}

func refusingSinkLosesNothing(t *testing.T, spin bool) {
	a := listen(t, Config{})
	cfg := Config{Window: minWindow}
	if !spin {
		cfg.SpinMax = -1
	}
	b := listen(t, cfg)
	as, bs := newSink(), newSink()
	p, _ := a.Resolve(b.Name())
	refusing := true
	calls := 0
	bs.refuse = func() bool { calls++; return refusing || calls%3 == 0 }

	const n = 2000
	const size = 1000
	sent, sawAgain := 0, false
	deadline := time.Now().Add(20 * time.Second)
	for sent < n {
		if time.Now().After(deadline) {
			t.Fatalf("sent %d of %d", sent, n)
		}
		h := &transport.Header{Kind: transport.KindTagged, Tag: uint64(sent), Len: size}
		_, c := a.Send(p, h, [][]byte{pattern(size, byte(sent))}, transport.Op(sent+1))
		switch c {
		case transport.OK:
			sent++
		case transport.EAgain:
			sawAgain = true
			refusing = false // the engine drains from now on (refusing every third)
			b.Poll(bs)
			a.Poll(as)
		default:
			t.Fatalf("Send: %d", c)
		}
	}
	if !sawAgain {
		t.Fatal("the sender never saw EAgain although the receiver refused everything")
	}
	pollUntil(t, "all messages", func() bool { return len(bs.arrivals) == n }, b, bs, a, as)
	for i, ar := range bs.arrivals {
		if ar.hdr.Tag != uint64(i) || !bytes.Equal(ar.eager, pattern(size, byte(i))) {
			t.Fatalf("message %d: tag %d, payload intact %v", i, ar.hdr.Tag, bytes.Equal(ar.eager, pattern(size, byte(i))))
		}
	}
	if bs.refused == 0 {
		t.Fatal("sink never refused")
	}
}

// A refusing peer does not block another peer's messages.
func TestFlowControl_RefusalIsPerPeer(t *testing.T) {
	a := listen(t, Config{})
	c := listen(t, Config{})
	b := listen(t, Config{})
	as, cs, bs := newSink(), newSink(), newSink()
	pa, _ := a.Resolve(b.Name())
	pc, _ := c.Resolve(b.Name())
	aPeer, _ := b.Resolve(a.Name())
	bs.refuse = nil
	var refusedA bool
	sink := &perPeerSink{fakeSink: bs, refusePeer: aPeer, refusing: &refusedA}
	refusedA = true
	h := &transport.Header{Kind: transport.KindMsg, Len: 4}
	sendAll(t, a, as, b, newSink(), pa, h, []byte("from"), 1)
	pollUntil(t, "a's message refused", func() bool { return sink.refused > 0 }, b, sink, a, as)
	sendAll(t, c, cs, b, newSink(), pc, h, []byte("othr"), 1)
	pollUntil(t, "c's message despite a being held", func() bool { return len(bs.arrivals) == 1 }, b, sink, c, cs)
	if string(bs.arrivals[0].eager) != "othr" {
		t.Fatalf("got %q first", bs.arrivals[0].eager)
	}
	refusedA = false
	pollUntil(t, "a's message redelivered", func() bool { return len(bs.arrivals) == 2 }, b, sink, a, as)
	if string(bs.arrivals[1].eager) != "from" {
		t.Fatalf("got %q", bs.arrivals[1].eager)
	}
}

type perPeerSink struct {
	*fakeSink
	refusePeer transport.Peer
	refusing   *bool
}

func (s *perPeerSink) Arrive(p transport.Peer, h *transport.Header, eager []byte, cookie uint64) bool {
	if p == s.refusePeer && *s.refusing {
		s.refused++
		return false
	}
	return s.fakeSink.Arrive(p, h, eager, cookie)
}

// Both sides send to each other before either connection exists: every
// message arrives, in order, whichever connections win.
func TestSimultaneousConnect_BothDirectionsInOrder(t *testing.T) {
	a := listen(t, Config{})
	b := listen(t, Config{})
	as, bs := newSink(), newSink()
	pa, _ := a.Resolve(b.Name())
	pb, _ := b.Resolve(a.Name())
	const n = 300
	for i := 0; i < n; i++ {
		h := &transport.Header{Kind: transport.KindTagged, Tag: uint64(i), Len: 8}
		if _, c := a.Send(pa, h, [][]byte{pattern(8, byte(i))}, 0); c != transport.OK {
			t.Fatalf("a.Send %d: %d", i, c)
		}
		if _, c := b.Send(pb, h, [][]byte{pattern(8, byte(i))}, 0); c != transport.OK {
			t.Fatalf("b.Send %d: %d", i, c)
		}
	}
	pollUntil(t, "both directions", func() bool { return len(as.arrivals) == n && len(bs.arrivals) == n }, a, as, b, bs)
	for i := 0; i < n; i++ {
		if as.arrivals[i].hdr.Tag != uint64(i) || bs.arrivals[i].hdr.Tag != uint64(i) {
			t.Fatalf("message %d out of order", i)
		}
		if as.arrivals[i].peer != pa || bs.arrivals[i].peer != pb {
			t.Fatalf("message %d reported from the wrong peer", i)
		}
	}
	if len(as.downs)+len(bs.downs) != 0 {
		t.Fatalf("peer downs: %v %v", as.downs, bs.downs)
	}
}

func TestAuth_Handshake(t *testing.T) {
	cases := []struct {
		name     string
		keyA     string
		keyB     string
		accepted bool
	}{
		{"SameKeyAccepted", "secret", "secret", true},
		{"PeerWithoutKeyRefused", "secret", "", false},
		{"KeyedPeerRefusedByKeylessEndpoint", "", "secret", false},
		{"WrongKeyRefused", "secret", "other", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := listen(t, Config{AuthKey: []byte(tc.keyA)})
			b := listen(t, Config{AuthKey: []byte(tc.keyB)})
			as, bs := newSink(), newSink()
			p, _ := a.Resolve(b.Name())
			h := &transport.Header{Kind: transport.KindMsg, Len: 5}
			done, c := a.Send(p, h, [][]byte{[]byte("hello")}, 7)
			if c != transport.OK || done {
				t.Fatalf("Send before the handshake: done=%v code=%d", done, c)
			}
			if tc.accepted {
				pollUntil(t, "delivery", func() bool { return len(bs.arrivals) == 1 && len(as.sendDone) == 1 }, a, as, b, bs)
				if as.sendDone[7] != transport.OK {
					t.Fatalf("SendDone %d", as.sendDone[7])
				}
				return
			}
			pollUntil(t, "refusal", func() bool { return len(as.sendDone) == 1 && len(as.downs) == 1 }, a, as, b, bs)
			if as.sendDone[7] == transport.OK || as.downs[0] == transport.OK {
				t.Fatalf("refused handshake completed with OK")
			}
			if len(bs.arrivals) != 0 {
				t.Fatal("a message crossed a refused handshake")
			}
		})
	}
}

// Connecting to a port nobody listens on is an error completion, not a hang.
func TestDial_RefusedIsAnErrorCompletion(t *testing.T) {
	a := listen(t, Config{})
	gone := listen(t, Config{})
	addr := gone.Name()
	gone.Close()
	as := newSink()
	p, _ := a.Resolve(addr)
	h := &transport.Header{Kind: transport.KindMsg, Len: 1}
	if _, c := a.Send(p, h, [][]byte{{1}}, 9); c != transport.OK {
		t.Fatalf("Send: %d", c)
	}
	pollUntil(t, "refusal", func() bool { return len(as.sendDone) == 1 }, a, as)
	if as.sendDone[9] != transport.EConnRefuse {
		t.Fatalf("SendDone code %d, want %d", as.sendDone[9], transport.EConnRefuse)
	}
}

// Close fails held operations with ECanceled through the last sink.
func TestClose_FailsHeldOpsWithCanceled(t *testing.T) {
	a := listen(t, Config{})
	b := listen(t, Config{})
	as, bs := newSink(), newSink()
	p, _ := a.Resolve(b.Name())
	h := &transport.Header{Kind: transport.KindMsg, Len: 1 << 20}
	done, c := a.Send(p, h, [][]byte{make([]byte, 1<<20)}, 3)
	if done || c != transport.OK {
		t.Fatalf("rendezvous Send: %v %d", done, c)
	}
	pollUntil(t, "RTS", func() bool { return len(bs.arrivals) == 1 }, b, bs, a, as)
	a.Close()
	if as.sendDone[3] != transport.ECanceled {
		t.Fatalf("SendDone after Close: %d, want ECanceled", as.sendDone[3])
	}
	if _, c := a.Send(p, h, [][]byte{make([]byte, 1<<20)}, 4); c != transport.ECanceled {
		t.Fatalf("Send after Close: %d", c)
	}
}

// Resolve refuses what is not a sockaddr with a port.
func TestResolve_RejectsBadAddresses(t *testing.T) {
	a := listen(t, Config{})
	for _, b := range [][]byte{nil, {2, 0}, make([]byte, 16), append([]byte{10, 0, 0, 0}, make([]byte, 24)...)} {
		if _, c := a.Resolve(b); c != transport.EInval {
			t.Fatalf("Resolve(%x) = %d, want EInval", b, c)
		}
	}
	if _, c := a.Resolve(a.Name()); c != transport.OK {
		t.Fatalf("Resolve(own name) = %d", c)
	}
}
