package coll_test

import (
	"bytes"
	"fmt"
	"time"

	"github.com/gofi-dev/fi/coll"
	"github.com/gofi-dev/fi/engine"
	"github.com/gofi-dev/fi/transport"
)

// hub connects in-memory transports in one process, driven from one
// goroutine: eager up to maxEager bytes, rendezvous above, per-peer order.
type hub struct {
	eps      map[string]*pipe
	maxEager int
	async    bool // fetches complete on the next Poll
	cap      int  // max messages queued per inbox (0: unbounded); Send gives EAgain beyond
}

type wireMsg struct {
	from   string
	hdr    transport.Header
	data   []byte
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
	held    map[uint64]*heldSend
	next    uint64
	fetched []fetchEv
	down    []transport.Peer
	dead    bool
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
	if !ok || dst.dead {
		return true, transport.EConnRefuse
	}
	if p.h.cap > 0 && len(dst.inbox) >= p.h.cap {
		return false, transport.EAgain
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
			break
		}
		p.inbox = p.inbox[1:]
		did = true
	}
	return did
}

func (p *pipe) Wait(d time.Duration) {}
func (p *pipe) Wake()                {}
func (p *pipe) Close() error         { return nil }

// kill makes p dead: its peers see PeerDown on their next Poll.
func (h *hub) kill(name string) {
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

type book struct{ names []string }

func (b *book) Lookup(a uint64) ([]byte, bool) {
	if a >= uint64(len(b.names)) {
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

// world is n ranks on one hub, each an engine endpoint with a CQ and a
// collective engine; rank i's fi_addr for rank j is j.
type world struct {
	h     *hub
	names []string
	eng   []*engine.Endpoint
	cq    []*engine.CQ
	ce    []*coll.Endpoint
	g     []*coll.Group
}

func newWorld(n, maxEager int) *world { return newWorldKey(n, maxEager, 0) }

// newWorldKey is newWorld with the ranks' node key: not 0, they share a
// node-local shared-memory region once joined.
func newWorldKey(n, maxEager int, nodeKey uint64) *world {
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = nodeKey
	}
	return newWorldKeys(maxEager, keys)
}

// newWorldKeys is a world of len(keys) ranks, rank i with node key
// keys[i]: ranks with equal non-zero keys form a node.
func newWorldKeys(maxEager int, keys []uint64) *world {
	n := len(keys)
	w := &world{h: &hub{eps: map[string]*pipe{}, maxEager: maxEager}}
	for i := 0; i < n; i++ {
		w.names = append(w.names, fmt.Sprintf("rank%d", i))
	}
	for i := 0; i < n; i++ {
		p := w.h.newPipe(w.names[i])
		cq := engine.NewCQ(256, nil)
		ep, c := engine.NewEndpoint(engine.Config{Transport: p, Addrs: &book{names: w.names}, TxCQ: cq, RxCQ: cq})
		if c != 0 {
			panic(c)
		}
		cq.Bind(ep, nil)
		w.eng = append(w.eng, ep)
		w.cq = append(w.cq, cq)
		w.ce = append(w.ce, coll.Attach(ep, coll.Config{NodeKey: keys[i]}))
	}
	return w
}

func (w *world) members() ([]uint64, [][]byte) {
	var m []uint64
	var names [][]byte
	for i, n := range w.names {
		m = append(m, uint64(i))
		names = append(names, []byte(n))
	}
	return m, names
}

// join joins all ranks and waits for every join completion.
func (w *world) join() error {
	m, names := w.members()
	w.g = make([]*coll.Group, len(w.names))
	for i := range w.names {
		g, c := w.ce[i].Join(m, names, i, "join")
		if c != 0 {
			return fmt.Errorf("rank %d join: %v", i, c)
		}
		w.g[i] = g
	}
	errs := w.waitAll(nil)
	for i, e := range errs {
		if e != 0 {
			return fmt.Errorf("rank %d join completion: %v", i, e)
		}
	}
	return nil
}

// waitAll drives every rank until each has one completion (skipping
// ranks in skip), and returns their errnos.
func (w *world) waitAll(skip map[int]bool) []engine.Code {
	n := len(w.names)
	got := make([]bool, n)
	res := make([]engine.Code, n)
	left := n - len(skip)
	buf := make([]engine.Entry, 1)
	for spins := 0; left > 0; spins++ {
		if spins > 1_000_000 {
			panic("collective did not complete (hang)")
		}
		for i := 0; i < n; i++ {
			if got[i] || skip[i] {
				continue
			}
			k, c := w.cq[i].Read(buf)
			switch {
			case k == 1:
				got[i] = true
				left--
			case c == engine.CodeAvail:
				e, _ := w.cq[i].ReadErr()
				res[i] = e.Err
				got[i] = true
				left--
			}
		}
	}
	return res
}

// leave closes every rank's group (unmapping shared-memory regions).
func (w *world) leave() {
	for i, g := range w.g {
		if g != nil {
			w.ce[i].Leave(g)
		}
	}
}
