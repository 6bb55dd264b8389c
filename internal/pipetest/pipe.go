package pipetest

import (
	"bytes"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// Hub connects the pipes made by NewPipe. It is not safe for concurrent
// use: one goroutine drives every pipe on a hub.
type Hub struct {
	eps map[string]*Pipe

	// MaxEager is the largest payload a Send copies at once; larger ones
	// go by rendezvous (held by the sender until the receiver's Fetch).
	MaxEager int
	// Async makes Fetch complete on the receiver's next Poll (FetchDone)
	// instead of at once.
	Async bool
	// Cap bounds the messages queued in one inbox; a Send beyond it gives
	// EAgain. 0: unbounded.
	Cap int
	// SleepInWait makes Wait sleep (at most 1 ms) like a real transport
	// with nothing to do; otherwise Wait returns at once.
	SleepInWait bool
}

// NewHub returns an empty hub whose pipes copy up to maxEager bytes.
func NewHub(maxEager int) *Hub { return &Hub{eps: map[string]*Pipe{}, MaxEager: maxEager} }

type wireMsg struct {
	from   string
	hdr    transport.Header
	data   []byte // eager copy; nil for a rendezvous announcement
	cookie uint64
}

type heldSend struct {
	op   transport.Op
	iov  [][]byte
	done bool
	code transport.Code
}

type fetchEv struct {
	op   transport.Op
	n    int
	drop *heldSend // DiscardOp: the sender is told when this is reported
}

// Pipe is one endpoint's transport on a Hub; its name is its address.
type Pipe struct {
	h       *Hub
	name    string
	inbox   []wireMsg
	peers   []string
	held    map[uint64]*heldSend // rendezvous sends by cookie
	next    uint64
	fetched []fetchEv // async fetch completions to report
	down    []transport.Peer
	dead    bool
	closed  bool
}

// NewPipe adds a pipe named name to the hub.
func (h *Hub) NewPipe(name string) *Pipe {
	p := &Pipe{h: h, name: name, held: map[uint64]*heldSend{}}
	h.eps[name] = p
	return p
}

// Kill makes the pipe named name dead: sends to it are refused and its
// peers see PeerDown (and their held sends fail) on their next Poll.
func (h *Hub) Kill(name string) {
	d := h.eps[name]
	d.dead = true
	for _, p := range h.eps {
		if p == d {
			continue
		}
		for i, n := range p.peers {
			if n == name {
				p.down = append(p.down, transport.Peer(i))
			}
		}
	}
}

// Hub returns the hub p belongs to.
func (p *Pipe) Hub() *Hub { return p.h }

// Closed reports whether Close was called.
func (p *Pipe) Closed() bool { return p.closed }

func (p *Pipe) Name() []byte { return []byte(p.name) }

func (p *Pipe) Resolve(addr []byte) (transport.Peer, transport.Code) {
	for i, n := range p.peers {
		if n == string(addr) {
			return transport.Peer(i), 0
		}
	}
	p.peers = append(p.peers, string(addr))
	return transport.Peer(len(p.peers) - 1), 0
}

func (p *Pipe) PeerAddr(pr transport.Peer) []byte { return []byte(p.peers[pr]) }
func (p *Pipe) MaxEager() int                     { return p.h.MaxEager }

func (p *Pipe) Send(pr transport.Peer, hdr *transport.Header, iov [][]byte, op transport.Op) (bool, transport.Code) {
	dst, ok := p.h.eps[p.peers[pr]]
	if !ok || dst.dead {
		return true, transport.EConnRefuse
	}
	if p.h.Cap > 0 && len(dst.inbox) >= p.h.Cap {
		return false, transport.EAgain
	}
	m := wireMsg{from: p.name, hdr: *hdr}
	if int(hdr.Len) <= p.h.MaxEager {
		m.data = bytes.Join(iov, nil)
		if m.data == nil {
			m.data = []byte{}
		}
		dst.inbox = append(dst.inbox, m)
		return true, 0
	}
	p.next++
	p.held[p.next] = &heldSend{op: op, iov: iov}
	m.cookie = p.next
	dst.inbox = append(dst.inbox, m)
	return false, 0
}

func (p *Pipe) Fetch(pr transport.Peer, cookie uint64, dst [][]byte, op transport.Op) (bool, int, transport.Code) {
	src := p.h.eps[p.peers[pr]]
	hs := src.held[cookie]
	if hs == nil {
		return true, 0, transport.EIO
	}
	data := bytes.Join(hs.iov, nil)
	n := 0
	for _, d := range dst {
		k := copy(d, data)
		data = data[k:]
		n += k
	}
	hs.done = true
	if p.h.Async {
		p.fetched = append(p.fetched, fetchEv{op: op, n: n})
		return false, 0, 0
	}
	return true, n, 0
}

func (p *Pipe) Discard(pr transport.Peer, cookie uint64) {
	src := p.h.eps[p.peers[pr]]
	if hs := src.held[cookie]; hs != nil {
		hs.done = true
	}
}

// DiscardOp is Discard (transport.Discarder); with Async the sender is
// told, and FetchDone(op, 0, 0) reported, on the receiver's next Poll.
func (p *Pipe) DiscardOp(pr transport.Peer, cookie uint64, op transport.Op) bool {
	src := p.h.eps[p.peers[pr]]
	hs := src.held[cookie]
	if hs == nil {
		return true
	}
	if p.h.Async {
		p.fetched = append(p.fetched, fetchEv{op: op, drop: hs})
		return false
	}
	hs.done = true
	return true
}

func (p *Pipe) Poll(s transport.Sink) bool {
	did := false
	for len(p.down) > 0 {
		pr := p.down[0]
		p.down = p.down[1:]
		for c, hs := range p.held {
			delete(p.held, c)
			s.SendDone(hs.op, transport.EConnReset)
		}
		s.PeerDown(pr, transport.EConnReset)
		did = true
	}
	for c, hs := range p.held {
		if hs.done {
			delete(p.held, c)
			s.SendDone(hs.op, hs.code)
			did = true
		}
	}
	for len(p.fetched) > 0 {
		ev := p.fetched[0]
		p.fetched = p.fetched[1:]
		if ev.drop != nil {
			ev.drop.done = true
		}
		s.FetchDone(ev.op, ev.n, 0)
		did = true
	}
	for len(p.inbox) > 0 {
		m := p.inbox[0]
		pr, _ := p.Resolve([]byte(m.from))
		if !s.Arrive(pr, &m.hdr, m.data, m.cookie) {
			break // back-pressure: redeliver later
		}
		p.inbox = p.inbox[1:]
		did = true
	}
	return did
}

func (p *Pipe) Wait(d time.Duration) {
	if p.h.SleepInWait {
		time.Sleep(min(d, time.Millisecond))
	}
}

func (p *Pipe) Wake()        {}
func (p *Pipe) Close() error { p.closed = true; return nil }

// Book is an address book over a slice of names: fi_addr i is Names[i]
// (an empty name is no address).
type Book struct{ Names []string }

func (b *Book) Lookup(a uint64) ([]byte, bool) {
	if a >= uint64(len(b.Names)) || b.Names[a] == "" {
		return nil, false
	}
	return []byte(b.Names[a]), true
}

func (b *Book) Reverse(addr []byte) (uint64, bool) {
	for i, n := range b.Names {
		if n == string(addr) {
			return uint64(i), true
		}
	}
	return 0, false
}

var (
	_ transport.Transport = (*Pipe)(nil)
	_ transport.Discarder = (*Pipe)(nil)
)
