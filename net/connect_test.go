package net

import (
	"errors"
	stdnet "net"
	"net/netip"
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
		nc, err := connect(ap, 5*time.Second)
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
	if _, err := connect(ap, 5*time.Second); !errors.Is(err, unix.ECONNREFUSED) {
		t.Fatalf("connect to a closed port: %v, want ECONNREFUSED", err)
	}
	nc, err := connect(netip.MustParseAddrPort("192.0.2.1:9"), 50*time.Millisecond)
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
	nc, err := connect(netip.MustParseAddrPort(l.Addr().String()), 5*time.Second)
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
