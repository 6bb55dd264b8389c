package shm

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// opSink is a sender's sink: it counts the completions of each send.
type opSink struct {
	done map[transport.Op][]transport.Code
}

func newOpSink() *opSink { return &opSink{done: map[transport.Op][]transport.Code{}} }

func (s *opSink) Arrive(transport.Peer, *transport.Header, []byte, uint64) bool { return true }
func (s *opSink) SendDone(op transport.Op, c transport.Code) {
	s.done[op] = append(s.done[op], c)
}
func (s *opSink) FetchDone(transport.Op, int, transport.Code) {}
func (s *opSink) PeerDown(transport.Peer, transport.Code)     {}

// rxSink is a receiver's sink that takes every rendezvous message one
// way: "fetch" reads it whole, "truncate" into a buffer half its size,
// "discard" drops it unread (Transport.Discard), "hold" keeps it
// unmatched.
type rxSink struct {
	t       *testing.T
	tr      *Transport
	mode    string
	arrived int
	n       int // messages complete (fetched or dropped)
	got     map[transport.Op][]byte
	want    map[transport.Op]int // op -> full length
	errs    []transport.Code
	next    transport.Op
}

func newRxSink(t *testing.T, tr *Transport, mode string) *rxSink {
	return &rxSink{t: t, tr: tr, mode: mode, got: map[transport.Op][]byte{}, want: map[transport.Op]int{}}
}

func (s *rxSink) Arrive(p transport.Peer, h *transport.Header, eager []byte, cookie uint64) bool {
	s.arrived++
	if eager != nil {
		s.t.Errorf("a %d-byte payload arrived inline: the test wants bounce sends", len(eager))
		s.n++
		return true
	}
	switch s.mode {
	case "hold":
		return true
	case "discard":
		s.tr.Discard(p, cookie)
		s.n++
		return true
	}
	s.next++
	op := s.next
	buf := make([]byte, h.Len)
	if s.mode == "truncate" {
		buf = buf[:h.Len/2]
	}
	s.got[op], s.want[op] = buf, int(h.Len)
	done, n, c := s.tr.Fetch(p, cookie, [][]byte{buf}, op)
	switch {
	case c != 0:
		s.errs = append(s.errs, c)
	case done:
		s.FetchDone(op, n, 0)
	}
	return true
}

func (s *rxSink) SendDone(transport.Op, transport.Code) {}

func (s *rxSink) FetchDone(op transport.Op, n int, c transport.Code) {
	if c != 0 {
		s.errs = append(s.errs, c)
		return
	}
	if n != len(s.got[op]) {
		s.t.Errorf("fetch %d: %d bytes into a %d-byte buffer", op, n, len(s.got[op]))
	}
	s.got[op] = s.got[op][:n]
	s.n++
}

func (s *rxSink) PeerDown(transport.Peer, transport.Code) {}

// bounceSend sends size bytes from a to b as message seq, retrying
// while the transport says EAgain (maxBounce copies in flight), polling
// both sides; it fails the test when the send completes in Send (it
// must bounce).
func bounceSend(t *testing.T, a, b *Transport, sa, sb transport.Sink, pb transport.Peer, seq, size int) {
	t.Helper()
	h := transport.Header{Kind: transport.KindMsg, Len: uint64(size)}
	m := seqMsg(seq, size)
	deadline := time.Now().Add(20 * time.Second)
	for {
		done, c := a.Send(pb, &h, [][]byte{m}, transport.Op(seq+1))
		if c == 0 {
			if done {
				t.Fatalf("send %d of %d bytes completed in Send", seq, size)
			}
			clear(m) // the transport has its own copy
			return
		}
		if c != transport.EAgain || time.Now().After(deadline) {
			t.Fatalf("send %d of %d bytes: code %d (%v)", seq, size, c, a.LastError())
		}
		a.Poll(sa)
		b.Poll(sb)
	}
}

// pollBoth polls a and b with their sinks until cond holds, failing the
// test after 20 s.
func pollBoth(t *testing.T, what string, a, b *Transport, sa, sb transport.Sink, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		x, y := a.Poll(sa), b.Poll(sb)
		if !x && !y {
			time.Sleep(10 * time.Microsecond)
		}
	}
}

// checkBounceCopies fails the test when a keeps a bounce copy or a held
// send for peer pb after every send completed.
func checkBounceCopies(t *testing.T, a *Transport, pb transport.Peer) {
	t.Helper()
	if a.bounces == 0 || a.bounces > maxBounce || len(a.bounceFree) != a.bounces {
		t.Errorf("%d bounce copies made (at most %d), %d free: copies leaked", a.bounces, maxBounce, len(a.bounceFree))
	}
	if p := a.peers[pb]; len(p.held) != 0 || len(p.streams) != 0 {
		t.Errorf("%d sends still held, %d streams", len(p.held), len(p.streams))
	}
}

// Bounce sends (a crowded shm directory: the small ring cannot grow), 3
// times maxBounce of them, to a receiver that reads each whole, into a
// buffer half its size, or drops it unread, with and without single
// copy: every send completes exactly once, without error, the receiver
// gets every payload's leading bytes intact, and at the end every bounce
// copy is back on the free list (none leaked, at most maxBounce made).
func TestTransport_BounceSendsCompleteOnceAndGiveTheirCopiesBack(t *testing.T) {
	crowdedDir(t)
	const size, n = 3000, 3 * maxBounce
	for _, noCMA := range []bool{false, true} {
		for _, mode := range []string{"fetch", "truncate", "discard"} {
			t.Run(fmt.Sprintf("nocma=%v/%s", noCMA, mode), func(t *testing.T) {
				p := newTPair(t, TransportConfig{NoCMA: noCMA})
				sa, sb := newOpSink(), newRxSink(t, p.b, mode)
				for i := range n {
					bounceSend(t, p.a, p.b, sa, sb, p.ab, i, size)
				}
				pollBoth(t, "every completion", p.a, p.b, sa, sb, func() bool { return len(sa.done) == n && sb.n == n })
				for range 100 { // no second completion comes later
					p.a.Poll(sa)
					p.b.Poll(sb)
				}
				for i := range n {
					if d := sa.done[transport.Op(i+1)]; len(d) != 1 || d[0] != 0 {
						t.Fatalf("send %d completed %v (want once, without error)", i, d)
					}
				}
				if len(sb.errs) != 0 {
					t.Fatalf("receive errors %v", sb.errs)
				}
				want := size
				if mode == "truncate" {
					want = size / 2
				}
				for op, g := range sb.got { // arrived in order: op i+1 is message i
					if len(g) != want || !bytes.Equal(g, seqMsg(int(op)-1, size)[:want]) {
						t.Fatalf("message %d garbled (%d bytes, want %d)", op-1, len(g), want)
					}
				}
				checkBounceCopies(t, p.a, p.ab)
			})
		}
	}
}

// A bounce send whose receiver goes away without reading it fails once,
// with an error, within PeerTimeout or so, and gives its copy back; one
// whose sender closes first fails once with ECANCELED and its copy is
// parked (the receiver may still read it), not reused.
func TestTransport_BounceSendFailsOnceWhenEitherSideCloses(t *testing.T) {
	crowdedDir(t)
	for _, noCMA := range []bool{false, true} {
		t.Run(fmt.Sprintf("nocma=%v/ReceiverCloses", noCMA), func(t *testing.T) {
			p := newTPair(t, TransportConfig{NoCMA: noCMA})
			sa, sb := newOpSink(), newRxSink(t, p.b, "hold")
			bounceSend(t, p.a, p.b, sa, sb, p.ab, 0, 3000)
			pollBoth(t, "the announcement", p.a, p.b, sa, sb, func() bool { return sb.arrived == 1 })
			_ = p.b.Close()
			deadline := time.Now().Add(20 * time.Second)
			for len(sa.done) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the send to a closed receiver never completed")
				}
				if !p.a.Poll(sa) {
					time.Sleep(100 * time.Microsecond)
				}
			}
			for range 100 {
				p.a.Poll(sa)
			}
			if d := sa.done[1]; len(d) != 1 || d[0] == 0 {
				t.Fatalf("send completed %v, want once with an error", d)
			}
			checkBounceCopies(t, p.a, p.ab)
		})
		t.Run(fmt.Sprintf("nocma=%v/SenderCloses", noCMA), func(t *testing.T) {
			p := newTPair(t, TransportConfig{NoCMA: noCMA})
			sa, sb := newOpSink(), newRxSink(t, p.b, "hold")
			bounceSend(t, p.a, p.b, sa, sb, p.ab, 0, 3000)
			pollBoth(t, "the announcement", p.a, p.b, sa, sb, func() bool { return sb.arrived == 1 })
			parked.Lock()
			before := len(parked.bufs)
			parked.Unlock()
			a := p.a
			_ = a.Close() // lingers up to lingerMax for the receiver, which does not read
			if d := sa.done[1]; len(d) != 1 || d[0] != transport.ECanceled {
				t.Fatalf("send completed %v, want once with ECANCELED", d)
			}
			parked.Lock()
			after := len(parked.bufs)
			parked.Unlock()
			if after != before+1 {
				t.Fatalf("%d bounce copies parked, want 1", after-before)
			}
			if len(a.bounceFree) != 0 {
				t.Fatalf("the parked copy is on the free list too")
			}
		})
	}
}
