package net

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// An engine that keeps polling borrows the loop and reads the sockets
// itself; messages of every protocol still arrive intact and in order, and
// sleeping in Wait hands the loop back.
func TestOwnerPoll_SpinningPollDeliversInOrder(t *testing.T) {
	a := listen(t, Config{})
	b := listen(t, Config{})
	as, bs := newSink(), newSink()
	p, _ := a.Resolve(b.Name())
	sizes := []int{8, 4096, 40 << 10, 300 << 10}
	const n = 400
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < n; i++ {
		size := sizes[i%len(sizes)]
		msg := pattern(size, byte(i))
		h := &transport.Header{Kind: transport.KindTagged, Tag: uint64(i), Len: uint64(size)}
		for {
			_, c := a.Send(p, h, [][]byte{msg}, transport.Op(i+1))
			if c == transport.OK {
				break
			}
			if c != transport.EAgain {
				t.Fatalf("Send: %d", c)
			}
			a.Poll(as)
			b.Poll(bs)
		}
		for len(bs.arrivals) <= i { // spin: no Wait, so the loops get borrowed
			if time.Now().After(deadline) {
				t.Fatalf("message %d did not arrive", i)
			}
			a.Poll(as)
			b.Poll(bs)
		}
		ar := bs.arrivals[i]
		if ar.hdr.Tag != uint64(i) {
			t.Fatalf("message %d arrived as %d", i, ar.hdr.Tag)
		}
		if ar.eager != nil {
			if !bytes.Equal(ar.eager, msg) {
				t.Fatalf("message %d corrupted", i)
			}
			continue
		}
		dst := make([]byte, size)
		done, _, c := b.Fetch(ar.peer, ar.cookie, [][]byte{dst}, transport.Op(1000+i))
		if c != transport.OK {
			t.Fatalf("Fetch %d: %d", i, c)
		}
		for !done {
			if time.Now().After(deadline) {
				t.Fatalf("fetch %d did not finish", i)
			}
			a.Poll(as)
			b.Poll(bs)
			_, done = bs.fetchDone[transport.Op(1000+i)]
		}
		if r := bs.fetchDone[transport.Op(1000+i)]; r.code != transport.OK || !bytes.Equal(dst, msg) {
			t.Fatalf("fetch %d: code %d, intact %v", i, r.code, bytes.Equal(dst, msg))
		}
	}
	if a.parks.Load()+b.parks.Load() == 0 {
		t.Fatal("spinning Poll never borrowed a loop")
	}
	b.Wait(time.Millisecond)
	if b.parked.Load() {
		t.Fatal("Wait left the loop parked")
	}
}

// A spinning engine that has borrowed its loop still accepts a new peer:
// Poll hands the loop back when gnet queues the accepted connection's
// registration (or, failing that, the parked loop runs it on its next
// tick), and the loop stays out of the borrow until the handshake is done.
func TestOwnerPoll_ParkedLoopAcceptsNewPeer(t *testing.T) {
	b := listen(t, Config{})
	bs := newSink()
	deadline := time.Now().Add(30 * time.Second)
	for !b.parked.Load() { // a first peer gives b a loop to borrow
		if time.Now().After(deadline) {
			t.Fatal("b never borrowed its loop")
		}
		b.Poll(bs)
		if b.el.Load() == nil {
			a := listen(t, Config{})
			p, _ := a.Resolve(b.Name())
			h := &transport.Header{Kind: transport.KindMsg, Len: 8}
			if _, c := a.Send(p, h, [][]byte{pattern(8, 1)}, 1); c != transport.OK {
				t.Fatalf("Send: %d", c)
			}
			for b.el.Load() == nil && time.Now().Before(deadline) {
				a.Poll(newSink())
				b.Poll(bs)
			}
		}
	}
	c := listen(t, Config{})
	cs := newSink()
	p, _ := c.Resolve(b.Name())
	msg := pattern(8, 7)
	h := &transport.Header{Kind: transport.KindTagged, Tag: 77, Len: 8}
	if _, code := c.Send(p, h, [][]byte{msg}, 2); code != transport.OK {
		t.Fatalf("Send: %d", code)
	}
	for { // b keeps spinning: it never sleeps in Wait
		for _, ar := range bs.arrivals {
			if ar.hdr.Tag == 77 {
				if !bytes.Equal(ar.eager, msg) {
					t.Fatal("message corrupted")
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new peer's message never arrived (ticks %d)", b.ticks.Load())
		}
		b.Poll(bs)
		c.Poll(cs)
	}
}

// An engine that borrowed its loop and then stops calling Poll (without
// Wait) gets its loop handed back at the parked task's next tick: the
// loop serves the sockets again (a one-sided request to it completes with
// its application making no call).
func TestOwnerPoll_StoppedPollingHandsTheLoopBack(t *testing.T) {
	a := listen(t, Config{})
	b := listen(t, Config{})
	rmaTarget(t, b)
	as, bs := newSink(), newSink()
	p, _ := a.Resolve(b.Name())
	h := &transport.Header{Kind: transport.KindMsg, Len: 8}
	if _, c := a.Send(p, h, [][]byte{pattern(8, 1)}, 1); c != transport.OK {
		t.Fatalf("Send: %d", c)
	}
	deadline := time.Now().Add(30 * time.Second)
	// b spins until a's message came (the connection is up: its
	// registration and handshake need the loop) and it borrowed its loop.
	for len(bs.arrivals) == 0 || !b.parked.Load() {
		if time.Now().After(deadline) {
			t.Fatal("b never borrowed its loop")
		}
		a.Poll(as)
		b.Poll(bs)
	}
	for b.parked.Load() || b.idled.Load() == 0 { // b stops polling
		if time.Now().After(deadline) {
			t.Fatalf("the parked loop was not handed back (ticks %d, idled %d, parks %d, parked %v)", b.ticks.Load(), b.idled.Load(), b.parks.Load(), b.parked.Load())
		}
		a.Poll(as)
	}
	buf := pattern(8, 9)
	done, c := a.RMA(p, &transport.RMAReq{Kind: transport.RMAWrite, Local: [][]byte{buf}, Remote: []transport.RMAIOV{{Addr: 16, Len: 8, Key: 7}}}, 2)
	if c != transport.OK {
		t.Fatalf("RMA: %d", c)
	}
	if !done {
		pollUntil(t, "the write's completion", func() bool { _, ok := as.sendDone[2]; return ok }, a, as)
	}
	if as.sendDone[2] != transport.OK {
		t.Fatalf("write completed with %d", as.sendDone[2])
	}
}

// Poll hands a borrowed loop back as soon as gnet has tasks queued for it
// (an accepted connection's registration is one), instead of leaving them
// to the parked loop's tick, and borrows it again later. The test raises a
// task flag of its own in place of gnet's.
func TestOwnerPoll_GnetTasksHandTheLoopBack(t *testing.T) {
	a := listen(t, Config{})
	b := listen(t, Config{})
	as, bs := newSink(), newSink()
	p, _ := a.Resolve(b.Name())
	h := &transport.Header{Kind: transport.KindMsg, Len: 8}
	if _, c := a.Send(p, h, [][]byte{pattern(8, 1)}, 1); c != transport.OK {
		t.Fatalf("Send: %d", c)
	}
	pollUntil(t, "b's first message and borrowed loop", func() bool {
		return len(bs.arrivals) > 0 && b.parked.Load()
	}, a, as, b, bs)
	var flag int32 = 1
	b.gtasks.Store(&flag)
	pollUntil(t, "a handback", func() bool { return b.handbacks.Load() != 0 }, a, as, b, bs)
	if b.handbacks.Load() != 1 || b.parked.Load() {
		t.Fatalf("gnet's queued tasks did not hand the loop back (handbacks %d, parked %v)", b.handbacks.Load(), b.parked.Load())
	}
	atomic.StoreInt32(&flag, 0)
	pollUntil(t, "b borrowing its loop again", func() bool { return b.parked.Load() }, a, as, b, bs)
	if _, c := a.Send(p, h, [][]byte{pattern(8, 2)}, 2); c != transport.OK {
		t.Fatalf("Send: %d", c)
	}
	pollUntil(t, "the second message", func() bool { return len(bs.arrivals) == 2 }, a, as, b, bs)
	if b.handbacks.Load() != 1 {
		t.Fatalf("handbacks %d with no task queued", b.handbacks.Load())
	}
}

// A Poll that follows a frame written whole yields before it reads (the
// answer cannot be there yet; a peer sharing the CPU runs first), once per
// write; a Poll with nothing written does not. Both transports exchange
// no places (NoHost), as in the next test: a Poll whose same-host peers
// all poll on another CPU never yields first (peersApart), and the one
// goroutine polling both here moves between CPUs as the host pleases.
func TestOwnerPoll_YieldsFirstAfterAWrite(t *testing.T) {
	a := listen(t, Config{Host: NoHost})
	b := listen(t, Config{Host: NoHost})
	as, bs := newSink(), newSink()
	p, _ := a.Resolve(b.Name())
	h := &transport.Header{Kind: transport.KindMsg, Len: 8}
	deadline := time.Now().Add(20 * time.Second)
	for i := 1; ; i++ {
		if _, c := a.Send(p, h, [][]byte{pattern(8, byte(i))}, transport.Op(i)); c != transport.OK {
			t.Fatalf("Send %d: %d", i, c)
		}
		// Spin (pollUntil would Wait, which hands a's loop back) until
		// the message is there and a has borrowed its loop.
		for len(bs.arrivals) < i || !a.parked.Load() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for message %d and a's borrowed loop", i)
			}
			a.Poll(as)
			b.Poll(bs)
		}
		a.Poll(as) // takes the flag of the write above
		y := a.firstYields
		a.Poll(as)
		if a.firstYields != y {
			t.Fatalf("a Poll with nothing written yielded first (%d -> %d)", y, a.firstYields)
		}
		i++
		a.afterWrite, a.ahead = 0, false // the next Poll is no probe
		if _, c := a.Send(p, h, [][]byte{pattern(8, byte(i))}, transport.Op(i)); c != transport.OK {
			t.Fatalf("Send %d: %d", i, c)
		}
		parked := a.parked.Load()
		a.Poll(as)
		a.Poll(as)
		if !parked {
			continue // handed back meanwhile (gnet had tasks): again
		}
		if a.firstYields != y+1 {
			t.Fatalf("two Polls after one write: first yields %d -> %d, want one", y, a.firstYields)
		}
		pollUntil(t, "the last message", func() bool { return len(bs.arrivals) == i }, a, as, b, bs)
		return
	}
}

// A Poll after a write that probes (reads first) and finds the peer's
// message already there reads first after the following writes too, with
// no yield first; once such a read finds nothing, the next one yields
// first again. With places exchanged, a look that found b polling on
// another CPU than a (the goroutine polling both had moved between them)
// made a read first (apart) where the test wants a yield: one run in
// ~100 of the net package under -race at load 17-23.
func TestOwnerPoll_ReadsFirstWhileThePeerIsAhead(t *testing.T) {
	a := listen(t, Config{Host: NoHost})
	b := listen(t, Config{Host: NoHost})
	as, bs := newSink(), newSink()
	pa, _ := a.Resolve(b.Name())
	pb, _ := b.Resolve(a.Name())
	h := &transport.Header{Kind: transport.KindMsg, Len: 8}
	deadline := time.Now().Add(20 * time.Second)
	sends := 0
	send := func(x *Transport, p transport.Peer) {
		sends++
		if _, c := x.Send(p, h, [][]byte{pattern(8, byte(sends))}, transport.Op(sends)); c != transport.OK {
			t.Fatalf("Send %d: %d", sends, c)
		}
	}
	// exchange: b's message goes out (over loopback it is in a's socket
	// when writev returns), then a's; a then Polls once.
	exchange := func() (yielded, gotB bool) {
		n := len(as.arrivals)
		send(b, pb)
		send(a, pa)
		if !a.wrote.Load() {
			return false, false // not written whole: the round starts again
		}
		y := a.firstYields
		a.Poll(as)
		return a.firstYields != y, len(as.arrivals) > n
	}
	for round := 0; ; round++ {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: a never kept its borrowed loop through a round (%d rounds)", round)
		}
		// Both connections up, everything delivered, a's loop borrowed.
		for len(as.arrivals) < sends/2 || len(bs.arrivals) < sends/2 || !a.parked.Load() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for the messages and a's borrowed loop")
			}
			a.Poll(as)
			b.Poll(bs)
		}
		a.Poll(as) // takes any write flag left
		a.afterWrite, a.ahead = probeEvery-1, false
		yielded, got := exchange() // the probe: read first
		if !a.parked.Load() {
			continue
		}
		if yielded || !got {
			if !got {
				continue // b's message was not in the socket yet: again
			}
			t.Fatalf("the probe yielded first")
		}
		if !a.ahead {
			t.Fatal("a probe that found the peer's message did not set ahead")
		}
		yielded, got = exchange() // ahead: read first again
		if !a.parked.Load() || !got {
			continue
		}
		if yielded {
			t.Fatal("a Poll after a write yielded first while the peer was ahead")
		}
		send(a, pa) // nothing from b: this read-first finds nothing
		w := a.wrote.Load()
		a.Poll(as)
		if !a.parked.Load() || !w {
			continue
		}
		if a.ahead {
			t.Fatal("a read first that found nothing left ahead set")
		}
		y := a.firstYields
		send(a, pa)
		w = a.wrote.Load()
		a.Poll(as)
		if !a.parked.Load() || !w {
			continue
		}
		if a.firstYields != y+1 {
			t.Fatalf("after a read first that found nothing, the next Poll after a write: first yields %d -> %d, want one", y, a.firstYields)
		}
		return
	}
}
