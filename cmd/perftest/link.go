package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// link is what the latency, bw and msgrate kernels move messages over: a
// gofi endpoint, or, as a baseline, a plain Go TCP connection. Not safe
// for concurrent use.
type link interface {
	// send queues b to the peer; b must not change until flush.
	send(b []byte) error
	// flush waits until every queued send has completed.
	flush() error
	// recv waits for the next message, which must be size bytes.
	recv(size int) error
	// buffers returns the send buffer (at least the largest size).
	txBuf() []byte
	close() error
}

// netProv is the pseudo-provider name of the Go net baseline.
const netProv = "net"

// gofiLink keeps depth receives posted at all times (each completion
// reposts one), all into one buffer: the data is not looked at.
type gofiLink struct {
	n       *node
	rx, tx  []byte
	pending int // sends whose completion is still to be read
}

func newGofiLink(n *node, maxSize, depth int) (*gofiLink, error) {
	l := &gofiLink{n: n, rx: make([]byte, max(maxSize, ppMinRecv)), tx: make([]byte, max(maxSize, ppMinRecv))}
	for range depth {
		if err := n.postRecv(l.rx); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (l *gofiLink) txBuf() []byte { return l.tx }

func (l *gofiLink) send(b []byte) error {
	inject := len(b) < l.n.injectSize
	reaped, err := l.n.post(b, inject)
	l.pending -= reaped
	if err != nil {
		return err
	}
	if !inject {
		l.pending++
	}
	return nil
}

func (l *gofiLink) flush() error {
	if l.pending <= 0 {
		l.pending = 0
		return nil
	}
	err := l.n.wait(l.n.txcq, l.pending)
	l.pending = 0
	return err
}

func (l *gofiLink) recv(size int) error {
	if err := l.n.wait(l.n.rxcq, 1); err != nil {
		return err
	}
	if got := l.n.ent[0].Len; got != size {
		return fmt.Errorf("received %d bytes, expected %d", got, size)
	}
	return l.n.postRecv(l.rx)
}

func (l *gofiLink) close() error { return l.n.Close() }

// netLink is the baseline: Go's net package, TCP_NODELAY, one write per
// message, reads of exactly the expected size.
type netLink struct {
	c       *net.TCPConn
	rx, tx  []byte
	timeout time.Duration
}

func newNetLink(c net.Conn, maxSize int, timeout time.Duration) *netLink {
	tc := c.(*net.TCPConn)
	tc.SetNoDelay(true)
	return &netLink{c: tc, rx: make([]byte, max(maxSize, ppMinRecv)), tx: make([]byte, max(maxSize, ppMinRecv)), timeout: timeout}
}

func (l *netLink) txBuf() []byte { return l.tx }

func (l *netLink) deadline() time.Time {
	if l.timeout <= 0 {
		return time.Time{}
	}
	return time.Now().Add(l.timeout)
}

func (l *netLink) send(b []byte) error {
	l.c.SetWriteDeadline(l.deadline())
	if _, err := l.c.Write(b); err != nil {
		return netErr(err)
	}
	return nil
}

func (l *netLink) flush() error { return nil }

func (l *netLink) recv(size int) error {
	l.c.SetReadDeadline(l.deadline())
	if _, err := io.ReadFull(l.c, l.rx[:size]); err != nil {
		return netErr(err)
	}
	return nil
}

func (l *netLink) close() error { return l.c.Close() }

func netErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %v", errPeerUnreachable, err)
	}
	return err
}
