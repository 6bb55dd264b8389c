package net

import (
	"context"
	"errors"
	"io"
	stdnet "net"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/rma"
)

// Owner polling: the latency design.
//
// Measured on this 2-vCPU machine (two processes, 8 B ping-pong, medians):
// with the gnet loop reading every socket, a one-way trip costs a wake-up
// of the receiver's loop thread out of epoll_wait (and, when the engine
// sleeps in Wait, a second one for the engine): 10.2 us when both engines
// busy-poll (p99 in milliseconds: the spinning engines starve the loop
// threads), 17.5 us when they spin 50 us then Wait, 18.9 us sleeping at
// once. Go's net does 10.3 us. Writing from Send directly to the socket
// already removed the loop from the send side.
//
// Final run (BenchmarkTCPPingPong2P, -count 3, medians of the p50s, the
// machine shared with other jobs): busy-polling as fi_pingpong does, 8 B
// owner polling 8.85 us, loop only 10.1 us, Go net 8.6 us; 4 KiB 9.4 /
// 10.8 / 10.5 us; but p99 is milliseconds and 1 MiB collapses (the
// spinning engines starve the loop and flusher threads). Spinning 50 us
// then Wait: 8 B 18.2 / 20.8 / 10.5 us, 4 KiB 19.2 / 28.4 / 10.4 us,
// 1 MiB 351 / 374 / 181 us per one-way (2.4 / 2.6 / 4.9 GB/s).
//
// To remove it from the receive side too, an engine that keeps polling
// borrows the loop: after a run of empty Polls it queues a task on the
// gnet loop (EventLoop.Execute) that parks the loop goroutine on a channel.
// While parked, gnet runs no callback for this endpoint, so Poll may read
// the sockets itself (non-blocking read, then the same decoder and ring as
// the loop) with no thread hand-off at all, as libfabric's tcp progress
// does. Poll hands the loop back when a connection fails, when Send starts
// a dial, and before Wait sleeps; the loop is not borrowed while a
// connection is in its handshake (only the loop reads those).
//
// Handing the loop back is what made the mean latency bad: the loop
// thread must then be scheduled to read every inbound frame, and on a
// machine whose cores are busy with spinning pollers that thread waits
// for a CPU for up to milliseconds (a scheduler slice), once per
// hand-back. Handing it back every millisecond (so that gnet could run
// accepted connections' registrations, dials' enrolments and closes)
// cost 158 us of mean per transfer at 8 B. Instead the parked task
// wakes every parkTick and, with own held so Poll is not reading, queues
// a fresh parking task and returns: gnet then runs every task queued
// behind the old one (they are in the same queue, in order) and parks
// again in the same batch, without going back to epoll_wait. A new
// connection's OnOpen then marks a handshake pending, and the new
// parking task steps aside until it completes. Queuing a park costs one
// small allocation inside gnet (EventLoop.Execute wraps the Runnable in a
// closure): once per tick and once per Wait that released the loop, never
// per message. When Poll was not called for parkIdleTicks ticks in a row
// the tick hands the loop back instead (the application stopped polling
// without Wait, say to compute): the loop then reads the sockets at once
// again, so one-sided requests to an application that polled once are
// not served once per tick.
//
// Every tick wakes a thread, which on a 2-vCPU host whose CPUs both run
// spinning pollers takes one of them for its turn: an engine spinning on
// an idle endpoint for 3 s made ~4000 futex calls and 13 000 context
// switches with a 1 ms tick against ~500 and 3 000 with 10 ms. Only
// accepted connections wait for the tick (dials, closes and Wait hand
// the loop back themselves), so the tick is 10 ms: a new peer's first
// message to an endpoint whose loop is borrowed waits up to that long.
// The happens-before edges
// are the state mutex and the release channel; the own mutex keeps a
// Wait on another goroutine from releasing the loop in the middle of
// Poll's reads.
const (
	parkAfter = 32 // empty Polls before the loop is borrowed
	// loopGosched: while a handshake is in progress, or a park was
	// requested and the loop has not taken it, every loopGosched-th empty
	// Poll calls runtime.Gosched (see "The loop needs a P" below).
	loopGosched = 8
	parkTick    = 10 * time.Millisecond // how often a parked loop runs its queued tasks
	// parkIdleTicks is how many ticks without a Poll hand the loop back.
	parkIdleTicks = 2
	ownRead       = 64 << 10
	// parkEnrollMax bounds Listen's wait for its own loop to enroll the
	// park socket (startPark) when DialTimeout is shorter: that wait has
	// no peer in it, only this process's scheduling, and a crowded host
	// (GOMAXPROCS=1, load 14) took over 200 ms.
	parkEnrollMax = 20 * time.Second
)

// The loop needs a P.
//
// A busy-polling application goroutine never enters the Go scheduler:
// Poll's system calls are raw, and its yields (sched_yield) reach the
// kernel's scheduler, not Go's. With GOMAXPROCS 2 on a 2-CPU host, the
// other P is often held by a goroutine blocked in a system call made
// through entersyscall: gnet's acceptor loop in epoll_wait, the
// responder of the placement probe in futex(2) (distance.go), the
// connections' loop itself in epoll_wait. Such a P is taken back only by
// the runtime's monitor (sysmon), which in a spinning program sleeps
// 10 ms between looks (its sleep doubles up to 10 ms while it takes no P
// back). The connections' loop, runnable again after its epoll_wait or
// its runtime.Gosched (gnet's poller calls it when a poll found
// nothing), then waited in the global run queue up to 15 ms, and the
// application polled all that time for what only the loop could do: a
// handshake (only the loop reads those), taking a requested park.
// perftest pingpong -S 64k -I 500 (runtime/trace of both processes: sched
// latency 12.5-15 ms on gnet's Gosched, the spinning goroutine preempted
// by sysmon after 10-15 ms): the first round trip, which is also the
// connection's handshake, took 1-20 ms, +2-40 us on the 500-iteration
// mean. So while a handshake is in progress, or a park was requested and
// the loop has not taken it, Poll lets the Go scheduler run every
// loopGosched-th empty Poll. Not at every empty Poll with the loop not
// parked: the loop, given the P, blocked in epoll_wait holding it until
// the next message, the application took that message and its next 8
// empty Polls and yielded again, never reaching the parkAfter empty
// Polls that request a park, and the pair ran through the loop for the
// first 100-200 messages (early round trips 57-217 us against 25-30).
// And the responder starts with the transport (Listen), not with the
// first same-host handshake, where its first futex wait held a P during
// the first round trip (with the Gosched alone the first round trip
// still took 15-18 ms in 3 of 6 rounds). Alternated with the code before
// (64 KiB x 500 ping-pong, far, load 19-22, 6 rounds, medians): 39.8 ->
// 23.6 us per transfer, first round trip/2 0.5-10.2 ms -> 0.5-1.4 ms;
// Go net 20.7.

const (
	parkIdle = iota
	parkRequested
	parkHeld
)

// connSrc is what the decoder reads from: bytes Poll read itself while it
// owned the loop (pre, always older) and then gnet's inbound buffer.
type connSrc struct {
	tc *tconn
	gc gnet.Conn
}

func (s *connSrc) InboundBuffered() int {
	n := len(s.tc.pre)
	if s.gc != nil {
		n += s.gc.InboundBuffered()
	}
	return n
}

func (s *connSrc) Read(p []byte) (int, error) {
	if len(s.tc.pre) > 0 {
		n := copy(p, s.tc.pre)
		s.tc.pre = s.tc.pre[n:]
		return n, nil
	}
	if s.gc == nil {
		return 0, nil
	}
	return s.gc.Read(p)
}

// requestPark queues the parking task (engine's goroutine).
func (t *Transport) requestPark() {
	el := t.loopOf()
	if el == nil || t.handshakes.Load() != 0 {
		return
	}
	t.pmu.Lock()
	if t.pstate != parkIdle || t.closing.Load() {
		t.pmu.Unlock()
		return
	}
	t.pstate = parkRequested
	t.pmu.Unlock()
	t.queuePark(el)
}

// queuePark has the loop run parkTask; pstate is parkRequested. With the
// park socket (startPark) that is one byte written to it: the loop reads
// it and calls OnTraffic, which parks, without allocating. Before it is
// enrolled, a task is queued (gnet's Execute allocates a closure and a
// queue node).
func (t *Transport) queuePark(el gnet.EventLoop) {
	if t.pokePark() || el.Execute(context.Background(), t.parkFn) == nil {
		return
	}
	t.pmu.Lock()
	if t.pstate == parkRequested {
		t.pstate = parkIdle
	}
	t.pmu.Unlock()
}

// pokePark writes a byte to the park socket; false when there is none.
func (t *Transport) pokePark() bool {
	t.pmu.Lock() // Close closes parkW under it
	defer t.pmu.Unlock()
	if t.parkW < 0 {
		return false
	}
	one := [1]byte{1}
	n, err := unix.Write(t.parkW, one[:])
	return n == 1 || err == unix.EAGAIN // EAGAIN: unread bytes wake the loop anyway
}

// evLoop boxes the gnet event loop for an atomic.Pointer (an
// atomic.Value holding the interface would need a type assertion, and
// its first run an itab allocation, on the path that parks).
type evLoop struct{ el gnet.EventLoop }

// loopOf returns the event loop, or nil before a connection opened.
func (t *Transport) loopOf() gnet.EventLoop {
	if b := t.el.Load(); b != nil {
		return b.el
	}
	return nil
}

// parkMark is the context of the park socket's gnet connection.
type parkMark struct{}

// startPark enrolls one end of a socket pair in the gnet loop: a byte
// written to the other end (parkW) makes the loop call OnTraffic for it,
// which runs parkTask. Parking and re-parking every tick then cost a
// write instead of an allocating Execute.
func (t *Transport) startPark() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fds[0]), "gofi-park")
	nc, err := stdnet.FileConn(f) // a dup; gnet dups it again and closes nc
	f.Close()
	if err != nil {
		unix.Close(fds[1])
		return err
	}
	ctx := gnet.NewNetConnContext(gnet.NewContext(context.Background(), parkMark{}), nc)
	ch, err := t.eng.Register(ctx)
	if err != nil {
		nc.Close()
		unix.Close(fds[1])
		return err
	}
	select {
	case res := <-ch:
		if res.Err != nil {
			unix.Close(fds[1])
			return res.Err
		}
	case <-time.After(max(t.cfg.DialTimeout, parkEnrollMax)):
		unix.Close(fds[1])
		return errors.New("net: the event loop did not enroll the park socket")
	}
	t.parkW = fds[1]
	return nil
}

// parkTask runs on the gnet loop and blocks it until released. Every
// parkTick it lets the loop run the tasks queued behind it (see above).
func (t *Transport) parkTask(context.Context) error {
	t.pmu.Lock()
	if t.pstate != parkRequested || t.sleeping.Load() != 0 || t.closing.Load() ||
		t.handshakes.Load() != 0 {
		t.pstate = parkIdle
		t.pmu.Unlock()
		return nil
	}
	t.pstate = parkHeld
	t.parks.Add(1)
	t.parked.Store(true)
	t.pmu.Unlock()
	t.epollOffAll(&t.parkConns)
	defer t.epollOn()
	for {
		t.ptimer.Reset(parkTick)
		select {
		case <-t.pch:
			t.ptimer.Stop()
			return nil
		case <-t.ptimer.C:
		}
		el := t.loopOf()
		t.own.Lock()
		t.pmu.Lock()
		if t.pstate != parkHeld { // released meanwhile: its token is in pch
			t.pmu.Unlock()
			t.own.Unlock()
			<-t.pch
			return nil
		}
		t.ticks.Add(1)
		t.parked.Store(false)
		if t.ownPolls != t.tickPolls {
			t.idleTicks = 0
		} else if t.idleTicks++; t.idleTicks >= parkIdleTicks {
			// Poll was not called for parkIdleTicks ticks: the
			// application stopped polling without Wait. Hand the loop back for good,
			// so that messages and one-sided requests are read by the
			// loop at once rather than once per tick.
			t.pstate = parkIdle
			t.idleTicks = 0
			t.idled.Add(1)
			t.pmu.Unlock()
			t.own.Unlock()
			return nil
		}
		t.tickPolls = t.ownPolls
		t.pstate = parkRequested
		t.pmu.Unlock()
		t.queuePark(el)
		t.own.Unlock()
		return nil
	}
}

// release hands the loop back (or cancels a pending park). Callers hold own.
func (t *Transport) releaseLocked() {
	t.pmu.Lock()
	switch t.pstate {
	case parkRequested:
		t.pstate = parkIdle
	case parkHeld:
		t.pstate = parkIdle
		t.parked.Store(false)
		t.pch <- struct{}{} // buffered: the parked task is its only reader
	}
	t.pmu.Unlock()
	t.wantRelease.Store(false)
}

func (t *Transport) release() {
	if t.pstateHint() {
		t.own.Lock()
		t.releaseLocked()
		t.own.Unlock()
	}
}

// parkPending reports whether a park was requested and the loop has not
// taken it yet.
func (t *Transport) parkPending() bool {
	t.pmu.Lock()
	s := t.pstate
	t.pmu.Unlock()
	return s == parkRequested
}

// pstateHint reports whether a park may be requested or held.
func (t *Transport) pstateHint() bool {
	t.pmu.Lock()
	s := t.pstate
	t.pmu.Unlock()
	return s != parkIdle
}

// ownerPoll reads and decodes every attached socket while the loop is
// parked. It returns whether bytes arrived. own is held.
func (t *Transport) ownerPoll() bool {
	if !t.parked.Load() {
		return false
	}
	if t.wantRelease.Load() {
		t.releaseLocked()
		return false
	}
	if f := t.gtasks.Load(); f != nil && atomic.LoadInt32(f) != 0 {
		// gnet has tasks queued for the parked loop: most likely an
		// accepted connection to register (the acceptor runs on a loop
		// of its own), whose handshake only the loop reads. Waiting for
		// the parked loop's tick cost a new peer's first message up to
		// parkTick on each side: the first round trip of a busy-polling
		// ping-pong took 24 ms, 28 us per transfer of a 500-iteration
		// 64 KiB run. Hand the loop back; Poll borrows it again once the
		// handshake is done.
		t.handbacks.Add(1)
		t.releaseLocked()
		t.handedBack = true
		return false
	}
	t.mu.Lock()
	t.owned = append(t.owned[:0], t.fdv...)
	t.mu.Unlock()
	got := false
	for i, tc := range t.owned {
		t.owned[i] = nil
		if tc.dead || tc.gc == nil {
			continue
		}
		if tc.outq.Load() {
			tc.ownerFlush()
		}
		if n := tc.gc.InboundBuffered(); n > 0 { // keep byte order: gnet's older bytes first
			tc.reservePre(n)
			k, _ := tc.gc.Read(tc.pre[len(tc.pre):cap(tc.pre)][:n])
			tc.pre = tc.pre[:len(tc.pre)+k]
		}
		if !t.ownerConn(tc) {
			continue
		}
		got = true
	}
	if t.lis.committed {
		t.lis.committed = false
		t.ho.publish()
	}
	return got
}

// reservePre makes room for n more bytes in pre, moving unread bytes to
// the front of its buffer first.
func (tc *tconn) reservePre(n int) {
	if cap(tc.pre)-len(tc.pre) >= n {
		return
	}
	if len(tc.pbuf) < len(tc.pre)+n {
		nb := make([]byte, max(2*len(tc.pbuf), len(tc.pre)+n, 2*ownRead))
		tc.pbuf = nb
	}
	m := copy(tc.pbuf, tc.pre)
	tc.pre = tc.pbuf[:m]
}

// ownerConn reads tc until the socket is empty (or a bounded number of
// reads), decoding after each read so pre stays small, and after the last
// one too: bytes left undecoded in pre would wait for the socket's next
// bytes once the loop is handed back (gnet calls OnTraffic only for new
// bytes), and a peer waiting for our reply never sends them. It returns
// whether bytes arrived.
//
// Reading a rendezvous payload straight from the socket into the Fetch
// destination (no pre, no copy), when the decoder is inside a DATA frame
// and nothing is buffered, was measured and dropped: on this 2-vCPU
// machine, 1 MiB ping-pong (perftest latency -p tcp, 7 alternating runs of
// 3000, medians of p50) took 207 us with reads as large as the rest of the
// frame and 200 us with 64 KiB reads, against 192 us reading into pre
// (up to 128 KiB) and copying. The copy out of pre (an L2-hot buffer) is
// cheaper than what a long read costs the sender: the receiver holds the
// socket lock while the kernel copies into a cold destination, and the
// sender's segments wait in the backlog meanwhile. Re-measured with
// readDirect (a readv into the destination and pre behind it) on a loaded
// machine (load 20-28, 2 rounds x 4 variants of 2000 round trips, p50):
// 1 MiB 425-482 us direct in 256 KiB reads, 423-466 in 64 KiB, 396-404
// in 16 KiB, 448-487 in one read, against 300-372 us through pre. So a
// rendezvous payload still goes through pre; a pushed one (at most
// PushMax), whose receive was matched when its header came, is read
// straight into it (readDirect): that is where the copy is saved.
func (t *Transport) ownerConn(tc *tconn) bool { return t.readConn(tc, true) }

// readConn is ownerConn for Poll (owner) or for the loop's spin
// (spin.go): the loop decodes as in OnTraffic, into the handoff ring.
func (t *Transport) readConn(tc *tconn, owner bool) bool {
	decode := func(tc *tconn) bool {
		if owner {
			return t.ownerDecode(tc)
		}
		return t.loopDecode(tc)
	}
	got := false
	// A frame may wait with nothing buffered behind it (a zero-length
	// frame the ring had no room for): decode before reading too.
	if (len(tc.pre) > 0 || tc.dec.have) && !decode(tc) {
		return got
	}
	for r := 0; r < 16; r++ {
		var n int
		var err error
		drained := false
		switch {
		case owner && len(tc.pre) == 0 && tc.dec.dataLeft() > 0 && tc.cur != nil && tc.cur.push:
			tc.reservePre(ownRead)
			n, drained, err = tc.readDirect()
		case len(tc.pre) == 0 && tc.dec.rmaLeft() > 0:
			// Inside an RMA write's payload: straight into the region.
			var ok bool
			if n, ok, err = tc.readRMADirect(); !ok {
				n, drained, err = tc.spinRead()
			}
		case tc.lastWrite && len(tc.pre) == 0 && !tc.dec.have:
			// After a large RMA write the next frame is likely one
			// too: read its header and a one-range request header
			// alone, so that its payload goes straight into the
			// region (the socket held nothing more when the last
			// payload's read took the headers behind it).
			k := hdrSize + rma.ReqHeader + rma.IOVSize
			tc.reservePre(k)
			n, err = sysRead(tc.fd, tc.pre[:k])
			if n > 0 {
				tc.pre = tc.pre[:n]
				drained = n < k
			}
		case tc.dec.rmaHeadLeft() > len(tc.pre):
			// Inside an RMA request's header: read the rest of it
			// alone, so that a write's payload behind it goes
			// straight into the region (the case above) instead of
			// through pre and a copy (a 64 KiB read at the start of
			// every large write).
			k := tc.dec.rmaHeadLeft() - len(tc.pre)
			tc.reservePre(k)
			n, err = sysRead(tc.fd, tc.pre[len(tc.pre):len(tc.pre)+k])
			if n > 0 {
				tc.pre = tc.pre[:len(tc.pre)+n]
				drained = n < k
			}
		case owner && tc.lastPush && len(tc.pre) == 0 && !tc.dec.have:
			// After a push the next frame is likely one too: read its
			// header (and no more than another header's worth) alone,
			// so that its payload can go straight into the receive it
			// matches instead of through pre (a 64 KiB push whose first
			// read took all of it was copied twice). Two headers: a
			// CREDIT frame riding in front of the push (writeDirect) is
			// read with its header.
			tc.reservePre(ownRead)
			n, err = sysRead(tc.fd, tc.pre[:2*hdrSize])
			if n > 0 {
				tc.pre = tc.pre[:n]
				drained = n < 2*hdrSize
			}
		default:
			n, drained, err = tc.spinRead()
		}
		switch {
		case n > 0:
			got = true
			if !decode(tc) || drained {
				// drained: the read emptied the socket; the next poll
				// (or pass, or OnTraffic) reads what comes later. This
				// saves an EAGAIN read per small message on each side.
				return got
			}
			continue
		case err == unix.EAGAIN || err == unix.EINTR:
		default:
			if err == nil {
				err = io.EOF // the peer closed it in order (OnClose)
			}
			if owner {
				tc.fail(err)
			} else {
				tc.loopFail(err)
			}
		}
		return got
	}
	return got
}

// ownerDecode decodes what tc has buffered. It returns false when Poll must stop
// reading tc: the connection failed, or the handoff ring is full (tc is
// then listed as stalled and decoded again once the ring drains).
func (t *Transport) ownerDecode(tc *tconn) bool {
	tc.src.tc, tc.src.gc = tc, tc.gc
	tc.owner = true
	stalled, err := tc.dec.run(&tc.src, tc)
	t.flushAnswers()
	tc.owner = false
	if err != nil {
		tc.fail(err)
		return false
	}
	if stalled {
		t.listStalled(tc, false) // Poll itself drains them
		return false
	}
	return true
}

// listStalled lists tc as stalled (the handoff ring had no room for its
// next frame) once; progress decodes it again when the ring drains. notify
// wakes a sleeping engine to drain it.
func (t *Transport) listStalled(tc *tconn, notify bool) {
	if tc.stalled.Swap(true) {
		return
	}
	t.mu.Lock()
	t.stalled = append(t.stalled, tc)
	t.nStall.Store(int32(len(t.stalled)))
	t.mu.Unlock()
	if notify {
		t.notify()
	}
}

// fail gives up on a connection Poll was reading while it owned the loop;
// gnet closes it once it has the loop back.
func (tc *tconn) fail(err error) {
	tc.dead = true
	tc.closeReason(err)
	_ = tc.gc.Close()
	tc.t.wantRelease.Store(true)
}

// directChunk bounds one direct read of a pushed payload (see readDirect).
const directChunk = 256 << 10

// readDirect reads the rest of the DATA frame the decoder is inside
// straight from the socket into the Fetch destination, with the bytes
// behind it (the next frames) going to pre in the same readv. pre is
// empty. Without a live fetch slot (torn down) it reads into pre and the
// decoder discards. It returns the bytes read, and drained when the read
// ended the payload and emptied the socket: the caller then stops reading
// it (the next frame is not there; a read would only say EAGAIN, before
// the completion is handed over).
func (tc *tconn) readDirect() (int, bool, error) {
	p := tc.peer
	p.mu.Lock()
	defer p.mu.Unlock()
	s := tc.cur
	if s == nil || p.fetches.get(tc.curID) != s {
		n, err := sysRead(tc.fd, tc.pre[len(tc.pre):cap(tc.pre)])
		if n > 0 {
			tc.pre = tc.pre[:len(tc.pre)+n]
		}
		return n, false, err
	}
	want := min(tc.dec.dataLeft(), uint64(directChunk))
	iov := tc.riov[:0]
	seg, off := tc.curSeg, tc.curOff
	for want > 0 && seg < len(s.dst) && len(iov) < len(tc.riov)-1 {
		b := s.dst[seg][off:]
		if len(b) == 0 {
			seg, off = seg+1, 0
			continue
		}
		k := int(min(uint64(len(b)), want))
		iov = append(iov, iovec(b[:k]))
		want -= uint64(k)
		off += k
	}
	data := 0
	for _, v := range iov {
		data += int(v.Len)
	}
	// Behind the payload: the next frames, or at most two headers when
	// the payload ends in this read (it is likely another push's; see
	// readConn).
	tail := tc.pre[len(tc.pre):cap(tc.pre)]
	if data == int(tc.dec.dataLeft()) {
		tail = tail[:2*hdrSize]
	}
	iov = append(iov, iovec(tail))
	n, err := readv(tc.fd, iov)
	clear(tc.riov[:])
	if n <= 0 {
		return n, false, err
	}
	drained := n >= data && n < data+len(tail)
	d := min(n, data)
	tc.pre = tc.pre[:len(tc.pre)+n-d]
	s.got += uint64(d)
	tc.dec.tookData(uint64(d))
	for d > 0 { // advance the destination cursor
		b := len(s.dst[tc.curSeg]) - tc.curOff
		if b == 0 {
			tc.curSeg, tc.curOff = tc.curSeg+1, 0
			continue
		}
		k := min(b, d)
		tc.curOff += k
		d -= k
	}
	return n, drained, nil
}

// readv reads into iovs without allocating.
func readv(fd int, iovs []unix.Iovec) (int, error) {
	for {
		r, _, e := unix.Syscall(unix.SYS_READV, uintptr(fd), uintptr(unsafe.Pointer(&iovs[0])), uintptr(len(iovs)))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(r), nil
	}
}

// ownerFlush writes what tc's send queue holds, as the flusher would once
// the socket is writable: a spinning Poll gets the bytes out without
// waiting for the flusher's thread to be woken and scheduled.
func (tc *tconn) ownerFlush() {
	p := tc.peer
	if p == nil {
		return
	}
	p.mu.Lock()
	if tc.ready && !tc.closed && tc.qh < len(tc.q) {
		if err := p.flushLocked(tc); err != nil {
			p.breakLocked(tc, err)
		}
	}
	p.mu.Unlock()
}
