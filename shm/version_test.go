package shm

import (
	"strings"
	"testing"

	"github.com/gofi-dev/fi/transport"
)

// A receiver's region of another layout version (a process of an older
// gofi: version 4 has no slot records, 5bbfe7f) is refused when a sender
// connects: Send fails with EIO, again on a retry, LastError names the
// version, and no ring is announced into it. Put the version back and
// the same transport connects and delivers.
func TestTransport_RegionOfAnotherVersionIsRefused(t *testing.T) {
	testDir(t)
	p := newTPair(t, TransportConfig{})
	mem := p.b.region.Segment().Bytes()
	ne.PutUint32(mem[hVersion:], Version-1)
	h := transport.Header{Kind: transport.KindMsg, Len: 8}
	for range 2 {
		done, c := p.a.Send(p.ab, &h, [][]byte{seqMsg(0, 8)}, 1)
		if done || c != transport.EIO {
			t.Fatalf("send to a version %d region: done %v code %d, want EIO", Version-1, done, c)
		}
		if err := p.a.LastError(); err == nil || !strings.Contains(err.Error(), "version") {
			t.Fatalf("LastError %v, want one naming the version", err)
		}
	}
	if q := p.a.peers[p.ab]; q.out != nil || q.region != nil {
		t.Fatal("a ring or a mapping was kept for a refused region")
	}
	ne.PutUint32(mem[hVersion:], Version)
	p.send(transport.KindMsg, seqMsg(1, 8))
	p.until("the message", func() bool { return p.sb.n == 1 })
}
