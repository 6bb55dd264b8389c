package net

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	stdnet "net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/rma"
	"github.com/gofi-dev/fi/transport"
)

// Config configures one endpoint's transport. The zero value of every field
// but Addr selects the default noted.
type Config struct {
	// Addr is the listening address, "host:port" ("127.0.0.1:0",
	// "[::1]:7471"); port 0 picks a free port. The host is what Name
	// reports and what peers use to identify this endpoint, so give a
	// concrete address (not 0.0.0.0) when peers are on other hosts.
	Addr string
	// AuthKey, when set, must be shared by both ends: each connection
	// proves knowledge of it with an HMAC-SHA256 over both handshakes.
	// A peer without the key (or with another) is refused.
	AuthKey []byte
	// MaxEager is the largest payload sent eagerly (default 16 KiB, at most
	// 64 KiB); larger messages use ready-to-send / clear-to-send.
	MaxEager int
	// Window is the receive window per peer in bytes of eager frames
	// (default 4 MiB, at least 256 KiB): the most one peer can have
	// buffered here before the engine accepts its messages.
	Window int
	// PushMax is the largest payload sent as one PUSH frame, header and
	// payload at once (push.go; default and at most 1 MiB, and at most a
	// quarter of Window); larger messages use ready-to-send /
	// clear-to-send. Below MaxEager it is unused; -1 disables pushes.
	PushMax int
	// SendQueue is the high-water mark of bytes copied into one
	// connection's send queue (default 4 MiB); above it Send returns EAgain.
	SendQueue int
	// Handoff is the size of the loop-to-Poll ring (default 4 MiB).
	Handoff int
	// DialTimeout bounds a connect (default 5 s), and again the opening
	// of the connection it made (gnet's enrolment and the handshake): a
	// dialed connection not ready by then fails what is queued on it with
	// ETIMEDOUT and the peer goes down. An accepted connection whose
	// handshake is not done DialTimeout after it opened is closed.
	DialTimeout time.Duration
	// LoopOnly keeps Poll from borrowing the gnet loop to read sockets
	// itself (see own.go); every byte is then read by the loop.
	LoopOnly bool
	// SpinMax bounds how long the event loop keeps polling its sockets
	// after traffic before it sleeps in epoll_wait (spin.go; the window
	// adapts between 0 and SpinMax). Zero: GOFI_TCP_SPIN if set, else
	// 100 us; negative disables.
	SpinMax time.Duration
	// Host identifies the host to same-host peers, which then exchange
	// where they poll (place.go). Zero: the kernel's boot id; NoHost:
	// places are not exchanged (as with peers from before place.go).
	Host uint64
	// KeepAlive is the idle time before TCP keepalive probes start
	// (default 5 s; probes every second, 3 of them). Negative disables.
	KeepAlive time.Duration
	// UserTimeout, when positive, is how long bytes of ours may wait for
	// the peer to take them before the connection is given up
	// (TCP_USER_TIMEOUT): keepalive probes do not go out while bytes are
	// unacknowledged, so without it an operation waiting on a peer whose
	// host vanished (no FIN, no RST) fails only after the kernel's
	// retransmissions, ~15 minutes. The kernel counts a peer that is alive
	// but reads nothing (a full receive window: stopped in a debugger) the
	// same way, which is why it is off by default. Zero:
	// GOFI_TCP_USER_TIMEOUT (a Go duration) if set, else off; negative:
	// off.
	UserTimeout time.Duration

	// noLoopStamps: the HELLO omits helloPlaceLoop and stamps never carry
	// placeLoop, as from peers before it (tests).
	noLoopStamps bool
	// noManyStamps: the HELLO omits helloPlaceMany and stamps never
	// carry placeMany, as from peers before it (tests).
	noManyStamps bool
}

// NoHost as Config.Host: this transport exchanges no places.
const NoHost = ^uint64(0)

// UserTimeoutEnv sets Config.UserTimeout when that is zero.
const UserTimeoutEnv = "GOFI_TCP_USER_TIMEOUT"

const (
	defaultMaxEager  = 16 << 10
	defaultWindow    = 4 << 20 // room for pushes of defaultPushMax (push.go)
	minWindow        = 256 << 10
	defaultSendQueue = 4 << 20
	defaultHandoff   = 4 << 20
	maxPendingOps    = 1 << 15 // rendezvous sends or fetches per peer
	pollBatch        = 256     // records delivered per Poll
	defaultPushMax   = 1 << 20
	protoVersion     = 2 // 2: PUSH frames
)

func (c *Config) fill() error {
	if c.Addr == "" {
		return errors.New("net: Config.Addr is empty")
	}
	if c.Host == 0 {
		c.Host = hostID()
	}
	if c.MaxEager == 0 {
		c.MaxEager = defaultMaxEager
	}
	if c.MaxEager < 0 || c.MaxEager > maxWireEager {
		return fmt.Errorf("net: MaxEager %d out of [0, %d]", c.MaxEager, maxWireEager)
	}
	if c.Window == 0 {
		c.Window = defaultWindow
	}
	if c.Window < minWindow || c.Window > maxCredit {
		return fmt.Errorf("net: Window %d out of [%d, %d]", c.Window, minWindow, maxCredit)
	}
	switch {
	case c.PushMax == 0:
		c.PushMax = min(defaultPushMax, c.Window/4)
	case c.PushMax < 0:
		c.PushMax = 0
	case c.PushMax > maxWirePush || c.PushMax > c.Window/4:
		return fmt.Errorf("net: PushMax %d above %d or a quarter of Window", c.PushMax, maxWirePush)
	}
	if c.SendQueue == 0 {
		c.SendQueue = defaultSendQueue
	}
	if c.SendQueue < 0 {
		return fmt.Errorf("net: SendQueue %d < 0", c.SendQueue)
	}
	if c.Handoff == 0 {
		c.Handoff = defaultHandoff
	}
	if c.Handoff < 4*(maxWireEager+msgRecHdr+8) {
		return fmt.Errorf("net: Handoff %d too small", c.Handoff)
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.UserTimeout == 0 {
		if v := os.Getenv(UserTimeoutEnv); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("net: %s: %w", UserTimeoutEnv, err)
			}
			c.UserTimeout = d
		}
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = 5 * time.Second
	}
	return nil
}

// Transport is one endpoint's tcp transport; it implements
// transport.Transport. Send, Fetch, Discard, Resolve, PeerAddr and Poll
// must be serialised by the caller (the engine calls them from one
// goroutine at a time); Name, MaxEager, Wait, Wake and Close are safe for
// concurrent use.
type Transport struct {
	cfg      Config
	name     []byte
	nameKey  addrKey // name as a peer-table key
	instance uint64
	pid      uint32

	eng     gnet.Engine
	lis     *loop
	runDone chan error
	ho      *handoff
	fl      *flusher
	dials   sync.WaitGroup

	mu      sync.Mutex // peers, byAddr, done, stalled, fds; after peer.mu
	peers   []*peer
	byAddr  map[addrKey]transport.Peer
	done    []event
	stalled []*tconn
	fds     map[int]*tconn
	fdv     []*tconn     // fds' values, in no order (addFDLocked, dropFDLocked)
	nDone   atomic.Int32 // len(done), readable without mu
	nStall  atomic.Int32 // len(stalled)

	sleeping atomic.Int32
	bell     chan struct{}
	waker    atomic.Pointer[func()] // SetWaker: rung with bell while sleeping
	waitMu   sync.Mutex
	timer    *time.Timer

	closing atomic.Bool
	closed  atomic.Bool
	sinkMu  sync.Mutex
	sink    transport.Sink // the last Poll's sink, for Close

	// Owner polling (own.go).
	own          sync.Mutex // held by Poll while it reads sockets itself
	pmu          sync.Mutex // pstate, pch
	pstate       int
	pch          chan struct{} // release token to the parked task (cap 1)
	ptimer       *time.Timer   // the parked task's tick (loop goroutine only)
	spin         spinner       // the loop's busy-poll (spin.go; loop goroutine only)
	parkFn       gnet.Runnable
	parkW        int // our end of the park socket (own.go), -1 before startPark
	parked       atomic.Bool
	parks        atomic.Int64 // times the loop was borrowed (tests)
	creditFrames atomic.Int64 // CREDIT frames written on their own (tests)
	ticks        atomic.Int64 // times a parked loop ran its queue (tests)
	idled        atomic.Int64 // times a parked loop was handed back for lack of Polls (tests)
	ownPolls     uint64       // Polls of a parked loop (under own)
	tickPolls    uint64       // ownPolls at the parked loop's last tick (loop, under own)
	idleTicks    int          // ticks in a row without a Poll (loop, under own)
	handshakes   atomic.Int32 // connections opened, not yet ready or closed
	openTimeouts atomic.Int32 // dialed connections failed by openExpired (tests)
	retired      atomic.Int32 // duplicate connections retired (tests)
	pushes       atomic.Int64 // PUSH frames received (tests)
	pushDirect   atomic.Int64 // of them, read straight into the engine's buffers (tests)
	rmaDirect    atomic.Int64 // RMA write payload bytes read straight into regions (tests)
	arrivedNow   atomic.Int64 // EAGER and RTS frames handed over from inside the decoder (tests)
	wantRelease  atomic.Bool
	el           atomic.Pointer[evLoop] // the loop, once a connection opened
	emptyPolls   int
	owned        []*tconn

	// gtasks is gnet's task flag (gnetTasks): Poll hands a parked loop
	// back when gnet has queued it work (handbacks counts it, tests).
	gtasks atomic.Pointer[int32]
	// epfd is the loop's epoll descriptor (gnetEpoll), epOut the
	// sockets taken out of it while the loop is held (epoll.go); loop
	// goroutine only.
	epfd  int
	epOut []int
	// parkConns is parkTask's copy of fdv (loop goroutine).
	parkConns []*tconn
	handbacks atomic.Int64
	// dialing counts dial goroutines started and not yet running.
	dialing atomic.Int32
	// connected, when set (tests), runs on a dial's socket right after its
	// connect succeeded, before it is wrapped and enrolled.
	connected func(fd int)
	// shakeTimeouts counts inbound connections closed by shakeExpired (tests).
	shakeTimeouts atomic.Int32
	// handedBack: ownerPoll just handed the loop back (Poll's goroutine).
	handedBack bool
	// wrote: a frame went to its socket whole since Poll last looked
	// (writeDirect); Poll then yields before it reads (see Poll).
	// firstYields counts those yields, emptyYields the yields after a
	// pass that found nothing (Poll's goroutine; tests).
	wrote       atomic.Bool
	firstYields int64
	emptyYields int64
	// afterWrite counts the Polls that followed a whole write; ahead:
	// the last of them that read first found bytes (Poll's goroutine).
	afterWrite int64
	ahead      bool

	// Places of same-host peers (place.go): place is this side's stamp;
	// local lists the peers that exchange places (copy on write under
	// localMu); lastMove, placePolls: Poll's goroutine; moves (tests).
	place      atomic.Uint32
	local      atomic.Pointer[[]*peer]
	localMu    sync.Mutex
	lastMove   time.Duration
	placePolls uint64
	apart      bool // Poll's goroutine: peersApart at the last look
	// appPolled: Poll ran since the loop last noted its place (its
	// stamps then do not carry placeLoop for a while, notePlace).
	appPolled atomic.Bool
	moves     atomic.Int64
	crowded   atomic.Int64 // moves not made: the host was busy (tests)
	// bigAt: when (since placeEpoch) a message of colocateMin bytes up
	// to colocateMax, or an RMA of colocateMin or more, last went out or
	// came in; hugeAt: a message of colocateMax bytes or more; joins
	// counts the moves onto a peer's CPU that such traffic made
	// (place.go; tests).
	bigAt  atomic.Int64
	hugeAt atomic.Int64
	joins  atomic.Int64

	// rmaTarget executes peers' RMA requests (ServeRMA; nil: refused).
	rmaTarget atomic.Pointer[rma.Target]
	answers   []*tconn // connections with gathered RMA answers (rma.go; the decoding goroutine)
	sp        splicer  // the pipe large RMA write payloads go through (splice.go)

	// Poll scratch (the engine's goroutine only).
	pushRec [msgRecHdr]byte // a PUSH header offered from inside the decoder
	pbufs   *bufList        // payload buffers of pushes not read straight into the engine's
	qsmall  *bufList        // send-queue copies up to smallBuf bytes
	qlarge  *bufList        // send-queue copies of larger eager frames
	hdr     transport.Header
	events  []event
	blocked []*peer // peers with held messages
}

var _ transport.Transport = (*Transport)(nil)

type eventKind uint8

const (
	evSendDone eventKind = iota + 1
	evFetchDone
	evPeerDown
)

// event is a completion or peer failure waiting for Poll.
type event struct {
	kind eventKind
	code transport.Code
	peer transport.Peer
	n    int
	op   transport.Op
	seq  uint64 // evPeerDown: handoff records published before it
}

// Listen starts a transport listening on cfg.Addr.
func Listen(cfg Config) (*Transport, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	ap, err := netip.ParseAddrPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("net: Config.Addr: %w", err)
	}
	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return nil, err
	}
	t := &Transport{
		cfg:      cfg,
		instance: binary.LittleEndian.Uint64(idb[:]) | 1,
		pid:      uint32(os.Getpid()),
		runDone:  make(chan error, 1),
		byAddr:   make(map[addrKey]transport.Peer),
		fds:      make(map[int]*tconn),
		bell:     make(chan struct{}, 1),
		timer:    time.NewTimer(time.Hour),
		done:     make([]event, 0, 64),
		events:   make([]event, 0, 64),
		owned:    make([]*tconn, 0, 8),
		answers:  make([]*tconn, 0, 8),
	}
	t.timer.Stop()
	t.pch = make(chan struct{}, 1)
	t.ptimer = time.NewTimer(time.Hour)
	t.ptimer.Stop()
	t.parkFn = gnet.RunnableFunc(t.parkTask)
	t.parkW = -1
	t.spin.max = spinMaxOf(&cfg)
	t.spin.w = min(spinStart, t.spin.max)
	t.spin.appPoll = time.Since(placeEpoch) // a new transport's application counts as polling
	t.spin.conns = make([]*tconn, 0, 8)
	t.pbufs = newBufList(max(cfg.PushMax, 1), 4)
	t.qsmall = newBufList(smallBuf, 64)
	t.qlarge = newBufList(maxWireEager+hdrSize, 16)
	if t.ho, err = newHandoff(cfg.Handoff); err != nil {
		return nil, fmt.Errorf("net: handoff ring: %w", err)
	}
	t.fl, err = newFlusher(t)
	if err != nil {
		return nil, err
	}
	t.lis = &loop{t: t, booted: make(chan struct{})}
	network := "tcp4"
	if !ap.Addr().Is4() {
		network = "tcp6"
	}
	proto := network + "://" + ap.String()
	go func() {
		t.runDone <- gnet.Run(t.lis, proto,
			gnet.WithMulticore(false),
			gnet.WithNumEventLoop(1),
			gnet.WithLoadBalancing(gnet.LeastConnections), // Register from other goroutines is race-free with it
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			// A restarted endpoint must be able to listen at its old
			// address although the connections it had accepted there sit
			// in TIME_WAIT (SO_REUSEADDR never lets two listeners share a
			// port on Linux; that is SO_REUSEPORT, left off).
			gnet.WithReuseAddr(true),
			gnet.WithLogger(nopLogger{}),
			gnet.WithTicker(true),
		)
	}()
	select {
	case <-t.lis.booted:
	case err := <-t.runDone:
		t.fl.close()
		if err == nil {
			err = errors.New("net: gnet stopped at start")
		}
		return nil, fmt.Errorf("net: listen %s: %w", cfg.Addr, err)
	}
	if t.name == nil {
		t.Close()
		return nil, fmt.Errorf("net: listener address: %w", t.lis.nameErr)
	}
	// probeCPUs's responder parks in futex(2) holding a P until sysmon
	// takes it back (distance.go): started with the first same-host
	// handshake, that was during the first round trip (own.go,
	// loopGosched).
	prober.run()
	if !cfg.LoopOnly {
		if err := t.startPark(); err != nil {
			t.Close()
			return nil, fmt.Errorf("net: park socket: %w", err)
		}
	}
	return t, nil
}

// listenerName reads the bound address of the engine's listener.
func listenerName(eng gnet.Engine) ([]byte, error) {
	fd, err := eng.Dup()
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return nil, err
	}
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return encodeSockaddr(netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))), nil
	case *unix.SockaddrInet6:
		return encodeSockaddr(netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port))), nil
	}
	return nil, errors.New("not an inet socket")
}

// sockaddrKey is the peer-table key of a socket address (the zero key for
// anything but inet).
func sockaddrKey(sa unix.Sockaddr) addrKey {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return keyOf(netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port)))
	case *unix.SockaddrInet6:
		return keyOf(netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port)))
	}
	return addrKey{}
}

// Name returns the listening address as a sockaddr_in / sockaddr_in6.
func (t *Transport) Name() []byte { return append([]byte(nil), t.name...) }

// MaxEager returns the eager threshold.
func (t *Transport) MaxEager() int { return t.cfg.MaxEager }

// Resolve maps a sockaddr to a Peer, creating it on first use. It never
// touches the network.
func (t *Transport) Resolve(addr []byte) (transport.Peer, transport.Code) {
	ap, err := parseSockaddr(addr)
	if err != nil {
		return 0, transport.EInval
	}
	if t.closed.Load() {
		return 0, transport.ECanceled
	}
	t.mu.Lock()
	p := t.peerLocked(ap)
	t.mu.Unlock()
	return p.idx, transport.OK
}

// peerLocked finds or creates the peer listening at ap. t.mu is held.
func (t *Transport) peerLocked(ap netip.AddrPort) *peer {
	k := keyOf(ap)
	if i, ok := t.byAddr[k]; ok {
		return t.peers[i]
	}
	p := newPeer(t, transport.Peer(len(t.peers)), ap)
	t.byAddr[k] = p.idx
	t.peers = append(t.peers, p)
	return p
}

func (t *Transport) peer(i transport.Peer) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if int(i) >= len(t.peers) {
		return nil
	}
	return t.peers[i]
}

// PeerAddr returns the address a peer was resolved or announced with.
func (t *Transport) PeerAddr(i transport.Peer) []byte {
	p := t.peer(i)
	if p == nil {
		return nil
	}
	return append([]byte(nil), p.addr...)
}

// pushLocked queues an event for Poll; t.mu is held.
func (t *Transport) pushLocked(e event) {
	t.done = append(t.done, e)
	t.nDone.Store(int32(len(t.done)))
}

func (t *Transport) push(e event) {
	t.mu.Lock()
	t.pushLocked(e)
	t.mu.Unlock()
	t.notify()
}

// notify wakes a goroutine sleeping in Wait. The sleeping flag is read
// after the work was published (and Wait sets it before checking for
// work), so no wake-up is lost, and an idle Wait costs the loop nothing.
func (t *Transport) notify() {
	if t.sleeping.Load() != 0 {
		select {
		case t.bell <- struct{}{}:
		default:
		}
		if w := t.waker.Load(); w != nil {
			(*w)()
		}
	}
}

// Wake makes a current or the next Wait return.
func (t *Transport) Wake() {
	select {
	case t.bell <- struct{}{}:
	default:
	}
}

func (t *Transport) pending() bool {
	return !t.ho.empty() || t.nDone.Load() != 0 || t.nStall.Load() != 0
}

// Wait sleeps until Poll may have work, Wake is called or timeout passes
// (a negative timeout waits without limit; 0 returns at once).
func (t *Transport) Wait(timeout time.Duration) {
	t.sleeping.Add(1)
	defer t.sleeping.Add(-1)
	t.release() // nobody reads the sockets while we sleep but the loop
	if t.pending() || t.closed.Load() {
		return
	}
	if timeout == 0 {
		return
	}
	if timeout < 0 { // no timeout
		<-t.bell
		return
	}
	if !t.waitMu.TryLock() {
		select { // another goroutine owns the shared timer
		case <-t.bell:
		case <-time.After(timeout):
		}
		return
	}
	t.timer.Reset(timeout)
	select {
	case <-t.bell:
	case <-t.timer.C:
	}
	t.timer.Stop()
	t.waitMu.Unlock()
}

// probeEvery: one Poll in this many after a whole write reads before it
// yields, to learn whether the peer's messages come ahead of the answer
// (see Poll).
const probeEvery = 8

// Poll delivers completions, peer failures and inbound messages to sink.
func (t *Transport) Poll(sink transport.Sink) bool {
	if t.sink != sink {
		t.sinkMu.Lock()
		t.sink = sink
		t.sinkMu.Unlock()
	}
	if t.dialing.Load() != 0 {
		// A dial goroutine is at work: it waits in this P's run queue
		// when Send started it, and in the global one when it comes
		// back from connect's system call while the loop holds the
		// other P. An application that keeps polling never enters the
		// scheduler, so it ran only when the runtime preempted this
		// goroutine: a new peer's first message waited 4-10 ms.
		runtime.Gosched()
	}
	if !t.appPolled.Load() {
		t.appPolled.Store(true)
	}
	work := false
	if !t.cfg.LoopOnly && t.parked.Load() {
		readFirst := false
		if t.wrote.Load() {
			// A request or message just went out whole. In a ping-pong
			// its answer cannot be here yet (a round trip over loopback
			// takes ~10 us and more), so a read now would only say
			// EAGAIN before the yield below: yield first. When the peer
			// (or its loop) shares this CPU it runs now and the read
			// that follows finds its answer; on a CPU of its own the
			// yield returns at once. Co-located, that is one read fewer
			// per operation (perf: an EAGAIN read ~1 us). In a
			// collective exchange both sides send at once and the
			// peer's message is often there already: the yield then
			// only hands a loaded CPU to another process. So every
			// probeEvery-th such Poll reads first, and while reads
			// first find bytes (ahead) every one does. No Poll yields
			// while every same-host peer polls on another CPU
			// (peersApart, place.go).
			t.wrote.Store(false)
			t.afterWrite++
			readFirst = t.apart || t.ahead || t.afterWrite%probeEvery == 0
			if !readFirst {
				t.firstYields++
				schedYield()
			}
		}
		if t.local.Load() != nil {
			if t.placePolls++; t.placePolls%placeEvery == 0 {
				t.lookPlace(&t.lastMove, false)
				t.apart = t.peersApart()
			}
		}
		t.own.Lock()
		t.ownPolls++
		work = t.ownerPoll()
		t.own.Unlock()
		if readFirst {
			t.ahead = work
		}
		if t.handedBack {
			// The loop goroutine, woken by the release, waits in this
			// P's run queue: let it run its queued tasks now.
			t.handedBack = false
			runtime.Gosched()
		} else if !work && !t.apart {
			// Nothing came: give the CPU to a thread waiting on this
			// one's run queue, perhaps the peer (or its loop) whose
			// answer this poll waits for; with nobody waiting the yield
			// returns at once. An application polling its CQ in a loop
			// then no longer holds a shared CPU until preempted: 8-byte
			// fetch-add with both processes on one CPU 24-32 us median
			// against 56-118 without (p99 100 us against 1.3-15 ms);
			// spin.go has the loaded two-CPU figures. The yield comes
			// after own is released: the parked loop's tick (own.go)
			// waiting for it through a yield that switched was woken
			// through a futex by Poll's unlock. Not while every
			// same-host peer polls on another CPU (peersApart).
			t.emptyYields++
			schedYield()
		}
	}
	if t.deliverEvents(sink) {
		work = true
	}
	if len(t.blocked) > 0 && t.retryHeld(sink) {
		work = true
	}
	for n := 0; n < pollBatch; n++ {
		rec := t.ho.peek()
		if rec == nil {
			break
		}
		work = true
		t.deliver(sink, rec, false)
		t.ho.consume()
	}
	t.ho.release()
	if t.nStall.Load() != 0 {
		t.unstall()
	}
	if work {
		t.emptyPolls = 0
	} else if t.emptyPolls++; t.emptyPolls%parkAfter == 0 && !t.cfg.LoopOnly {
		t.requestPark()
	} else if t.emptyPolls%loopGosched == 0 && !t.parked.Load() && !t.cfg.LoopOnly &&
		(t.handshakes.Load() != 0 || t.emptyPolls > parkAfter && t.parkPending()) {
		runtime.Gosched() // the loop must run for this Poll to get anywhere (own.go, loopGosched)
	}
	return work
}

// deliverEvents hands queued completions and peer failures to sink.
func (t *Transport) deliverEvents(sink transport.Sink) bool {
	if t.nDone.Load() == 0 {
		return false
	}
	t.mu.Lock()
	t.events, t.done = t.done, t.events[:0]
	t.nDone.Store(0)
	t.mu.Unlock()
	for i := range t.events {
		e := &t.events[i]
		switch e.kind {
		case evSendDone:
			sink.SendDone(e.op, e.code)
		case evFetchDone:
			sink.FetchDone(e.op, e.n, e.code)
		case evPeerDown:
			t.deliverUpTo(sink, e.seq)
			sink.PeerDown(e.peer, e.code)
		}
	}
	return true
}

// deliverUpTo hands the engine the records published before a PeerDown
// (the last messages of the peer that failed; Poll would deliver them
// after it), and the held ones first (they are older).
func (t *Transport) deliverUpTo(sink transport.Sink, seq uint64) {
	if len(t.blocked) > 0 {
		t.retryHeld(sink)
	}
	for t.ho.consumed() < seq {
		rec := t.ho.peek()
		if rec == nil {
			return
		}
		t.deliver(sink, rec, false)
		t.ho.consume()
	}
}

// deliver offers one record to the engine. A record of a peer that already
// has held messages, or that the engine refuses, is copied aside and
// offered again later, in order. held says rec is such a copy.
func (t *Transport) deliver(sink transport.Sink, rec []byte, held bool) bool {
	pi := transport.Peer(binary.LittleEndian.Uint32(rec[0:]))
	p := t.peer(pi)
	if !held && len(p.held) > 0 {
		p.hold(rec)
		return false
	}
	epoch := binary.LittleEndian.Uint32(rec[4:])
	op := rec[8]
	h := &t.hdr
	h.Flags = rec[9]
	h.Kind = transport.Kind(rec[10])
	h.Group = binary.LittleEndian.Uint32(rec[12:])
	h.Tag = binary.LittleEndian.Uint64(rec[16:])
	h.Data = binary.LittleEndian.Uint64(rec[24:])
	h.Len = binary.LittleEndian.Uint64(rec[32:])
	cookie := binary.LittleEndian.Uint64(rec[40:])
	var eager []byte
	cost := hdrSize
	if op == opEager {
		eager = rec[msgRecHdr : msgRecHdr+int(h.Len)]
		cost += int(h.Len)
		cookie = 0
	} else {
		cookie = uint64(epoch)<<32 | cookie&0xffffffff
	}
	if !sink.Arrive(pi, h, eager, cookie) {
		if !held {
			p.hold(rec)
			if len(p.held) == 1 {
				t.blocked = append(t.blocked, p)
			}
		}
		return false
	}
	p.returnCredit(epoch, cost)
	return true
}

// retryHeld offers held messages again, oldest first, per peer.
func (t *Transport) retryHeld(sink transport.Sink) bool {
	work := false
	keep := t.blocked[:0]
	for _, p := range t.blocked {
		for len(p.held) > 0 {
			b := p.held[0]
			if !t.deliver(sink, *b, true) {
				break
			}
			work = true
			p.held[0] = nil
			p.held = p.held[1:]
			heldPool.Put(b)
		}
		if len(p.held) > 0 {
			keep = append(keep, p)
		} else {
			p.held = p.held[:0:0]
		}
	}
	for i := len(keep); i < len(t.blocked); i++ {
		t.blocked[i] = nil
	}
	t.blocked = keep
	return work
}

// unstall resumes connections whose loop found the ring full.
func (t *Transport) unstall() {
	t.mu.Lock()
	s := t.stalled
	t.stalled = nil
	t.nStall.Store(0)
	t.mu.Unlock()
	for _, tc := range s {
		tc.stalled.Store(false)
		if tc.draining.Load() { // gnet closed it: the loop decodes the rest
			t.queueDrain(tc)
			continue
		}
		if c := tc.gc; c != nil {
			_ = c.Wake(nil)
		}
	}
}

// Close stops the gnet engine, closes every connection and fails held
// operations with ECanceled through the sink of the last Poll.
func (t *Transport) Close() error {
	if !t.closed.CompareAndSwap(false, true) {
		return nil
	}
	t.closing.Store(true)
	t.release()
	var err error
	var runErr error
	if t.eng.Validate() == nil {
		// gnet.Run returns as soon as the engine has shut down, while
		// Stop notices only at its next poll (every 500 ms): wait for
		// whichever comes first, so a Close costs no half second.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		stopped := make(chan error, 1)
		go func() { stopped <- t.eng.Stop(ctx) }()
		select {
		case runErr = <-t.runDone:
			cancel()
			<-stopped // canceled, or nil: the engine is down either way
		case err = <-stopped:
			runErr = <-t.runDone
		}
		cancel()
	} else {
		runErr = <-t.runDone
	}
	if err == nil && runErr != nil && !errors.Is(runErr, stdnet.ErrClosed) {
		err = runErr
	}
	t.pmu.Lock()
	if t.parkW >= 0 {
		unix.Close(t.parkW)
		t.parkW = -1
	}
	t.pmu.Unlock()
	t.dials.Wait()
	t.mu.Lock()
	peers := append([]*peer(nil), t.peers...)
	t.mu.Unlock()
	for _, p := range peers {
		p.mu.Lock()
		p.teardownLocked(transport.ECanceled, nil)
		p.mu.Unlock()
	}
	t.fl.close()
	t.sp.close()
	t.Wake()
	t.sinkMu.Lock()
	sink := t.sink
	t.sinkMu.Unlock()
	if sink != nil {
		t.mu.Lock()
		ev := t.done
		t.done = nil
		t.nDone.Store(0)
		t.mu.Unlock()
		for _, e := range ev {
			switch e.kind {
			case evSendDone:
				sink.SendDone(e.op, e.code)
			case evFetchDone:
				sink.FetchDone(e.op, e.n, e.code)
			case evPeerDown:
				sink.PeerDown(e.peer, e.code)
			}
		}
	}
	return err
}

// codeOf maps a socket error to a libfabric errno.
func codeOf(err error) transport.Code {
	var errno unix.Errno
	switch {
	case err == nil:
		return transport.EConnReset
	case errors.As(err, &errno):
		switch errno {
		case unix.ECONNREFUSED:
			return transport.EConnRefuse
		case unix.ETIMEDOUT:
			return transport.ETimedOut
		case unix.EHOSTUNREACH, unix.ENETUNREACH:
			return transport.EHostUnrch
		case unix.ECONNRESET, unix.EPIPE:
			return transport.EConnReset
		}
	}
	var ne stdnet.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return transport.ETimedOut
	}
	if errors.Is(err, errProto) {
		return transport.EIO
	}
	return transport.EConnReset
}

type nopLogger struct{}

func (nopLogger) Debugf(string, ...any) {}
func (nopLogger) Infof(string, ...any)  {}
func (nopLogger) Warnf(string, ...any)  {}
func (nopLogger) Errorf(string, ...any) {}
func (nopLogger) Fatalf(string, ...any) {}
