package shm

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gofi-dev/fi/transport"
)

// TestTransport_ReceiveCompletesOnlyWithItsACKWritten: a rendezvous
// receive read by single copy completes only once its ACK is in the
// receiver's ring to the sender, so that the sender's send completes
// with the sender alone progressing after that. The receiver's ring to
// the sender is full (its own messages, unread) when the announcement
// comes; the first message's size varies the room left (16 and 8 bytes
// do not take the 24-byte ACK record).
//
// On 92ecf81 the receive completed at once with the ACK queued for room,
// written only at the receiver's next progress: the sender, draining the
// receiver's messages, waited for good.
func TestTransport_ReceiveCompletesOnlyWithItsACKWritten(t *testing.T) {
	testDir(t)
	if !ProbeCMA().Available {
		t.Skip("no single copy here")
	}
	for _, first := range []int{8, 16, 24} {
		t.Run(fmt.Sprint(first), func(t *testing.T) {
			p := newTPair(t, TransportConfig{MinRingSize: 4 << 10, RingSize: 512 << 10, CMAMin: 1})
			big := seqMsg(1<<20, 64<<10)
			h := transport.Header{Kind: transport.KindTagged, Tag: 7, Len: uint64(len(big))}
			if done, c := p.a.Send(p.ab, &h, [][]byte{big}, 1); done || c != 0 {
				t.Fatalf("rendezvous send: done %v code %d", done, c)
			}
			sent := fillBack(t, p, first)
			// The receiver progresses until its receive completes, the
			// sender too while it does not; then only the sender.
			for i := 0; p.sb.n == 0; i++ {
				if i == 100000 || len(p.sb.errs) > 0 {
					t.Fatalf("the receive did not complete (errors %v)", p.sb.errs)
				}
				p.b.Poll(p.sb)
				if p.sb.n == 0 {
					p.a.Poll(p.sa)
				}
			}
			for idle := 0; p.sa.sent == 0; {
				before := p.sa.n
				p.a.Poll(p.sa)
				if p.sa.n != before {
					idle = 0
				} else if idle++; idle == 10000 {
					t.Fatalf("b sent %d: the sender alone never completed its send (it got %d of b's messages)", sent, p.sa.n)
				}
			}
			if len(p.sa.errs) > 0 || !bytes.Equal(p.sb.got[0], big) {
				t.Fatalf("errors %v, payload equal %v", p.sa.errs, bytes.Equal(p.sb.got[0], big))
			}
		})
	}
}

// fillBack fills b's ring to a with tagged messages until it is full
// (EAgain) and returns how many went: the first of first bytes, the rest
// of 8, each numbered by seqMsg.
func fillBack(t *testing.T, p *tpair, first int) int {
	t.Helper()
	sent := 0
	for ; sent < 1000; sent++ {
		m := seqMsg(sent, 8)
		if sent == 0 {
			m = seqMsg(sent, first)
		}
		hh := transport.Header{Kind: transport.KindTagged, Tag: 7, Len: uint64(len(m))}
		if _, c := p.b.Send(p.ba, &hh, [][]byte{m}, 2); c == transport.EAgain {
			break
		} else if c != 0 {
			t.Fatalf("b's send %d: code %d", sent, c)
		}
	}
	return sent
}
