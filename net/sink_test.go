package net

import (
	"bytes"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// arrival is one message a fakeSink accepted.
type arrival struct {
	peer   transport.Peer
	hdr    transport.Header
	eager  []byte // copy; nil for rendezvous
	cookie uint64
}

type fetchResult struct {
	n    int
	code transport.Code
}

// fakeSink records what Poll delivers. refuse, when set, decides whether
// Arrive takes a message.
type fakeSink struct {
	arrivals  []arrival
	sendDone  map[transport.Op]transport.Code
	fetchDone map[transport.Op]fetchResult
	downs     []transport.Code
	refuse    func() bool
	refused   int
}

func newSink() *fakeSink {
	return &fakeSink{sendDone: map[transport.Op]transport.Code{}, fetchDone: map[transport.Op]fetchResult{}}
}

func (s *fakeSink) Arrive(p transport.Peer, h *transport.Header, eager []byte, cookie uint64) bool {
	if s.refuse != nil && s.refuse() {
		s.refused++
		return false
	}
	a := arrival{peer: p, hdr: *h, cookie: cookie}
	if eager != nil {
		a.eager = append([]byte{}, eager...)
	}
	s.arrivals = append(s.arrivals, a)
	return true
}

func (s *fakeSink) SendDone(op transport.Op, c transport.Code) { s.sendDone[op] = c }
func (s *fakeSink) FetchDone(op transport.Op, n int, c transport.Code) {
	s.fetchDone[op] = fetchResult{n, c}
}
func (s *fakeSink) PeerDown(p transport.Peer, c transport.Code) { s.downs = append(s.downs, c) }

func listen(t testing.TB, cfg Config) *Transport {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	tr, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// pollUntil polls the given transports until cond holds or the test's
// deadline budget (20 s) runs out.
func pollUntil(t testing.TB, what string, cond func() bool, pairs ...any) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		work := false
		for i := 0; i < len(pairs); i += 2 {
			if pairs[i].(*Transport).Poll(pairs[i+1].(transport.Sink)) {
				work = true
			}
		}
		if !work {
			pairs[0].(*Transport).Wait(time.Millisecond)
		}
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed) + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}

func sum(b []byte) [32]byte { return sha256.Sum256(b) }

// sendAll sends msg from a to peer, retrying on EAgain while polling both
// sides. It returns whether the send completed at once.
func sendAll(t testing.TB, a *Transport, as transport.Sink, b *Transport, bs transport.Sink, p transport.Peer, h *transport.Header, msg []byte, op transport.Op) bool {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		done, c := a.Send(p, h, [][]byte{msg}, op)
		if c != transport.EAgain {
			if c != transport.OK {
				t.Fatalf("Send: code %d", c)
			}
			return done
		}
		if time.Now().After(deadline) {
			t.Fatal("Send: EAgain for 20 s")
		}
		a.Poll(as)
		b.Poll(bs)
	}
}

// receive completes rendezvous arrivals with Fetch and checks payloads.
func checkArrival(t testing.TB, b *Transport, bs *fakeSink, as *fakeSink, a *Transport, ar arrival, want []byte, op transport.Op) {
	t.Helper()
	if ar.hdr.Len != uint64(len(want)) {
		t.Fatalf("arrival length %d, want %d", ar.hdr.Len, len(want))
	}
	if ar.eager != nil {
		if !bytes.Equal(ar.eager, want) {
			t.Fatalf("eager payload of %d bytes differs", len(want))
		}
		return
	}
	dst := make([]byte, len(want))
	done, n, c := b.Fetch(ar.peer, ar.cookie, [][]byte{dst}, op)
	if c != transport.OK {
		t.Fatalf("Fetch: code %d", c)
	}
	if !done {
		pollUntil(t, "FetchDone", func() bool { _, ok := bs.fetchDone[op]; return ok }, b, bs, a, as)
		r := bs.fetchDone[op]
		n, c = r.n, r.code
	}
	if c != transport.OK || n != len(want) {
		t.Fatalf("FetchDone n=%d code=%d, want %d OK", n, c, len(want))
	}
	if sum(dst) != sum(want) {
		t.Fatalf("fetched payload of %d bytes differs", len(want))
	}
}
