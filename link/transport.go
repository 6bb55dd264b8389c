package link

import (
	"errors"
	"fmt"
	"time"

	fnet "github.com/gofi-dev/fi/net"
	"github.com/gofi-dev/fi/rma"
	"github.com/gofi-dev/fi/shm"
	"github.com/gofi-dev/fi/transport"
)

// Transport is a linked endpoint's data path: a transport.Transport over
// a shm member and a tcp member. Each peer is routed to one member; the
// engine sees one dense table of peers, and both members deliver into
// the engine's one sink through two small translating sinks.
//
// Polling. Both members are polled on every Poll, except that a tcp
// member found idle while the shm member is busy is not polled but asked
// Quiet (a few atomic loads): its event loop then reads the sockets, so
// no Poll of the busy shm traffic pays a system call for an idle tcp
// connection. An idle shm member costs a few loads per Poll (its
// connection queue word and its inbound rings' or bitmap's words): no
// ring is scanned for a peer that does not exist.
//
// Waiting. Wait sleeps once, on the shm region's doorbell (which local
// peers ring); the tcp member counts the link as its sleeper and rings
// the same doorbell (shm Wake) when work arrives for it.
//
// Concurrency: as transport.Transport (the engine serialises calls; Wait
// and Wake from any goroutine).
type Transport struct {
	shm *shm.Transport
	tcp *fnet.Transport

	name []byte // fi_link://host:port?shm=<region>&dom=<identity>
	dom  string

	routes []peerRoute               // linked peer -> member and member peer
	byShm  []transport.Peer          // shm peer -> linked peer + 1 (0: none yet)
	byTCP  []transport.Peer          // tcp peer -> linked peer + 1
	addrs  map[string]transport.Peer // Resolve's cache: address bytes -> linked peer

	sink   transport.Sink
	ss, ts memberSink

	shmAgo uint32 // Polls since the shm member last did work
	tcpAgo uint32 // Polls since the tcp member last did work

	polls, tcpPolls uint64 // Polls, and those that polled the tcp member (Polls)
}

// peerRoute is where a linked peer lives.
type peerRoute struct {
	tcp  bool
	peer transport.Peer
}

// memberSink hands a member's deliveries to the engine's sink with the
// member's peer index translated to the linked one.
type memberSink struct {
	t   *Transport
	tcp bool
}

// Polling thresholds (in Polls): the tcp member counts as idle after
// tcpIdleAfter empty polls, beyond net's own parking threshold, and the
// shm member as busy while it did work within shmBusyWithin polls.
const (
	tcpIdleAfter  = 64
	shmBusyWithin = 4096
)

var (
	_ transport.Transport    = (*Transport)(nil)
	_ transport.Poker        = (*Transport)(nil)
	_ transport.RMATransport = (*Transport)(nil)
	_ transport.Discarder    = (*Transport)(nil)
	_ transport.Sink         = (*memberSink)(nil)
)

// New links the two members, which become the Transport's (Close closes
// them). dom is the shared-memory domain identity (LocalDomain).
func New(s *shm.Transport, t *fnet.Transport, dom string) (*Transport, error) {
	if s == nil || t == nil {
		return nil, errors.New("link: both members are needed")
	}
	tcpAddr, ok := parseSockaddr(t.Name())
	if !ok {
		return nil, fmt.Errorf("link: tcp member's name %x is not a sockaddr", t.Name())
	}
	shmName, err := shm.ParseAddr(string(s.Name()))
	if err != nil {
		return nil, fmt.Errorf("link: shm member's name: %w", err)
	}
	l := &Transport{shm: s, tcp: t, dom: dom, addrs: make(map[string]transport.Peer),
		shmAgo: shmBusyWithin, tcpAgo: tcpIdleAfter}
	l.name = []byte(Name{TCP: tcpAddr, Shm: shmName, Dom: dom}.Format())
	l.ss = memberSink{t: l}
	l.ts = memberSink{t: l, tcp: true}
	t.SetWaker(s.Wake)
	return l, nil
}

// Name returns the linked address.
func (l *Transport) Name() []byte { return l.name }

// Domain returns the shared-memory domain identity the name carries.
func (l *Transport) Domain() string { return l.dom }

// Shm and TCP return the members (tests, counters).
func (l *Transport) Shm() *shm.Transport  { return l.shm }
func (l *Transport) TCP() *fnet.Transport { return l.tcp }

// MaxEager is the smaller of the members' eager limits: an inject must
// complete at once whichever member carries it.
func (l *Transport) MaxEager() int { return min(l.shm.MaxEager(), l.tcp.MaxEager()) }

// Resolve routes addr: an address vector's stored form carries the route
// (via=shm or via=tcp, see Canon); any other form Parse reads is routed
// now, as Canon would. The answer is cached per address.
func (l *Transport) Resolve(addr []byte) (transport.Peer, transport.Code) {
	if p, ok := l.addrs[string(addr)]; ok {
		return p, transport.OK
	}
	n, err := Parse(addr)
	if err != nil {
		return 0, transport.EInval
	}
	if n.Via == RouteNone {
		if n.Via, err = Decide(n, l.dom); err != nil {
			return 0, transport.EHostUnrch
		}
	}
	var p transport.Peer
	if n.Via == RouteShm {
		mp, c := l.shm.Resolve([]byte(shm.Addr(n.Shm)))
		if c != transport.OK {
			return 0, c
		}
		p = l.linked(false, mp)
	} else {
		mp, c := l.tcp.Resolve(appendSockaddr(nil, n.TCP))
		if c != transport.OK {
			return 0, c
		}
		p = l.linked(true, mp)
	}
	l.addrs[string(addr)] = p
	return p, transport.OK
}

// linked returns the linked index of member peer mp, creating it.
func (l *Transport) linked(tcp bool, mp transport.Peer) transport.Peer {
	tab := &l.byShm
	if tcp {
		tab = &l.byTCP
	}
	if int(mp) < len(*tab) && (*tab)[mp] != 0 {
		return (*tab)[mp] - 1
	}
	for len(*tab) <= int(mp) {
		*tab = append(*tab, 0)
	}
	p := transport.Peer(len(l.routes))
	l.routes = append(l.routes, peerRoute{tcp: tcp, peer: mp})
	(*tab)[mp] = p + 1
	return p
}

// Route reports which member carries linked peer p.
func (l *Transport) Route(p transport.Peer) Route {
	if int(p) >= len(l.routes) {
		return RouteNone
	}
	if l.routes[p].tcp {
		return RouteTCP
	}
	return RouteShm
}

// Polls reports how many Polls ran and how many of them polled the tcp
// member (the others only asked it Quiet): tests, tools. Engine goroutine
// only.
func (l *Transport) Polls() (all, tcp uint64) { return l.polls, l.tcpPolls }

// Routes counts the peers routed over each member (tests, tools).
func (l *Transport) Routes() (shm, tcp int) {
	for _, r := range l.routes {
		if r.tcp {
			tcp++
		} else {
			shm++
		}
	}
	return shm, tcp
}

// PeerAddr returns a form of the peer's address whose RouteKey is that of
// the address vector's entry for it: fi_link://?shm=<region>&via=shm or
// fi_link://host:port?via=tcp.
func (l *Transport) PeerAddr(p transport.Peer) []byte {
	if int(p) >= len(l.routes) {
		return nil
	}
	r := l.routes[p]
	if r.tcp {
		ap, ok := parseSockaddr(l.tcp.PeerAddr(r.peer))
		if !ok {
			return nil
		}
		return []byte(Name{TCP: ap, Via: RouteTCP}.Format())
	}
	region, err := shm.ParseAddr(string(l.shm.PeerAddr(r.peer)))
	if err != nil {
		return nil
	}
	return []byte(Name{Shm: region, Via: RouteShm}.Format())
}

// Send hands the message to the peer's member.
func (l *Transport) Send(p transport.Peer, hdr *transport.Header, iov [][]byte, op transport.Op) (bool, transport.Code) {
	if int(p) >= len(l.routes) {
		return true, transport.EInval
	}
	r := l.routes[p]
	if r.tcp {
		return l.tcp.Send(r.peer, hdr, iov, op)
	}
	return l.shm.Send(r.peer, hdr, iov, op)
}

// SendInject hands an inject to the peer's member
// (transport.InjectSender): shm's SendInject copies eager sizes it would
// otherwise let the receiver read from the caller's buffers; tcp's Send
// copies them anyway.
func (l *Transport) SendInject(p transport.Peer, hdr *transport.Header, iov [][]byte, op transport.Op) (bool, transport.Code) {
	if int(p) >= len(l.routes) {
		return true, transport.EInval
	}
	r := l.routes[p]
	if r.tcp {
		return l.tcp.Send(r.peer, hdr, iov, op)
	}
	return l.shm.SendInject(r.peer, hdr, iov, op)
}

var _ transport.InjectSender = (*Transport)(nil)

// Fetch pulls a rendezvous payload through the peer's member.
func (l *Transport) Fetch(p transport.Peer, cookie uint64, dst [][]byte, op transport.Op) (bool, int, transport.Code) {
	if int(p) >= len(l.routes) {
		return true, 0, transport.EInval
	}
	r := l.routes[p]
	if r.tcp {
		return l.tcp.Fetch(r.peer, cookie, dst, op)
	}
	return l.shm.Fetch(r.peer, cookie, dst, op)
}

// Discard drops a rendezvous message through the peer's member.
func (l *Transport) Discard(p transport.Peer, cookie uint64) {
	if int(p) >= len(l.routes) {
		return
	}
	r := l.routes[p]
	if r.tcp {
		l.tcp.Discard(r.peer, cookie)
		return
	}
	l.shm.Discard(r.peer, cookie)
}

// DiscardOp is Discard through the peer's member (transport.Discarder).
func (l *Transport) DiscardOp(p transport.Peer, cookie uint64, op transport.Op) bool {
	if int(p) >= len(l.routes) {
		return true
	}
	r := l.routes[p]
	if r.tcp {
		l.tcp.Discard(r.peer, cookie) // tcp tells the sender at once (or its flusher does)
		return true
	}
	return l.shm.DiscardOp(r.peer, cookie, op)
}

// Poll polls the shm member, then the tcp member unless it is idle while
// shm is busy (see Transport).
func (l *Transport) Poll(s transport.Sink) bool {
	l.sink = s
	l.polls++
	did := false
	if l.shm.Poll(&l.ss) {
		did, l.shmAgo = true, 0
	} else if l.shmAgo < shmBusyWithin {
		l.shmAgo++
	}
	if l.tcpAgo >= tcpIdleAfter && l.shmAgo < shmBusyWithin {
		// tcp idle, shm busy: let the loop read the sockets and look
		// only at what it queued.
		if l.tcp.Quiet() {
			return did
		}
		l.tcp.Unborrow()
	}
	l.tcpPolls++
	if l.tcp.Poll(&l.ts) {
		did, l.tcpAgo = true, 0
	} else if l.tcpAgo < tcpIdleAfter {
		l.tcpAgo++
	}
	return did
}

// RMA starts a one-sided operation through the peer's member
// (transport.RMATransport): each member reaches the target's memory its
// own way (shm: mapping or single copy or the target's executor; tcp: the
// target's event loop).
func (l *Transport) RMA(p transport.Peer, req *transport.RMAReq, op transport.Op) (bool, transport.Code) {
	if int(p) >= len(l.routes) {
		return true, transport.EInval
	}
	r := l.routes[p]
	if r.tcp {
		return l.tcp.RMA(r.peer, req, op)
	}
	return l.shm.RMA(r.peer, req, op)
}

// ServeRMA makes the endpoint a target on both members: local initiators
// find it through the shm member's service segment, remote ones reach
// the tcp member's loop. x's key table must be a shared segment (the shm
// member's requirement), which serves the tcp member as well.
func (l *Transport) ServeRMA(x *rma.Target) error {
	if err := l.shm.ServeRMA(x); err != nil {
		return err
	}
	return l.tcp.ServeRMA(x)
}

// Poke wakes a peer on this host without a message (transport.Poker, for
// collectives synchronising through shared memory): false for peers
// reached over tcp.
func (l *Transport) Poke(p transport.Peer) bool {
	if int(p) >= len(l.routes) || l.routes[p].tcp {
		return false
	}
	return l.shm.Poke(l.routes[p].peer)
}

// WaitPokes counts waiters for pokes: Wait sleeps on the shm member's
// doorbell, which pokes ring.
func (l *Transport) WaitPokes(delta int) { l.shm.WaitPokes(delta) }

// RecvPrepareMin and PrepareRecv are shm's (transport.RecvPreparer): a
// receive is posted for any peer, and a buffer prepared for a shm peer's
// copy costs a tcp one nothing.
func (l *Transport) RecvPrepareMin() int  { return l.shm.RecvPrepareMin() }
func (l *Transport) PrepareRecv(b []byte) { l.shm.PrepareRecv(b) }

// Wait sleeps on the shm doorbell until either member may have work,
// Wake is called or the timeout passes.
func (l *Transport) Wait(timeout time.Duration) {
	if l.tcp.BeginWait() {
		l.shm.Wait(timeout)
	}
	l.tcp.EndWait()
}

// Wake makes a concurrent or the next Wait return.
func (l *Transport) Wake() { l.shm.Wake() }

// SpinBudget forwards the shm member's advice (engine.Spinner): on an
// oversubscribed host a spinning rank takes the CPU from the one it
// waits for, whichever member carries the answer.
func (l *Transport) SpinBudget() int { return l.shm.SpinBudget() }

// LastError returns the shm member's account of its last space or I/O
// failure (the tcp member keeps none).
func (l *Transport) LastError() error { return l.shm.LastError() }

// Close closes both members.
func (l *Transport) Close() error {
	return errors.Join(l.tcp.Close(), l.shm.Close())
}

func (s *memberSink) Arrive(p transport.Peer, hdr *transport.Header, eager []byte, cookie uint64) bool {
	return s.t.sink.Arrive(s.t.linked(s.tcp, p), hdr, eager, cookie)
}

func (s *memberSink) SendDone(op transport.Op, c transport.Code) { s.t.sink.SendDone(op, c) }

func (s *memberSink) FetchDone(op transport.Op, n int, c transport.Code) {
	s.t.sink.FetchDone(op, n, c)
}

func (s *memberSink) PeerDown(p transport.Peer, c transport.Code) {
	s.t.sink.PeerDown(s.t.linked(s.tcp, p), c)
}
