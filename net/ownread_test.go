package net

import (
	"bytes"
	stdnet "net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/rma"
)

// Poll's reads of a socket it owns are decoded before it returns, also
// those of its last read when it stops after the bounded number of reads:
// once the loop is handed back, bytes left in pre would wait for new
// socket bytes (gnet calls OnTraffic only for those).
func TestOwnerConn_DecodesItsLastRead(t *testing.T) {
	ln, err := stdnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := stdnet.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	_ = sc.(*stdnet.TCPConn).SetReadBuffer(8 << 20)
	_ = cc.(*stdnet.TCPConn).SetWriteBuffer(4 << 20)

	// More CREDIT frames (one credit each) than sixteen full reads hold.
	const want = 20 * 2 * ownRead
	frames := make([]byte, 0, want+hdrSize)
	for len(frames) < want {
		var h [hdrSize]byte
		putHeader(h[:], &frame{op: opCredit, length: 1})
		frames = append(frames, h[:]...)
	}
	werr := make(chan error, 1)
	go func() { _, err := cc.Write(frames); werr <- err }()

	raw, err := sc.(*stdnet.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	_ = raw.Control(func(f uintptr) { fd = int(f) })
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
		if err != nil {
			t.Fatal(err)
		}
		if n == len(frames) {
			break
		}
		if time.Now().After(deadline) {
			t.Skipf("the socket holds only %d of %d bytes (kernel buffer limits)", n, len(frames))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}

	tr := &Transport{}
	p := &peer{t: tr, peerWindow: 1 << 40}
	tc := &tconn{t: tr, fd: fd, peer: p, state: stReady}
	if !tr.ownerConn(tc) {
		t.Fatal("ownerConn read nothing")
	}
	rest, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
	if err != nil {
		t.Fatal(err)
	}
	if rest == 0 {
		t.Fatalf("ownerConn read all %d bytes: the bounded number of reads was not reached", len(frames))
	}
	if len(tc.pre) >= hdrSize {
		t.Fatalf("%d bytes read but not decoded", len(tc.pre))
	}
	if got, read := p.credit, int64(len(frames)-rest-len(tc.pre))/hdrSize; got != read {
		t.Fatalf("credit %d after reading %d frames", got, read)
	}
}

// A CREDIT frame riding in front of the next push (writeDirect) leaves the
// decoder expecting that push: Poll then still reads its header alone and
// its payload straight into the matched receive (readConn).
func TestFrame_CreditKeepsThePushExpectation(t *testing.T) {
	tr := &Transport{}
	p := &peer{t: tr, peerWindow: 1 << 40}
	tc := &tconn{t: tr, peer: p, state: stReady, lastPush: true}
	if ok, err := tc.frame(&frame{op: opCredit, length: 1}, nil); !ok || err != nil {
		t.Fatalf("CREDIT: %v, %v", ok, err)
	}
	if !tc.lastPush || p.credit != 1 {
		t.Fatalf("after a CREDIT frame: expecting a push %v, credit %d", tc.lastPush, p.credit)
	}
}

// readDirect reports the socket drained when its read ended the payload
// and left the room behind it unfilled: Poll then hands the completion
// over without another read (which would only say EAGAIN).
func TestReadDirect_DrainedWhenThePayloadEndsTheSocket(t *testing.T) {
	fds := socketPair(t)
	tr := &Transport{}
	p := &peer{t: tr, peerWindow: 1 << 40}
	const size = 4096
	for _, c := range []struct {
		behind  int // bytes of the next frames in the socket behind the payload
		drained bool
	}{{0, true}, {10, true}, {2 * hdrSize, false}} {
		tc := &tconn{t: tr, fd: fds[0], peer: p, state: stReady}
		tc.pbuf = make([]byte, 2*ownRead)
		tc.pre = tc.pbuf[:0]
		s, id := p.fetches.alloc()
		dst := make([]byte, size)
		s.cap, s.got, s.dst = size, 0, append(s.dst[:0], dst)
		tc.cur, tc.curID = s, id
		tc.dec.have, tc.dec.f.op, tc.dec.left = true, opData, size
		msg := append(pattern(size, 3), make([]byte, c.behind)...)
		if _, err := unix.Write(fds[1], msg); err != nil {
			t.Fatal(err)
		}
		n, drained, err := tc.readDirect()
		if err != nil || n != len(msg) || drained != c.drained {
			t.Fatalf("%d bytes behind the payload: read %d of %d, drained %v (want %v), %v", c.behind, n, len(msg), drained, c.drained, err)
		}
		if !bytes.Equal(dst, pattern(size, 3)) || len(tc.pre) != c.behind {
			t.Fatalf("%d bytes behind: payload intact %v, %d bytes in pre", c.behind, bytes.Equal(dst, pattern(size, 3)), len(tc.pre))
		}
		p.fetches.put(id)
	}
}

// Large RMA writes streamed back to back are read straight into the
// region after the first read: a payload's last read takes the next
// frame's header and a one-range request header behind it, and a longer
// request header is read to its end alone, so no write's first bytes
// come through pre and a copy (they did: each write after the first
// started with a 64 KiB read into pre).
func TestReadRMADirect_BackToBackWrites(t *testing.T) {
	// The writer goroutine stands for the peer process: with one P it
	// and the spinning reader took turns (GOMAXPROCS=1: 88 KiB of 2.4 MiB
	// direct, 3 runs of 3), which no peer of another process does.
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	fds := socketPair(t)
	if err := unix.SetNonblock(fds[1], false); err != nil {
		t.Fatal(err)
	}
	size, _ := rma.Size(4, 4)
	tab, err := rma.NewTable(make([]byte, size), 4, 4, "")
	if err != nil {
		t.Fatal(err)
	}
	mem := make([]byte, 4<<20)
	if _, _, err := tab.Register(rma.Region{Mem: mem, Key: 9, Access: rma.AccessRemoteWrite}, false, nil); err != nil {
		t.Fatal(err)
	}
	tr := &Transport{}
	tr.rmaTarget.Store(&rma.Target{Table: tab})
	p := &peer{t: tr, peerWindow: 1 << 40}
	tc := &tconn{t: tr, fd: fds[0], peer: p, state: stReady}

	// One- and two-range writes of 300 KiB each, alternating.
	const n, plen = 8, 300 << 10
	var stream, want []byte
	want = make([]byte, len(mem))
	for i := range n {
		rq := rma.Request{Kind: rma.KindWrite, ID: uint64(i), Payload: plen}
		base := uint64(i) * plen
		if i%2 == 0 {
			rq.IOV[0], rq.NIOV = rma.IOV{Addr: base, Len: plen, Key: 9}, 1
		} else {
			rq.IOV[0], rq.IOV[1], rq.NIOV = rma.IOV{Addr: base, Len: 1000, Key: 9}, rma.IOV{Addr: base + 1000, Len: plen - 1000, Key: 9}, 2
		}
		hl := rq.HeaderLen()
		b := make([]byte, hdrSize+hl)
		putHeader(b, &frame{op: opRMA, cookie: uint64(i), length: uint64(hl) + plen})
		rq.Encode(b[hdrSize:])
		payload := pattern(plen, byte(i))
		copy(want[base:], payload)
		stream = append(append(stream, b...), payload...)
	}
	werr := make(chan error, 1)
	go func() { _, err := unix.Write(fds[1], stream); werr <- err }()

	// The first read (nothing decoded yet) fills pre's room: at most
	// 2*ownRead bytes come through it.
	deadline := time.Now().Add(20 * time.Second)
	for tr.rmaDirect.Load()+2*ownRead < int64(n*plen) || tc.dec.have || len(tc.pre) > 0 {
		tr.ownerConn(tc)
		if tc.dead {
			t.Fatalf("connection failed after %d direct bytes", tr.rmaDirect.Load())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d payload bytes read straight into the region (want all but the first read's)", tr.rmaDirect.Load(), n*plen)
		}
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mem, want) {
		t.Fatal("the region does not hold what was written")
	}
}

// socketPair returns a connected non-blocking AF_UNIX stream pair, closed
// when the test (or fuzz input) ends.
func socketPair(t *testing.T) [2]int {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	return fds
}
