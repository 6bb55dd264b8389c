package net

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	stdnet "net"
	"net/netip"
	"testing"
	"time"

	"github.com/gofi-dev/fi/rma"
	"github.com/gofi-dev/fi/transport"
)

// rmaFlowTarget is a transport serving a region of size bytes (key 9,
// read and write) filled with a pattern.
func rmaFlowTarget(t *testing.T, size int, seed byte) (*Transport, []byte) {
	t.Helper()
	return rmaFlowTargetCfg(t, Config{}, size, seed)
}

// rmaFlowTargetCfg is rmaFlowTarget listening with cfg.
func rmaFlowTargetCfg(t *testing.T, cfg Config, size int, seed byte) (*Transport, []byte) {
	t.Helper()
	b := listen(t, cfg)
	tsize, _ := rma.Size(4, 4)
	tab, err := rma.NewTable(make([]byte, tsize), 4, 4, "")
	if err != nil {
		t.Fatal(err)
	}
	mem := pattern(size, seed)
	if _, _, err := tab.Register(rma.Region{Mem: mem, Key: 9, Access: rma.AccessRemoteRead | rma.AccessRemoteWrite}, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.ServeRMA(&rma.Target{Table: tab}); err != nil {
		t.Fatal(err)
	}
	return b, mem
}

// rmaFlowPair is an initiator a (sink as) connected to peer p, the
// rmaFlowTarget b (sink bs) serving mem.
func rmaFlowPair(t *testing.T, size int, seed byte) (a *Transport, as *fakeSink, b *Transport, bs *fakeSink, p transport.Peer, mem []byte) {
	t.Helper()
	b, mem = rmaFlowTarget(t, size, seed)
	bs = newSink()
	a = listen(t, Config{})
	as = newSink()
	p, c := a.Resolve(b.Name())
	if c != transport.OK {
		t.Fatal(c)
	}
	return a, as, b, bs, p, mem
}

// rmaReader keeps reads of one size in flight from a target's region,
// each into its own buffer, and checks every answer against the region
// (CRC): the RMA calls that find no room for their answers (EAgain) are
// retried after progress.
type rmaReader struct {
	tr     *Transport
	sink   *fakeSink
	peer   transport.Peer
	mem    []byte // the target's region (never written while reads run)
	size   int
	n      int // reads in all
	bufs   [][]byte
	offs   []int
	busy   []bool
	posted int
	done   int
	agains int
	base   transport.Op
}

func newRMAReader(tr *Transport, sink *fakeSink, p transport.Peer, mem []byte, size, window, n int, base transport.Op) *rmaReader {
	r := &rmaReader{tr: tr, sink: sink, peer: p, mem: mem, size: size, n: n, base: base}
	for range window {
		r.bufs = append(r.bufs, make([]byte, size))
		r.offs = append(r.offs, 0)
		r.busy = append(r.busy, false)
	}
	return r
}

// step posts into free buffers and checks completed reads; err reports a
// failed or wrong read.
func (r *rmaReader) step() error {
	for i := range r.bufs {
		if r.busy[i] {
			op := r.base + transport.Op(i)
			c, ok := r.sink.sendDone[op]
			if !ok {
				continue
			}
			delete(r.sink.sendDone, op)
			if c != transport.OK {
				return fmt.Errorf("read %d: code %d", r.done, c)
			}
			want := r.mem[r.offs[i] : r.offs[i]+r.size]
			if crc32.ChecksumIEEE(r.bufs[i]) != crc32.ChecksumIEEE(want) {
				return fmt.Errorf("read %d (offset %d): the bytes differ from the region's", r.done, r.offs[i])
			}
			r.busy[i] = false
			r.done++
		}
		if r.busy[i] || r.posted == r.n {
			continue
		}
		off := (r.posted * 4099) % (len(r.mem) - r.size + 1)
		clear(r.bufs[i])
		req := &transport.RMAReq{Kind: transport.RMARead, Local: [][]byte{r.bufs[i]}, Remote: []transport.RMAIOV{{Addr: uint64(off), Len: uint64(r.size), Key: 9}}}
		done, c := r.tr.RMA(r.peer, req, r.base+transport.Op(i))
		if c == transport.EAgain && !done {
			r.agains++
			continue // no room: after progress
		}
		if done || c != transport.OK {
			return fmt.Errorf("read %d: RMA done %v code %d", r.posted, done, c)
		}
		r.offs[i], r.busy[i] = off, true
		r.posted++
	}
	return nil
}

// Many large reads in flight get flow control, not a reset: sixteen or
// more 4 MiB reads at once used to queue more than rmaQueueMax of answers
// at the target, which then broke the connection ("connection reset by
// peer" at the initiator, perftest rma -s 4m read-bw now and then).
func TestRMAFlow_ManyLargeReadsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name             string
		size, window, n  int
		region           int
		wantAgainAtLeast int
	}{
		{"32x4MiB", 4 << 20, 32, 32, 16 << 20, 1},
		{"1GiB", 4 << 20, 32, 256, 16 << 20, 1},
		{"64x1MiB", 1 << 20, 64, 256, 8 << 20, 0},
		{"odd", 3<<20 + 5, 24, 48, 9 << 20, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, as, b, bs, p, mem := rmaFlowPair(t, tc.region, 3)
			r := newRMAReader(a, as, p, mem, tc.size, tc.window, tc.n, 1000)
			deadline := time.Now().Add(60 * time.Second)
			for r.done < r.n {
				if err := r.step(); err != nil {
					t.Fatal(err)
				}
				if len(as.downs) > 0 || len(bs.downs) > 0 {
					t.Fatalf("peer down after %d of %d reads: initiator %v, target %v", r.done, r.n, as.downs, bs.downs)
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d reads done (%d posted)", r.done, r.n, r.posted)
				}
				if !a.Poll(as) && !b.Poll(bs) {
					a.Wait(time.Millisecond)
				}
			}
			if r.agains < tc.wantAgainAtLeast {
				t.Fatalf("%d reads refused for room, want at least %d", r.agains, tc.wantAgainAtLeast)
			}
			pp := a.peer(p)
			pp.mu.Lock()
			out := pp.rmaOut
			pp.mu.Unlock()
			if out != 0 {
				t.Fatalf("after the reads: %d answer bytes outstanding", out)
			}
		})
	}
}

// Two peers reading each other with large windows at once, with writes
// interleaved, both complete: neither side stops reading its socket while
// its answers wait (each one's answers to the other are bounded by the
// other's answer window), so neither waits for the other to read.
func TestRMAFlow_BothWaysAtOnce(t *testing.T) {
	a, amem := rmaFlowTarget(t, 16<<20, 5)
	b, bmem := rmaFlowTarget(t, 16<<20, 7)
	as, bs := newSink(), newSink()
	pb, c := a.Resolve(b.Name())
	if c != transport.OK {
		t.Fatal(c)
	}
	pa, c := b.Resolve(a.Name())
	if c != transport.OK {
		t.Fatal(c)
	}
	// Reads cover [0, 12 MiB + ...) of each region; writes go above 14 MiB.
	ra := newRMAReader(a, as, pb, bmem[:12<<20], 4<<20, 24, 96, 1000)
	rb := newRMAReader(b, bs, pa, amem[:12<<20], 4<<20, 24, 96, 1000)
	wsrc := [2][]byte{pattern(1<<20, 11), pattern(1<<20, 13)}
	writes := [2]int{}
	const nwrites = 64
	wbusy := [2]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for ra.done < ra.n || rb.done < rb.n || writes[0] < nwrites || writes[1] < nwrites {
		for i, r := range []*rmaReader{ra, rb} {
			if err := r.step(); err != nil {
				t.Fatalf("side %d: %v", i, err)
			}
			tr, s, p := a, as, pb
			if i == 1 {
				tr, s, p = b, bs, pa
			}
			const wop = 5000
			if wbusy[i] {
				if c, ok := s.sendDone[wop]; ok {
					delete(s.sendDone, wop)
					if c != transport.OK {
						t.Fatalf("side %d: write: code %d", i, c)
					}
					wbusy[i] = false
					writes[i]++
				}
			}
			if !wbusy[i] && writes[i] < nwrites {
				req := &transport.RMAReq{Kind: transport.RMAWrite, Local: [][]byte{wsrc[i]}, Remote: []transport.RMAIOV{{Addr: 14 << 20, Len: 1 << 20, Key: 9}}}
				done, c := tr.RMA(p, req, wop)
				switch {
				case c == transport.EAgain && !done:
				case done || c != transport.OK:
					t.Fatalf("side %d: write: done %v code %d", i, done, c)
				default:
					wbusy[i] = true
				}
			}
		}
		if len(as.downs) > 0 || len(bs.downs) > 0 {
			t.Fatalf("peer down: %v %v", as.downs, bs.downs)
		}
		if time.Now().After(deadline) {
			t.Fatalf("reads %d/%d and %d/%d, writes %v of %d", ra.done, ra.n, rb.done, rb.n, writes, nwrites)
		}
		wa, wb := a.Poll(as), b.Poll(bs)
		if !wa && !wb {
			a.Wait(time.Millisecond)
		}
	}
	// The last writes landed (read back through each target).
	for i, pair := range []struct {
		tr   *Transport
		s    *fakeSink
		p    transport.Peer
		want []byte
	}{{a, as, pb, wsrc[0]}, {b, bs, pa, wsrc[1]}} {
		got := readBack(t, pair.tr, pair.s, pair.p, []transport.RMAIOV{{Addr: 14 << 20, Len: 1 << 20, Key: 9}}, 6000)
		if !bytes.Equal(got, pair.want) {
			t.Fatalf("side %d: the written bytes differ", i)
		}
	}
}

// rawRMAPeer connects to tr as a peer of its own (a HELLO, no listener),
// for requests the transport's own initiator would never send.
func rawRMAPeer(t *testing.T, tr *Transport) stdnet.Conn {
	t.Helper()
	c, err := stdnet.Dial("tcp4", tcpAddr(t, tr.Name()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	name := encodeSockaddr(netip.MustParseAddrPort("127.0.0.1:1"))
	if _, err := c.Write(helloFrame(name, 0x7a11, defaultWindow)); err != nil {
		t.Fatal(err)
	}
	return c
}

// readRequests encodes n read requests of size bytes each at offsets
// i*step (modulo 12 MiB) of key 9, ids from 1.
func readRequests(n, size, step int) []byte {
	var stream []byte
	for i := range n {
		rq := rma.Request{Kind: rma.KindRead, ID: uint64(i + 1), NIOV: 1}
		rq.IOV[0] = rma.IOV{Addr: uint64(i*step) % (12 << 20), Len: uint64(size), Key: 9}
		hl := rq.HeaderLen()
		b := make([]byte, hdrSize+hl)
		putHeader(b, &frame{op: opRMA, cookie: uint64(i + 1), length: uint64(hl)})
		rq.Encode(b[hdrSize:])
		stream = append(stream, b...)
	}
	return stream
}

// A peer that asks for more answers than rmaAnswerWindow allows and never
// reads them is broken: the target gives up on it once rmaQueueMax bytes
// of answers wait (memory stays bounded), and it keeps serving others.
// One that keeps to the window may read its answers as late as it likes:
// they all come, whole and in order.
func TestRMAFlow_PeerNotReading(t *testing.T) {
	t.Run("beyond the window: broken", func(t *testing.T) {
		b, _ := rmaFlowTarget(t, 16<<20, 1)
		bs := newSink()
		c := rawRMAPeer(t, b)
		n := (2*rmaQueueMax)/(4<<20) + 4 // twice what the target keeps
		go func() { _, _ = c.Write(readRequests(n, 4<<20, 1<<20)) }()
		pollUntil(t, "the target gives up on the peer", func() bool { return len(bs.downs) > 0 }, b, bs)
		// Another initiator is still served.
		a := listen(t, Config{})
		as := newSink()
		p, code := a.Resolve(b.Name())
		if code != transport.OK {
			t.Fatal(code)
		}
		readBack(t, a, as, p, []transport.RMAIOV{{Addr: 0, Len: 4 << 20, Key: 9}}, 1)
	})
	t.Run("within the window: slow reader", func(t *testing.T) {
		b, mem := rmaFlowTarget(t, 16<<20, 2)
		bs := newSink()
		// The target answers while the peer reads nothing: its queue fills.
		c, n, size := queueUnreadAnswers(t, b, bs)
		stop := time.Now().Add(200 * time.Millisecond)
		pollUntil(t, "a while", func() bool { return time.Now().After(stop) }, b, bs)
		if len(bs.downs) > 0 {
			t.Fatalf("the target gave up on a peer within its answer window: %v", bs.downs)
		}
		done := make(chan error, 1)
		go func() {
			hello := make([]byte, hdrSize+helloLen) // the target's HELLO first
			if _, err := io.ReadFull(c, hello); err != nil {
				done <- err
				return
			}
			for i := range n {
				var h [hdrSize]byte
				if _, err := io.ReadFull(c, h[:]); err != nil {
					done <- fmt.Errorf("answer %d: %v", i, err)
					return
				}
				var f frame
				if err := decodeHeader(h[:], &f); err != nil || f.op != opData || f.cookie != uint64(i+1) || f.length != uint64(size) || f.flags != 0 {
					done <- fmt.Errorf("answer %d: %+v (%v)", i, f, err)
					return
				}
				got := make([]byte, size)
				if _, err := io.ReadFull(c, got); err != nil {
					done <- fmt.Errorf("answer %d: %v", i, err)
					return
				}
				if off := (i << 20) % (12 << 20); !bytes.Equal(got, mem[off:off+size]) {
					done <- fmt.Errorf("answer %d: bytes differ", i)
					return
				}
			}
			done <- nil
		}()
		var err error
		got := false
		pollUntil(t, "every answer read", func() bool {
			select {
			case err = <-done:
				got = true
			default:
			}
			return got
		}, b, bs)
		if err != nil {
			t.Fatal(err)
		}
		if len(bs.downs) > 0 {
			t.Fatalf("peer down: %v", bs.downs)
		}
	})
}

// A peer that keeps to its answer window but never reads (stopped, or
// hostile) holds the target's queued answers, at most rmaQueueMax, for
// as long as its connection lives: until Config.UserTimeout, when set,
// ends it (the kernel counts a receive window that stays shut as bytes
// not taken), which fails the peer and frees them.
func TestRMAFlow_UserTimeoutEndsAPeerThatNeverReads(t *testing.T) {
	b, _ := rmaFlowTargetCfg(t, Config{UserTimeout: time.Second}, 16<<20, 3)
	bs := newSink()
	queueUnreadAnswers(t, b, bs)
	pollUntil(t, "the target gives the peer up", func() bool { return len(bs.downs) > 0 }, b, bs)
	if q := b.answersQueued(); q != 0 {
		t.Fatalf("%d bytes of answers still queued after the peer was given up", q)
	}
}

// queueUnreadAnswers connects a raw peer to b and sends it a whole
// answer window of 4 MiB reads (n of size bytes) without reading, then
// polls b until answers are queued for it.
func queueUnreadAnswers(t *testing.T, b *Transport, bs *fakeSink) (c stdnet.Conn, n, size int) {
	t.Helper()
	c = rawRMAPeer(t, b)
	size = 4 << 20
	n = rmaAnswerWindow / (size + hdrSize)
	if _, err := c.Write(readRequests(n, size, 1<<20)); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "answers queued", func() bool { return b.answersQueued() > 0 }, b, bs)
	return c, n, size
}

// answersQueued is the RMA answer bytes waiting in the transport's send
// queues (tests).
func (t *Transport) answersQueued() int {
	t.mu.Lock()
	peers := append([]*peer(nil), t.peers...)
	t.mu.Unlock()
	n := 0
	for _, p := range peers {
		if p == nil {
			continue
		}
		p.mu.Lock()
		if p.tx != nil {
			n += p.tx.aq
		}
		p.mu.Unlock()
	}
	return n
}

// A read of at most tcpOrderSize (rmaReadWindow requests) goes out whole
// or not at all: with too little room left in the answer window it gets
// EAgain and sends nothing, so no request of it is left behind for a
// later write to overtake (fi_rma(3) ordering up to MaxOrder sizes); with
// the room back it goes out with all its requests at once.
func TestRMAFlow_ReadGoesWholeOrNotAtAll(t *testing.T) {
	a, as, b, bs, p, mem := rmaFlowPair(t, 16<<20, 5)
	pp := a.peer(p)
	const size = rmaReadWindow * rma.MaxRead // 16 MiB: four requests
	buf := make([]byte, size)
	req := &transport.RMAReq{Kind: transport.RMARead, Local: [][]byte{buf}, Remote: []transport.RMAIOV{{Addr: 0, Len: size, Key: 9}}}
	const taken = rmaAnswerWindow - 2*rma.MaxRead // room for two requests' answers only
	pp.mu.Lock()
	pp.rmaOut += taken
	pp.mu.Unlock()
	if done, c := a.RMA(p, req, 7); c != transport.EAgain || done {
		t.Fatalf("read with room for half its requests: done %v, code %d; want EAgain, not done", done, c)
	}
	pp.mu.Lock()
	out := pp.rmaOut
	pp.rmaOut -= taken
	pp.mu.Unlock()
	if out != taken {
		t.Fatalf("a refused read sent requests: %d answer bytes outstanding, want %d", out-taken, 0)
	}
	if _, c := a.RMA(p, req, 8); c != transport.OK {
		t.Fatalf("read with room: code %d", c)
	}
	pp.mu.Lock()
	out = pp.rmaOut
	pp.mu.Unlock()
	if want := uint64(rmaReadWindow * (hdrSize + rma.MaxRead)); out != want {
		t.Fatalf("read with room: %d answer bytes outstanding, want all %d of its requests' (%d)", out, rmaReadWindow, want)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if c, ok := as.sendDone[8]; ok {
			if c != transport.OK {
				t.Fatalf("read: code %d", c)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the read did not complete within 60 s")
		}
		if !a.Poll(as) && !b.Poll(bs) {
			a.Wait(time.Millisecond)
		}
	}
	if !bytes.Equal(buf, mem[:size]) {
		t.Fatal("the read's bytes differ from the region's")
	}
}
