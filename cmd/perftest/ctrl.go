package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
)

// The out-of-band control channel: a TCP connection between the two
// perftest processes that carries the endpoint names and keeps the two
// sides in step, the way fi_pingpong's control socket does. Its messages
// are fi_pingpong's: a name is a 4-byte big-endian length and the bytes;
// a sync is "q\0" answered by "a\0"; a count is 10 bytes of NUL-padded
// decimal answered by "cnt ok\0".

// defaultCtrlPort is fi_pingpong's control port.
const defaultCtrlPort = 47592

// peerFDEnv names the environment variable through which a perftest that
// starts its own peer hands the child the control listener (the file
// descriptor number); the child then serves on it instead of -B.
const peerFDEnv = "PERFTEST_PEER_FD"

// maxName bounds an endpoint name received over the control channel.
const maxName = 4096

// ctrl is one control connection. Not safe for concurrent use.
type ctrl struct {
	conn    net.Conn
	timeout time.Duration // bound on every read; 0 waits forever
	buf     [16]byte
}

// errPeerUnreachable wraps every failure to reach the peer in time.
var errPeerUnreachable = errors.New("peer unreachable")

// dialCtrl connects to host:port, retrying refused connections (the peer
// may still be starting) until timeout has passed.
func dialCtrl(host string, port int, srcPort int, timeout time.Duration) (*ctrl, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	deadline := time.Now().Add(timeout)
	var last error
	for {
		d := net.Dialer{Deadline: deadline}
		if srcPort != 0 {
			d.LocalAddr = &net.TCPAddr{Port: srcPort}
		}
		c, err := d.Dial("tcp4", addr)
		if err == nil {
			return &ctrl{conn: c, timeout: timeout}, nil
		}
		last = err
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) {
			return nil, fmt.Errorf("%w: %v", errPeerUnreachable, err)
		}
		if time.Now().Add(50 * time.Millisecond).After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, fmt.Errorf("%w: no answer from %s within %v: %v", errPeerUnreachable, addr, timeout, last)
}

// listenCtrl listens on port (all IPv4 addresses), or, when this process
// was started as a peer, takes the listener its parent passed down.
func listenCtrl(port int) (net.Listener, bool, error) {
	if launchedListener != nil { // rank 1 of a launched pair (launched.go)
		return launchedListener, true, nil
	}
	if s := os.Getenv(peerFDEnv); s != "" {
		fd, err := strconv.Atoi(s)
		if err != nil || fd < 3 {
			return nil, false, fmt.Errorf("bad %s=%q", peerFDEnv, s)
		}
		l, err := net.FileListener(os.NewFile(uintptr(fd), "ctrl-listener"))
		if err != nil {
			return nil, false, fmt.Errorf("inherited control listener: %w", err)
		}
		return l, true, nil
	}
	l, err := net.Listen("tcp4", ":"+strconv.Itoa(port))
	if err != nil {
		return nil, false, fmt.Errorf("control port %d: %w", port, err)
	}
	return l, false, nil
}

// acceptCtrl waits for the client; a positive wait bounds it.
func acceptCtrl(l net.Listener, wait, timeout time.Duration) (*ctrl, error) {
	if wait > 0 {
		if tl, ok := l.(*net.TCPListener); ok {
			tl.SetDeadline(time.Now().Add(wait))
		}
	}
	c, err := l.Accept()
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, fmt.Errorf("%w: no client connected within %v", errPeerUnreachable, wait)
		}
		return nil, err
	}
	return &ctrl{conn: c, timeout: timeout}, nil
}

func (c *ctrl) Close() error { return c.conn.Close() }

// localIP is this side's address on the control connection: an address
// the peer can reach, used to pick the tcp provider's interface.
func (c *ctrl) localIP() string {
	if a, ok := c.conn.LocalAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return ""
}

func (c *ctrl) readFull(b []byte) error {
	if c.timeout > 0 {
		c.conn.SetReadDeadline(time.Now().Add(c.timeout))
	}
	_, err := io.ReadFull(c.conn, b)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: control channel silent for %v%s", errPeerUnreachable, c.timeout, rtNote())
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("%w: control connection closed by the peer", errPeerUnreachable)
	}
	return fmt.Errorf("control channel: %w", err)
}

func (c *ctrl) write(b []byte) error {
	if c.timeout > 0 {
		c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	}
	if _, err := c.conn.Write(b); err != nil {
		return fmt.Errorf("%w: control channel: %v", errPeerUnreachable, err)
	}
	return nil
}

// sendFrame sends a 4-byte big-endian length and b (fi_pingpong's name
// message; perftest's other messages use the same framing).
func (c *ctrl) sendFrame(b []byte) error {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	return c.write(append(hdr[:], b...))
}

// recvFrame receives one frame of at most max bytes.
func (c *ctrl) recvFrame(max int) ([]byte, error) {
	var hdr [4]byte
	if err := c.readFull(hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if int64(n) > int64(max) {
		return nil, fmt.Errorf("control channel: message of %d bytes exceeds %d (not a perftest peer?)", n, max)
	}
	b := make([]byte, n)
	if err := c.readFull(b); err != nil {
		return nil, err
	}
	return b, nil
}

// sync brings both sides to the same point: the client sends "q\0", the
// server answers "a\0".
func (c *ctrl) sync(client bool) error {
	q, a := []byte("q\x00"), []byte("a\x00")
	if client {
		if err := c.write(q); err != nil {
			return err
		}
		if err := c.readFull(c.buf[:2]); err != nil {
			return err
		}
		if !bytes.Equal(c.buf[:2], a) {
			return fmt.Errorf("control channel: sync answered %q, not %q", c.buf[:2], a)
		}
		return nil
	}
	if err := c.readFull(c.buf[:2]); err != nil {
		return err
	}
	if !bytes.Equal(c.buf[:2], q) {
		return fmt.Errorf("control channel: sync request %q, not %q", c.buf[:2], q)
	}
	return c.write(a)
}

// exchangeCount sends the client's count of received messages to the
// server, which returns it: fi_pingpong's #ack column on both sides.
func (c *ctrl) exchangeCount(client bool, n int64) (int64, error) {
	const cntLen = 10
	ok := []byte("cnt ok\x00")
	if client {
		var b [cntLen]byte
		copy(b[:], strconv.FormatInt(n, 10))
		if err := c.write(b[:]); err != nil {
			return 0, err
		}
		if err := c.readFull(c.buf[:len(ok)]); err != nil {
			return 0, err
		}
		if !bytes.Equal(c.buf[:len(ok)], ok) {
			return 0, fmt.Errorf("control channel: count answered %q", c.buf[:len(ok)])
		}
		return n, nil
	}
	if err := c.readFull(c.buf[:cntLen]); err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(string(bytes.TrimRight(c.buf[:cntLen], "\x00")), 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("control channel: bad count %q", c.buf[:cntLen])
	}
	return v, c.write(ok)
}
