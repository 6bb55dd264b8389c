package launch

// The two PMI wire formats, as MPICH's Hydra and Slurm's mpi/pmi2 plugin
// put them on the PMI socket:
//
//	PMI-1: "cmd=NAME key=value key=value\n"       one line per message
//	PMI-2: "LLLLLLcmd=NAME;key=value;key=value;"  LLLLLL = body length
//
// PMI-1 separates attributes with spaces and ends a message with a
// newline, so no value may hold a space, '=' or newline (newer MPICH
// escapes with a backslash; Hydra 4.0 and Slurm do not). PMI-2 prefixes a
// six-character decimal length, right-aligned by Hydra ("%6u") and
// left-aligned by Slurm and MPICH's client ("%-6d"), and separates
// attributes with ';' (MPICH 4.0 doubles a ';' inside a value; Slurm
// cannot carry one). gofi writes only values from a safe alphabet (see
// value.go), so it needs no escapes of its own; the decoders accept every
// variant above and refuse anything else with an error, never a panic.
//
// Everything read here comes from the launcher and is checked: lengths are
// bounded (maxMsg), the command must come first, keys are non-empty.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofi-dev/fi"
)

// maxMsg bounds one PMI message (MPICH's PMI-2 client uses 64 KiB too).
// A longer reply is refused as oversized.
const maxMsg = 64 << 10

// msg is one decoded PMI message: its command and attributes in order.
type msg struct {
	cmd  string
	keys []string
	vals []string
}

// get returns the first value of key.
func (m *msg) get(key string) (string, bool) {
	for i, k := range m.keys {
		if k == key {
			return m.vals[i], true
		}
	}
	return "", false
}

// String formats m in PMI-1 style, for errors and traces.
func (m *msg) String() string {
	var b strings.Builder
	b.WriteString("cmd=")
	b.WriteString(m.cmd)
	for i, k := range m.keys {
		b.WriteByte(' ')
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(m.vals[i])
	}
	return b.String()
}

// errSyntax is what the decoders return for a malformed message; callers
// wrap it with fi.ErrRemoteIO.
type errSyntax struct{ why string }

func (e *errSyntax) Error() string { return e.why }

func syntax(format string, args ...any) error {
	return &errSyntax{why: fmt.Sprintf(format, args...)}
}

// parseV1 decodes one PMI-1 line (without its newline). Attributes are
// separated by one or more spaces; a backslash keeps the next byte
// (newer MPICH escapes spaces that way); an attribute without '=' has an
// empty value. The first attribute must be cmd with a non-empty value.
func parseV1(line []byte) (msg, error) {
	var m msg
	if !bytes.HasPrefix(line, []byte("cmd=")) {
		return m, syntax("PMI-1 message does not start with cmd=: %.40q", line)
	}
	var tok []byte
	first := true
	for i := 0; i <= len(line); i++ {
		if i < len(line) && line[i] != ' ' {
			c := line[i]
			if c == '\\' && i+1 < len(line) {
				i++
				c = line[i]
			} else if c == '\n' || c == 0 {
				return m, syntax("PMI-1 message holds a %q byte", c)
			}
			tok = append(tok, c)
			continue
		}
		if len(tok) == 0 {
			continue
		}
		k, v, _ := bytes.Cut(tok, []byte("="))
		tok = tok[:0]
		if len(k) == 0 {
			return m, syntax("PMI-1 attribute without a key in %.60q", line)
		}
		if first {
			first = false
			if len(v) == 0 {
				return m, syntax("PMI-1 message with an empty command")
			}
			m.cmd = string(v)
			continue
		}
		m.keys = append(m.keys, string(k))
		m.vals = append(m.vals, string(v))
	}
	return m, nil
}

// parseV2 decodes a PMI-2 body (after its length field). Attributes end
// with ';' (the last one may end the body instead); ";;" inside a value
// is one ';' (MPICH 4.0's escape). The first attribute must be cmd.
func parseV2(body []byte) (msg, error) {
	var m msg
	if !bytes.HasPrefix(body, []byte("cmd=")) {
		return m, syntax("PMI-2 message does not start with cmd=: %.40q", body)
	}
	first := true
	for i := 0; i < len(body); {
		// key: up to '=' or ';'
		j := i
		for j < len(body) && body[j] != '=' && body[j] != ';' {
			j++
		}
		key := body[i:j]
		if len(key) == 0 {
			if j < len(body) && body[j] == ';' { // stray separator
				i = j + 1
				continue
			}
			return m, syntax("PMI-2 attribute without a key in %.60q", body)
		}
		var val []byte
		if j < len(body) && body[j] == '=' {
			j++
			for j < len(body) {
				if body[j] == ';' {
					if j+1 < len(body) && body[j+1] == ';' {
						val = append(val, ';')
						j += 2
						continue
					}
					break
				}
				val = append(val, body[j])
				j++
			}
		}
		if j < len(body) { // body[j] == ';'
			j++
		}
		i = j
		if bytes.IndexByte(key, 0) >= 0 || bytes.IndexByte(val, 0) >= 0 {
			return m, syntax("PMI-2 message holds a NUL byte")
		}
		if first {
			first = false
			if len(val) == 0 {
				return m, syntax("PMI-2 message with an empty command")
			}
			m.cmd = string(val)
			continue
		}
		m.keys = append(m.keys, string(key))
		m.vals = append(m.vals, string(val))
	}
	return m, nil
}

// parseV2Len decodes a PMI-2 length field: six bytes holding a decimal
// number padded with spaces on either side.
func parseV2Len(h []byte) (int, error) {
	s := strings.TrimSpace(string(h))
	if s == "" || len(h) != 6 {
		return 0, syntax("PMI-2 length field %q is not a number", h)
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, syntax("PMI-2 length field %q is not a number", h)
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, syntax("PMI-2 length field %q is not a number", h)
	}
	return n, nil
}

// appendV1 encodes a PMI-1 message. kv alternates keys and values.
func appendV1(b []byte, cmd string, kv ...string) []byte {
	b = append(b, "cmd="...)
	b = append(b, cmd...)
	for i := 0; i+1 < len(kv); i += 2 {
		b = append(b, ' ')
		b = append(b, kv[i]...)
		b = append(b, '=')
		b = append(b, kv[i+1]...)
	}
	return append(b, '\n')
}

// appendV2 encodes a PMI-2 message with its length field (left-aligned,
// as MPICH's client and Slurm write it). kv alternates keys and values.
func appendV2(b []byte, cmd string, kv ...string) []byte {
	start := len(b)
	b = append(b, "      cmd="...)
	b = append(b, cmd...)
	b = append(b, ';')
	for i := 0; i+1 < len(kv); i += 2 {
		b = append(b, kv[i]...)
		b = append(b, '=')
		for _, c := range []byte(kv[i+1]) {
			if c == ';' {
				b = append(b, ';')
			}
			b = append(b, c)
		}
		b = append(b, ';')
	}
	n := strconv.Itoa(len(b) - start - 6)
	copy(b[start:start+6], n) // callers keep messages under maxMsg: n fits
	return b
}

// conn is the PMI socket: one request, one reply, under a deadline. A
// failure that may leave a reply in flight (timeout, short write, bad
// reply) breaks the conn: every later call returns the same error, since
// the next reply read could belong to the earlier request. Not safe for
// concurrent use; Job serializes calls.
type conn struct {
	c       net.Conn
	r       *bufio.Reader
	timeout time.Duration
	trace   io.Writer // nil: no trace (GOFI_PMI_DEBUG=1 sets os.Stderr)
	tag     string    // trace prefix
	broken  error
	wbuf    []byte
	wmu     sync.Mutex // one write at a time (abort may come from another goroutine)
}

func newConn(c net.Conn, timeout time.Duration, trace io.Writer, tag string) *conn {
	return &conn{c: c, r: bufio.NewReaderSize(c, 4096), timeout: timeout, trace: trace, tag: tag}
}

// connFromFD makes a conn of an inherited socket (PMI_FD). The fd is
// duplicated into the runtime's poller, so deadlines work, and the
// inherited descriptor is closed.
func connFromFD(fd int, name string) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), name)
	if f == nil {
		return nil, lerr("Init", fi.ErrBadF, "%s=%d is not an open descriptor", name, fd)
	}
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, lerr("Init", fi.ErrBadF, "%s=%d is not a socket: %v", name, fd, err)
	}
	return c, nil
}

// dialPMI connects to PMI_PORT ("host:port").
func dialPMI(addr string, timeout time.Duration) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return nil, lerr("Init", fi.ErrInval, "PMI_PORT=%q is not host:port", addr)
	}
	c, err := net.DialTimeout("tcp", addr, min(timeout, 30*time.Second))
	if err != nil {
		return nil, lerr("Init", fi.ErrConnRefused, "connecting to the launcher at PMI_PORT=%s: %v", addr, err)
	}
	return c, nil
}

// send writes one encoded request.
func (c *conn) send(op string, b []byte) error {
	if c.broken != nil {
		return c.broken
	}
	if c.trace != nil {
		fmt.Fprintf(c.trace, "%s -> %s\n", c.tag, strings.TrimRight(string(b), "\n"))
	}
	if err := c.c.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return c.fail(lerr(op, fi.ErrIO, "PMI socket: %v", err))
	}
	c.wmu.Lock()
	_, err := c.c.Write(b)
	c.wmu.Unlock()
	if err != nil {
		return c.fail(c.ioErr(op, "sending to the launcher", err))
	}
	return nil
}

// sendAbort writes an abort request, whatever state the conversation is
// in and whichever goroutine waits for a reply: the process exits next.
func (c *conn) sendAbort(b []byte) error {
	if c.trace != nil {
		fmt.Fprintf(c.trace, "%s -> %s\n", c.tag, strings.TrimRight(string(b), "\n"))
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.c.Write(b); err != nil {
		return lerr("Abort", fi.ErrIO, "sending the abort to the launcher: %v", err)
	}
	return nil
}

// readV1 reads one PMI-1 reply line.
func (c *conn) readV1(op string) (msg, error) {
	if c.broken != nil {
		return msg{}, c.broken
	}
	var line []byte
	for {
		part, err := c.r.ReadSlice('\n')
		if len(line)+len(part) > maxMsg {
			return msg{}, c.fail(lerr(op, fi.ErrRemoteIO, "PMI reply longer than %d bytes", maxMsg))
		}
		line = append(line, part...)
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return msg{}, c.fail(lerr(op, fi.ErrConnReset, "the launcher closed the PMI socket in the middle of a reply: %.60q", line))
		}
		return msg{}, c.fail(c.ioErr(op, "reading the launcher's reply", err))
	}
	line = line[:len(line)-1]
	if c.trace != nil {
		fmt.Fprintf(c.trace, "%s <- %s\n", c.tag, line)
	}
	m, err := parseV1(line)
	if err != nil {
		return msg{}, c.fail(lerr(op, fi.ErrRemoteIO, "bad PMI reply: %v", err))
	}
	return m, nil
}

// readV2 reads one PMI-2 reply.
func (c *conn) readV2(op string) (msg, error) {
	if c.broken != nil {
		return msg{}, c.broken
	}
	var h [6]byte
	if _, err := io.ReadFull(c.r, h[:]); err != nil {
		return msg{}, c.fail(c.ioErr(op, "reading the launcher's reply", err))
	}
	n, err := parseV2Len(h[:])
	if err != nil {
		return msg{}, c.fail(lerr(op, fi.ErrRemoteIO, "bad PMI reply: %v", err))
	}
	if n > maxMsg {
		return msg{}, c.fail(lerr(op, fi.ErrRemoteIO, "PMI reply of %d bytes is longer than %d", n, maxMsg))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return msg{}, c.fail(c.ioErr(op, "reading the launcher's reply", err))
	}
	if c.trace != nil {
		fmt.Fprintf(c.trace, "%s <- %s%s\n", c.tag, h[:], body)
	}
	m, err := parseV2(body)
	if err != nil {
		return msg{}, c.fail(lerr(op, fi.ErrRemoteIO, "bad PMI reply: %v", err))
	}
	return m, nil
}

// expect checks a reply's command and its rc attribute (absent or 0 is
// success; otherwise msg or errmsg says why). A reply to another request
// means the conversation is out of step: the conn breaks.
func (c *conn) expect(op string, m msg, want string) error {
	if m.cmd != want {
		return c.fail(lerr(op, fi.ErrRemoteIO, "launcher answered %q, expected %s", m.String(), want))
	}
	if rc, ok := m.get("rc"); ok && rc != "0" {
		why, _ := m.get("msg")
		if why == "" {
			why, _ = m.get("errmsg")
		}
		return lerr(op, fi.ErrRemoteIO, "launcher refused (%s rc=%s): %s", want, rc, why)
	}
	return nil
}

// ioErr classifies a socket error: a timeout, the launcher closing the
// socket, or anything else.
func (c *conn) ioErr(op, doing string, err error) error {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		if op == "Fence" || op == "Barrier" {
			doing = "waiting for every rank to reach the " + strings.ToLower(op) + " (has one not called it, or not started?)"
		}
		return lerr(op, fi.ErrTimedOut, "no answer from the launcher within %v while %s", c.timeout, doing)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return lerr(op, fi.ErrConnReset, "the launcher closed the PMI socket while %s", doing)
	default:
		return lerr(op, fi.ErrIO, "PMI socket, %s: %v", doing, err)
	}
}

func (c *conn) fail(err error) error {
	if c.broken == nil {
		c.broken = err
	}
	return err
}

func (c *conn) close() error { return c.c.Close() }
