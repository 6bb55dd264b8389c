package shm

import (
	"fmt"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// TestTransport_DiscardCompletesOnlyWithItsACKWritten: a rendezvous
// message dropped unread with DiscardOp (the engine's FI_DISCARD)
// completes only once its ACK (status 1) is in the receiver's ring to
// the sender, so that the sender's send completes with the sender alone
// progressing after that. The receiver's ring to the sender is full of
// its own messages, unread, when the announcement comes; the first
// message's size varies the room left (16 and 8 bytes do not take the
// 24-byte ACK record). The receiver progresses until its discard
// completes (the sender too while it does not), then only the sender
// (20 s deadline).
//
// Before DiscardOp (Discard alone, which the engine reported complete at
// once) the ACK waited for the receiver's next progress: the sender,
// draining the receiver's 127 messages, waited for good (first 16, 24).
func TestTransport_DiscardCompletesOnlyWithItsACKWritten(t *testing.T) {
	testDir(t)
	for _, noCMA := range []bool{false, true} {
		for _, first := range []int{8, 16, 24} {
			t.Run(fmt.Sprintf("nocma=%v/first=%d", noCMA, first), func(t *testing.T) {
				p := newTPair(t, TransportConfig{MinRingSize: 4 << 10, RingSize: 512 << 10, NoCMA: noCMA})
				p.sb.discard = true
				big := seqMsg(1<<20, 64<<10)
				h := transport.Header{Kind: transport.KindTagged, Tag: 7, Len: uint64(len(big))}
				if done, c := p.a.Send(p.ab, &h, [][]byte{big}, 1); done || c != 0 {
					t.Fatalf("rendezvous send: done %v code %d", done, c)
				}
				sent := fillBack(t, p, first)
				deadline := time.Now().Add(20 * time.Second)
				for p.sb.n == 0 {
					if time.Now().After(deadline) || len(p.sb.errs) > 0 {
						t.Fatalf("the discard did not complete (errors %v)", p.sb.errs)
					}
					p.b.Poll(p.sb)
					if p.sb.n == 0 {
						p.a.Poll(p.sa)
					}
				}
				deadline = time.Now().Add(20 * time.Second)
				for p.sa.sent == 0 {
					if time.Now().After(deadline) {
						t.Fatalf("b sent %d: the sender alone never completed its send (it got %d of b's messages)", sent, p.sa.n)
					}
					if !p.a.Poll(p.sa) {
						time.Sleep(10 * time.Microsecond)
					}
				}
				if len(p.sa.errs)+len(p.sb.errs) > 0 {
					t.Fatal(p.sa.errs, p.sb.errs)
				}
				if p.sa.n != sent {
					t.Fatalf("the sender got %d of b's %d messages", p.sa.n, sent)
				}
			})
		}
	}
}
