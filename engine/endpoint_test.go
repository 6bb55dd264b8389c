package engine

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

const (
	addrA, addrB = 0, 1
	anySrc       = ^uint64(0)
)

type pair struct {
	h      *hub
	a, b   *Endpoint
	ca, cb *CQ
}

// makeTransports builds the two transports of a pair and their names;
// the default is the in-process hub, TestEndpointOverShm swaps in shm.
var makeTransports = func(t *testing.T, maxEager int) (*hub, transport.Transport, transport.Transport) {
	h := newHub(maxEager)
	return h, h.NewPipe("A"), h.NewPipe("B")
}

func newPair(t *testing.T, maxEager int, mod func(*Config)) *pair {
	t.Helper()
	h, ta, tb := makeTransports(t, maxEager)
	bk := &book{Names: []string{string(ta.Name()), string(tb.Name())}}
	mk := func(tr transport.Transport) (*Endpoint, *CQ) {
		cq := NewCQ(64, nil)
		cfg := Config{Transport: tr, Addrs: bk, TxCQ: cq, RxCQ: cq, Source: true}
		if mod != nil {
			mod(&cfg)
		}
		ep, c := NewEndpoint(cfg)
		if c != 0 {
			t.Fatalf("NewEndpoint: %v", c)
		}
		cq.Bind(ep, ep.Waiter())
		t.Cleanup(func() { ep.Close() })
		return ep, cq
	}
	p := &pair{h: h}
	p.a, p.ca = mk(ta)
	p.b, p.cb = mk(tb)
	// Reading either CQ progresses both sides, as two processes reading
	// their own CQs would: multi-step protocols (rendezvous) complete.
	p.ca.Bind(p.b, nil)
	p.cb.Bind(p.a, nil)
	if warmUp {
		p.warm(t)
	}
	return p
}

// drain reads every completion (success and error) now available.
// warmUp makes newPair exchange one message each way first, waiting as
// long as it takes, so that socket transports have connected before a
// test's timing-free expectations start.
var warmUp bool

const warmTag = 1 << 63

func (p *pair) warm(t *testing.T) {
	t.Helper()
	for _, d := range []struct {
		from, to *Endpoint
		cq       *CQ
		dest     uint64
	}{{p.a, p.b, p.cb, addrB}, {p.b, p.a, p.ca, addrA}} {
		d.to.Recv(&RecvArgs{Buf: make([]byte, 1), Src: anySrc, Kind: transport.KindTagged, Tag: warmTag, Flags: FlagCompletion}, "warm")
		d.from.Send(&SendArgs{Buf: []byte{1}, Dest: d.dest, Kind: transport.KindTagged, Tag: warmTag, Flags: FlagCompletion}, "warm")
		var buf [4]Entry
		deadline := time.Now().Add(30 * time.Second)
		got := 0
		for got < 1 {
			n, _ := d.cq.Read(buf[:])
			for _, e := range buf[:n] {
				if e.Flags&FlagRecv != 0 && e.Context == "warm" {
					got++
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("warm-up message never arrived")
			}
		}
	}
	drain(p.ca)
	drain(p.cb)
}

// drainIdle is how long drain waits without a completion before it
// decides nothing more is coming: 0 for in-process transports (a few empty
// reads suffice), longer for sockets.
var drainIdle time.Duration

// drain reads every completion now available. With want, it first waits
// (up to 30 s) until that many completions (success and error) arrived,
// so socket transports need no timing luck; then it keeps reading until
// the CQ has been idle for drainIdle.
func drain(cq *CQ, want ...int) (ok []Entry, errs []Entry) {
	var buf [16]Entry
	n0 := 0
	if len(want) > 0 {
		n0 = want[0]
	}
	idle := 0
	last := time.Now()
	deadline := last.Add(30 * time.Second)
	for range 1 << 26 {
		n, c := cq.Read(buf[:])
		ok = append(ok, buf[:n]...)
		switch c {
		case CodeAvail:
			e, _ := cq.ReadErr()
			errs = append(errs, e)
			idle, last = 0, time.Now()
		case CodeAgain:
			if len(ok)+len(errs) < n0 && time.Now().Before(deadline) {
				continue
			}
			if idle++; idle > 20 && time.Since(last) >= drainIdle {
				return
			}
		default:
			idle, last = 0, time.Now()
		}
	}
	return
}

// waitUnexpected progresses cq until ep holds n unexpected messages.
func waitUnexpected(t *testing.T, ep *Endpoint, cq *CQ, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for ep.msgs.Unexpected()+ep.tags.Unexpected() < n {
		cq.Read(nil)
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d messages arrived", ep.msgs.Unexpected()+ep.tags.Unexpected(), n)
		}
	}
}

func send(ep *Endpoint, dest uint64, kind transport.Kind, tag uint64, p []byte, ctx any) Code {
	return ep.Send(&SendArgs{IOV: [][]byte{p}, Dest: dest, Kind: kind, Tag: tag}, ctx)
}

func recv(ep *Endpoint, src uint64, kind transport.Kind, tag, ignore uint64, buf []byte, ctx any) Code {
	return ep.Recv(&RecvArgs{IOV: [][]byte{buf}, Src: src, Kind: kind, Tag: tag, Ignore: ignore}, ctx)
}

func TestEndpoint_DeliveryPostedOrUnexpected(t *testing.T) {
	for _, tc := range []struct {
		name      string
		kind      transport.Kind
		size      int
		postFirst bool
		async     bool
	}{
		{"msg eager posted", transport.KindMsg, 8, true, false},
		{"msg eager unexpected", transport.KindMsg, 8, false, false},
		{"tagged eager posted", transport.KindTagged, 100, true, false},
		{"tagged eager unexpected", transport.KindTagged, 100, false, false},
		{"tagged rendezvous posted", transport.KindTagged, 5000, true, false},
		{"tagged rendezvous unexpected", transport.KindTagged, 5000, false, false},
		{"msg rendezvous async fetch", transport.KindMsg, 5000, true, true},
		{"zero bytes", transport.KindTagged, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, 1024, nil)
			if p.h != nil {
				p.h.Async = tc.async
			}
			payload := bytes.Repeat([]byte{0xa5}, tc.size)
			for i := range payload {
				payload[i] = byte(i * 7)
			}
			buf := make([]byte, tc.size+10)
			if tc.postFirst {
				if c := recv(p.b, anySrc, tc.kind, 9, 0, buf, "rx"); c != 0 {
					t.Fatal(c)
				}
			}
			if c := send(p.a, addrB, tc.kind, 9, payload, "tx"); c != 0 {
				t.Fatal(c)
			}
			first := 0
			if tc.postFirst {
				first = 1
			}
			rx, errs := drain(p.cb, first) // progress B: message arrives
			if !tc.postFirst {
				if c := recv(p.b, anySrc, tc.kind, 9, 0, buf, "rx"); c != 0 {
					t.Fatal(c)
				}
			}
			rx2, errs2 := drain(p.cb, 1-first)
			rx, errs = append(rx, rx2...), append(errs, errs2...)
			if len(errs) != 0 || len(rx) != 1 {
				t.Fatalf("receiver completions %+v errors %+v", rx, errs)
			}
			e := rx[0]
			if e.Context != "rx" || e.Len != tc.size || !bytes.Equal(buf[:tc.size], payload) {
				t.Fatalf("completion %+v, data ok=%v", e, bytes.Equal(buf[:tc.size], payload))
			}
			if e.Src != addrA {
				t.Fatalf("Src = %d, want sender's fi_addr %d", e.Src, addrA)
			}
			wantFlags := FlagRecv | kindFlag(tc.kind)
			if e.Flags != wantFlags {
				t.Fatalf("flags %#x want %#x", e.Flags, wantFlags)
			}
			if tc.kind == transport.KindTagged && e.Tag != 9 {
				t.Fatalf("tag %d", e.Tag)
			}
			tx, _ := drain(p.ca, 1)
			if len(tx) != 1 || tx[0].Context != "tx" || tx[0].Flags != FlagSend|kindFlag(tc.kind) {
				t.Fatalf("sender completions %+v", tx)
			}
			if ntx, nrx := p.b.Outstanding(); ntx != 0 || nrx != 0 {
				t.Fatalf("outstanding after delivery: tx %d rx %d", ntx, nrx)
			}
		})
	}
}

// A message longer than the posted buffer completes with ETRUNC, the
// overflow in OLen and the leading bytes delivered: eager (100 bytes;
// 4096, which over shm fills a ring slot whose record carries the length
// where the L1 data cache is 32 KiB, 5bbfe7f and 720e328's slotsPay) and
// rendezvous (5000).
func TestEndpoint_TruncationReportsOverflow(t *testing.T) {
	for _, size := range []int{100, 4096, 5000} {
		p := newPair(t, 4096, nil)
		buf := make([]byte, 40)
		recv(p.b, anySrc, transport.KindMsg, 0, 0, buf, "rx")
		send(p.a, addrB, transport.KindMsg, 0, bytes.Repeat([]byte{1}, size), nil)
		ok, errs := drain(p.cb, 1)
		if len(ok) != 0 || len(errs) != 1 {
			t.Fatalf("size %d: completions %+v errors %+v", size, ok, errs)
		}
		if e := errs[0]; e.Err != CodeTrunc || e.OLen != size-40 || e.Len != 40 || e.Context != "rx" {
			t.Fatalf("size %d: error entry %+v, want ETRUNC with OLen %d", size, e, size-40)
		}
		if !bytes.Equal(buf, bytes.Repeat([]byte{1}, 40)) {
			t.Fatal("the part that fits was not delivered")
		}
	}
}

func TestEndpoint_TagMatchingWithIgnoreAndOrder(t *testing.T) {
	p := newPair(t, 1024, nil)
	b1, b2, b3 := make([]byte, 8), make([]byte, 8), make([]byte, 8)
	recv(p.b, anySrc, transport.KindTagged, 0x100, 0xff, b1, "wild") // matches 0x1xx
	recv(p.b, anySrc, transport.KindTagged, 0x105, 0, b2, "exact")
	recv(p.b, anySrc, transport.KindTagged, 0x200, 0, b3, "other")
	send(p.a, addrB, transport.KindTagged, 0x105, []byte("first"), nil)
	send(p.a, addrB, transport.KindTagged, 0x105, []byte("second"), nil)
	ok, _ := drain(p.cb, 2)
	if len(ok) != 2 || ok[0].Context != "wild" || ok[1].Context != "exact" {
		t.Fatalf("want the earlier-posted wildcard first, then the exact receive: %+v", ok)
	}
	if string(b1[:5]) != "first" || string(b2[:6]) != "second" {
		t.Fatalf("data %q %q", b1, b2)
	}
}

func TestEndpoint_DirectedRecvHonoursSource(t *testing.T) {
	p := newPair(t, 1024, func(c *Config) { c.DirectedRecv = true })
	buf := make([]byte, 8)
	recv(p.b, addrB, transport.KindMsg, 0, 0, buf, "from-self-only") // B itself, not A
	send(p.a, addrB, transport.KindMsg, 0, []byte("x"), nil)
	if ok, _ := drain(p.cb); len(ok) != 0 {
		t.Fatalf("a receive for another source took the message: %+v", ok)
	}
	recv(p.b, addrA, transport.KindMsg, 0, 0, buf, "from-A")
	if ok, _ := drain(p.cb, 1); len(ok) != 1 || ok[0].Context != "from-A" {
		t.Fatalf("directed receive from A: %+v", ok)
	}
}

func TestEndpoint_SourceOffReportsUnknown(t *testing.T) {
	p := newPair(t, 1024, func(c *Config) { c.Source = false })
	recv(p.b, anySrc, transport.KindMsg, 0, 0, make([]byte, 4), nil)
	send(p.a, addrB, transport.KindMsg, 0, []byte("x"), nil)
	if ok, _ := drain(p.cb, 1); len(ok) != 1 || ok[0].Src != AddrUnknown {
		t.Fatalf("Src without FI_SOURCE: %+v", ok)
	}
}

func TestEndpoint_RemoteCQData(t *testing.T) {
	p := newPair(t, 1024, nil)
	recv(p.b, anySrc, transport.KindMsg, 0, 0, make([]byte, 4), nil)
	p.a.Send(&SendArgs{IOV: [][]byte{[]byte("x")}, Dest: addrB, Kind: transport.KindMsg, Data: 0xfeed, Flags: FlagRemoteCQData}, nil)
	ok, _ := drain(p.cb, 1)
	if len(ok) != 1 || ok[0].Data != 0xfeed || ok[0].Flags&FlagRemoteCQData == 0 {
		t.Fatalf("remote CQ data: %+v", ok)
	}
}

func TestEndpoint_MultiRecvPacksAndReleases(t *testing.T) {
	p := newPair(t, 1024, func(c *Config) { c.MinMultiRecv = 16 })
	buf := make([]byte, 64)
	// Two messages arrive before the buffer is posted, two after.
	send(p.a, addrB, transport.KindMsg, 0, bytes.Repeat([]byte{'a'}, 20), nil)
	send(p.a, addrB, transport.KindMsg, 0, bytes.Repeat([]byte{'b'}, 20), nil)
	drain(p.cb)
	if c := p.b.Recv(&RecvArgs{IOV: [][]byte{buf}, Src: anySrc, Kind: transport.KindMsg, Flags: FlagMultiRecv}, "multi"); c != 0 {
		t.Fatal(c)
	}
	send(p.a, addrB, transport.KindMsg, 0, bytes.Repeat([]byte{'c'}, 10), nil)
	send(p.a, addrB, transport.KindMsg, 0, bytes.Repeat([]byte{'d'}, 10), nil) // would leave 4 < 16
	ok, errs := drain(p.cb, 3)
	if len(errs) != 0 || len(ok) != 3 {
		t.Fatalf("completions %+v errors %+v", ok, errs)
	}
	if string(buf[:50]) != string(bytes.Repeat([]byte{'a'}, 20))+string(bytes.Repeat([]byte{'b'}, 20))+string(bytes.Repeat([]byte{'c'}, 10)) {
		t.Fatalf("buffer %q", buf)
	}
	if ok[2].Flags&FlagMultiRecv == 0 || ok[0].Flags&FlagMultiRecv != 0 {
		t.Fatalf("FI_MULTI_RECV must mark only the completion that released the buffer: %+v", ok)
	}
	if &ok[1].Buf[0] != &buf[20] {
		t.Fatal("completion Buf does not point at where the message landed")
	}
	// The fourth message waits for a new buffer.
	b2 := make([]byte, 10)
	recv(p.b, anySrc, transport.KindMsg, 0, 0, b2, "plain")
	if ok, _ = drain(p.cb, 1); len(ok) != 1 || string(b2) != "dddddddddd" {
		t.Fatalf("message after release: %+v %q", ok, b2)
	}
}

func TestEndpoint_PeekClaimDiscard(t *testing.T) {
	p := newPair(t, 1024, nil)
	tr := func(flags uint64, tag uint64, buf []byte, ctx any) Code {
		return p.b.Recv(&RecvArgs{IOV: [][]byte{buf}, Src: anySrc, Kind: transport.KindTagged, Tag: tag, Flags: flags}, ctx)
	}
	// Peek with nothing there: FI_ENOMSG error completion.
	tr(FlagPeek, 1, nil, "peek0")
	if _, errs := drain(p.cb, 1); len(errs) != 1 || errs[0].Err != CodeNoMsg {
		t.Fatalf("peek on empty queue: %+v", errs)
	}
	p.a.Send(&SendArgs{IOV: [][]byte{[]byte("one")}, Dest: addrB, Kind: transport.KindTagged, Tag: 1, Data: 5, Flags: FlagRemoteCQData}, nil)
	send(p.a, addrB, transport.KindTagged, 2, []byte("two"), nil)
	waitUnexpected(t, p.b, p.cb, 2)
	tr(FlagPeek, 1, nil, "peek1")
	ok, _ := drain(p.cb, 1)
	if len(ok) != 1 || ok[0].Len != 3 || ok[0].Tag != 1 || ok[0].Data != 5 {
		t.Fatalf("peek: %+v", ok)
	}
	// Peek|Claim sets it aside: a plain receive no longer sees it.
	claimCtx := new(int)
	tr(FlagPeek|FlagClaim, 1, nil, claimCtx)
	drain(p.cb, 1)
	tr(FlagPeek, 1, nil, "peek2")
	if _, errs := drain(p.cb, 1); len(errs) != 1 || errs[0].Err != CodeNoMsg {
		t.Fatalf("claimed message still visible to peek: %+v", errs)
	}
	buf := make([]byte, 8)
	if c := tr(FlagClaim, 1, buf, claimCtx); c != 0 {
		t.Fatal(c)
	}
	if ok, _ = drain(p.cb, 1); len(ok) != 1 || string(buf[:3]) != "one" {
		t.Fatalf("claim: %+v %q", ok, buf)
	}
	// Peek|Discard drops message two.
	tr(FlagPeek|FlagDiscard, 2, nil, "pd")
	if ok, _ = drain(p.cb, 1); len(ok) != 1 {
		t.Fatalf("peek|discard completion: %+v", ok)
	}
	tr(FlagPeek, 2, nil, "after")
	if _, errs := drain(p.cb, 1); len(errs) != 1 || errs[0].Err != CodeNoMsg {
		t.Fatal("discarded message still there")
	}
}

func TestEndpoint_CancelCompletesWithECANCELED(t *testing.T) {
	p := newPair(t, 1024, nil)
	ctx := new(int)
	recv(p.b, anySrc, transport.KindTagged, 3, 0, make([]byte, 4), ctx)
	if c := p.b.Cancel(ctx); c != 0 {
		t.Fatal(c)
	}
	_, errs := drain(p.cb, 1)
	if len(errs) != 1 || errs[0].Err != CodeCanceled || errs[0].Context != ctx {
		t.Fatalf("cancel: %+v", errs)
	}
	if c := p.b.Cancel(ctx); c != CodeNoMsg {
		t.Fatalf("second cancel = %v, want CodeNoMsg", c)
	}
	send(p.a, addrB, transport.KindTagged, 3, []byte("x"), nil)
	if ok, _ := drain(p.cb); len(ok) != 0 {
		t.Fatal("a canceled receive still matched")
	}
}

func TestEndpoint_SelectiveCompletion(t *testing.T) {
	p := newPair(t, 1024, func(c *Config) { c.TxSelective, c.RxSelective = true, true })
	recv(p.b, anySrc, transport.KindMsg, 0, 0, make([]byte, 4), "quiet")
	p.b.Recv(&RecvArgs{IOV: [][]byte{make([]byte, 4)}, Src: anySrc, Kind: transport.KindMsg, Flags: FlagCompletion}, "loud")
	send(p.a, addrB, transport.KindMsg, 0, []byte("1"), "quiet-tx")
	p.a.Send(&SendArgs{IOV: [][]byte{[]byte("2")}, Dest: addrB, Kind: transport.KindMsg, Flags: FlagCompletion}, "loud-tx")
	rx, _ := drain(p.cb, 1)
	tx, _ := drain(p.ca, 1)
	if len(rx) != 1 || rx[0].Context != "loud" || len(tx) != 1 || tx[0].Context != "loud-tx" {
		t.Fatalf("only FI_COMPLETION operations report: rx %+v tx %+v", rx, tx)
	}
}

func TestEndpoint_UnexpectedBackPressureLosesNothing(t *testing.T) {
	p := newPair(t, 1024, func(c *Config) { c.UnexpectedBytes = 256 })
	const n = 50
	msg := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 100) }
	sent := 0
	for ; sent < n; sent++ {
		c := send(p.a, addrB, transport.KindTagged, uint64(sent), msg(sent), nil)
		if c == CodeAgain {
			break // the transport holds no more: the rest goes as receives drain it
		}
		if c != 0 {
			t.Fatal(c)
		}
	}
	drain(p.cb)
	if got := p.b.msgs.Unexpected() + p.b.tags.Unexpected(); got >= sent && sent > 3 {
		t.Fatalf("%d of %d messages buffered despite a 256-byte cap", got, sent)
	}
	for i := range n {
		buf := make([]byte, 100)
		recv(p.b, anySrc, transport.KindTagged, uint64(i), 0, buf, i)
		ok, _ := drain(p.cb, 1)
		if len(ok) != 1 || ok[0].Context != i || buf[0] != byte(i) {
			t.Fatalf("message %d: %+v", i, ok)
		}
		for ; sent < n; sent++ {
			if c := send(p.a, addrB, transport.KindTagged, uint64(sent), msg(sent), nil); c == CodeAgain {
				break
			} else if c != 0 {
				t.Fatal(c)
			}
		}
	}
}

func TestEndpoint_QueueLimitsAndBadInput(t *testing.T) {
	p := newPair(t, 16, func(c *Config) { c.TxSize, c.RxSize = 2, 2 })
	big := make([]byte, 100) // rendezvous: held until fetched
	for i := range 2 {
		if c := send(p.a, addrB, transport.KindMsg, 0, big, nil); c != 0 {
			t.Fatalf("send %d within tx size failed: %v", i, c)
		}
	}
	if c := send(p.a, addrB, transport.KindMsg, 0, big, nil); c != CodeAgain {
		t.Fatalf("third outstanding send = %v, want CodeAgain", c)
	}
	recv(p.b, anySrc, transport.KindTagged, 1, 0, nil, nil)
	recv(p.b, anySrc, transport.KindTagged, 1, 0, nil, nil)
	if c := recv(p.b, anySrc, transport.KindTagged, 1, 0, nil, nil); c != CodeAgain {
		t.Fatalf("third posted receive = %v, want CodeAgain", c)
	}
	if c := send(p.a, 7, transport.KindMsg, 0, []byte("x"), nil); c != CodeAddrNotAvail {
		t.Fatalf("send to unknown fi_addr = %v, want CodeAddrNotAvail", c)
	}
	if c := p.a.Send(&SendArgs{IOV: [][]byte{big}, Dest: addrB, Flags: FlagInject}, nil); c != CodeMsgSize {
		t.Fatalf("inject above the eager size = %v, want CodeMsgSize", c)
	}
}

func TestEndpoint_CloseCancelsPostedReceives(t *testing.T) {
	p := newPair(t, 1024, nil)
	recv(p.b, anySrc, transport.KindMsg, 0, 0, make([]byte, 4), "pending")
	p.b.Close()
	var buf [4]Entry
	if _, c := p.cb.Read(buf[:]); c != CodeAvail {
		t.Fatalf("Read after Close = %v, want CodeAvail", c)
	}
	if e, _ := p.cb.ReadErr(); e.Err != CodeCanceled || e.Context != "pending" {
		t.Fatalf("close: %+v", e)
	}
	if c := recv(p.b, anySrc, transport.KindMsg, 0, 0, nil, nil); c != CodeInval {
		t.Fatalf("Recv after Close = %v", c)
	}
}

func TestEndpoint_PeerGroupsMustAgree(t *testing.T) {
	p := newPair(t, 1024, nil)
	p.b.Recv(&RecvArgs{Buf: make([]byte, 8), Src: anySrc, Kind: transport.KindTagged, Tag: 4}, "group0")
	p.a.Send(&SendArgs{Buf: []byte("g5"), Dest: addrB, Group: 5, Kind: transport.KindTagged, Tag: 4}, nil)
	waitUnexpected(t, p.b, p.cb, 1)
	if ok, _ := drain(p.cb); len(ok) != 0 {
		t.Fatalf("a receive of group 0 took a group-5 message: %+v", ok)
	}
	buf := make([]byte, 8)
	p.b.Recv(&RecvArgs{Buf: buf, Src: anySrc, Group: 5, Kind: transport.KindTagged, Tag: 4}, "group5")
	if ok, _ := drain(p.cb, 1); len(ok) != 1 || ok[0].Context != "group5" || string(buf[:2]) != "g5" {
		t.Fatalf("group-5 receive: %+v", ok)
	}
}

// endpointTable is the behaviour table every transport runs (the fake hub
// by default, shm and tcp through TestEndpointOverShm / OverTCP).
var endpointTable = []struct {
	name string
	f    func(*testing.T)
}{
	{"Delivery", TestEndpoint_DeliveryPostedOrUnexpected},
	{"Truncation", TestEndpoint_TruncationReportsOverflow},
	{"TagMatching", TestEndpoint_TagMatchingWithIgnoreAndOrder},
	{"DirectedRecv", TestEndpoint_DirectedRecvHonoursSource},
	{"SourceOff", TestEndpoint_SourceOffReportsUnknown},
	{"RemoteCQData", TestEndpoint_RemoteCQData},
	{"MultiRecv", TestEndpoint_MultiRecvPacksAndReleases},
	{"PeekClaimDiscard", TestEndpoint_PeekClaimDiscard},
	{"Cancel", TestEndpoint_CancelCompletesWithECANCELED},
	{"Selective", TestEndpoint_SelectiveCompletion},
	{"BackPressure", TestEndpoint_UnexpectedBackPressureLosesNothing},
	{"Close", TestEndpoint_CloseCancelsPostedReceives},
	{"PeerGroups", TestEndpoint_PeerGroupsMustAgree},
}

func runEndpointTable(t *testing.T) {
	for _, tc := range endpointTable {
		t.Run(tc.name, tc.f)
	}
}

// prepCount is a transport that counts Prepare calls (transport.Preparer).
type prepCount struct {
	transport.Transport
	peers []transport.Peer
}

func (p *prepCount) Prepare(pr transport.Peer) { p.peers = append(p.peers, pr) }

// Prepare hands every address of a small AV insert to a transport that
// prepares connections, and none of an insert of more than prepareMax
// addresses (a big job's ranks connect on first use, as before).
func TestEndpoint_PrepareSmallInsertsOnly(t *testing.T) {
	h := newHub(64)
	tr := &prepCount{Transport: h.NewPipe("A")}
	bk := &book{}
	for i := range prepareMax + 1 {
		bk.Names = append(bk.Names, string(rune('a'+i)))
	}
	cq := NewCQ(8, nil)
	ep, c := NewEndpoint(Config{Transport: tr, Addrs: bk, TxCQ: cq, RxCQ: cq})
	if c != 0 {
		t.Fatal(c)
	}
	defer ep.Close()
	ep.Prepare([]uint64{0, 1, 2})
	if len(tr.peers) != 3 {
		t.Fatalf("an insert of 3: %d peers prepared", len(tr.peers))
	}
	all := make([]uint64, prepareMax+1)
	for i := range all {
		all[i] = uint64(i)
	}
	ep.Prepare(all)
	if len(tr.peers) != 3 {
		t.Errorf("an insert of %d: %d more peers prepared, want none", len(all), len(tr.peers)-3)
	}
}

// recvPrepCount is a transport that prepares receive buffers from min
// bytes and records the lengths it was handed.
type recvPrepCount struct {
	transport.Transport
	min  int
	lens []int
}

func (r *recvPrepCount) RecvPrepareMin() int  { return r.min }
func (r *recvPrepCount) PrepareRecv(b []byte) { r.lens = append(r.lens, len(b)) }

// A posted receive buffer (or iov element) of at least the transport's
// RecvPrepareMin bytes is handed to PrepareRecv when posted, whichever
// queue takes the receive; smaller ones, peeks and a transport whose
// minimum is 0 are not.
func TestEndpoint_PrepareRecvLargeBuffersOnly(t *testing.T) {
	big, small := make([]byte, 1000), make([]byte, 999)
	for _, c := range []struct {
		name string
		min  int
		args RecvArgs
		want []int
	}{
		{"buffer at the minimum", 1000, RecvArgs{Buf: big}, []int{1000}},
		{"buffer under it", 1000, RecvArgs{Buf: small}, nil},
		{"iov: only the large elements", 1000, RecvArgs{IOV: [][]byte{small, big, big[:10], big}}, []int{1000, 1000}},
		{"iov of one element (held apart)", 1000, RecvArgs{IOV: [][]byte{big}}, []int{1000}},
		{"iov of one small element", 1000, RecvArgs{IOV: [][]byte{small}}, nil},
		{"tagged", 1000, RecvArgs{Buf: big, Kind: transport.KindTagged}, []int{1000}},
		{"multi-receive buffer", 1000, RecvArgs{Buf: big, Flags: FlagMultiRecv}, []int{1000}},
		{"peek", 1000, RecvArgs{Buf: big, Flags: FlagPeek}, nil},
		{"minimum 0: never", 0, RecvArgs{Buf: big}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHub(64)
			tr := &recvPrepCount{Transport: h.NewPipe("A"), min: c.min}
			cq := NewCQ(8, nil)
			ep, code := NewEndpoint(Config{Transport: tr, Addrs: &book{Names: []string{"A"}}, TxCQ: cq, RxCQ: cq})
			if code != 0 {
				t.Fatal(code)
			}
			defer ep.Close()
			post := func(which string) {
				tr.lens = nil
				a := c.args
				a.Src = anySrc
				if a.Kind == 0 {
					a.Kind = transport.KindMsg
				}
				ep.Recv(&a, nil)
				if fmt.Sprint(tr.lens) != fmt.Sprint(c.want) {
					t.Errorf("%s post: PrepareRecv got lengths %v, want %v", which, tr.lens, c.want)
				}
			}
			post("first")
			// A second receive goes to the matcher (the first is held
			// apart, or queued): prepared the same way.
			if c.args.Flags&FlagPeek == 0 {
				post("second")
			}
		})
	}
}

// TestEndpoint_DiscardOfRendezvousWaitsForTheTransport: FI_DISCARD of an
// unexpected rendezvous message (peek|discard, and claim|discard after a
// peek|claim) over a transport.Discarder that tells the sender only at
// its next Poll (the async hub): the completion, with the peek's
// details, and the receive counter come once the transport reports it,
// not in Recv; the sender's send completes; nothing is left behind.
func TestEndpoint_DiscardOfRendezvousWaitsForTheTransport(t *testing.T) {
	for _, claim := range []bool{false, true} {
		t.Run(fmt.Sprintf("claim=%v", claim), func(t *testing.T) {
			cnt := &testCntr{}
			p := newPair(t, 16, func(c *Config) { c.RecvCntr = cnt })
			p.h.Async = true
			big := make([]byte, 100)
			if c := p.a.Send(&SendArgs{IOV: [][]byte{big}, Dest: addrB, Kind: transport.KindTagged, Tag: 4, Data: 9, Flags: FlagRemoteCQData}, "big"); c != 0 {
				t.Fatal(c)
			}
			waitUnexpected(t, p.b, p.cb, 1)
			flags := uint64(FlagPeek | FlagDiscard)
			if claim {
				if c := p.b.Recv(&RecvArgs{Src: anySrc, Kind: transport.KindTagged, Tag: 4, Flags: FlagPeek | FlagClaim}, "drop"); c != 0 {
					t.Fatal(c)
				}
				if ok, _ := drain(p.cb, 1); len(ok) != 1 {
					t.Fatalf("peek|claim: %+v", ok)
				}
				flags = FlagClaim | FlagDiscard
			}
			base := cnt.ok.Load()
			if c := p.b.Recv(&RecvArgs{Src: anySrc, Kind: transport.KindTagged, Tag: 4, Flags: flags}, "drop"); c != 0 {
				t.Fatal(c)
			}
			if !p.b.dropsHeld() || cnt.ok.Load() != base {
				t.Fatalf("the discard completed in Recv (held %v, counter +%d)", p.b.dropsHeld(), cnt.ok.Load()-base)
			}
			ok, errs := drain(p.cb, 1)
			if len(ok) != 1 || len(errs) != 0 || ok[0].Context != "drop" || ok[0].Tag != 4 {
				t.Fatalf("discard completion: %+v %+v", ok, errs)
			}
			if !claim && (ok[0].Len != 100 || ok[0].Data != 9 || ok[0].Flags&FlagRemoteCQData == 0) {
				t.Fatalf("peek|discard lost the peek's details: %+v", ok[0])
			}
			if cnt.ok.Load() != base+1 {
				t.Fatalf("receive counter +%d, want +1", cnt.ok.Load()-base)
			}
			if ok, errs := drain(p.ca, 1); len(ok) != 1 || len(errs) != 0 || ok[0].Context != "big" {
				t.Fatalf("send completion: %+v %+v", ok, errs)
			}
			if p.b.dropsHeld() || p.b.msgs.Unexpected()+p.b.tags.Unexpected() != 0 {
				t.Fatal("left behind: a held discard or the message")
			}
		})
	}
}

// dropsHeld reports whether a discard's completion is held for the
// transport (discardUx).
func (ep *Endpoint) dropsHeld() bool {
	for _, d := range ep.drops {
		if d.live {
			return true
		}
	}
	return false
}
