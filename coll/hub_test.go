package coll_test

import (
	"fmt"

	"github.com/gofi-dev/fi/coll"
	"github.com/gofi-dev/fi/engine"
	"github.com/gofi-dev/fi/internal/pipetest"
)

// hub connects in-memory pipe transports in one process (internal/
// pipetest), driven from one goroutine: eager up to MaxEager bytes,
// rendezvous above, per-peer order.
type hub = pipetest.Hub

type book = pipetest.Book

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
	w := &world{h: pipetest.NewHub(maxEager)}
	for i := 0; i < n; i++ {
		w.names = append(w.names, fmt.Sprintf("rank%d", i))
	}
	for i := 0; i < n; i++ {
		p := w.h.NewPipe(w.names[i])
		cq := engine.NewCQ(256, nil)
		ep, c := engine.NewEndpoint(engine.Config{Transport: p, Addrs: &book{Names: w.names}, TxCQ: cq, RxCQ: cq})
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
