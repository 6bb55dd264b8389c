package net

import (
	"bytes"
	"testing"

	"github.com/gofi-dev/fi/rma"
	"github.com/gofi-dev/fi/transport"
)

// spliceTarget is a transport serving one 4 MiB region (key 9) filled
// with guard bytes 0xee.
func spliceTarget(t *testing.T) (*Transport, []byte) {
	t.Helper()
	b := listen(t, Config{})
	size, _ := rma.Size(4, 4)
	tab, err := rma.NewTable(make([]byte, size), 4, 4, "")
	if err != nil {
		t.Fatal(err)
	}
	mem := bytes.Repeat([]byte{0xee}, 4<<20)
	if _, _, err := tab.Register(rma.Region{Mem: mem, Key: 9, Access: rma.AccessRemoteRead | rma.AccessRemoteWrite}, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.ServeRMA(&rma.Target{Table: tab}); err != nil {
		t.Fatal(err)
	}
	return b, mem
}

// readBack reads remote's bytes from the target of p with an RMA read
// (the target's region is written by its loop: the test reads it through
// the target, which the race detector can order).
func readBack(t *testing.T, a *Transport, as *fakeSink, p transport.Peer, remote []transport.RMAIOV, op transport.Op) []byte {
	t.Helper()
	n := uint64(0)
	for _, v := range remote {
		n += v.Len
	}
	got := make([]byte, n)
	if done, c := a.RMA(p, &transport.RMAReq{Kind: transport.RMARead, Local: [][]byte{got}, Remote: remote}, op); done || c != transport.OK {
		t.Fatalf("read: done %v code %d", done, c)
	}
	pollUntil(t, "the read", func() bool { _, ok := as.sendDone[op]; return ok }, a, as)
	if c := as.sendDone[op]; c != transport.OK {
		t.Fatalf("read: code %d", c)
	}
	return got
}

func forceSplice(t *testing.T) {
	t.Helper()
	spliceAlways = true
	t.Cleanup(func() { spliceAlways = false })
}

// Large RMA writes go to the socket by vmsplice+splice (splice.go): a
// window of writes in flight, each from several local buffers at odd
// lengths into several remote ranges, lands byte for byte, the guard bytes
// around the ranges stay, and the payload bytes went through the pipe; a
// write below spliceMin and an injected one do not.
func TestSplice_LargeWritesLandWhole(t *testing.T) {
	forceSplice(t)
	a := listen(t, Config{})
	b, mem := spliceTarget(t)
	as, bs := newSink(), newSink()
	p, _ := a.Resolve(b.Name())
	const n = 3<<20 + 4097
	src := pattern(n, 7)
	local := [][]byte{src[:1], src[1 : 70<<10], src[70<<10 : 2<<20+3], src[2<<20+3:]}
	remote := []transport.RMAIOV{{Addr: 3, Len: 1<<20 + 5, Key: 9}, {Addr: 1<<20 + 100, Len: 7, Key: 9}, {Addr: 1<<20 + 200, Len: n - (1<<20 + 5) - 7, Key: 9}}
	ops := 0
	for round := range 6 {
		// Each round's source differs; the previous round's bytes are
		// overwritten only after its writes completed.
		for i := range src {
			src[i] = byte(int(src[i]) + round)
		}
		const window = 4
		for op := transport.Op(1); op <= window; op++ {
			ops++
			done, c := a.RMA(p, &transport.RMAReq{Kind: transport.RMAWrite, Local: local, Remote: remote}, transport.Op(ops))
			if done || c != transport.OK {
				t.Fatalf("round %d: write %d: done %v code %d", round, op, done, c)
			}
		}
		last := transport.Op(ops)
		pollUntil(t, "the writes", func() bool {
			for o := last - window + 1; o <= last; o++ {
				if _, ok := as.sendDone[o]; !ok {
					return false
				}
			}
			return true
		}, a, as, b, bs)
		for o := last - window + 1; o <= last; o++ {
			if c := as.sendDone[o]; c != transport.OK {
				t.Fatalf("round %d: op %d: code %d", round, o, c)
			}
		}
		ops++
		if got := readBack(t, a, as, p, remote, transport.Op(ops)); !bytes.Equal(got, src) {
			t.Fatalf("round %d: the ranges differ from what was written, first at %d", round, firstDiff(got, src))
		}
		for _, g := range [][2]uint64{{0, 3}, {1<<20 + 8, 1<<20 + 100}, {1<<20 + 107, 1<<20 + 200}, {1<<20 + 200 + remote[2].Len, 4 << 20}} {
			for i := g[0]; i < g[1]; i++ {
				if mem[i] != 0xee {
					t.Fatalf("round %d: guard byte %d changed to %#x", round, i, mem[i])
				}
			}
		}
	}
	if got := a.sp.bytes.Load(); got != int64(6*4*n) {
		t.Fatalf("%d payload bytes went by splice, want all %d", got, 6*4*n)
	}
	before := a.sp.bytes.Load()
	for i, req := range []*transport.RMAReq{
		{Kind: transport.RMAWrite, Local: [][]byte{src[:spliceMin-1]}, Remote: []transport.RMAIOV{{Addr: 64, Len: spliceMin - 1, Key: 9}}},
		{Kind: transport.RMAWrite, Local: [][]byte{src[:spliceMin]}, Remote: []transport.RMAIOV{{Addr: 64, Len: spliceMin, Key: 9}}, Inject: true},
	} {
		ops++
		op := transport.Op(ops)
		if done, c := a.RMA(p, req, op); done || c != transport.OK {
			t.Fatalf("write %d: done %v code %d", i, done, c)
		}
		pollUntil(t, "the write", func() bool { _, ok := as.sendDone[op]; return ok }, a, as, b, bs)
		ops++
		if got := readBack(t, a, as, p, req.Remote, transport.Op(ops)); !bytes.Equal(got, src[:req.Remote[0].Len]) {
			t.Fatalf("write %d: the region differs", i)
		}
	}
	if got := a.sp.bytes.Load(); got != before {
		t.Fatalf("%d bytes of a small or injected write went by splice", got-before)
	}
}

// Two targets written at once from one transport share its one pipe: the
// connection that finds it owned by the other writes with writev, and
// every write lands whole on both.
func TestSplice_TwoConnectionsShareThePipe(t *testing.T) {
	forceSplice(t)
	a := listen(t, Config{})
	b, _ := spliceTarget(t)
	c, _ := spliceTarget(t)
	as := newSink() // b and c make no call: their loops serve the writes
	pb, _ := a.Resolve(b.Name())
	pc, _ := a.Resolve(c.Name())
	const n = 2 << 20
	srcB, srcC := pattern(n, 1), pattern(n, 2)
	op := transport.Op(0)
	for round := range 8 {
		var want []transport.Op
		for _, w := range []struct {
			p   transport.Peer
			src []byte
		}{{pb, srcB}, {pc, srcC}, {pb, srcB}, {pc, srcC}} {
			op++
			if done, code := a.RMA(w.p, &transport.RMAReq{Kind: transport.RMAWrite, Local: [][]byte{w.src}, Remote: []transport.RMAIOV{{Addr: uint64(round), Len: n, Key: 9}}}, op); done || code != transport.OK {
				t.Fatalf("round %d: done %v code %d", round, done, code)
			}
			want = append(want, op)
		}
		pollUntil(t, "the writes", func() bool {
			for _, o := range want {
				if _, ok := as.sendDone[o]; !ok {
					return false
				}
			}
			return true
		}, a, as)
		for _, o := range want {
			if code := as.sendDone[o]; code != transport.OK {
				t.Fatalf("round %d: op %d: code %d", round, o, code)
			}
		}
		for _, w := range []struct {
			p   transport.Peer
			src []byte
		}{{pb, srcB}, {pc, srcC}} {
			op++
			if got := readBack(t, a, as, w.p, []transport.RMAIOV{{Addr: uint64(round), Len: n, Key: 9}}, op); !bytes.Equal(got, w.src) {
				t.Fatalf("round %d: a region differs from what was written, first at %d", round, firstDiff(got, w.src))
			}
		}
	}
	if a.sp.bytes.Load() == 0 {
		t.Fatal("no payload byte went by splice")
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
