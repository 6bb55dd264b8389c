package engine

import (
	"bytes"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// hub connects pipe transports in one process: a test stand-in for shm/tcp
// with the same contract (eager up to maxEager, rendezvous above it).
type hub struct {
	eps      map[string]*pipe
	maxEager int
	async    bool // Fetch completes on the receiver's next Poll
}

func newHub(maxEager int) *hub { return &hub{eps: map[string]*pipe{}, maxEager: maxEager} }

type wireMsg struct {
	from   string
	hdr    transport.Header
	data   []byte // eager copy
	cookie uint64
}

type heldSend struct {
	op   transport.Op
	iov  [][]byte
	done bool
	code transport.Code
}

type pipe struct {
	h       *hub
	name    string
	inbox   []wireMsg
	peers   []string
	held    map[uint64]*heldSend // rendezvous sends by cookie
	next    uint64
	fetched []fetchEv // async fetch completions to report
	closed  bool
}

type fetchEv struct {
	op transport.Op
	n  int
}

func (h *hub) newPipe(name string) *pipe {
	p := &pipe{h: h, name: name, held: map[uint64]*heldSend{}}
	h.eps[name] = p
	return p
}

func (p *pipe) Name() []byte { return []byte(p.name) }

func (p *pipe) Resolve(addr []byte) (transport.Peer, transport.Code) {
	for i, n := range p.peers {
		if n == string(addr) {
			return transport.Peer(i), 0
		}
	}
	p.peers = append(p.peers, string(addr))
	return transport.Peer(len(p.peers) - 1), 0
}

func (p *pipe) PeerAddr(pr transport.Peer) []byte { return []byte(p.peers[pr]) }
func (p *pipe) MaxEager() int                     { return p.h.maxEager }

func (p *pipe) Send(pr transport.Peer, hdr *transport.Header, iov [][]byte, op transport.Op) (bool, transport.Code) {
	dst, ok := p.h.eps[p.peers[pr]]
	if !ok {
		return false, transport.EConnRefuse
	}
	m := wireMsg{from: p.name, hdr: *hdr}
	if int(hdr.Len) <= p.h.maxEager {
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

func (p *pipe) Fetch(pr transport.Peer, cookie uint64, dst [][]byte, op transport.Op) (bool, int, transport.Code) {
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
	if p.h.async {
		p.fetched = append(p.fetched, fetchEv{op: op, n: n})
		return false, 0, 0
	}
	return true, n, 0
}

func (p *pipe) Discard(pr transport.Peer, cookie uint64) {
	src := p.h.eps[p.peers[pr]]
	if hs := src.held[cookie]; hs != nil {
		hs.done = true
	}
}

func (p *pipe) Poll(s transport.Sink) bool {
	did := false
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
		s.FetchDone(ev.op, ev.n, 0)
		did = true
	}
	for len(p.inbox) > 0 {
		m := p.inbox[0]
		pr, _ := p.Resolve([]byte(m.from))
		var eager []byte
		if m.data != nil {
			eager = m.data
		}
		if !s.Arrive(pr, &m.hdr, eager, m.cookie) {
			break // back-pressure: redeliver later
		}
		p.inbox = p.inbox[1:]
		did = true
	}
	return did
}

func (p *pipe) Wait(d time.Duration) { time.Sleep(min(d, time.Millisecond)) }
func (p *pipe) Wake()                {}
func (p *pipe) Close() error         { p.closed = true; return nil }

// book is an AddrBook over a slice of names: fi_addr i is names[i].
type book struct{ names []string }

func (b *book) Lookup(a uint64) ([]byte, bool) {
	if a >= uint64(len(b.names)) || b.names[a] == "" {
		return nil, false
	}
	return []byte(b.names[a]), true
}

func (b *book) Reverse(addr []byte) (uint64, bool) {
	for i, n := range b.names {
		if n == string(addr) {
			return uint64(i), true
		}
	}
	return 0, false
}
