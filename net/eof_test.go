package net

import (
	"bytes"
	"context"
	"io"
	stdnet "net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
// dropped, nothing else. reset closes with a reset instead of a FIN (gnet
// reads ECONNRESET): what arrived before it is the peer's too.
func TestPeerClose_StalledFramesArrive(t *testing.T) {
	small := Config{Handoff: 4 * (maxWireEager + msgRecHdr + 8)} // a 512 KiB ring; window 1 MiB
	for _, tc := range []struct {
		name        string
		cfg         Config
		tail, reset bool
	}{
		{"LoopOnly", Config{LoopOnly: true, Handoff: small.Handoff}, false, false},
		{"Default", small, false, false},
		{"DefaultCutShort", small, true, false},
		{"LoopOnlyReset", Config{LoopOnly: true, Handoff: small.Handoff}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) { stalledFramesArrive(t, tc.cfg, tc.tail, tc.reset) })
	}
}

func stalledFramesArrive(t *testing.T, cfg Config, tail, reset bool) {
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
	if reset {
		// Once every byte is in gnet's buffer (it reads while the ring is
		// full): a reset may overtake what the kernel has not delivered.
		for !allRead(t, a, in) {
			if ctx.Err() != nil {
				t.Fatal("the loop never read the frames")
			}
			time.Sleep(time.Millisecond)
		}
		_ = in.(*stdnet.TCPConn).SetLinger(0)
	}
	in.Close()
	// gnet reads the rest and the EOF while nobody polls.
	for a.openFds() != 0 {
		if ctx.Err() != nil {
			t.Fatal("the connection was never closed")
		}
		time.Sleep(time.Millisecond)
	}

	allBeforeDown(t, a, as, n, size)
}

// allBeforeDown checks that the n messages of size bytes the peer sent
// before closing (tags 0..n-1, pattern(size, tag)) all arrived intact, in
// order and before one PeerDown(ECONNRESET), and that nothing came after.
func allBeforeDown(t *testing.T, a *Transport, as *downSink, n, size int) {
	t.Helper()
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

// allRead reports whether every byte written on c was read from the
// socket at the other end, the only connection of tr: nothing unsent or
// unacknowledged on c, nothing waiting in tr's receive queue.
func allRead(t *testing.T, tr *Transport, c stdnet.Conn) bool {
	raw, err := c.(*stdnet.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	outq := -1
	_ = raw.Control(func(fd uintptr) { outq, _ = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) })
	tr.mu.Lock()
	fd := -1
	for k := range tr.fds {
		fd = k
	}
	tr.mu.Unlock()
	if outq != 0 || fd < 0 {
		return false
	}
	inq, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
	return err == nil && inq == 0
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

// The same with two connections of one peer attached (a simultaneous
// connect not converged): the peer's dial stalls with frames buffered and
// closes first, then our dial. The second EOF finds no other open
// connection; before the fix it tore the peer down while the first one
// still had frames to decode, which were then refused (detached).
func TestPeerClose_OtherConnectionDrainsFirst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := listen(t, Config{LoopOnly: true, Handoff: 4 * (maxWireEager + msgRecHdr + 8)})
	as := &downSink{fakeSink: newSink()}
	_, dialed, in := bothAttached(t, a, as)
	// Read all we wrote on both (HELLOs and the message), so that closing
	// them sends FINs.
	if _, err := io.ReadFull(dialed, make([]byte, hdrSize+helloLen+hdrSize+len(bothPing))); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(in, make([]byte, hdrSize+helloLen)); err != nil {
		t.Fatal(err)
	}

	const n, size = 60, 16 << 10
	var out []byte
	for i := 0; i < n; i++ {
		out = append(out, eagerFrame(uint64(i), pattern(size, byte(i)))...)
	}
	if _, err := in.Write(out); err != nil {
		t.Fatal(err)
	}
	in.Close()
	for a.openFds() != 1 {
		if ctx.Err() != nil {
			t.Fatal("the peer's dial was never closed")
		}
		time.Sleep(time.Millisecond)
	}
	dialed.Close()
	for a.openFds() != 0 {
		if ctx.Err() != nil {
			t.Fatal("our dial was never closed")
		}
		time.Sleep(time.Millisecond)
	}

	allBeforeDown(t, a, as, n, size)
}
