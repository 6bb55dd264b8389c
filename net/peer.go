package net

import (
	"bytes"
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/transport"
)

// peer is one remote endpoint, identified by its listening address. Its
// mutex guards the fields below it and every write to its connections'
// sockets and send queues; it is taken before Transport.mu.
type peer struct {
	t    *Transport
	idx  transport.Peer
	ap   netip.AddrPort
	addr []byte

	mu         sync.Mutex
	tx         *tconn   // the connection this side sends on
	conns      []*tconn // attached connections (tx and any inbound ones)
	instance   uint64   // the peer's instance id, 0 until a handshake
	peerWindow int64    // the peer's receive window
	epoch      uint32   // bumped whenever the peer is torn down
	credit     int64    // bytes of EAGER/RTS frames we may still send
	recvUsed   int64    // bytes received and not yet credited back
	owed       int64    // bytes accepted by the engine, credit not yet sent
	sends      slots[sendSlot]
	fetches    slots[fetchSlot]

	held []*[]byte // engine's goroutine only: refused records, in order

	rmaFree []*rmaOp // RMA operation records for reuse (rma.go), under mu
	// rmaOut is the answer bytes this side's RMA requests in flight may
	// bring back (rmaAnswerWindow bounds it; rma.go). Under mu.
	rmaOut uint64

	// Same-host peers (place.go): local (under mu) once listed in
	// Transport.local; place its last stamp; outranks: it stays rather
	// than this side when both poll from their applications; loopStamps:
	// its HELLO said it marks stamps of its loop's spin (placeLoop), and
	// it moves off a CPU such a stamp of ours names; otherGroup: it runs
	// in another scheduling group than this process (otherGroup in
	// place.go), so a yield of ours never hands it our CPU.
	local      bool
	place      atomic.Uint32
	outranks   atomic.Bool
	loopStamps atomic.Bool
	otherGroup atomic.Bool
}

func newPeer(t *Transport, idx transport.Peer, ap netip.AddrPort) *peer {
	p := &peer{t: t, idx: idx, ap: ap, addr: encodeSockaddr(ap), credit: minWindow}
	p.sends.init(slotsAtStart)
	p.fetches.init(slotsAtStart)
	return p
}

// slotsAtStart is how many rendezvous sends and fetches (pushes included)
// a peer's tables hold from the start: the first large messages to or
// from a peer allocate nothing.
const slotsAtStart = 8

// sendSlot is a rendezvous send waiting for clear-to-send.
type sendSlot struct {
	gen    uint16
	used   bool
	op     transport.Op
	length uint64
	iov    [][]byte
}

// fetchSlot is a Fetch waiting for its DATA frame, one request of an RMA
// operation waiting for its answer (rop set; rma.go), or a pushed message
// being received (push set; push.go).
type fetchSlot struct {
	gen  uint16
	used bool
	op   transport.Op
	cap  uint64   // bytes the DATA frame may carry; a push's payload length
	got  uint64   // bytes written to dst
	dst  [][]byte // where the payload goes
	rop  *rmaOp

	// pushes only
	push  bool
	mode  uint8    // pushPending, pushDirect, pushBuffered, pushDiscard
	hasOp bool     // the engine fetched it (op is valid)
	done  bool     // the whole payload was read
	epoch uint32   // the peer's epoch the push came in
	buf   *[]byte  // pushBuffered: the payload's buffer
	user  [][]byte // pushBuffered: the engine's destination, once fetched
}

type slot interface{ sendSlot | fetchSlot }

// slots is a table of pending operations named on the wire by a 32-bit
// cookie: generation << 16 | index. Freed entries are reused without
// allocating.
type slots[T slot] struct {
	s    []*T
	free []uint16
}

// init fills the table with n free entries, each with room for a few
// buffers, handed out lowest index first.
func (s *slots[T]) init(n int) {
	s.s = make([]*T, n, n*2)
	s.free = make([]uint16, n, n*2)
	for i := range s.s {
		e := new(T)
		switch v := any(e).(type) {
		case *sendSlot:
			v.iov = make([][]byte, 0, 4)
		case *fetchSlot:
			v.dst = make([][]byte, 0, 4)
			v.user = make([][]byte, 0, 4)
		}
		s.s[i] = e
		s.free[n-1-i] = uint16(i)
	}
}

func (s *slots[T]) alloc() (*T, uint32) {
	var i int
	if n := len(s.free); n > 0 {
		i = int(s.free[n-1])
		s.free = s.free[:n-1]
	} else if len(s.s) < maxPendingOps {
		i = len(s.s)
		s.s = append(s.s, new(T))
	} else {
		return nil, 0
	}
	e := s.s[i]
	var gen uint16
	switch v := any(e).(type) {
	case *sendSlot:
		v.gen++
		v.used = true
		gen = v.gen
	case *fetchSlot:
		v.gen++
		v.used = true
		gen = v.gen
	}
	return e, uint32(gen)<<16 | uint32(i)
}

func (s *slots[T]) get(cookie uint32) *T {
	i := int(cookie & 0xffff)
	if i >= len(s.s) {
		return nil
	}
	e := s.s[i]
	var gen uint16
	var used bool
	switch v := any(e).(type) {
	case *sendSlot:
		gen, used = v.gen, v.used
	case *fetchSlot:
		gen, used = v.gen, v.used
	}
	if !used || gen != uint16(cookie>>16) {
		return nil
	}
	return e
}

func (s *slots[T]) put(cookie uint32) {
	i := int(cookie & 0xffff)
	switch v := any(s.s[i]).(type) {
	case *sendSlot:
		v.used = false
		clear(v.iov)
		v.iov = v.iov[:0]
	case *fetchSlot:
		v.used = false
		v.rop = nil
		clear(v.dst)
		v.dst = v.dst[:0]
		v.push, v.mode, v.hasOp, v.done, v.buf = false, 0, false, false, nil
	}
	s.free = append(s.free, uint16(i))
}

// each calls fn for every pending entry with its cookie.
func (s *slots[T]) each(fn func(*T, uint32)) {
	for i, e := range s.s {
		switch v := any(e).(type) {
		case *sendSlot:
			if v.used {
				fn(e, uint32(v.gen)<<16|uint32(i))
			}
		case *fetchSlot:
			if v.used {
				fn(e, uint32(v.gen)<<16|uint32(i))
			}
		}
	}
}

func iovLen(iov [][]byte) uint64 {
	var n uint64
	for _, b := range iov {
		n += uint64(len(b))
	}
	return n
}

// Send starts a message to peer pi. Results:
//
//	(true, OK)       written to the socket; the buffers are free again
//	(false, OK)      pending; SendDone(op, code) follows (rendezvous, the
//	                 bytes were copied into the send queue, or earlier
//	                 completions are still waiting for Poll: completions
//	                 come in send order)
//	(false, EAgain)  no credit or queue space now; nothing was sent
//	(true, code)     failed at once (EInval, ECanceled, a socket error)
func (t *Transport) Send(pi transport.Peer, hdr *transport.Header, iov [][]byte, op transport.Op) (bool, transport.Code) {
	p := t.peer(pi)
	if p == nil || iovLen(iov) != hdr.Len || hdr.Len > maxMsgLen ||
		(!transport.ValidKind(hdr.Kind) && (hdr.Kind != transport.KindRMAData || hdr.Len != 0)) ||
		hdr.Flags&^transport.FlagRemoteData != 0 {
		return true, transport.EInval
	}
	if t.closed.Load() {
		return true, transport.ECanceled
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	tc := p.tx
	if tc == nil {
		tc = p.dialLocked()
	}
	eager := hdr.Len <= uint64(t.cfg.MaxEager)
	push := !eager && p.canPush(hdr.Len)
	if hdr.Len >= colocateMin {
		t.noteBig(hdr.Len)
	}
	cost := int64(hdrSize)
	f := frame{op: opRTS, flags: hdr.Flags, kind: uint8(hdr.Kind), group: hdr.Group, tag: hdr.Tag, data: hdr.Data, length: hdr.Len}
	if eager || push {
		f.op = opEager
		cost += int64(hdr.Len)
	}
	if push {
		f.op = opPush
	}
	if p.credit < cost {
		return false, transport.EAgain
	}
	direct := tc.ready && tc.qh == len(tc.q) && len(iov) < maxIOV
	if !direct && tc.queued+int(cost) > t.cfg.SendQueue {
		return false, transport.EAgain
	}
	if push {
		return t.sendPushLocked(p, tc, &f, iov, op, cost, direct)
	}
	if !eager {
		s, cookie := p.sends.alloc()
		if s == nil {
			return false, transport.EAgain
		}
		s.op, s.length = op, hdr.Len
		s.iov = append(s.iov[:0], iov...)
		f.cookie = uint64(cookie)
		iov = nil
	}
	p.credit -= cost
	tc.header(tc.hbuf[:], &f)
	if !direct {
		tc.enqueueCopy(tc.hbuf[:], iov, 0, op, eager)
		return false, transport.OK
	}
	n, err := tc.writeDirect(tc.hbuf[:], iov)
	switch {
	case err == nil && n == int(cost):
		if !eager {
			return false, transport.OK
		}
		// Earlier sends that went through the queue may have been written
		// with their SendDone still in t.done, waiting for Poll (pop pushes
		// it under p.mu before the queue looks empty, and Poll runs on
		// this goroutine, so t.done holds every undelivered one).
		// Completing this one now would overtake them; queue it behind.
		if t.nDone.Load() != 0 {
			t.push(event{kind: evSendDone, op: op})
			return false, transport.OK
		}
		return true, transport.OK
	case err == nil || err == unix.EAGAIN:
		tc.enqueueCopy(tc.hbuf[:], iov, n, op, eager)
		if err := t.fl.arm(tc); err != nil {
			p.breakLocked(tc, err)
		}
		return false, transport.OK
	default:
		p.breakLocked(tc, err)
		if eager {
			return true, codeOf(err)
		}
		return false, transport.OK // the slot fails with the connection
	}
}

// Fetch asks the sender of a rendezvous message for its payload.
func (t *Transport) Fetch(pi transport.Peer, cookie uint64, dst [][]byte, op transport.Op) (bool, int, transport.Code) {
	p := t.peer(pi)
	if p == nil {
		return true, 0, transport.EInval
	}
	if t.closed.Load() {
		return true, 0, transport.ECanceled
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	total := iovLen(dst)
	if cookie&pushBit != 0 { // the payload is here, or being read: no peer needed
		id := uint32(cookie &^ pushBit)
		s := p.fetches.get(id)
		if s == nil || !s.push || s.epoch != uint32(cookie>>32) {
			return true, 0, transport.EConnReset // the peer failed before all of it came
		}
		return p.fetchPushLocked(s, id, dst, total, op)
	}
	if uint32(cookie>>32) != p.epoch || p.tx == nil {
		return true, 0, transport.EConnReset
	}
	f := frame{op: opCTS, cookie: cookie & 0xffffffff}
	if total == 0 {
		p.controlLocked(&f)
		return true, 0, transport.OK
	}
	s, id := p.fetches.alloc()
	if s == nil {
		return false, 0, transport.EAgain
	}
	s.op, s.cap, s.got = op, total, 0
	s.dst = append(s.dst[:0], dst...)
	f.data, f.length = uint64(id), total
	p.controlLocked(&f)
	return false, 0, transport.OK
}

// Discard tells the sender of a rendezvous message to complete it unsent.
func (t *Transport) Discard(pi transport.Peer, cookie uint64) {
	p := t.peer(pi)
	if p == nil || t.closed.Load() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if cookie&pushBit != 0 {
		id := uint32(cookie &^ pushBit)
		if s := p.fetches.get(id); s != nil && s.push && s.epoch == uint32(cookie>>32) {
			p.discardPushLocked(s, id)
		}
		return
	}
	if uint32(cookie>>32) != p.epoch || p.tx == nil {
		return
	}
	f := frame{op: opCTS, flags: ctsDiscard, cookie: cookie & 0xffffffff}
	p.controlLocked(&f)
}

// controlLocked sends a header-only frame (CTS, CREDIT, RETIRE ack) on the
// tx connection. Control frames are bounded by the operations that cause
// them, so they bypass the high-water mark.
func (p *peer) controlLocked(f *frame) { p.controlOnLocked(p.tx, f) }

// controlOnLocked sends a header-only frame on tc, behind what is queued.
func (p *peer) controlOnLocked(tc *tconn, f *frame) {
	tc.header(tc.hbuf[:], f)
	if tc.ready && tc.qh == len(tc.q) {
		n, err := tc.writeDirect(tc.hbuf[:], nil)
		if err == nil && n == hdrSize {
			return
		}
		if err != nil && err != unix.EAGAIN {
			p.breakLocked(tc, err)
			return
		}
		tc.enqueueCopy(tc.hbuf[:], nil, n, 0, false)
		if err := p.t.fl.arm(tc); err != nil {
			p.breakLocked(tc, err)
		}
		return
	}
	tc.enqueueCopy(tc.hbuf[:], nil, 0, 0, false)
}

// sendDataLocked answers a clear-to-send: a DATA frame carrying want bytes
// of the send's buffers, written without copying; SendDone follows when
// the last byte is in the socket.
func (p *peer) sendDataLocked(s *sendSlot, fetchID uint64, want uint64) {
	tc := p.tx
	f := frame{op: opData, length: want, cookie: fetchID}
	tc.header(tc.hbuf[:], &f)
	iov := s.iov
	if want < s.length { // truncated receive: send a prefix
		iov = truncIOV(tc, s.iov, want)
	}
	if tc.ready && tc.qh == len(tc.q) && len(iov) < maxIOV {
		n, err := tc.writeDirect(tc.hbuf[:], iov)
		if err == nil && n == hdrSize+int(want) {
			p.t.push(event{kind: evSendDone, op: s.op})
			return
		}
		if err != nil && err != unix.EAGAIN {
			tc.enqueueRef(tc.hbuf[:], iov, 0, s.op)
			p.breakLocked(tc, err)
			return
		}
		tc.enqueueRef(tc.hbuf[:], iov, n, s.op)
		if err := p.t.fl.arm(tc); err != nil {
			p.breakLocked(tc, err)
		}
		return
	}
	tc.enqueueRef(tc.hbuf[:], iov, 0, s.op)
	if tc.ready && tc.qh < len(tc.q) && !tc.inEpoll {
		if err := p.flushLocked(tc); err != nil {
			p.breakLocked(tc, err)
		}
	}
}

func truncIOV(tc *tconn, iov [][]byte, want uint64) [][]byte {
	out := tc.trunc[:0]
	for _, b := range iov {
		if want == 0 {
			break
		}
		if uint64(len(b)) > want {
			b = b[:want]
		}
		out = append(out, b)
		want -= uint64(len(b))
	}
	tc.trunc = out
	return out
}

// returnCredit counts an accepted message and returns credit
// (creditLocked).
func (p *peer) returnCredit(epoch uint32, cost int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if epoch != p.epoch || p.tx == nil {
		return
	}
	p.creditLocked(int64(cost))
}

// creditLocked counts n bytes consumed and returns credit to the peer.
// The peer's mu is held.
//
// From a quarter of the window consumed, the credit rides in front of the
// next frame this side writes to the peer (writeDirect): in a ping-pong
// of 64 KiB pushes a CREDIT frame of its own, every fourth message, cost
// the receiver a writev before it could answer and the sender a read of
// its own (perf stat: writev per message 1.25 on each side). Only a side
// that sends the peer nothing while it consumed half the window writes
// one: the peer then still has half its window to send in, so it never
// waits for credit that is held back for a ride.
func (p *peer) creditLocked(n int64) {
	p.owed += n
	if p.owed < int64(p.t.cfg.Window)/2 {
		return
	}
	f := frame{op: opCredit, length: uint64(p.owed)}
	p.recvUsed -= p.owed
	p.owed = 0
	p.t.creditFrames.Add(1)
	p.controlLocked(&f)
}

// creditSoon is the credit owed from which it rides on the next write.
func (t *Transport) creditSoon() int64 { return int64(t.cfg.Window) / 4 }

// hold keeps a refused record (engine's goroutine only).
func (p *peer) hold(rec []byte) {
	b := heldPool.Get().(*[]byte)
	*b = append((*b)[:0], rec...)
	p.held = append(p.held, b)
}

var heldPool = sync.Pool{New: func() any { return new([]byte) }}

// breakLocked gives up on a connection after a write error: no more
// writes; gnet closes it and OnClose tears the peer down.
func (p *peer) breakLocked(tc *tconn, err error) {
	if !tc.ready {
		return
	}
	tc.ready = false
	tc.werr = err
	if tc.gc != nil {
		_ = tc.gc.Close()
	}
}

// teardownLocked fails everything owed by or to the peer with code, closes
// its connections except keep, and reports PeerDown after the failures.
// It ends an incarnation of the peer: credit, window, receive accounting
// and pending rendezvous start afresh, frames still queued on keep are
// failed, and the dropped connections are detached, so that bytes gnet
// still delivers from them before it closes them are refused (frame).
func (p *peer) teardownLocked(code transport.Code, keep *tconn) {
	t := p.t
	live := false
	drop := func(tc *tconn) {
		if tc == nil || tc == keep || tc.detached {
			return
		}
		live = true
		tc.detached = true
		tc.ready = false
		tc.closed = true
		tc.failQueue(code)
		t.fl.del(tc)
		t.mu.Lock()
		t.dropFDLocked(tc)
		t.mu.Unlock()
		if tc.gc != nil {
			_ = tc.gc.Close()
		}
	}
	drop(p.tx)
	for _, tc := range p.conns {
		drop(tc)
	}
	if keep != nil && keep.qh < len(keep.q) {
		// A dialed connection whose handshake met a new incarnation: what
		// was queued on it before was meant for the old one and paid for
		// with the old one's credit (reset below). Nothing of it has been
		// written (only ready connections write), and none of it may
		// reach the new incarnation.
		live = true
		keep.failQueue(code)
	}
	t.mu.Lock()
	p.sends.each(func(s *sendSlot, c uint32) {
		live = true
		t.pushLocked(event{kind: evSendDone, op: s.op, code: code})
		p.sends.put(c)
	})
	p.fetches.each(func(s *fetchSlot, c uint32) {
		if s.push && s.mode == pushBuffered && s.done && !s.hasOp {
			// A whole message waiting for the engine's Fetch: the bytes
			// are here, it outlives the connection (as an eager one
			// does in the engine's buffer). Fetch or Discard frees it.
			return
		}
		live = true
		if s.rop != nil {
			p.rmaFailLocked(s, c, code)
			return
		}
		if !s.push || (s.hasOp && !s.done) {
			t.pushLocked(event{kind: evFetchDone, op: s.op, code: code})
		}
		t.pbufs.put(s.buf)
		p.fetches.put(c)
	})
	p.rmaOut = 0 // every request failed above
	if live {
		// After the messages the loop handed over before it (deliverEvents).
		t.pushLocked(event{kind: evPeerDown, peer: p.idx, code: code, seq: t.ho.published.Load()})
	}
	t.mu.Unlock()
	clear(p.conns)
	p.conns = p.conns[:0]
	p.tx = nil
	if keep != nil {
		p.conns = append(p.conns, keep)
		p.tx = keep
	}
	p.epoch++
	p.instance = 0
	t.dropLocal(p)
	p.peerWindow = 0
	p.credit = minWindow
	p.recvUsed = 0
	p.owed = 0
	if live {
		t.notify()
	}
}

// Simultaneous connect. When both sides dial each other at once, each ends
// up with two connections to the other, sending on its own dial and
// receiving on both. They converge to one, the dial of the side whose
// (listening address, instance id) sorts first, without losing or
// reordering a frame:
//
//  1. The other side (the "loser") queues RETIRE on its dial, behind
//     everything it sent there, and switches its tx to the inbound
//     connection, gated: what it sends from now on is queued there, not
//     written.
//  2. The winner reads RETIRE after every earlier frame of that
//     connection (one byte stream), answers "RETIRE ack" on its own dial
//     (the surviving connection, which it always sent on) and closes the
//     retired one: the loser never writes on it again.
//  3. The loser reads the ack and opens the gate: the queued frames go out
//     on the surviving connection, all of them after the winner has read
//     the last frame of the retired one. Credit is per peer, not per
//     connection, so nothing in flight changes hands.
//
// The loser retires only when the winner's dial reached exactly the address
// the loser announces: then the winner files both connections under the
// same peer and can honour RETIRE. Otherwise (an endpoint reached through
// an address it does not announce) both connections stay, as before.

// rank compares this endpoint with peer p by (listening address, instance
// id): negative if this side's dial is the one to keep, 0 for a connection
// to itself.
func (t *Transport) rank(p *peer) int {
	pk := keyOf(p.ap)
	if c := bytes.Compare(t.nameKey[:], pk[:]); c != 0 {
		return c
	}
	return cmp.Compare(t.instance, p.instance)
}

// convergeLocked starts retiring our dial when the peer's dial is the one
// to keep (step 1). It runs whenever a connection attaches.
func (p *peer) convergeLocked() {
	tx := p.tx
	if tx == nil || !tx.dialed || !tx.ready || tx.retiring || p.t.rank(p) <= 0 {
		return
	}
	var in *tconn
	for _, tc := range p.conns {
		if !tc.dialed && tc.ready && tc.viaName && !tc.detached {
			in = tc
			break
		}
	}
	if in == nil {
		return
	}
	f := frame{op: opRetire}
	p.controlOnLocked(tx, &f)
	tx.retiring = true
	in.ready, in.gated = false, true
	p.tx = in
}

// retireReadLocked handles RETIRE on tc (step 2, on the winner).
func (p *peer) retireReadLocked(tc *tconn) error {
	tx := p.tx
	if tx == tc && tc.inherited {
		// The peer retired its dial while closing: our dial's EOF came
		// first and this connection took its place (closedInOrderLocked).
		// Its own EOF follows.
		return nil
	}
	if tc.dialed || tx == nil || tx == tc || !tx.dialed || tx.retiring || p.t.rank(p) >= 0 {
		return fmt.Errorf("%w: unexpected RETIRE", errProto)
	}
	f := frame{op: opRetire, flags: retireAck}
	p.controlLocked(&f)
	p.retireLocked(tc)
	if tc.gc != nil {
		_ = tc.gc.Close()
	}
	return nil
}

// retireAckedLocked handles the RETIRE ack on tc (step 3, on the loser).
func (p *peer) retireAckedLocked(tc *tconn) error {
	if p.tx != tc || !tc.gated {
		return fmt.Errorf("%w: unexpected RETIRE ack", errProto)
	}
	if tc.closed { // acked in the tail of a closed connection (closeTail)
		tc.gated = false
		return nil
	}
	tc.gated, tc.ready = false, true
	if tc.qh < len(tc.q) {
		if err := p.flushLocked(tc); err != nil {
			p.breakLocked(tc, err)
		}
	}
	return nil
}

// retireLocked forgets a retired connection without failing anything:
// nothing is owed on it any more. Bytes gnet may still deliver from it are
// refused (it is detached).
func (p *peer) retireLocked(tc *tconn) {
	p.detachLocked(tc)
	p.t.retired.Add(1)
}

// closedInOrderLocked handles the peer's orderly close (EOF) of tc while
// another of its connections to us is still attached, and reports whether
// it did; otherwise OnClose tears the peer down.
//
// A closing endpoint closes all its connections, and each one's EOF comes
// after every byte the peer wrote on it, but the EOFs of different
// connections come in no particular order: while two connections of a
// simultaneous connect were converging, the peer could write a message on
// its dial, see it complete, close, and this side read the EOF of its own
// dial first. Tearing the peer down then detached the other connection
// with the message still unread: a send the peer saw complete never
// arrived (TestTCPAcrossNetworkNamespaces, 1 run in 15). So tc alone is
// dropped here, as a retired one is, and the peer is torn down when its
// last connection closes, after everything it sent. A peer only closes a
// single connection by retiring it (convergeLocked), so nothing else is
// lost waiting: pending operations fail in that last teardown.
//
// When tc was the connection this side sends on, the other one takes its
// place; a retiring or gated one cannot (the loser's retired dial, which
// the winner never writes on past its HELLO: nothing is left unread
// there), and the peer is torn down at once as before.
func (p *peer) closedInOrderLocked(tc *tconn) bool {
	var next *tconn
	for _, o := range p.conns {
		if o != tc && !o.detached && !o.closed {
			next = o
			break
		}
	}
	if next == nil {
		return false
	}
	if p.tx == tc {
		if !next.ready || next.retiring || next.gated {
			return false
		}
		p.tx = next
		next.inherited = true
	}
	tc.cur = nil // a frame the peer's close cut short: its slot fails in the last teardown
	tc.failQueue(transport.EConnReset)
	p.detachLocked(tc)
	return true
}

// detachLocked forgets tc: it writes no more and bytes gnet may still
// deliver from it are refused.
func (p *peer) detachLocked(tc *tconn) {
	t := p.t
	tc.detached = true
	tc.ready = false
	tc.closed = true
	t.fl.del(tc)
	t.mu.Lock()
	t.dropFDLocked(tc)
	t.mu.Unlock()
	if i := slices.Index(p.conns, tc); i >= 0 {
		p.conns = slices.Delete(p.conns, i, i+1)
	}
}

// connsTo returns how many connections to peer pi are attached (tests).
func (t *Transport) connsTo(pi transport.Peer) int {
	p := t.peer(pi)
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}
