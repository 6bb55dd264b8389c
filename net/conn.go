package net

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	stdnet "net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/rma"
	"github.com/gofi-dev/fi/transport"
)

const (
	stHello uint8 = iota // waiting for the peer's HELLO
	stAuth               // waiting for the peer's AUTH
	stReady              // handshake done

	maxIOV      = 64
	helloAuth   = 1 << 0
	smallBuf    = 4 << 10
	authContext = "gofi-net-auth-v1"
)

var (
	errRefused = errors.New("net: peer refused (authentication)")
	errClosing = errors.New("net: transport closing")
	// errDetached stops the decoding of a connection that was torn down
	// (its peer failed or restarted) while gnet still had bytes of it to
	// deliver: they belong to an ended incarnation of the peer.
	errDetached = errors.New("net: frame on a torn-down connection")
	// errEnroll: gnet took a dialed socket but never opened it.
	errEnroll = fmt.Errorf("net: event loop did not open the connection: %w", unix.ECONNRESET)
)

// tconn is one TCP connection. Loop-owned fields are touched only by the
// gnet loop; the others only with the peer's mu held (once peer is set).
type tconn struct {
	t      *Transport
	gc     gnet.Conn
	fd     int
	peer   *peer // set before enrolling (dialed) or at attach (inbound)
	dialed bool

	// loop-owned
	state      uint8
	dec        decoder
	myHello    [hdrSize + helloLen]byte
	theirHello [helloLen]byte
	cur        *fetchSlot
	curID      uint32
	curSeg     int
	curOff     int
	discard    [4096]byte
	src        connSrc
	pre        []byte        // bytes Poll read from the socket, not yet decoded
	riov       [9]unix.Iovec // readDirect's scratch
	owner      bool          // Poll is decoding (push.go: the engine may be called)
	pbuf       []byte
	dead       bool // Poll saw it fail while owning the loop
	shaking    bool // counted in t.handshakes (loop only)
	gone       bool // gnet closed it (OnClose ran)
	stalled    atomic.Bool
	draining   atomic.Bool // closed by gnet with frames left to decode (closeTail)
	closeErr   error       // why gnet closed it, while draining
	rx         *rmaRx      // the RMA request being executed (rma.go)
	lastPush   bool        // the last frame decoded was a PUSH (own.go: read the next header alone)
	lastWrite  bool        // ... a large RMA write (own.go: read the next headers alone)
	// placed: both HELLOs agreed to exchange places (place.go); set by
	// the loop at the HELLO, read by every writer (a frame queued before
	// the handshake ended goes unstamped).
	placed atomic.Bool
	// placeLoop: both HELLOs said they mark their loop's stamps
	// (placeLoop), set with placed.
	placeLoop atomic.Bool
	// placeMany: both HELLOs said they mark stamps of a writer with more
	// than one same-host peer (placeMany), set with placed.
	placeMany atomic.Bool
	// expiry fails the handshake DialTimeout after it began (openExpired
	// for a dial, shakeExpired for an accepted connection); the HELLO that
	// makes the connection ready stops it, so that no timer fires (and
	// allocates, queueing a task on the loop) into a running data path.
	// Set before gnet opens a dial, in OnOpen for an accepted one.
	expiry *time.Timer

	// under peer.mu
	ready     bool // handshake done and no write error: writes allowed
	closed    bool
	detached  bool // torn down: its OnClose does nothing more
	retiring  bool // duplicate: RETIRE queued as its last frame (converge)
	gated     bool // the connection switched to: writes wait for RETIRE ack
	viaName   bool // inbound, dialed at exactly our announced address
	inherited bool // became tx when the peer closed our dial (closedInOrderLocked)
	werr      error
	inEpoll   bool        // registered with the flusher
	armed     bool        // the flusher's one-shot EPOLLOUT is armed
	outq      atomic.Bool // the send queue holds bytes (set and cleared under mu; read by Poll)
	q         []outEntry
	qh        int
	queued    int // bytes copied into q (the high-water mark counts these)
	aq        int // of those, RMA answers (rma.go: a peer's requests are bounded by them)
	hbuf      [hdrSize]byte
	cbuf      [hdrSize]byte // a CREDIT frame riding in front of a write (writeDirect)
	iovs      []unix.Iovec
	trunc     [][]byte
	rmaHdr    [hdrSize + rma.MaxReqHeader]byte // an RMA request's headers (rma.go)
	rmaPay    [][]byte
	ab        []byte // RMA answers gathered in this decoding pass (rma.go)
	abListed  bool   // listed in Transport.answers
}

// newTconn makes a connection's state with its scratch and queue space,
// so that its first messages of any size allocate nothing.
func newTconn(t *Transport) *tconn {
	tc := &tconn{t: t, iovs: make([]unix.Iovec, 0, maxIOV), q: make([]outEntry, 8)}
	for i := range tc.q {
		tc.q[i].iov = make([][]byte, 0, 4)
	}
	tc.q = tc.q[:0]
	if !t.cfg.LoopOnly { // Poll reads into pre once it owns the loop
		tc.pbuf = make([]byte, 2*ownRead)
		tc.pre = tc.pbuf[:0]
	}
	return tc
}

// outEntry is a frame (or its unwritten tail) waiting in a send queue.
type outEntry struct {
	hdr   [hdrSize]byte
	nh    int      // header bytes in hdr (0 when the header is in own)
	own   *[]byte  // copied bytes, from bufPool
	iov   [][]byte // payload: own's bytes, or the sender's buffers (DATA)
	off   int      // bytes already written (header first, then payload)
	total int      // header + payload bytes
	op    transport.Op
	hasOp bool // SendDone(op) when the last byte is written
	// splice: iov is an RMA write payload (no header), kept by the
	// engine until the target answers: it may go by splice (splice.go).
	splice bool
	// ans: own holds RMA answers (counted in tconn.aq, rma.go).
	ans bool
}

// writeDirect writes hdr and iov with one writev. The peer's mu is held.
// Receive-window credit the peer is owed rides in front (a CREDIT frame
// in the same writev, see creditLocked); the count returned is of hdr and
// iov's bytes only. When the socket took part of the CREDIT frame alone,
// its rest is queued and writeDirect reports EAGAIN: the caller queues
// its frame behind it.
func (tc *tconn) writeDirect(hdr []byte, iov [][]byte) (int, error) {
	v := tc.iovs[:0]
	p := tc.peer
	cred := 0
	if p != nil && p.tx == tc && p.owed >= p.t.creditSoon() {
		f := frame{op: opCredit, length: uint64(p.owed)}
		tc.header(tc.cbuf[:], &f)
		v = append(v, iovec(tc.cbuf[:]))
		cred = hdrSize
	}
	v = append(v, iovec(hdr))
	for _, b := range iov {
		if len(b) > 0 {
			v = append(v, iovec(b))
		}
	}
	n, err := writev(tc.fd, v)
	if n == cred+len(hdr)+int(iovLen(iov)) && !tc.t.wrote.Load() {
		tc.t.wrote.Store(true) // all of it went out: Poll yields first
	}
	clear(v) // drop the references to the buffers
	tc.iovs = v[:0]
	if cred == 0 || n <= 0 {
		return n, err
	}
	p.recvUsed -= p.owed // the CREDIT frame is (or its rest will be) on the wire
	p.owed = 0
	if n < cred {
		tc.enqueueCopy(tc.cbuf[:], nil, n, 0, false)
		return 0, unix.EAGAIN
	}
	return n - cred, err
}

func iovec(b []byte) unix.Iovec {
	v := unix.Iovec{Base: &b[0]}
	v.SetLen(len(b))
	return v
}

// enqueueCopy queues the bytes of hdr+iov after skip, copied. With hasOp,
// SendDone(op) follows once they are written.
func (tc *tconn) enqueueCopy(hdr []byte, iov [][]byte, skip int, op transport.Op, hasOp bool) {
	total := len(hdr) + int(iovLen(iov)) - skip
	list := tc.t.qsmall
	if total > smallBuf {
		list = tc.t.qlarge
	}
	own := list.get(0)
	if cap(*own) < total {
		*own = make([]byte, total)
	}
	b := (*own)[:0]
	if skip < len(hdr) {
		b = append(b, hdr[skip:]...)
		skip = 0
	} else {
		skip -= len(hdr)
	}
	for _, s := range iov {
		if skip >= len(s) {
			skip -= len(s)
			continue
		}
		b = append(b, s[skip:]...)
		skip = 0
	}
	e := tc.push()
	e.own = own
	e.iov = append(e.iov[:0], b)
	e.total, e.op, e.hasOp = len(b), op, hasOp
	tc.queued += len(b)
}

// enqueueRef queues a DATA frame whose payload stays in the sender's
// buffers (not copied: they are the transport's until SendDone).
func (tc *tconn) enqueueRef(hdr []byte, iov [][]byte, skip int, op transport.Op) {
	e := tc.push()
	copy(e.hdr[:], hdr)
	e.nh = hdrSize
	e.iov = append(e.iov[:0], iov...)
	e.total = hdrSize + int(iovLen(iov))
	e.off = skip
	e.op, e.hasOp = op, true
}

func (tc *tconn) push() *outEntry {
	tc.outq.Store(true)
	if tc.qh == len(tc.q) {
		tc.q, tc.qh = tc.q[:0], 0
	}
	if len(tc.q) < cap(tc.q) {
		tc.q = tc.q[:len(tc.q)+1]
	} else {
		tc.q = append(tc.q, outEntry{})
	}
	e := &tc.q[len(tc.q)-1]
	e.nh, e.off, e.own, e.splice, e.ans = 0, 0, nil, false, false
	return e
}

// pop completes the head entry.
func (tc *tconn) pop(code transport.Code) {
	e := &tc.q[tc.qh]
	if e.hasOp {
		tc.t.push(event{kind: evSendDone, op: e.op, code: code})
	}
	if e.own != nil {
		tc.queued -= len(e.iov[0])
		if e.ans {
			tc.aq -= len(e.iov[0])
			e.ans = false
		}
		if cap(*e.own) > smallBuf {
			tc.t.qlarge.put(e.own)
		} else {
			tc.t.qsmall.put(e.own)
		}
		e.own = nil
	}
	clear(e.iov)
	e.iov = e.iov[:0]
	e.hasOp = false
	tc.qh++
}

func (tc *tconn) failQueue(code transport.Code) {
	tc.t.sp.drop(tc) // bytes of its head entry may be in the pipe
	for tc.qh < len(tc.q) {
		tc.pop(code)
	}
	tc.q, tc.qh = tc.q[:0], 0
	tc.outq.Store(false)
}

// flushLocked writes queued frames until the queue is empty or the socket
// is full (then the flusher is armed). The peer's mu is held.
func (p *peer) flushLocked(tc *tconn) error {
	for tc.qh < len(tc.q) {
		if h := &tc.q[tc.qh]; h.splice {
			handled, full, err := p.spliceLocked(tc, h)
			if err != nil {
				return err
			}
			if full {
				return p.t.fl.arm(tc)
			}
			if handled {
				continue
			}
		}
		v := tc.iovs[:0]
		want := 0
		for i := tc.qh; i < len(tc.q) && len(v) < maxIOV; i++ {
			e := &tc.q[i]
			if e.splice && i > tc.qh {
				break // it may go by splice once it is the head
			}
			skip := e.off
			if skip < e.nh {
				v = append(v, iovec(e.hdr[skip:e.nh]))
				want += e.nh - skip
				skip = 0
			} else {
				skip -= e.nh
			}
			for _, b := range e.iov {
				if skip >= len(b) {
					skip -= len(b)
					continue
				}
				if len(v) == maxIOV {
					break
				}
				v = append(v, iovec(b[skip:]))
				want += len(b) - skip
				skip = 0
			}
		}
		n, err := writev(tc.fd, v)
		clear(v)
		tc.iovs = v[:0]
		if err != nil && err != unix.EAGAIN {
			return err
		}
		for n > 0 {
			e := &tc.q[tc.qh]
			if rem := e.total - e.off; n >= rem {
				n -= rem
				tc.pop(transport.OK)
			} else {
				e.off += n
				n = 0
			}
		}
		if err == unix.EAGAIN || (n < want && tc.qh < len(tc.q)) {
			return p.t.fl.arm(tc)
		}
	}
	tc.q, tc.qh = tc.q[:0], 0
	tc.outq.Store(false)
	return nil
}

// dialLocked starts a connection to the peer: a goroutine connects (with a
// timeout) and enrolls the socket in the gnet loop, which never blocks.
func (p *peer) dialLocked() *tconn {
	t := p.t
	tc := newTconn(t)
	tc.peer, tc.dialed, tc.fd = p, true, -1
	p.tx = tc
	t.wantRelease.Store(true) // enrolling the socket needs the loop
	t.dials.Add(1)
	t.dialing.Add(1)
	go t.dial(tc, p.ap)
	return tc
}

func (t *Transport) dial(tc *tconn, ap netip.AddrPort) {
	defer t.dials.Done()
	defer t.dialing.Add(-1)
	nc, err := connect(ap, t.cfg.DialTimeout, t.connected)
	if err != nil {
		t.dialFailed(tc, err)
		return
	}
	if t.closing.Load() {
		nc.Close()
		t.dialFailed(tc, errClosing)
		return
	}
	if nc.RemoteAddr() == nil {
		// The peer reset the connection before it was wrapped (a peer
		// dying with our connect in its accept queue): getpeername
		// failed, and gnet's Register would panic on the nil address in
		// its worker (recovered there, silently) and report nothing.
		nc.Close()
		t.dialFailed(tc, unix.ECONNRESET)
		return
	}
	// Whatever becomes of the enrolment, a connection that is not ready
	// (handshake done) or gone within DialTimeout fails (openExpired).
	timer := time.AfterFunc(t.cfg.DialTimeout, func() { t.openExpired(tc) })
	tc.expiry = timer // read once the HELLO arrives, after gnet opened tc
	ctx := gnet.NewNetConnContext(gnet.NewContext(context.Background(), tc), nc)
	ch, err := t.eng.Register(ctx)
	if err != nil {
		timer.Stop()
		nc.Close()
		t.dialFailed(tc, err)
		return
	}
	select {
	case res, ok := <-ch:
		switch {
		case !ok:
			err = errEnroll // its worker ended (panicked) without an answer
		case res.Err != nil:
			err = res.Err
		case !t.opened(tc):
			// gnet answered without opening the connection (its poller
			// refused the descriptor, which it then closed): no OnOpen
			// and no OnClose will ever come.
			err = errEnroll
		default:
			return // opened: the handshake goes on, openExpired watches it
		}
	case <-time.After(t.cfg.DialTimeout):
		// The loop stopped (or is wedged) before enrolling the socket.
		err = unix.ETIMEDOUT
	}
	timer.Stop()
	t.dialFailed(tc, err)
}

// opened reports whether gnet opened the dialed connection tc (OnOpen ran).
func (t *Transport) opened(tc *tconn) bool {
	p := tc.peer
	p.mu.Lock()
	defer p.mu.Unlock()
	return tc.gc != nil
}

// openExpired fails a dialed connection still opening DialTimeout after
// its connect succeeded: enrolled but not opened by gnet, or opened but
// the handshake not done (a peer that accepted and never answered, or
// that died in between). Everything queued on it fails with ETIMEDOUT and
// the peer is torn down, so no gnet quirk and no silent peer can hang a
// send (a timer goroutine).
func (t *Transport) openExpired(tc *tconn) {
	p := tc.peer
	p.mu.Lock()
	defer p.mu.Unlock()
	if tc.ready || tc.detached || tc.closed || p.tx != tc || t.closing.Load() {
		return
	}
	t.openTimeouts.Add(1)
	p.teardownLocked(transport.ETimedOut, nil)
}

func (t *Transport) dialFailed(tc *tconn, err error) {
	p := tc.peer
	p.mu.Lock()
	defer p.mu.Unlock()
	if tc.detached || tc.ready || p.tx != tc {
		return
	}
	code := codeOf(err)
	if t.closing.Load() {
		code = transport.ECanceled
	}
	p.teardownLocked(code, nil)
}

// connect opens a TCP connection to ap, giving up after timeout. It waits
// for the connection in poll(2) on its own thread rather than in Go's
// network poller: a goroutine parked there is resumed only when a thread
// of the runtime polls the network, and in a process whose application
// keeps polling (busy) and whose event loop sleeps in its own epoll set,
// that took 3-4 ms on loopback (sysmon's poll), the most of a new peer's
// first round trip. A zoned IPv6 address goes through Go's dialer.
func connect(ap netip.AddrPort, timeout time.Duration, connected func(fd int)) (stdnet.Conn, error) {
	addr := ap.Addr()
	var sa unix.Sockaddr
	family := unix.AF_INET
	switch {
	case addr.Is4() || addr.Is4In6():
		sa = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: addr.Unmap().As4()}
	case addr.Zone() == "":
		family = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: addr.As16()}
	default:
		d := stdnet.Dialer{Timeout: timeout, KeepAlive: -1}
		return d.Dial("tcp", ap.String())
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err = connectWait(fd, sa, timeout); err == nil && selfConnected(fd) {
		// A port nobody listens on, and the kernel picked it as our
		// source port too: TCP's simultaneous open connected the socket
		// to itself (Go's dialer checks this as well).
		err = unix.ECONNREFUSED
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	if connected != nil {
		connected(fd)
	}
	f := os.NewFile(uintptr(fd), "gofi-dial")
	nc, err := stdnet.FileConn(f) // a dup; gnet dups it again and closes nc
	f.Close()
	return nc, err
}

// selfConnected reports whether fd's local and remote addresses are the
// same.
func selfConnected(fd int) bool {
	la, err1 := unix.Getsockname(fd)
	ra, err2 := unix.Getpeername(fd)
	if err1 != nil || err2 != nil {
		return false
	}
	return sockaddrKey(la) == sockaddrKey(ra)
}

// connectWait connects the non-blocking socket fd to sa, waiting in
// poll(2) for at most timeout.
func connectWait(fd int, sa unix.Sockaddr, timeout time.Duration) error {
	err := unix.Connect(fd, sa)
	for err == unix.EINTR {
		err = unix.Connect(fd, sa) // the attempt goes on: EALREADY, EISCONN or its result
	}
	switch err {
	case nil, unix.EISCONN:
		return nil
	case unix.EINPROGRESS, unix.EALREADY:
	default:
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return unix.ETIMEDOUT
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(pfd, int(min(left.Milliseconds()+1, 1<<30)))
		if err == unix.EINTR || n == 0 {
			continue
		}
		if err != nil {
			return err
		}
		v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return err
		}
		if v != 0 {
			return unix.Errno(v)
		}
		return nil
	}
}

// loop is the gnet event handler of a transport.
type loop struct {
	gnet.BuiltinEventEngine
	t         *Transport
	booted    chan struct{}
	bootOnce  sync.Once
	nameErr   error
	committed bool // records committed to the handoff ring, not yet published
}

// OnBoot runs before gnet starts its loops: the listener's real address is
// read here so that every OnOpen sees it.
func (l *loop) OnBoot(eng gnet.Engine) gnet.Action {
	l.t.eng = eng
	l.t.name, l.nameErr = listenerName(eng)
	if ap, err := parseSockaddr(l.t.name); err == nil {
		l.t.nameKey = keyOf(ap)
	}
	return gnet.None
}

// OnTick runs first once gnet has set up its loops (OnBoot runs before,
// and using the engine from another goroutine then races with the setup):
// only then may Listen return and dials call Engine.Register.
func (l *loop) OnTick() (time.Duration, gnet.Action) {
	l.bootOnce.Do(func() { close(l.booted) })
	return time.Hour, gnet.None
}

func (l *loop) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	t := l.t
	if t.spin.tasks == nil {
		t.spin.tasks = gnetTasks(c.EventLoop())
		t.gtasks.Store(t.spin.tasks)
		t.epfd = gnetEpoll(c.EventLoop())
	}
	if _, ok := c.Context().(parkMark); ok {
		if t.el.Load() == nil {
			t.el.Store(&evLoop{c.EventLoop()})
		}
		return nil, gnet.None
	}
	tc, _ := c.Context().(*tconn)
	if tc == nil {
		tc = newTconn(t)
		c.SetContext(tc)
		// Inbound: a client that connects and never completes the
		// handshake would hold the connection (and keep the loop from
		// being borrowed or spinning, t.handshakes) for ever.
		el := c.EventLoop()
		tc.expiry = time.AfterFunc(t.cfg.DialTimeout, func() {
			_ = el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
				t.shakeExpired(tc, c)
				return nil
			}))
		})
	}
	if p := tc.peer; p != nil {
		p.mu.Lock() // a dialed connection: its dial and openExpired read gc
		tc.gc, tc.fd = c, c.Fd()
		p.mu.Unlock()
	} else {
		tc.gc, tc.fd = c, c.Fd()
	}
	if !tc.shaking {
		tc.shaking = true // the loop is not borrowed until it is ready
		t.handshakes.Add(1)
	}
	if t.el.Load() == nil {
		t.el.Store(&evLoop{c.EventLoop()})
	}
	if t.closing.Load() {
		return nil, gnet.Close
	}
	_ = c.SetNoDelay(true)
	if ka := t.cfg.KeepAlive; ka > 0 {
		_ = c.SetKeepAlive(true, ka, time.Second, 3)
	}
	if ut := t.cfg.UserTimeout; ut > 0 {
		_ = unix.SetsockoptInt(c.Fd(), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(max(ut.Milliseconds(), 1)))
	}
	tc.buildHello()
	return tc.myHello[:], gnet.None
}

// shakeExpired closes an inbound connection c whose handshake is not done
// DialTimeout after gnet opened it (on the loop).
func (t *Transport) shakeExpired(tc *tconn, c gnet.Conn) {
	if tc.gone || tc.gc != c || tc.state == stReady {
		return
	}
	t.shakeTimeouts.Add(1)
	_ = c.Close()
}

func (tc *tconn) buildHello() {
	t := tc.t
	f := frame{op: opHello, length: helloLen}
	putHeader(tc.myHello[:], &f)
	h := tc.myHello[hdrSize:]
	binary.LittleEndian.PutUint64(h[0:], t.instance)
	_, _ = rand.Read(h[8:16])
	binary.LittleEndian.PutUint32(h[16:], t.pid)
	binary.LittleEndian.PutUint32(h[20:], uint32(t.cfg.Window))
	if len(t.cfg.AuthKey) > 0 {
		h[24] = helloAuth
	}
	h[25] = protoVersion
	h[26] = byte(len(t.name))
	copy(h[28:56], t.name)
	if id := t.cfg.Host; id != 0 && id != NoHost { // places of same-host peers (place.go)
		h[24] |= helloPlace
		if !t.cfg.noLoopStamps {
			h[24] |= helloPlaceLoop
		}
		if !t.cfg.noManyStamps {
			h[24] |= helloPlaceMany
		}
		binary.LittleEndian.PutUint64(h[56:], id)
	}
}

func (l *loop) OnTraffic(c gnet.Conn) gnet.Action {
	tc, _ := c.Context().(*tconn)
	if tc == nil {
		if _, ok := c.Context().(parkMark); ok {
			_, _ = c.Discard(-1)
			_ = l.t.parkTask(context.Background())
			return gnet.None
		}
		return gnet.Close
	}
	t := l.t
	spin := t.spin.max > 0
	if spin {
		t.spin.arrived(time.Now())
	}
	tc.src.tc, tc.src.gc = tc, c
	stalled, err := tc.dec.run(&tc.src, tc)
	t.flushAnswers()
	if l.committed {
		l.committed = false
		t.ho.publish()
		t.notify()
	}
	if err != nil {
		tc.closeReason(err)
		return gnet.Close
	}
	if stalled {
		t.listStalled(tc, true)
		return gnet.None
	}
	if spin && tc.state == stReady {
		t.loopSpin()
		if tc.dead {
			return gnet.Close
		}
	}
	return gnet.None
}

// doneShaking ends tc's handshake (ready or closed; on the loop).
func (tc *tconn) doneShaking() {
	if tc.shaking {
		tc.shaking = false
		tc.t.handshakes.Add(-1)
	}
}

func (tc *tconn) closeReason(err error) {
	if p := tc.peer; p != nil {
		p.mu.Lock()
		if tc.werr == nil {
			tc.werr = err
		}
		p.mu.Unlock()
	}
}

func (l *loop) OnClose(c gnet.Conn, err error) gnet.Action {
	tc, _ := c.Context().(*tconn)
	if tc == nil {
		return gnet.None
	}
	tc.gone = true
	tc.doneShaking()
	p := tc.peer
	if p == nil {
		return gnet.None
	}
	p.mu.Lock()
	if tc.detached {
		p.mu.Unlock()
		return gnet.None
	}
	if tc.retiring && tc.qh == len(tc.q) {
		// The peer closed a connection we retired once it had read our
		// RETIRE (every byte we queued on it was written): not a failure.
		p.retireLocked(tc)
		p.mu.Unlock()
		return gnet.None
	}
	tail := tc.state == stReady && !l.t.closing.Load() &&
		(tc.werr == nil || errors.Is(tc.werr, io.EOF))
	p.mu.Unlock()
	if tail && l.t.closeTail(tc, c, err) {
		return gnet.None
	}
	l.t.closeConn(tc, err)
	return gnet.None
}

// closeTail decodes the frames gnet closed c with (on the loop, in
// OnClose, while c's inbound buffer is still readable). A connection the
// handoff ring stalled keeps its undecoded bytes in gnet's buffer (and in
// pre); when the peer then closes, gnet reads the EOF and closes c without
// another OnTraffic, and those frames, which the peer wrote and saw
// complete, were lost with the teardown (TestPeerClose_StalledFramesArrive).
// When the ring still has no room, the rest moves into pre, tc drains
// (listed stalled; unstall has the loop decode it, drainTask) and the
// close is finished once every frame is decoded. It reports whether the
// close was deferred.
func (t *Transport) closeTail(tc *tconn, c gnet.Conn, err error) bool {
	if c.InboundBuffered() == 0 && len(tc.pre) == 0 && !tc.dec.have {
		return false
	}
	tc.src.tc, tc.src.gc = tc, c
	stalled, derr := tc.dec.run(&tc.src, tc)
	tc.src.gc = nil
	t.published()
	if derr != nil {
		tc.closeReason(derr) // a protocol error in the tail: EIO
	}
	if derr != nil || !stalled {
		return false
	}
	if n := c.InboundBuffered(); n > 0 {
		tc.reservePre(n)
		k, _ := c.Read(tc.pre[len(tc.pre):cap(tc.pre)][:n])
		tc.pre = tc.pre[:len(tc.pre)+k]
	}
	p := tc.peer
	p.mu.Lock()
	if tc.detached {
		p.mu.Unlock()
		return false
	}
	tc.closeErr = err
	tc.draining.Store(true)
	p.shutLocked(tc)
	p.mu.Unlock()
	t.listStalled(tc, true)
	return true
}

// published publishes what the loop committed to the handoff ring and
// wakes the engine (on the loop).
func (t *Transport) published() {
	t.flushAnswers()
	if t.lis.committed {
		t.lis.committed = false
		t.ho.publish()
		t.notify()
	}
}

// drainTask decodes what a draining connection left (on the loop; see
// closeTail) and finishes its close once all of it is decoded.
func (t *Transport) drainTask(tc *tconn) {
	tc.src.tc, tc.src.gc = tc, nil
	stalled, err := tc.dec.run(&tc.src, tc)
	t.published()
	if err == nil && stalled {
		t.listStalled(tc, true)
		return
	}
	if err != nil {
		tc.closeReason(err)
	}
	tc.draining.Store(false)
	t.closeConn(tc, tc.closeErr)
}

// queueDrain has the loop run drainTask for tc (engine's goroutine, from
// unstall; a close path only, so the task's allocation does not matter).
func (t *Transport) queueDrain(tc *tconn) {
	el := t.loopOf()
	if el == nil {
		return
	}
	_ = el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		t.drainTask(tc)
		return nil
	}))
	// An error means the engine stopped: Close tears every peer down.
}

// closeConn ends tc after gnet closed it (OnClose, or the end of its
// drain): the peer is torn down unless another of its connections carries
// on (closedInOrderLocked) or still drains (then the last one to finish
// tears it down, after all the peer sent).
func (t *Transport) closeConn(tc *tconn, err error) {
	p := tc.peer
	p.mu.Lock()
	defer p.mu.Unlock()
	if tc.detached {
		return
	}
	if tc.werr != nil {
		err = tc.werr
	}
	if errors.Is(err, io.EOF) && tc.state == stReady && !t.closing.Load() && p.closedInOrderLocked(tc) {
		return
	}
	if tc.state == stReady && !t.closing.Load() && p.drainingLocked(tc) {
		tc.cur = nil // a frame the close cut short: its slot fails in the teardown
		p.shutLocked(tc)
		return
	}
	code := codeOf(err)
	switch {
	case t.closing.Load():
		code = transport.ECanceled
	case tc.state != stReady && tc.dialed:
		code = transport.EConnRefuse // refused during the handshake
	}
	if tc.cur != nil {
		tc.cur = nil // its slot fails in the teardown
	}
	p.teardownLocked(code, nil)
	tc.detached = true
	t.fl.del(tc)
	t.mu.Lock()
	t.dropFDLocked(tc)
	t.mu.Unlock()
}

// shutLocked stops every write to a connection gnet closed whose peer is
// not torn down yet (its descriptor is closed, or about to be, and its
// number may be reused at once): it stays attached, so that the teardown
// fails what is queued on it.
func (p *peer) shutLocked(tc *tconn) {
	tc.ready = false
	tc.closed = true
	p.t.fl.del(tc)
	p.t.mu.Lock()
	p.t.dropFDLocked(tc)
	p.t.mu.Unlock()
}

// drainingLocked reports whether a connection of p other than tc still
// decodes what its peer sent before closing it.
func (p *peer) drainingLocked(tc *tconn) bool {
	for _, o := range p.conns {
		if o != tc && !o.detached && o.draining.Load() {
			return true
		}
	}
	return false
}

// frame handles HELLO, AUTH, EAGER, RTS, CTS and CREDIT (decoder callback,
// on the loop).
func (tc *tconn) frame(f *frame, src inbound) (bool, error) {
	if f.op != opCredit { // credit rides in front of other frames (writeDirect)
		tc.lastPush = f.op == opPush
		if tc.lastWrite {
			tc.lastWrite = false
		}
	}
	if f.op == opHello || f.op == opAuth {
		return true, tc.handshake(f, src)
	}
	if tc.state != stReady {
		return false, fmt.Errorf("%w: op %d before the handshake", errProto, f.op)
	}
	p := tc.peer
	t := tc.t
	switch f.op {
	case opPush:
		return tc.pushStart(f)
	case opEager, opRTS:
		if tc.owner && t.sink != nil {
			if handled, err := tc.arriveNow(f); handled || err != nil {
				return handled, err
			}
		}
		cost := int64(hdrSize)
		plen := 0
		if f.op == opEager {
			plen = int(f.length)
			cost += int64(plen)
		}
		b := t.ho.reserve(msgRecHdr + plen)
		if b == nil {
			return false, nil
		}
		p.mu.Lock()
		if tc.detached {
			p.mu.Unlock()
			return false, errDetached // reserved, never committed
		}
		p.recvUsed += cost
		over := p.recvUsed > int64(t.cfg.Window)
		epoch := p.epoch
		p.mu.Unlock()
		if over {
			return false, fmt.Errorf("%w: peer exceeded the receive window", errProto)
		}
		putRec(b, p.idx, epoch, f, f.cookie)
		if err := readFull(src, b[msgRecHdr:]); err != nil {
			return false, err
		}
		t.ho.commit(msgRecHdr + plen)
		t.lis.committed = true
		return true, nil
	case opCTS:
		p.mu.Lock()
		defer p.mu.Unlock()
		if tc.detached {
			return false, errDetached
		}
		if f.cookie > 0xffffffff {
			return false, fmt.Errorf("%w: CTS cookie", errProto)
		}
		s := p.sends.get(uint32(f.cookie))
		if s == nil {
			return false, fmt.Errorf("%w: CTS for no pending send", errProto)
		}
		if f.flags&ctsDiscard != 0 || f.length == 0 {
			t.push(event{kind: evSendDone, op: s.op})
		} else if p.tx != nil {
			p.sendDataLocked(s, f.data, min(f.length, s.length))
		}
		p.sends.put(uint32(f.cookie))
		return true, nil
	case opCredit:
		p.mu.Lock()
		defer p.mu.Unlock()
		if tc.detached {
			return false, errDetached // credit of an ended incarnation
		}
		p.credit += int64(f.length)
		if p.credit > p.peerWindow {
			return false, fmt.Errorf("%w: credit beyond the window", errProto)
		}
		return true, nil
	case opRetire:
		p.mu.Lock()
		defer p.mu.Unlock()
		if tc.detached {
			return false, errDetached
		}
		if f.flags&retireAck != 0 {
			return true, p.retireAckedLocked(tc)
		}
		return true, p.retireReadLocked(tc)
	}
	return false, fmt.Errorf("%w: op %d", errProto, f.op)
}

func (tc *tconn) dataStart(f *frame) error {
	tc.lastPush = false
	if tc.lastWrite {
		tc.lastWrite = false
	}
	if tc.state != stReady {
		return fmt.Errorf("%w: DATA before the handshake", errProto)
	}
	p := tc.peer
	p.mu.Lock()
	defer p.mu.Unlock()
	if tc.detached {
		return errDetached
	}
	if f.cookie > 0xffffffff {
		return fmt.Errorf("%w: DATA id", errProto)
	}
	s := p.fetches.get(uint32(f.cookie))
	if s == nil || s.push || s.got != 0 || f.length > s.cap || f.flags&dataErr != 0 && s.rop == nil ||
		s.rop != nil && f.flags&dataErr == 0 && f.length != s.cap {
		return fmt.Errorf("%w: DATA for no fetch of that size", errProto)
	}
	if f.flags&dataErr != 0 { // an RMA request the target refused (rma.go)
		p.rmaSubDoneLocked(s, uint32(f.cookie), transport.Code(f.data))
		tc.cur = nil
		return nil
	}
	tc.cur, tc.curID, tc.curSeg, tc.curOff = s, uint32(f.cookie), 0, 0
	return nil
}

// dataChunk copies n bytes of a DATA payload from gnet's buffer into the
// Fetch destination. The slot is rechecked under the peer's mu: a teardown
// from another goroutine may have completed it, and then its buffers are
// the engine's again and the bytes are dropped.
func (tc *tconn) dataChunk(src inbound, n int) error {
	p := tc.peer
	p.mu.Lock()
	defer p.mu.Unlock()
	s := tc.cur
	if s == nil || p.fetches.get(tc.curID) != s {
		for n > 0 {
			k := min(n, len(tc.discard))
			if err := readFull(src, tc.discard[:k]); err != nil {
				return err
			}
			n -= k
		}
		return nil
	}
	for n > 0 {
		for tc.curSeg < len(s.dst) && tc.curOff == len(s.dst[tc.curSeg]) {
			tc.curSeg, tc.curOff = tc.curSeg+1, 0
		}
		if tc.curSeg == len(s.dst) {
			if !s.push { // a push to a shorter buffer drops the rest (truncated)
				return fmt.Errorf("%w: DATA overruns the fetch", errProto)
			}
			for n > 0 {
				k := min(n, len(tc.discard))
				if err := readFull(src, tc.discard[:k]); err != nil {
					return err
				}
				n -= k
			}
			return nil
		}
		seg := s.dst[tc.curSeg][tc.curOff:]
		k := min(n, len(seg))
		if err := readFull(src, seg[:k]); err != nil {
			return err
		}
		tc.curOff += k
		s.got += uint64(k)
		n -= k
	}
	return nil
}

func (tc *tconn) dataEnd() error {
	p := tc.peer
	p.mu.Lock()
	defer p.mu.Unlock()
	s := tc.cur
	tc.cur = nil
	if s == nil || p.fetches.get(tc.curID) != s {
		return nil
	}
	if s.rop != nil {
		p.rmaSubDoneLocked(s, tc.curID, transport.OK)
		return nil
	}
	if s.push {
		p.pushEndLocked(s, tc.curID)
		return nil
	}
	tc.t.push(event{kind: evFetchDone, op: s.op, n: int(s.got)})
	p.fetches.put(tc.curID)
	return nil
}

// handshake processes HELLO and AUTH (on the loop; nothing else writes to
// the socket before the connection is ready).
func (tc *tconn) handshake(f *frame, src inbound) error {
	t := tc.t
	key := t.cfg.AuthKey
	switch {
	case f.op == opHello && tc.state == stHello:
		if err := readFull(src, tc.theirHello[:]); err != nil {
			return err
		}
		h := tc.theirHello[:]
		if h[25] != protoVersion {
			return fmt.Errorf("%w: protocol version %d", errProto, h[25])
		}
		if (h[24]&helloAuth != 0) != (len(key) > 0) {
			return errRefused
		}
		if _, err := parseSockaddr(h[28 : 28+int(h[26])%29]); err != nil {
			return fmt.Errorf("%w: hello address", errProto)
		}
		if w := binary.LittleEndian.Uint32(h[20:]); w < minWindow {
			return fmt.Errorf("%w: window %d", errProto, w)
		}
		tc.placed.Store(placeOf(t.cfg.Host, h))
		tc.placeLoop.Store(h[24]&helloPlaceLoop != 0 && !t.cfg.noLoopStamps)
		tc.placeMany.Store(h[24]&helloPlaceMany != 0 && !t.cfg.noManyStamps)
		if len(key) == 0 {
			return tc.attach()
		}
		var out [hdrSize + authLen]byte
		putHeader(out[:], &frame{op: opAuth, length: authLen})
		copy(out[hdrSize:], tc.mac(tc.myHello[hdrSize:], tc.theirHello[:]))
		n, err := unix.Write(tc.fd, out[:])
		if err != nil || n != len(out) {
			return fmt.Errorf("net: writing auth: %v", err)
		}
		tc.state = stAuth
		return nil
	case f.op == opAuth && tc.state == stAuth:
		var got [authLen]byte
		if err := readFull(src, got[:]); err != nil {
			return err
		}
		if !hmac.Equal(got[:], tc.mac(tc.theirHello[:], tc.myHello[hdrSize:])) {
			return errRefused
		}
		return tc.attach()
	}
	return fmt.Errorf("%w: unexpected handshake op %d", errProto, f.op)
}

// mac is the proof of the side whose HELLO is first.
func (tc *tconn) mac(first, second []byte) []byte {
	m := hmac.New(sha256.New, tc.t.cfg.AuthKey)
	m.Write([]byte(authContext))
	m.Write(first)
	m.Write(second)
	return m.Sum(nil)
}

// attach binds a connection whose handshake completed to its peer. A new
// instance id means the peer restarted: its old connections and everything
// owed on them fail first.
func (tc *tconn) attach() error {
	t := tc.t
	h := tc.theirHello[:]
	inst := binary.LittleEndian.Uint64(h[0:])
	window := int64(binary.LittleEndian.Uint32(h[20:]))
	if tc.gc != nil && tc.gc.OutboundBuffered() > 0 {
		return errors.New("net: handshake bytes left in gnet's buffer")
	}
	p := tc.peer
	if !tc.dialed {
		ap, _ := parseSockaddr(h[28 : 28+int(h[26])])
		t.mu.Lock()
		p = t.peerLocked(ap)
		t.mu.Unlock()
		// gnet reports the listener's configured address (port 0 for
		// "any port") as every accepted connection's local address: ask
		// the socket which address the peer dialed.
		if sa, err := unix.Getsockname(tc.fd); err == nil {
			tc.viaName = sockaddrKey(sa) == t.nameKey
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if tc.detached {
		return errors.New("net: connection torn down during the handshake")
	}
	if p.instance != 0 && p.instance != inst {
		p.teardownLocked(transport.EConnReset, tc)
	}
	if p.instance == 0 {
		p.instance = inst
		p.peerWindow = window
		p.credit += window - minWindow
	}
	if !tc.dialed {
		tc.peer = p // a dialed one has had it from the start (its dial and openExpired read it)
	}
	if tc.placed.Load() {
		tc.dec.place = &p.place
		pid := binary.LittleEndian.Uint32(h[16:])
		p.outranks.Store(t.outranks(pid, inst))
		p.loopStamps.Store(tc.placeLoop.Load())
		p.otherGroup.Store(placeOtherGroup(pid))
		t.addLocal(p)
	}
	tc.state = stReady
	tc.ready = true
	tc.doneShaking()
	if tc.expiry != nil {
		tc.expiry.Stop() // ready: neither expiry has anything left to do
	}
	p.conns = append(p.conns, tc)
	if p.tx == nil {
		p.tx = tc
	}
	t.mu.Lock()
	t.addFDLocked(tc)
	t.mu.Unlock()
	if tc.qh < len(tc.q) {
		if err := p.flushLocked(tc); err != nil {
			return err
		}
	}
	p.convergeLocked()
	return nil
}

// addFDLocked enters tc in fds and fdv (t.mu held): the loop's spin
// (spinPass) and the owner's Poll (ownerPoll) copy fdv on every pass,
// where ranging over the map cost ~240 instructions a Poll (callgrind).
func (t *Transport) addFDLocked(tc *tconn) {
	if old := t.fds[tc.fd]; old != nil {
		t.dropFDLocked(old)
	}
	t.fds[tc.fd] = tc
	t.fdv = append(t.fdv, tc)
}

// dropFDLocked takes tc out of fds and fdv if it is there (t.mu held).
func (t *Transport) dropFDLocked(tc *tconn) {
	if t.fds[tc.fd] != tc {
		return
	}
	delete(t.fds, tc.fd)
	if i := slices.Index(t.fdv, tc); i >= 0 {
		last := len(t.fdv) - 1
		t.fdv[i] = t.fdv[last]
		t.fdv[last] = nil
		t.fdv = t.fdv[:last]
	}
}
