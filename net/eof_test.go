package net

import (
	"bytes"
	"context"
	"io"
	stdnet "net"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// A peer writes more than the handoff ring holds while the engine does
// not poll (the loop stalls the connection: the rest of the frames wait in
// gnet's inbound buffer or in pre), then closes the connection in order.
// gnet reads the EOF and closes the connection without another OnTraffic:
// before the fix its OnClose tore the peer down and the frames still
// buffered, which the peer had written and seen complete, were lost.
// Every message must arrive, in order and intact, before PeerDown
// (ECONNRESET, once). The peer is played over a raw socket and the test
// polls only after gnet closed the connection, so the order is fixed.
// tail adds the first bytes of a frame the close cuts short: it is
// dropped, nothing else.
func TestPeerClose_StalledFramesArrive(t *testing.T) {
	small := Config{Handoff: 4 * (maxWireEager + msgRecHdr + 8)} // a 512 KiB ring; window 1 MiB
	for _, tc := range []struct {
		name string
		cfg  Config
		tail bool
	}{
		{"LoopOnly", Config{LoopOnly: true, Handoff: small.Handoff}, false},
		{"Default", small, false},
		{"DefaultCutShort", small, true},
	} {
		t.Run(tc.name, func(t *testing.T) { stalledFramesArrive(t, tc.cfg, tc.tail) })
	}
}

func stalledFramesArrive(t *testing.T, cfg Config, tail bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := listen(t, cfg)
	as := &downSink{fakeSink: newSink()}
	rl, err := stdnet.Listen("tcp4", "127.0.0.1:0") // the peer's address (nobody dials it)
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	peerName := encodeSockaddr(rl.Addr().(*stdnet.TCPAddr).AddrPort())
	p, c := a.Resolve(peerName)
	if c != transport.OK {
		t.Fatalf("Resolve: %d", c)
	}
	in, err := stdnet.Dial("tcp4", tcpAddr(t, a.Name()))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if _, err := in.Write(helloFrame(peerName, 0x5eed, defaultWindow)); err != nil {
		t.Fatal(err)
	}
	// Read our HELLO, so that closing sends a FIN, not a reset.
	if _, err := io.ReadFull(in, make([]byte, hdrSize+helloLen)); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the connection attached", func() bool { return a.connsTo(p) == 1 }, a, as)

	// 60 messages of 16 KiB: 960 KiB, within the window, almost twice
	// what the ring holds.
	const n, size = 60, 16 << 10
	var out []byte
	for i := 0; i < n; i++ {
		out = append(out, eagerFrame(uint64(i), pattern(size, byte(i)))...)
	}
	if tail {
		out = append(out, eagerFrame(n, pattern(size, n))[:hdrSize+100]...)
	}
	if _, err := in.Write(out); err != nil {
		t.Fatal(err)
	}
	in.Close()
	// gnet reads the rest and the EOF while nobody polls.
	for a.openFds() != 0 {
		if ctx.Err() != nil {
			t.Fatal("the connection was never closed")
		}
		time.Sleep(time.Millisecond)
	}

	pollUntil(t, "the peer's failure", func() bool { return len(as.downs) > 0 }, a, as)
	if as.arrivedAtDown[0] != n {
		t.Fatalf("%d of %d messages arrived before PeerDown %v (%d in all)", as.arrivedAtDown[0], n, as.downs, len(as.arrivals))
	}
	for i, ar := range as.arrivals {
		if ar.hdr.Tag != uint64(i) || !bytes.Equal(ar.eager, pattern(size, byte(i))) {
			t.Fatalf("message %d arrived as tag %d, intact %v", i, ar.hdr.Tag, bytes.Equal(ar.eager, pattern(size, byte(i))))
		}
	}
	// A late PeerDown or arrival would show in a few more polls.
	for i := 0; i < 20; i++ {
		a.Poll(as)
		a.Wait(time.Millisecond)
	}
	if len(as.downs) != 1 || as.downs[0] != transport.EConnReset || len(as.arrivals) != n {
		t.Fatalf("PeerDown %v, %d arrivals; want one ECONNRESET after %d", as.downs, len(as.arrivals), n)
	}
}

// openFds is the number of connections the transport reads (tests).
func (t *Transport) openFds() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.fds)
}

// downSink records how many messages had arrived when PeerDown came.
type downSink struct {
	*fakeSink
	arrivedAtDown []int
}

func (s *downSink) PeerDown(p transport.Peer, c transport.Code) {
	s.arrivedAtDown = append(s.arrivedAtDown, len(s.arrivals))
	s.fakeSink.PeerDown(p, c)
}
