package fi

// The messaging conformance table: one row per behaviour that fi_msg(3),
// fi_tagged(3), fi_cq(3), fi_endpoint(3) and fi_av(3) promise, each run
// between this process and a peer process through the public API only.
// Nothing here is specific to a provider but the provCase numbers, so a
// provider joins with one line: func TestConformance_tcp(t) {
// runConformance(t, "tcp") } and a provCases entry.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	flink "github.com/gofi-dev/fi/link"
	"github.com/gofi-dev/fi/shm"
)

// provCase is what the table needs to know about a provider.
type provCase struct {
	prov  string
	eager int // largest payload the provider sends without a rendezvous
	// setup prepares the environment for the run (both processes inherit
	// it), nil when nothing is needed.
	setup func(t *testing.T)
	// peerWrap runs the peer process under a command (see peerWrap).
	peerWrap []string
}

// provCases are the configurations the table runs in, by name; the
// peer process finds its configuration by the same name.
var provCases = map[string]provCase{
	"shm": {prov: "shm", eager: shm.DefaultMaxEager, setup: shmTestDir},
	"tcp": {prov: "tcp", eager: 16 << 10},
	// the linked endpoint with its peer on this host (routed over shm),
	// and with a peer claiming another shared-memory domain (over tcp).
	"shm+tcp": {prov: linkName, eager: shm.DefaultMaxEager, setup: shmTestDir},
	"shm+tcp_remote": {prov: linkName, eager: 16 << 10, setup: shmTestDir,
		peerWrap: []string{"env", flink.DomainEnv + "=00000000000000ff"}},
	// shm with single copy (process_vm_readv) off: rendezvous payloads
	// stream through the rings in segments, as on kernels that refuse it.
	"shm_segments": {prov: "shm", eager: shm.DefaultMaxEager, setup: func(t *testing.T) {
		shmTestDir(t)
		t.Setenv(shm.DisableCMAEnv, "1")
	}},
}

// shmTestDir points the shm provider at a private directory under /dev/shm
// (inherited by peer processes), so tests see only their own files.
func shmTestDir(t *testing.T) {
	base := "/dev/shm"
	if _, err := os.Stat(base); err != nil {
		base = ""
	}
	dir, err := os.MkdirTemp(base, "gofi-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	t.Setenv(shm.DirEnv, dir)
}

func TestConformance_shm(t *testing.T) { runConformance(t, "shm") }

func TestConformance_tcp(t *testing.T) { runConformance(t, "tcp") }

func TestConformance_link(t *testing.T) { runConformance(t, "shm+tcp") }

func TestConformance_link_remote(t *testing.T) { runConformance(t, "shm+tcp_remote") }

func TestConformance_shm_segments(t *testing.T) { runConformance(t, "shm_segments") }

// confCase is one row: cfg configures both nodes (peerCfg the peer's when
// set); run is this process's side, peer the peer process's (nil: the row
// needs no peer).
type confCase struct {
	name    string
	cfg     nodeCfg
	peerCfg *nodeCfg
	run     func(c *conf)
	peer    func(c *conf)
}

// conf is one side of a running row.
type conf struct {
	t *testing.T
	p provCase
	n *node
	l *link
}

// to is the AV address of the other side's first endpoint.
func (c *conf) to() Addr { return c.n.peers[0] }

func (c *conf) ok(err error, what string, args ...any) {
	c.t.Helper()
	if err != nil {
		c.t.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}

func (c *conf) check(cond bool, format string, args ...any) {
	c.t.Helper()
	if !cond {
		c.t.Fatalf(format, args...)
	}
}

// wantErr checks that err is the Errno want.
func (c *conf) wantErr(err error, want Errno, what string) {
	c.t.Helper()
	if !errors.Is(err, want) {
		c.t.Fatalf("%s: got %v, want %v", what, err, want)
	}
}

// send sends with retries on ErrAgain.
func (c *conf) send(op func() error, what string) {
	c.t.Helper()
	c.ok(c.n.retry(op), "%s", what)
}

// runConformance runs the table in the configuration provCases[name].
func runConformance(t *testing.T, name string) {
	pc, ok := provCases[name]
	if !ok {
		t.Fatalf("no provCase %q", name)
	}
	if pc.setup != nil {
		pc.setup(t)
	}
	if pc.peerWrap != nil {
		peerWrap = pc.peerWrap
		t.Cleanup(func() { peerWrap = nil })
	}
	for _, cc := range conformanceCases {
		t.Run(cc.name, func(t *testing.T) {
			c := &conf{t: t, p: pc}
			if cc.peer != nil {
				pp := startPeer(t, "conf", name+"/"+cc.name, time.Minute)
				c.l = pp.link
				c.n = openNode(t, pc.prov, cc.cfg)
				c.n.exchange(c.l, cc.cfg.userIDs)
				cc.run(c)
				pp.wait(t)
				return
			}
			c.n = openNode(t, pc.prov, cc.cfg)
			cc.run(c)
		})
	}
}

func init() {
	peerRoles["conf"] = func(t *testing.T, l *link, arg string) {
		key, name, _ := cut(arg, "/")
		pc := provCases[key]
		prov := pc.prov
		for _, cc := range conformanceCases {
			if cc.name != name {
				continue
			}
			cfg := cc.cfg
			if cc.peerCfg != nil {
				cfg = *cc.peerCfg
			}
			c := &conf{t: t, p: pc, l: l, n: openNode(t, prov, cfg)}
			c.n.exchange(l, cfg.userIDs)
			cc.peer(c)
			return
		}
		t.Fatalf("no conformance case %q", arg)
	}
}

func cut(s, sep string) (string, string, bool) {
	for i := 0; i+len(sep) <= len(s); i++ {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

// Common flag sets of completions (fi_cq(3)).
const (
	rxMsg = Recv | Msg
	rxTag = Recv | Tagged
	txMsg = Send | Msg
	txTag = Send | Tagged
)

// sendOne is the peer side of most rows: wait for "go", send msg, wait for
// the transmit completion.
func sendOne(c *conf, tagged bool, tag uint64, msg []byte) {
	c.l.expect("go")
	if tagged {
		c.send(func() error { return c.n.ep.TSend(msg, c.to(), tag, "tx") }, "TSend")
	} else {
		c.send(func() error { return c.n.ep.Send(msg, c.to(), "tx") }, "Send")
	}
	e := c.n.tx()
	c.check(e.Context == "tx", "tx context %v", e.Context)
}

var conformanceCases = []confCase{
	{
		// fi_msg(3) fi_send/fi_recv; fi_cq(3): FI_SEND|FI_MSG on the send,
		// FI_RECV|FI_MSG, len and buf on the receive.
		name: "SendRecv",
		run: func(c *conf) {
			buf := make([]byte, 64)
			c.ok(c.n.ep.Recv(buf, AddrUnspec, "rx"), "Recv")
			c.l.send("go")
			e := c.n.rx()
			c.check(e.Context == "rx" && e.Flags == rxMsg && e.Len == 11, "completion %+v", e)
			c.check(string(e.Buf) == "hello world" && string(buf[:11]) == "hello world", "data %q", buf[:11])
		},
		peer: func(c *conf) {
			c.l.expect("go")
			c.ok(c.n.ep.Send([]byte("hello world"), c.to(), "tx"), "Send")
			e := c.n.tx()
			c.check(e.Context == "tx" && e.Flags == txMsg, "send completion %+v", e)
		},
	},
	{
		// fi_msg(3) fi_sendv/fi_recvv: the message is the concatenation of
		// the send iov, scattered over the receive iov, eager and large.
		name: "SendVRecvV",
		run: func(c *conf) {
			for i, size := range []int{100, 3 * c.p.eager} {
				want := pattern(size, i)
				a, b := make([]byte, size/3), make([]byte, size-size/3)
				c.ok(c.n.ep.RecvV([][]byte{a, b}, AddrUnspec, i), "RecvV")
				c.l.send("go")
				e := c.n.rx()
				c.check(e.Context == i && e.Len == size, "completion %+v", e)
				c.check(bytes.Equal(append(a, b...), want), "size %d: data differs", size)
			}
		},
		peer: func(c *conf) {
			for i, size := range []int{100, 3 * c.p.eager} {
				want := pattern(size, i)
				c.l.expect("go")
				iov := [][]byte{want[:7], want[7 : size/2], want[size/2:]}
				c.ok(c.n.ep.SendV(iov, c.to(), i), "SendV")
				c.check(c.n.tx().Context == i, "send completion")
			}
		},
	},
	{
		// fi_msg(3) fi_inject: the buffer may be reused when the call
		// returns, and no completion is generated; above inject_size it
		// fails with FI_EMSGSIZE.
		name: "Inject",
		run: func(c *conf) {
			for i := range 3 {
				buf := make([]byte, 32)
				c.ok(c.n.ep.Recv(buf, AddrUnspec, i), "Recv")
				e := c.n.rx()
				c.check(e.Context == i && e.Len == 32 && bytes.Equal(buf, pattern(32, i)), "message %d: %+v %x", i, e, buf)
			}
			buf := make([]byte, 32)
			c.ok(c.n.ep.TRecv(buf, AddrUnspec, 9, 0, "t"), "TRecv")
			e := c.n.rx()
			c.check(e.Tag == 9 && bytes.Equal(buf, pattern(32, 9)), "tagged inject %+v", e)
		},
		peer: func(c *conf) {
			inj := c.n.ep.Info().TxAttr.InjectSize
			c.check(inj > 0, "inject size %d", inj)
			c.wantErr(c.n.ep.Inject(make([]byte, inj+1), c.to()), ErrMsgSize, "Inject above inject_size")
			buf := make([]byte, 32)
			for i := range 2 {
				c.send(func() error { return c.n.ep.Inject(fill(buf, i), c.to()) }, "Inject")
			}
			c.send(func() error { return c.n.ep.Send(fill(buf, 2), c.to(), "last") }, "Send")
			fill(buf, 77) // reused after Inject returned
			c.check(c.n.tx().Context == "last", "the only transmit completion is the Send's")
			c.send(func() error { return c.n.ep.TInject(pattern(32, 9), c.to(), 9) }, "TInject")
			c.send(func() error { return c.n.ep.TSend(nil, c.to(), 10, "after") }, "TSend")
			c.check(c.n.tx().Context == "after", "TInject made no completion")
			c.n.progress()
			c.check(len(c.n.txq) == 0, "extra transmit completions %+v", c.n.txq)
		},
	},
	{
		// fi_msg(3) fi_senddata / fi_tagged(3) fi_tsenddata: the receive
		// completion carries FI_REMOTE_CQ_DATA and the data; a plain send
		// does not set the flag.
		name: "SendDataRemoteCQData",
		run: func(c *conf) {
			b := make([]byte, 16)
			c.ok(c.n.ep.Recv(b, AddrUnspec, 1), "Recv")
			c.ok(c.n.ep.TRecv(b, AddrUnspec, 5, 0, 2), "TRecv")
			c.ok(c.n.ep.Recv(b, AddrUnspec, 3), "Recv")
			c.ok(c.n.ep.Recv(make([]byte, 2*c.p.eager), AddrUnspec, 4), "Recv")
			c.l.send("go")
			e := c.n.rx()
			c.check(e.Context == 1 && e.Flags == rxMsg|RemoteCQData && e.Data == 0xdeadbeefcafe, "senddata %+v", e)
			e = c.n.rx()
			c.check(e.Context == 2 && e.Flags == rxTag|RemoteCQData && e.Data == 42 && e.Tag == 5, "tsenddata %+v", e)
			e = c.n.rx()
			c.check(e.Context == 3 && e.Flags == rxMsg, "plain send has no RemoteCQData: %+v", e)
			e = c.n.rx()
			c.check(e.Context == 4 && e.Flags == rxMsg|RemoteCQData && e.Data == 7 && e.Len == 2*c.p.eager, "large senddata %+v", e)
		},
		peer: func(c *conf) {
			c.l.expect("go")
			c.send(func() error { return c.n.ep.SendData([]byte("d1"), 0xdeadbeefcafe, c.to(), 1) }, "SendData")
			c.send(func() error { return c.n.ep.TSendData([]byte("d2"), 42, c.to(), 5, 2) }, "TSendData")
			c.send(func() error { return c.n.ep.Send([]byte("d3"), c.to(), 3) }, "Send")
			c.send(func() error { return c.n.ep.SendData(make([]byte, 2*c.p.eager), 7, c.to(), 4) }, "SendData large")
			for i := 1; i <= 4; i++ {
				c.check(c.n.tx().Context == i, "tx %d", i)
			}
		},
	},
	{
		// fi_tagged(3): a receive matches when (tag ^ msg tag) & ^ignore
		// is 0; tagged and untagged messages use separate queues; an
		// unmatched message waits for a matching receive.
		name: "TaggedMatching",
		run: func(c *conf) {
			b1, b2, b3, b4 := make([]byte, 8), make([]byte, 8), make([]byte, 8), make([]byte, 8)
			c.ok(c.n.ep.TRecv(b1, AddrUnspec, 0x100, 0xff, "masked"), "TRecv")
			c.ok(c.n.ep.TRecv(b2, AddrUnspec, 5, 0, "exact"), "TRecv")
			c.ok(c.n.ep.Recv(b3, AddrUnspec, "untagged"), "Recv")
			c.l.send("go")
			got := map[any]CQEntry{}
			for range 3 {
				e := c.n.rx()
				got[e.Context] = e
			}
			c.check(got["exact"].Tag == 5 && string(b2[:3]) == "t05", "exact %+v %q", got["exact"], b2)
			c.check(got["masked"].Tag == 0x1ab && string(b1[:3]) == "tab", "masked %+v %q", got["masked"], b1)
			c.check(got["untagged"].Flags == rxMsg && string(b3[:3]) == "msg", "untagged %+v %q", got["untagged"], b3)
			// tag 7 found no receive; it waits for one.
			c.n.progress()
			c.check(len(c.n.rxq) == 0, "tag 7 completed without a receive: %+v", c.n.rxq)
			c.ok(c.n.ep.TRecv(b4, AddrUnspec, 7, 0, "late"), "TRecv")
			e := c.n.rx()
			c.check(e.Context == "late" && e.Tag == 7 && string(b4[:3]) == "t07", "late %+v", e)
		},
		peer: func(c *conf) {
			c.l.expect("go")
			c.send(func() error { return c.n.ep.TSend([]byte("t07"), c.to(), 7, 1) }, "TSend")
			c.send(func() error { return c.n.ep.TSend([]byte("t05"), c.to(), 5, 2) }, "TSend")
			c.send(func() error { return c.n.ep.TSend([]byte("tab"), c.to(), 0x1ab, 3) }, "TSend")
			c.send(func() error { return c.n.ep.Send([]byte("msg"), c.to(), 4) }, "Send")
			for range 4 {
				c.n.tx()
			}
		},
	},
	{
		// fi_endpoint(3) FI_ORDER_SAS (send after send): messages from one
		// sender match receives in the order they were sent, eager and
		// rendezvous mixed, tagged and untagged.
		name: "OrderingSendAfterSend",
		run: func(c *conf) {
			const n = 200
			bufs := make([][]byte, n)
			for i := range n {
				bufs[i] = make([]byte, orderSize(c, i))
				if i%2 == 0 {
					c.ok(c.n.retry(func() error { return c.n.ep.Recv(bufs[i], AddrUnspec, i) }), "Recv")
				} else {
					c.ok(c.n.retry(func() error { return c.n.ep.TRecv(bufs[i], AddrUnspec, 3, 0, i) }), "TRecv")
				}
			}
			c.l.send("go")
			seen := map[int]bool{}
			for range n {
				e := c.n.rx()
				i := e.Context.(int)
				c.check(!seen[i], "duplicate %d", i)
				seen[i] = true
				c.check(e.Len == len(bufs[i]) && bytes.Equal(bufs[i], pattern(len(bufs[i]), i)), "receive %d got another message (len %d)", i, e.Len)
			}
		},
		peer: func(c *conf) {
			const n = 200
			c.l.expect("go")
			msgs := make([][]byte, n)
			for i := range n {
				msgs[i] = pattern(orderSize(c, i), i)
				if i%2 == 0 {
					c.send(func() error { return c.n.ep.Send(msgs[i], c.to(), i) }, "Send")
				} else {
					c.send(func() error { return c.n.ep.TSend(msgs[i], c.to(), 3, i) }, "TSend")
				}
			}
			for range n {
				c.n.tx()
			}
		},
	},
	{
		// fi_msg(3)/fi_cq(3): a message longer than the buffer completes
		// with an FI_ETRUNC error entry whose olen is the overflow; the
		// buffer holds the leading bytes; the sender succeeds.
		name: "Truncation",
		run: func(c *conf) {
			for i, sz := range [][2]int{{10, 25}, {c.p.eager, 3 * c.p.eager}, {0, 5}} {
				buf := make([]byte, sz[0])
				c.ok(c.n.ep.TRecv(buf, AddrUnspec, uint64(i), 0, i), "TRecv")
				c.l.send("go")
				e := c.n.rxErr()
				c.wantErr(e.Err, ErrTrunc, "truncated receive")
				c.check(e.Context == i && e.OLen == sz[1]-sz[0] && e.Len == sz[0] && e.Tag == uint64(i), "trunc entry %+v olen %d", e.CQEntry, e.OLen)
				c.check(bytes.Equal(buf, pattern(sz[1], i)[:sz[0]]), "leading bytes differ")
			}
		},
		peer: func(c *conf) {
			for i, sz := range [][2]int{{10, 25}, {c.p.eager, 3 * c.p.eager}, {0, 5}} {
				sendOne(c, true, uint64(i), pattern(sz[1], i))
			}
		},
	},
	{
		// fi_tagged(3) FI_PEEK, FI_CLAIM, FI_DISCARD: a peek reports a
		// waiting message without taking it or FI_ENOMSG; Peek|Claim
		// reserves it for the context, a later Claim takes it; Discard
		// drops it.
		name: "PeekClaimDiscard",
		run:  peekRun,
		peer: func(c *conf) {
			c.l.expect("go")
			for _, m := range peekMsgs(c) {
				c.send(func() error { return c.n.ep.TSendData(m.data, m.tag, c.to(), m.tag, m.tag) }, "TSend")
			}
			c.l.send("sent")
			for range peekMsgs(c) {
				c.n.tx() // discarded rendezvous messages complete too
			}
		},
	},
	{
		// fi_msg(3) FI_MULTI_RECV: one buffer takes several messages
		// back to back; the completion that releases it (free space below
		// FI_OPT_MIN_MULTI_RECV) carries FI_MULTI_RECV.
		name: "MultiRecv",
		cfg:  nodeCfg{minMulti: 200},
		run: func(c *conf) {
			big := make([]byte, 4096)
			c.ok(c.n.ep.RecvMsg(&Message{IOV: [][]byte{big}, Addr: AddrUnspec, Context: "multi"}, MultiRecv), "RecvMsg MultiRecv")
			next := make([]byte, 300)
			c.ok(c.n.ep.Recv(next, AddrUnspec, "next"), "Recv")
			c.l.send("go")
			off := 0
			for i := range 13 {
				e := c.n.rx()
				c.check(e.Context == "multi" && e.Len == 300, "message %d: %+v", i, e)
				c.check(bytes.Equal(e.Buf, pattern(300, i)), "message %d data", i)
				c.check(&e.Buf[0] == &big[off], "message %d not at offset %d", i, off)
				off += 300
				released := e.Flags&MultiRecv != 0
				c.check(released == (i == 12), "message %d: FI_MULTI_RECV %v", i, released)
			}
			e := c.n.rx()
			c.check(e.Context == "next" && bytes.Equal(next, pattern(300, 13)), "14th message went to %v", e.Context)
		},
		peer: func(c *conf) {
			c.l.expect("go")
			for i := range 14 {
				c.send(func() error { return c.n.ep.Send(pattern(300, i), c.to(), i) }, "Send")
			}
			for range 14 {
				c.n.tx()
			}
		},
	},
	{
		// fi_endpoint(3) fi_cancel: a canceled receive completes with an
		// FI_ECANCELED error entry and takes no message; canceling an
		// unknown context fails.
		name: "Cancel",
		run: func(c *conf) {
			b1, b2 := make([]byte, 8), make([]byte, 8)
			c.ok(c.n.ep.Recv(b1, AddrUnspec, "c1"), "Recv")
			c.ok(c.n.ep.Recv(b2, AddrUnspec, "c2"), "Recv")
			c.ok(c.n.ep.Cancel("c1"), "Cancel")
			e := c.n.rxErr()
			c.wantErr(e.Err, ErrCanceled, "canceled receive")
			c.check(e.Context == "c1", "canceled entry context %v", e.Context)
			c.check(c.n.ep.Cancel("c1") != nil, "second Cancel succeeded")
			c.check(c.n.ep.Cancel("nope") != nil, "Cancel of an unknown context succeeded")
			c.l.send("go")
			r := c.n.rx()
			c.check(r.Context == "c2" && string(b2[:3]) == "abc" && b1[0] == 0, "message went to %v", r.Context)
			tb := make([]byte, 8)
			c.ok(c.n.ep.TRecv(tb, AddrUnspec, 1, 0, "t"), "TRecv")
			c.ok(c.n.ep.Cancel("t"), "Cancel tagged")
			c.wantErr(c.n.rxErr().Err, ErrCanceled, "canceled tagged receive")
		},
		peer: func(c *conf) { sendOne(c, false, 0, []byte("abc")) },
	},
	{
		// fi_getinfo(3)/fi_cq(3) FI_SOURCE: the completion's source is the
		// sender's fi_addr in the receiver's AV.
		name: "SourceAddr",
		run: func(c *conf) {
			for i := range 2 {
				c.ok(c.n.ep.Recv(make([]byte, 3*c.p.eager), AddrUnspec, i), "Recv")
			}
			c.l.send("go")
			for i := range 2 {
				e := c.n.rx()
				c.check(e.Src == c.to(), "message %d: Src %d, want %d", i, e.Src, c.to())
			}
		},
		peer: func(c *conf) {
			c.l.expect("go")
			c.send(func() error { return c.n.ep.Send([]byte("s"), c.to(), 0) }, "Send")
			c.send(func() error { return c.n.ep.Send(make([]byte, 2*c.p.eager), c.to(), 1) }, "Send")
			c.n.tx()
			c.n.tx()
		},
	},
	{
		// fi_av(3) FI_AV_USER_ID: completions report the user id given at
		// insert instead of the fi_addr.
		name:    "SourceUserID",
		cfg:     nodeCfg{caps: defaultCaps | AVUserID, userIDs: true},
		peerCfg: &nodeCfg{},
		run: func(c *conf) {
			c.ok(c.n.ep.TRecv(make([]byte, 8), AddrUnspec, 0, ^uint64(0), 0), "TRecv")
			c.l.send("go")
			e := c.n.rx()
			c.check(e.Src == 1000, "Src %d, want the user id 1000", e.Src)
		},
		peer: func(c *conf) { sendOne(c, true, 1, []byte("u")) },
	},
	{
		// fi_getinfo(3): without FI_SOURCE the source is not reported
		// (FI_ADDR_NOTAVAIL).
		name:    "NoSourceCap",
		cfg:     nodeCfg{caps: Msg | Tagged},
		peerCfg: &nodeCfg{},
		run: func(c *conf) {
			c.ok(c.n.ep.Recv(make([]byte, 8), AddrUnspec, 0), "Recv")
			c.l.send("go")
			e := c.n.rx()
			c.check(e.Src == AddrNotAvail, "Src %d without FI_SOURCE", e.Src)
		},
		peer: func(c *conf) { sendOne(c, false, 0, []byte("x")) },
	},
	{
		// fi_getinfo(3) FI_DIRECTED_RECV: a receive posted with a source
		// address takes only that sender's messages.
		name:    "DirectedRecv",
		peerCfg: &nodeCfg{eps: 2},
		run: func(c *conf) {
			c.check(len(c.n.peers) == 2, "peer endpoints %d", len(c.n.peers))
			b0, b1, bt := make([]byte, 8), make([]byte, 8), make([]byte, 8)
			c.ok(c.n.ep.Recv(b1, c.n.peers[1], "from1"), "Recv from 1")
			c.ok(c.n.ep.TRecv(bt, c.n.peers[1], 4, 0, "tfrom1"), "TRecv from 1")
			c.ok(c.n.ep.Recv(b0, c.n.peers[0], "from0"), "Recv from 0")
			c.l.send("go")
			got := map[any]CQEntry{}
			for range 2 {
				e := c.n.rx()
				got[e.Context] = e
			}
			c.check(string(b0[:2]) == "e0" && string(b1[:2]) == "e1", "from0 %q from1 %q", b0, b1)
			// the tagged message from endpoint 0 waits for a receive naming
			// endpoint 0 (or any source).
			c.n.progress()
			c.check(len(c.n.rxq) == 0, "tagged message from 0 matched a receive for 1")
			c.ok(c.n.ep.TRecv(make([]byte, 8), AddrUnspec, 4, 0, "tany"), "TRecv any")
			e := c.n.rx()
			c.check(e.Context == "tany" && e.Src == c.n.peers[0], "tany %+v", e)
			c.l.send("more")
			e = c.n.rx()
			c.check(e.Context == "tfrom1" && string(bt[:2]) == "t1", "tfrom1 %+v", e)
		},
		peer: func(c *conf) {
			c.l.expect("go")
			c.send(func() error { return c.n.eps[0].Send([]byte("e0"), c.to(), 0) }, "Send ep0")
			c.send(func() error { return c.n.eps[0].TSend([]byte("t0"), c.to(), 4, 1) }, "TSend ep0")
			c.send(func() error { return c.n.eps[1].Send([]byte("e1"), c.to(), 2) }, "Send ep1")
			c.l.expect("more")
			c.send(func() error { return c.n.eps[1].TSend([]byte("t1"), c.to(), 4, 3) }, "TSend ep1")
			for range 4 {
				c.n.tx()
			}
		},
	},
	{
		// fi_av(3) PEER GROUPS: messages sent to fi_group_addr(a, g) match
		// only receives whose address carries the same group id.
		name: "PeerGroups",
		run: func(c *conf) {
			b0, b7 := make([]byte, 8), make([]byte, 8)
			c.ok(c.n.ep.Recv(b0, GroupAddr(c.to(), 0), "g0"), "Recv group 0")
			c.ok(c.n.ep.Recv(b7, GroupAddr(c.to(), 7), "g7"), "Recv group 7")
			c.l.send("go")
			for range 2 {
				c.n.rx()
			}
			c.check(string(b7[:2]) == "g7" && string(b0[:2]) == "g0", "group 0 got %q, group 7 got %q", b0, b7)
		},
		peer: func(c *conf) {
			c.l.expect("go")
			c.send(func() error { return c.n.ep.Send([]byte("g7"), GroupAddr(c.to(), 7), 7) }, "Send group 7")
			c.send(func() error { return c.n.ep.Send([]byte("g0"), c.to(), 0) }, "Send group 0")
			c.n.tx()
			c.n.tx()
		},
	},
	{
		// fi_cq(3)/fi_endpoint(3) FI_SELECTIVE_COMPLETION: only operations
		// with FI_COMPLETION report success; errors are always reported.
		name: "SelectiveCompletion",
		cfg:  nodeCfg{txSel: true, rxSel: true},
		run: func(c *conf) {
			b1, b2, b3 := make([]byte, 8), make([]byte, 4), make([]byte, 8)
			c.ok(c.n.ep.Recv(b1, AddrUnspec, "quiet"), "Recv")
			c.ok(c.n.ep.Recv(b2, AddrUnspec, "trunc"), "Recv")
			c.ok(c.n.ep.RecvMsg(&Message{IOV: [][]byte{b3}, Addr: AddrUnspec, Context: "loud"}, Completion), "RecvMsg")
			c.l.send("go")
			e := c.n.rxErr()
			c.check(e.Context == "trunc" && errors.Is(e.Err, ErrTrunc), "first completion %+v %v", e.CQEntry, e.Err)
			r := c.n.rx()
			c.check(r.Context == "loud" && string(b3[:2]) == "m3", "second completion %+v", r)
			c.check(string(b1[:2]) == "m1", "quiet receive got %q", b1)
		},
		peer: func(c *conf) {
			c.l.expect("go")
			c.send(func() error { return c.n.ep.Send([]byte("m1"), c.to(), "s1") }, "Send")
			c.send(func() error { return c.n.ep.Send([]byte("m2m2m2m2"), c.to(), "s2") }, "Send")
			c.send(func() error {
				return c.n.ep.SendMsg(&Message{IOV: [][]byte{[]byte("m3")}, Addr: c.to(), Context: "s3"}, Completion)
			}, "SendMsg")
			e := c.n.tx()
			c.check(e.Context == "s3", "first transmit completion %v, want s3", e.Context)
		},
	},
	cqFormatCase(CQFormatContext),
	cqFormatCase(CQFormatMsg),
	cqFormatCase(CQFormatData),
	cqFormatCase(CQFormatTagged),
	{
		// fi_cq(3) fi_cq_sread: blocks until a completion arrives; returns
		// FI_EAGAIN after the timeout when none does.
		name: "SreadBlocksAndTimesOut",
		run: func(c *conf) {
			var e [1]CQEntry
			start := time.Now()
			k, err := c.n.rxcq.Sread(e[:], 50*time.Millisecond)
			c.check(k == 0 && errors.Is(err, ErrAgain), "Sread on an empty CQ: %d %v", k, err)
			c.check(time.Since(start) >= 50*time.Millisecond, "Sread returned before its timeout")
			c.ok(c.n.ep.Recv(make([]byte, 8), AddrUnspec, "r"), "Recv")
			c.l.send("go")
			k, err = c.n.rxcq.Sread(e[:], waitLimit)
			c.check(k == 1 && err == nil && e[0].Context == "r", "blocking Sread: %d %v %+v", k, err, e[0])
		},
		peer: func(c *conf) {
			c.l.expect("go")
			time.Sleep(20 * time.Millisecond) // let the reader go to sleep
			c.send(func() error { return c.n.ep.Send([]byte("wake"), c.to(), 0) }, "Send")
			c.n.tx()
		},
	},
	{
		// fi_cq(3) fi_cq_signal: wakes a blocked fi_cq_sread, which
		// returns FI_EAGAIN.
		name: "Signal",
		run: func(c *conf) {
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(20 * time.Millisecond)
				c.n.rxcq.Signal()
			}()
			var e [1]CQEntry
			start := time.Now()
			k, err := c.n.rxcq.Sread(e[:], time.Minute)
			wg.Wait()
			c.check(k == 0 && errors.Is(err, ErrAgain), "signaled Sread: %d %v", k, err)
			c.check(time.Since(start) < 50*time.Second, "Signal did not wake Sread")
		},
	},
	{
		// fi_cq(3): fi_cq_read returns -FI_EAVAIL when an error entry is
		// next, even with successes behind it; fi_cq_readerr takes it and
		// reading continues in order; readerr with no error waiting gives
		// FI_EAGAIN.
		name: "ReadErrAvail",
		run: func(c *conf) {
			c.ok(c.n.ep.Recv(make([]byte, 8), AddrUnspec, "ok1"), "Recv")
			c.ok(c.n.ep.Recv(make([]byte, 2), AddrUnspec, "bad"), "Recv")
			c.ok(c.n.ep.Recv(make([]byte, 8), AddrUnspec, "ok2"), "Recv")
			c.l.send("go")
			c.l.expect("sent")
			var es [4]CQEntry
			var k int
			var err error
			deadline := time.Now().Add(waitLimit)
			total := 0
			for total == 0 {
				k, err = c.n.rxcq.Read(es[:])
				if k > 0 {
					total = k
					break
				}
				c.check(errors.Is(err, ErrAgain) && time.Now().Before(deadline), "Read: %v", err)
			}
			c.check(total == 1 && es[0].Context == "ok1", "first batch stops before the error: %d %+v", total, es[0])
			_, err = readSettled(c, es[:])
			c.wantErr(err, ErrAvail, "Read with an error entry next")
			ee, err := c.n.rxcq.ReadErr()
			c.ok(err, "ReadErr")
			c.check(ee.Context == "bad" && errors.Is(ee.Err, ErrTrunc) && ee.OLen == 6, "error entry %+v", ee)
			k, err = readSettled(c, es[:])
			c.check(k == 1 && err == nil && es[0].Context == "ok2", "after ReadErr: %d %v %+v", k, err, es[0])
			_, err = c.n.rxcq.ReadErr()
			c.wantErr(err, ErrAgain, "ReadErr with no error entry")
		},
		peer: func(c *conf) {
			c.l.expect("go")
			for i, m := range []string{"abc", "12345678", "xyz"} {
				c.send(func() error { return c.n.ep.Send([]byte(m), c.to(), i) }, "Send")
			}
			c.l.send("sent")
			for range 3 {
				c.n.tx()
			}
		},
	},
	{
		// fi_cq(3): completions are never lost when the application reads
		// late: a small CQ filled far past its size yields every entry,
		// in order, on both sides.
		name: "FullCQLosesNothing",
		cfg:  nodeCfg{cqSize: 8},
		run: func(c *conf) {
			const n = 100
			for i := range n {
				c.ok(c.n.retry(func() error { return c.n.ep.Recv(make([]byte, 16), AddrUnspec, i) }), "Recv")
			}
			c.l.send("go")
			c.l.expect("sent")
			// the peer's transmit CQ overflowed too; now drain ours.
			for i := range n {
				e := c.n.rx()
				c.check(e.Context == i && e.Len == 16, "entry %d: %+v", i, e)
			}
		},
		peer: func(c *conf) {
			const n = 100
			c.l.expect("go")
			for i := range n {
				c.send(func() error { return c.n.ep.Send(pattern(16, i), c.to(), i) }, "Send")
			}
			c.l.send("sent")
			for i := range n {
				e := c.n.tx()
				c.check(e.Context == i, "tx entry %d: %+v", i, e)
			}
		},
	},
	{
		// fi_msg(3) FI_EAGAIN: when the transmit queue (tx_attr.size) or
		// the path to the peer is full, sends fail with FI_EAGAIN, nothing
		// is lost, and a retry after progress succeeds.
		name:    "TxQueueFullAgain",
		cfg:     nodeCfg{},
		peerCfg: &nodeCfg{txSize: 4},
		run: func(c *conf) {
			c.l.send("go")
			c.l.expect("full")
			// Take the messages that filled the queue, then the rest.
			total := c.l.expectInt("count")
			for i := range total {
				size := txFullSize(c, i)
				buf := make([]byte, size)
				c.ok(c.n.retry(func() error { return c.n.ep.Recv(buf, AddrUnspec, i) }), "Recv")
				e := c.n.rx()
				c.check(e.Context == i && e.Len == size && bytes.Equal(buf, pattern(size, i)), "message %d: %+v", i, e)
			}
		},
		peer: func(c *conf) {
			c.l.expect("go")
			// Rendezvous sends stay outstanding until the receiver takes
			// them: the 5th must get FI_EAGAIN.
			i := 0
			msgs := map[int][]byte{}
			for ; ; i++ {
				msgs[i] = pattern(txFullSize(c, i), i)
				err := c.n.ep.Send(msgs[i], c.to(), i)
				if errors.Is(err, ErrAgain) {
					break
				}
				c.ok(err, "Send %d", i)
			}
			c.check(i == 4, "FI_EAGAIN after %d sends, want 4 (tx_attr.size)", i)
			// Eager sends then fill the path to the receiver.
			c.l.send("full")
			total := i + 400
			c.l.send("count", total)
			again := 0
			for ; i < total; i++ {
				msgs[i] = pattern(txFullSize(c, i), i)
				c.send(func() error {
					err := c.n.ep.Send(msgs[i], c.to(), i)
					if errors.Is(err, ErrAgain) {
						again++
					}
					return err
				}, "Send")
			}
			for range total {
				c.n.tx()
			}
			c.t.Logf("FI_EAGAIN returned %d times", again)
		},
	},
	{
		// fi_av(3)/fi_msg(3): sending to an fi_addr that is not in the AV,
		// was removed from it, or names no live endpoint fails (at once or
		// with an error completion), never hangs.
		name: "BadDestination",
		run: func(c *conf) {
			c.check(c.n.ep.Send([]byte("x"), Addr(12345), nil) != nil, "Send to an unknown fi_addr succeeded")
			c.check(c.n.ep.TSend([]byte("x"), Addr(12345), 1, nil) != nil, "TSend to an unknown fi_addr succeeded")
			c.l.send("go") // the peer still answers before the removal
			c.ok(c.n.ep.Recv(make([]byte, 8), AddrUnspec, "r"), "Recv")
			c.n.rx()
			c.ok(c.n.av.Remove([]Addr{c.to()}, 0), "AV.Remove")
			c.check(c.n.ep.Send([]byte("x"), c.to(), nil) != nil, "Send to a removed fi_addr succeeded")
			c.check(c.n.ep.Inject([]byte("x"), c.to()) != nil, "Inject to a removed fi_addr succeeded")
			// an address naming no endpoint (refused by Insert, by Send, or
			// reported as an error completion)
			name, _ := c.n.ep.Name()
			ghost := append(bytes.TrimRight(name, "\x00"), []byte("-gone")...)
			a, err := c.n.av.Insert([][]byte{ghost}, 0)
			if err != nil {
				return
			}
			err = c.n.ep.Send([]byte("x"), a[0], "ghost")
			if err == nil {
				e := c.n.txErr()
				c.check(e.Context == "ghost", "ghost send error entry %+v", e)
			}
		},
		peer: func(c *conf) { sendOne(c, false, 0, []byte("hi")) },
	},
	{
		// fi_domain(3)/fi_endpoint(3)/fi_cq(3)/fi_av(3): objects close in
		// order: a domain with open children, a CQ or AV with a bound
		// endpoint, report FI_EBUSY; closing an endpoint cancels its
		// posted receives.
		name: "CloseOrdering",
		run: func(c *conf) {
			n := c.n
			c.wantErr(n.dom.Close(), ErrBusy, "Domain.Close with children")
			c.wantErr(n.txcq.Close(), ErrBusy, "CQ.Close with a bound endpoint")
			c.wantErr(n.av.Close(), ErrBusy, "AV.Close with a bound endpoint")
			c.wantErr(n.fab.Close(), ErrBusy, "Fabric.Close with a domain")
			c.ok(n.ep.Recv(make([]byte, 8), AddrUnspec, "posted"), "Recv")
			c.ok(n.ep.Close(), "Endpoint.Close")
			e, err := n.rxcq.ReadErr()
			c.ok(err, "ReadErr after Endpoint.Close")
			c.check(e.Context == "posted" && errors.Is(e.Err, ErrCanceled), "posted receive at close: %+v %v", e.CQEntry, e.Err)
			c.check(n.ep.Send([]byte("x"), 0, nil) != nil, "Send on a closed endpoint succeeded")
			n.eps = nil
			c.ok(n.txcq.Close(), "CQ.Close")
			c.ok(n.rxcq.Close(), "CQ.Close")
			c.ok(n.av.Close(), "AV.Close")
			c.ok(n.dom.Close(), "Domain.Close")
			c.ok(n.fab.Close(), "Fabric.Close")
		},
	},
	{
		// fi_msg(3)/fi_tagged(3): every size from 0 to 4 MiB arrives
		// intact, around the provider's protocol switches (inject size,
		// eager limit), expected and unexpected, tagged and untagged.
		name: "MessageSizes",
		run: func(c *conf) {
			for i, sz := range msgSizes(c) {
				for _, mode := range []int{0, 1, 2, 3} { // bit 0 tagged, bit 1 unexpected
					seed := i*4 + mode
					buf := make([]byte, sz)
					post := func() {
						if mode&1 != 0 {
							c.ok(c.n.ep.TRecv(buf, AddrUnspec, uint64(seed), 0, seed), "TRecv")
						} else {
							c.ok(c.n.ep.Recv(buf, AddrUnspec, seed), "Recv")
						}
					}
					if mode&2 == 0 {
						post()
						c.l.send("go")
					} else {
						c.l.send("go")
						c.l.expect("sent")
						c.n.progress()
						post()
					}
					e := c.n.rx()
					c.check(e.Context == seed && e.Len == sz, "size %d mode %d: %+v", sz, mode, e)
					c.check(bytes.Equal(buf, pattern(sz, seed)), "size %d mode %d: data differs", sz, mode)
					c.check(len(e.Buf) == sz, "size %d: Buf len %d", sz, len(e.Buf))
				}
			}
		},
		peer: func(c *conf) {
			for i, sz := range msgSizes(c) {
				for _, mode := range []int{0, 1, 2, 3} {
					seed := i*4 + mode
					msg := pattern(sz, seed)
					c.l.expect("go")
					if mode&1 != 0 {
						c.send(func() error { return c.n.ep.TSend(msg, c.to(), uint64(seed), seed) }, "TSend")
					} else {
						c.send(func() error { return c.n.ep.Send(msg, c.to(), seed) }, "Send")
					}
					if mode&2 != 0 {
						c.l.send("sent")
					}
					e := c.n.tx()
					c.check(e.Context == seed, "tx %+v", e)
				}
			}
		},
	},
}

func orderSize(c *conf, i int) int {
	switch i % 5 {
	case 0:
		return 0
	case 1:
		return 17
	case 2:
		return c.p.eager + 1 + i
	case 3:
		return c.p.eager
	}
	return 1000 + i
}

func txFullSize(c *conf, i int) int {
	if i < 4 {
		return 2*c.p.eager + i
	}
	return c.p.eager
}

func msgSizes(c *conf) []int {
	inj := c.n.ep.Info().TxAttr.InjectSize
	e := c.p.eager
	return []int{0, 1, inj, e - 1, e, e + 1, 1 << 20, 4 << 20}
}

type peekMsg struct {
	tag  uint64
	data []byte
}

func peekMsgs(c *conf) []peekMsg {
	return []peekMsg{
		{1, pattern(100, 1)},
		{2, pattern(2*c.p.eager, 2)},
		{4, pattern(50, 4)},
		{5, pattern(2*c.p.eager, 5)},
	}
}

// peekFind peeks (with flags) for tag until the message is there.
func peekFind(c *conf, tag uint64, flags Flags, ctx any) CQEntry {
	c.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		c.ok(c.n.ep.TRecvMsg(&TaggedMsg{Addr: AddrUnspec, Tag: tag, Context: ctx}, Peek|flags), "TRecvMsg Peek")
		g := c.n.next(false)
		if g.err == nil {
			c.check(g.Context == ctx, "peek completion context %v", g.Context)
			return g.CQEntry
		}
		c.wantErr(g.err.Err, ErrNoMsg, "peek error entry")
		c.check(time.Now().Before(deadline), "tag %d never became visible to Peek", tag)
		time.Sleep(100 * time.Microsecond)
	}
}

func peekRun(c *conf) {
	msgs := peekMsgs(c)
	// Nothing sent yet: FI_ENOMSG.
	c.ok(c.n.ep.TRecvMsg(&TaggedMsg{Addr: AddrUnspec, Tag: 3, Context: "p3"}, Peek), "Peek")
	e := c.n.rxErr()
	c.check(e.Context == "p3" && errors.Is(e.Err, ErrNoMsg), "peek on nothing: %+v %v", e.CQEntry, e.Err)
	c.l.send("go")
	c.l.expect("sent")

	// Peek reports tag 1 with its length and data, and leaves it.
	p := peekFind(c, 1, 0, "peek1")
	c.check(p.Len == 100 && p.Tag == 1 && p.Data == 1 && p.Flags&RemoteCQData != 0, "peek tag 1: %+v", p)
	p = peekFind(c, 1, 0, "peek1again")
	buf := make([]byte, 100)
	c.ok(c.n.ep.TRecv(buf, AddrUnspec, 1, 0, "r1"), "TRecv")
	r := c.n.rx()
	c.check(r.Context == "r1" && bytes.Equal(buf, msgs[0].data), "receive after peek: %+v", r)

	// Peek|Claim reserves tag 2; it is then invisible to Peek and to
	// ordinary receives; Claim takes it.
	p = peekFind(c, 2, Claim, "claim2")
	c.check(p.Len == len(msgs[1].data), "peek|claim tag 2: %+v", p)
	c.ok(c.n.ep.TRecvMsg(&TaggedMsg{Addr: AddrUnspec, Tag: 2, Context: "again"}, Peek), "Peek")
	c.wantErr(c.n.rxErr().Err, ErrNoMsg, "peek of a claimed message")
	big := make([]byte, len(msgs[1].data))
	c.ok(c.n.ep.TRecvMsg(&TaggedMsg{IOV: [][]byte{big}, Addr: AddrUnspec, Tag: 2, Context: "claim2"}, Claim), "Claim")
	r = c.n.rx()
	c.check(r.Context == "claim2" && r.Len == len(big) && bytes.Equal(big, msgs[1].data), "claimed receive: %+v", r)
	c.wantErr(c.n.ep.TRecvMsg(&TaggedMsg{IOV: [][]byte{big}, Addr: AddrUnspec, Context: "claim2"}, Claim), ErrNoMsg, "Claim of nothing claimed")

	// Peek|Discard drops tag 4.
	peekFind(c, 4, Discard, "disc4")
	c.ok(c.n.ep.TRecvMsg(&TaggedMsg{Addr: AddrUnspec, Tag: 4, Context: "gone4"}, Peek), "Peek")
	c.wantErr(c.n.rxErr().Err, ErrNoMsg, "peek after Peek|Discard")

	// Peek|Claim then Claim|Discard drops tag 5 (a rendezvous message:
	// its sender still completes).
	peekFind(c, 5, Claim, "claim5")
	c.ok(c.n.ep.TRecvMsg(&TaggedMsg{Addr: AddrUnspec, Tag: 5, Context: "claim5"}, Claim|Discard), "Claim|Discard")
	r = c.n.rx()
	c.check(r.Context == "claim5", "claim|discard completion %+v", r)
	c.ok(c.n.ep.TRecvMsg(&TaggedMsg{Addr: AddrUnspec, Tag: 5, Context: "gone5"}, Peek), "Peek")
	c.wantErr(c.n.rxErr().Err, ErrNoMsg, "peek after Claim|Discard")
}

// cqFormatCase checks fi_cq(3)'s formats: FI_CQ_FORMAT_CONTEXT fills only
// op_context; MSG adds flags and len; DATA adds buf and data; TAGGED adds
// tag.
func cqFormatCase(f CQFormat) confCase {
	return confCase{
		name:    "CQFormat" + strconv.Itoa(int(f)) + "_" + [...]string{"", "Context", "Msg", "Data", "Tagged"}[f],
		cfg:     nodeCfg{rxFormat: f},
		peerCfg: &nodeCfg{},
		run: func(c *conf) {
			buf := make([]byte, 8)
			c.ok(c.n.ep.TRecv(buf, AddrUnspec, 0x77, 0, "ctx"), "TRecv")
			c.l.send("go")
			e := c.n.rx()
			c.check(e.Context == "ctx", "context %v", e.Context)
			wantFlags, wantLen := Flags(0), 0
			if f >= CQFormatMsg {
				wantFlags, wantLen = rxTag|RemoteCQData, 5
			}
			c.check(e.Flags == wantFlags && e.Len == wantLen, "format %d: flags %v len %d", f, e.Flags, e.Len)
			if f >= CQFormatData {
				c.check(string(e.Buf) == "fmt!!" && e.Data == 99, "format %d: buf %q data %d", f, e.Buf, e.Data)
			} else {
				c.check(e.Buf == nil && e.Data == 0, "format %d: buf %q data %d filled", f, e.Buf, e.Data)
			}
			if f >= CQFormatTagged {
				c.check(e.Tag == 0x77, "format %d: tag %#x", f, e.Tag)
			} else {
				c.check(e.Tag == 0, "format %d: tag %#x filled", f, e.Tag)
			}
		},
		peer: func(c *conf) {
			c.l.expect("go")
			c.send(func() error { return c.n.ep.TSendData([]byte("fmt!!"), 99, c.to(), 0x77, 0) }, "TSendData")
			c.n.tx()
		},
	}
}

// readSettled reads the receive CQ until it returns something other than
// FI_EAGAIN.
func readSettled(c *conf, es []CQEntry) (int, error) {
	c.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		k, err := c.n.rxcq.Read(es)
		if !errors.Is(err, ErrAgain) {
			return k, err
		}
		c.check(time.Now().Before(deadline), "CQ stayed empty")
		time.Sleep(100 * time.Microsecond)
	}
}
