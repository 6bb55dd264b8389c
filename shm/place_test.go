package shm

import (
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// notePlace publishes the polling CPU in the region's CPU word and learns
// where the peers with a larger pid poll; PeerShares says so for their
// CPU only while no rendezvous payload went for rdvQuiet.
func TestPeerShares(t *testing.T) {
	testDir(t)
	p := newTPair(t, TransportConfig{})
	p.send(transport.KindMsg, seqMsg(1, 8)) // connect a -> b
	p.until("the first message", func() bool { return p.sb.n == 1 })
	a, b := p.a, p.b
	a.notePlace()
	if c := a.region.cpuWord().Load(); c == 0 {
		t.Fatal("notePlace left the CPU word unset")
	}
	var pb *peer
	for _, q := range a.peers {
		if q != nil && q.region != nil {
			pb = q
		}
	}
	if pb == nil {
		t.Fatal("a has no peer with a region")
	}
	b.region.cpuWord().Store(5 + 1) // b polls on CPU 5
	a.rdvAt.Store(-int64(time.Hour))
	pb.pid = selfPID // same order: a does not move for b
	a.notePlace()
	if a.PeerShares(5) {
		t.Fatal("a peer with the same pid: a should not move")
	}
	pb.pid = selfPID + 1
	a.notePlace()
	if !a.PeerShares(5) || a.PeerShares(4) || a.PeerShares(-1) || a.PeerShares(64) {
		t.Fatalf("b (larger pid) on CPU 5: PeerShares(5, 4, -1, 64) = %v %v %v %v, want true false false false",
			a.PeerShares(5), a.PeerShares(4), a.PeerShares(-1), a.PeerShares(64))
	}
	// A rendezvous payload: no move for rdvQuiet.
	p.send(transport.KindMsg, seqMsg(2, 64<<10))
	p.until("the large message", func() bool { return p.sb.n == 2 })
	if a.PeerShares(5) {
		t.Fatal("right after a rendezvous payload: want no move")
	}
	a.rdvAt.Store(-int64(time.Hour))
	b.region.cpuWord().Store(0) // not known
	a.notePlace()
	if a.PeerShares(5) {
		t.Fatal("CPU word 0 (not known): want no move")
	}
	var _ transport.CPUSharer = a
}
