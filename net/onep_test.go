package net

import (
	"bytes"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// With one P, a Poll that keeps finding nothing lets the process's other
// goroutines run (every onePYield-th empty Poll in a row) while another
// transport listens in the process: that transport's loop, serving what
// the Poll waits for (an idle target's RMA), is a goroutine waiting for
// the P, which a polling application held until the runtime preempted
// it (20-34 ms per 8-byte write). Then RMA writes and reads to such an
// idle target, busy-polled for as perftest polls, complete whole.
func TestPoll_OnePLetsTheProcessRun(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a := listen(t, Config{})
	b := listen(t, Config{})
	rmaTarget(t, b)
	as := newSink()

	var ran atomic.Bool
	go func() { ran.Store(true) }() // runnable, waiting for the one P
	polls := 0
	for ; polls < 4*onePYield && !ran.Load(); polls++ {
		a.Poll(as)
	}
	if !ran.Load() {
		t.Fatalf("%d empty Polls with one P and a runnable goroutine: it never ran", polls)
	}

	p, c := a.Resolve(b.Name())
	if c != transport.OK {
		t.Fatal(c)
	}
	wait := func(op transport.Op, done bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !done {
			if time.Now().After(deadline) {
				t.Fatalf("RMA %d: no completion within 20 s", op)
			}
			a.Poll(as)
			var code transport.Code
			if code, done = as.sendDone[op]; done && code != transport.OK {
				t.Fatalf("RMA %d: code %d", op, code)
			}
		}
	}
	for i := range 20 {
		src := []byte{byte(i), 1, 2, 3, 4, 5, 6, byte(i)}
		op := transport.Op(2*i + 1)
		w := &transport.RMAReq{Kind: transport.RMAWrite, Local: [][]byte{src}, Remote: []transport.RMAIOV{{Addr: uint64(8 * i), Len: 8, Key: 7}}}
		done, code := a.RMA(p, w, op)
		if code != transport.OK {
			t.Fatalf("write %d: code %d", i, code)
		}
		wait(op, done)
		dst := make([]byte, 8)
		r := &transport.RMAReq{Kind: transport.RMARead, Local: [][]byte{dst}, Remote: []transport.RMAIOV{{Addr: uint64(8 * i), Len: 8, Key: 7}}}
		if done, code = a.RMA(p, r, op+1); code != transport.OK {
			t.Fatalf("read %d: code %d", i, code)
		}
		wait(op+1, done)
		if !bytes.Equal(dst, src) {
			t.Fatalf("RMA %d: read back %x, wrote %x", i, dst, src)
		}
	}
}
