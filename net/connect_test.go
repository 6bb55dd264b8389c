package net

import (
	"errors"
	"io"
	stdnet "net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/transport"
)

// connect (the dial's own connect, waiting in poll(2)) reaches IPv4 and
// IPv6 listeners and gives a connection that carries bytes both ways.
func TestConnect_ReachesIPv4AndIPv6(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		l, err := stdnet.Listen("tcp", addr)
		if err != nil {
			t.Logf("%s: %v (skipped)", addr, err)
			continue
		}
		defer l.Close()
		ap := netip.MustParseAddrPort(l.Addr().String())
		nc, err := connect(ap, 5*time.Second, nil)
		if err != nil {
			t.Fatalf("connect %v: %v", ap, err)
		}
		sc, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write([]byte{7}); err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		if _, err := sc.Read(b[:]); err != nil || b[0] != 7 {
			t.Fatalf("read %v %v", b, err)
		}
		nc.Close()
		sc.Close()
	}
}

// A port nobody listens on is ECONNREFUSED; an address nobody answers
// (TEST-NET-1) is an error once the timeout passes (or at once when the
// host has no route), never a hang.
func TestConnect_RefusedAndUnreachable(t *testing.T) {
	l, err := stdnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.MustParseAddrPort(l.Addr().String())
	l.Close()
	if _, err := connect(ap, 5*time.Second, nil); !errors.Is(err, unix.ECONNREFUSED) {
		t.Fatalf("connect to a closed port: %v, want ECONNREFUSED", err)
	}
	nc, err := connect(netip.MustParseAddrPort("192.0.2.1:9"), 50*time.Millisecond, nil)
	if err == nil {
		nc.Close()
		t.Fatal("connect to TEST-NET-1 succeeded")
	}
	if codeOf(err) == transport.OK {
		t.Fatalf("connect error %v maps to OK", err)
	}
}

// A socket connected to itself (TCP simultaneous open to its own port) is
// recognised, so that connect refuses it rather than handing the loop a
// connection that talks to itself.
func TestConnect_SelfConnectionIsRecognised(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	if err := connectWait(fd, sa, 5*time.Second); err != nil {
		t.Skipf("self-connect not possible here: %v", err)
	}
	if !selfConnected(fd) {
		t.Fatal("a self-connected socket was not recognised")
	}
	l, err := stdnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	nc, err := connect(netip.MustParseAddrPort(l.Addr().String()), 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	f, err := nc.(*stdnet.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if selfConnected(int(f.Fd())) {
		t.Fatal("an ordinary connection was taken for a self-connection")
	}
}

// A dial whose peer resets the connection between connect and the
// enrolment in gnet (a peer dying with our connect in its accept queue)
// fails its queued send with ECONNRESET and PeerDown follows. Before the
// fix the reset socket had no remote address, gnet's Register panicked on
// it inside its worker pool (recovered there, logged to our silent
// logger) and closed its answer channel without a value: the dial took
// that for success, no OnOpen or OnClose ever came, and the send hung.
func TestDial_ResetBeforeEnrollFails(t *testing.T) {
	l, err := stdnet.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := listen(t, Config{})
	as := newSink()
	var once atomic.Bool
	reset := make(chan error, 1)
	a.connected = func(fd int) {
		if !once.CompareAndSwap(false, true) {
			return
		}
		reset <- resetAccepted(l, fd)
	}
	p, c := a.Resolve(encodeSockaddr(l.Addr().(*stdnet.TCPAddr).AddrPort()))
	if c != transport.OK {
		t.Fatalf("Resolve: %d", c)
	}
	if _, c := a.Send(p, &transport.Header{Kind: transport.KindMsg, Len: 4}, [][]byte{[]byte("ping")}, 1); c != transport.OK {
		t.Fatalf("Send: %d", c)
	}
	pollUntil(t, "the send's failure", func() bool { _, ok := as.sendDone[1]; return ok && len(as.downs) > 0 }, a, as)
	if err := <-reset; err != nil {
		t.Fatal(err)
	}
	if code := as.sendDone[1]; code != transport.EConnReset {
		t.Fatalf("send to a peer that reset before the enrolment: code %d, want ECONNRESET (%d)", code, transport.EConnReset)
	}
	if len(as.downs) != 1 || as.downs[0] != transport.EConnReset {
		t.Fatalf("PeerDown %v, want one ECONNRESET", as.downs)
	}
}

// resetAccepted accepts the connection fd made to l, resets it (linger 0)
// and waits until fd has seen the reset (getpeername fails).
func resetAccepted(l stdnet.Listener, fd int) error {
	sc, err := l.Accept()
	if err != nil {
		return err
	}
	if err := sc.(*stdnet.TCPConn).SetLinger(0); err != nil {
		return err
	}
	sc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := unix.Getpeername(fd); err != nil {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return errors.New("the dialed socket never saw the reset")
}

// A peer that accepts the connection and never answers the handshake
// fails the send queued on it with ETIMEDOUT once DialTimeout passed
// (openExpired), PeerDown follows and the socket is closed: a connection
// that never opens cannot hang a send.
func TestDial_SilentPeerTimesOut(t *testing.T) {
	l, err := stdnet.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := listen(t, Config{DialTimeout: 200 * time.Millisecond})
	as := newSink()
	p, c := a.Resolve(encodeSockaddr(l.Addr().(*stdnet.TCPAddr).AddrPort()))
	if c != transport.OK {
		t.Fatalf("Resolve: %d", c)
	}
	if _, c := a.Send(p, &transport.Header{Kind: transport.KindMsg, Len: 4}, [][]byte{[]byte("ping")}, 1); c != transport.OK {
		t.Fatalf("Send: %d", c)
	}
	sc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	pollUntil(t, "the send's failure", func() bool { _, ok := as.sendDone[1]; return ok && len(as.downs) > 0 }, a, as)
	if code := as.sendDone[1]; code != transport.ETimedOut {
		t.Fatalf("send to a silent peer: code %d, want ETIMEDOUT (%d)", code, transport.ETimedOut)
	}
	if len(as.downs) != 1 || as.downs[0] != transport.ETimedOut {
		t.Fatalf("PeerDown %v, want one ETIMEDOUT", as.downs)
	}
	if n := a.openTimeouts.Load(); n != 1 {
		t.Fatalf("openExpired failed %d connections, want 1", n)
	}
	// Our end is closed: the peer reads our HELLO, then EOF.
	_ = sc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, sc); err != nil {
		t.Fatalf("the silent peer's connection was not closed: %v", err)
	}
	pollUntil(t, "the handshake's end", func() bool { return a.handshakes.Load() == 0 }, a, as)
}

// A client that connects and never completes the handshake is closed once
// DialTimeout passed: it would otherwise hold the connection, and keep
// the loop from being borrowed or spinning (t.handshakes), for ever.
func TestAccept_SilentClientIsClosed(t *testing.T) {
	a := listen(t, Config{DialTimeout: 200 * time.Millisecond})
	as := newSink()
	nc, err := stdnet.Dial("tcp", tcpAddr(t, a.Name()))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, nc); err != nil { // a's HELLO, then EOF
		t.Fatalf("the silent client's connection was not closed: %v", err)
	}
	pollUntil(t, "the handshake's end", func() bool { return a.handshakes.Load() == 0 }, a, as)
	if n := a.shakeTimeouts.Load(); n != 1 {
		t.Fatalf("shakeExpired closed %d connections, want 1", n)
	}
}

// The handshake that makes a connection ready stops its expiry, on the
// dialing side (openExpired) and on the accepting one (shakeExpired):
// the accepted side's timer used to fire DialTimeout after every accept
// whatever became of the handshake, and queue a task on the loop (gnet
// Execute: 3-7 allocations) into whatever the process was doing then,
// e.g. a later AllocsPerRun window ("1 allocations per operation").
func TestHandshake_ReadyStopsTheExpiry(t *testing.T) {
	a := listen(t, Config{})
	b := listen(t, Config{})
	as, bs := newSink(), newSink()
	p, _ := a.Resolve(b.Name())
	if _, c := a.Send(p, &transport.Header{Kind: transport.KindMsg, Len: 4}, [][]byte{[]byte("ping")}, 1); c != transport.OK {
		t.Fatalf("Send: %d", c)
	}
	pollUntil(t, "the message and its completion", func() bool { _, sent := as.sendDone[1]; return sent && len(bs.arrivals) == 1 }, a, as, b, bs)
	for _, tr := range []*Transport{a, b} {
		tr.mu.Lock()
		conns := 0
		for _, tc := range tr.fds {
			conns++
			if tc.expiry == nil {
				t.Errorf("a connection without its handshake expiry")
			} else if tc.expiry.Stop() {
				t.Errorf("a ready connection's handshake expiry was still armed (dialed %v)", tc.dialed)
			}
		}
		tr.mu.Unlock()
		if conns == 0 {
			t.Errorf("no ready connection")
		}
	}
}
