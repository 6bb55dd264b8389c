package shm

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// TestTransport_CloseWritesQueuedACKs: a receiver that closes while the
// ACK of a rendezvous message it read (Fetch) or dropped unread (Discard,
// as the engine does for unexpected messages at Close and for stray
// collective messages) waits for room in its ring to the sender gives a
// live sender that keeps progressing time to make the room (Close's
// linger), so the sender's send completes without error, as it does when
// the ACK finds room at once. The receiver's ring to the sender is full
// of its own messages, unread, when the announcement comes (fillBack);
// the first message's size varies the room left.
//
// Before, Close dropped the queued ACK: the sender's send failed with
// ECONNRESET once it found the receiver gone, although the payload had
// been read (fetch) or dropped as the application asked (discard).
func TestTransport_CloseWritesQueuedACKs(t *testing.T) {
	testDir(t)
	for _, how := range []string{"fetch", "discard"} {
		queued := 0
		for _, first := range []int{8, 16, 24} {
			t.Run(fmt.Sprintf("%s/first=%d", how, first), func(t *testing.T) {
				if how == "fetch" && !ProbeCMA().Available {
					t.Skip("no single copy here")
				}
				p := newTPair(t, TransportConfig{MinRingSize: 4 << 10, RingSize: 512 << 10, CMAMin: 1})
				defer func() { _ = p.a.Close() }()
				p.sb.drop = how == "discard"
				big := seqMsg(1<<20, 32<<10) // single copy, not split (SplitMin)
				h := transport.Header{Kind: transport.KindTagged, Tag: 7, Len: uint64(len(big))}
				if done, c := p.a.Send(p.ab, &h, [][]byte{big}, 1); done || c != 0 {
					t.Fatalf("rendezvous send: done %v code %d", done, c)
				}
				sent := fillBack(t, p, first)
				// b reads the announcement (and, fetching, the payload by
				// single copy) and drops or reads the message.
				deadline := time.Now().Add(20 * time.Second)
				for len(p.sb.got) == 0 {
					if time.Now().After(deadline) || len(p.sb.errs) > 0 {
						t.Fatalf("b did not take the message (errors %v)", p.sb.errs)
					}
					p.b.Poll(p.sb)
				}
				if !ackQueued(p.b.peers[p.ba]) {
					return // its ACK found room (first varies the room left)
				}
				queued++
				closed := make(chan error, 1)
				go func() { closed <- p.b.Close() }()
				for p.sa.sent == 0 {
					if time.Now().After(deadline) {
						t.Fatalf("the sender's send never completed (it got %d of b's %d messages)", p.sa.n, sent)
					}
					if !p.a.Poll(p.sa) {
						time.Sleep(10 * time.Microsecond)
					}
				}
				if err := <-closed; err != nil {
					t.Fatalf("b's Close: %v", err)
				}
				if len(p.sa.errs) > 0 {
					t.Fatalf("the sender's send failed: %v (b closed with its ACK queued)", p.sa.errs)
				}
				if p.sb.n != 1 || len(p.sb.errs) > 0 {
					t.Fatalf("b: %d messages complete, errors %v", p.sb.n, p.sb.errs)
				}
				if how == "fetch" && !bytes.Equal(p.sb.got[0], big) {
					t.Fatal("b read the payload wrong")
				}
			})
		}
		if queued == 0 {
			t.Errorf("%s: no ACK had to wait for room: the test missed its case", how)
		}
	}
}

// ackQueued reports whether an ACK to p waits for room.
func ackQueued(p *peer) bool {
	for _, c := range p.ctrl {
		if c.typ == recACK {
			return true
		}
	}
	return false
}
