package net

import (
	"encoding/binary"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/transport"
)

// Pushed messages: a message above MaxEager and up to PushMax goes as one
// PUSH frame, its header followed at once by the payload, written with
// one writev from the sender's buffers. The ready-to-send / clear-to-send
// round trip of a rendezvous is gone, and so is the copy through the
// handoff ring of an eager message:
//
//   - When Poll reads the socket itself (owner polling, own.go) it offers
//     the message to the engine the moment the header is decoded, after
//     delivering every record queued before it (order per peer is kept).
//     If a posted receive matches, the engine's Fetch (called from inside
//     Arrive) names the destination, and the payload is read straight from
//     the socket into it (readDirect).
//   - Otherwise (the message is unexpected, the engine refused it for now,
//     or the gnet loop decoded the header) the payload is read into a
//     buffer of the transport's and the message waits like a rendezvous
//     one: a later Fetch copies it out (at once when complete, at its end
//     otherwise), Discard drops it.
//
// A push spends credit for its header and payload like an eager frame.
// The header's credit comes back when the engine accepts the message, the
// payload's when the payload has left the transport (read into the
// engine's buffer, or its buffer freed). A sender pushes only while half
// the peer's window stays free after the push, and falls back to RTS
// otherwise, so unexpected pushes can never hold the whole window: a
// receiver waiting for a later message of the same peer always gets it.

// Receiver-side states of a push (fetchSlot.mode).
const (
	pushPending  uint8 = iota + 1 // header offered to the engine, no decision yet
	pushDirect                    // payload goes into the engine's buffers (dst)
	pushBuffered                  // payload goes into buf; the engine fetches later
	pushDiscard                   // payload is read and dropped
)

// pushBit marks a push's cookie (the low 32 bits name the fetch slot).
const pushBit = 1 << 31

// maxWirePush caps a PUSH payload on the wire: a receiver never buffers
// more than this per message.
const maxWirePush = 1 << 20

// bufList is a free list of byte buffers of one size (a send queue's
// copies, push payloads), safe for concurrent use: the loop, the flusher
// and Poll take and return them. Listen puts one of each kind in, so the
// first use allocates nothing; more are made only while several are in
// use at once, and at most keep are kept. (A sync.Pool would drop them at
// every collection.)
type bufList struct {
	mu   sync.Mutex
	size int
	keep int
	free []*[]byte
}

func newBufList(size, keep int) *bufList {
	b := &bufList{size: size, keep: keep, free: make([]*[]byte, 0, keep)}
	b.put(b.get(size))
	return b
}

// get returns a buffer of length n (n <= size).
func (b *bufList) get(n int) *[]byte {
	b.mu.Lock()
	if k := len(b.free); k > 0 {
		p := b.free[k-1]
		b.free = b.free[:k-1]
		b.mu.Unlock()
		*p = (*p)[:n]
		return p
	}
	b.mu.Unlock()
	p := make([]byte, n, max(n, b.size))
	return &p
}

func (b *bufList) put(p *[]byte) {
	if p == nil {
		return
	}
	b.mu.Lock()
	if len(b.free) < b.keep && cap(*p) >= b.size {
		b.free = append(b.free, p)
	}
	b.mu.Unlock()
}

// canPush reports whether a message of n bytes goes as PUSH now. The peer's
// mu is held.
func (p *peer) canPush(n uint64) bool {
	if n > uint64(p.t.cfg.PushMax) {
		return false
	}
	return p.credit-int64(hdrSize)-int64(n) >= p.peerWindow/2
}

// pushStart handles a PUSH header (decoder callback): it offers the message
// to the engine at once when Poll is decoding (tc.owner) and nothing of
// the peer waits before it, and otherwise queues it through the handoff
// ring; either way tc.cur becomes the slot the payload goes to. ok ==
// false means the ring had no room (nothing changed).
func (tc *tconn) pushStart(f *frame) (bool, error) {
	t, p := tc.t, tc.peer
	if f.length > maxWirePush || f.length == 0 {
		return false, fmt.Errorf("%w: PUSH length %d", errProto, f.length)
	}
	if f.length >= colocateMin {
		t.noteBig(f.length)
	}
	sync := tc.owner && t.sink != nil
	var b []byte
	if sync {
		b = t.pushRec[:]
	} else if b = t.ho.reserve(msgRecHdr); b == nil {
		return false, nil
	}
	p.mu.Lock()
	if tc.detached {
		p.mu.Unlock()
		return false, errDetached
	}
	p.recvUsed += int64(hdrSize) + int64(f.length)
	if p.recvUsed > int64(t.cfg.Window) {
		p.mu.Unlock()
		return false, fmt.Errorf("%w: peer exceeded the receive window", errProto)
	}
	s, id := p.fetches.alloc()
	if s == nil {
		p.mu.Unlock()
		return false, fmt.Errorf("%w: too many pushes in flight", errProto)
	}
	s.push, s.mode, s.cap, s.got, s.hasOp, s.done = true, pushPending, f.length, 0, false, false
	s.epoch = p.epoch
	if !sync {
		s.bufferLocked(t.pbufs)
	}
	tc.cur, tc.curID, tc.curSeg, tc.curOff = s, id, 0, 0
	epoch := p.epoch
	p.mu.Unlock()
	t.pushes.Add(1)
	putRec(b, p.idx, epoch, f, uint64(id)|pushBit)
	if !sync {
		t.ho.commit(msgRecHdr)
		t.lis.committed = true
		return true, nil
	}
	// Deliver what the ring holds first: every record in it is older than
	// this header, and the engine must see a peer's messages in order.
	t.drainHandoff()
	if len(p.held) == 0 {
		t.deliver(t.sink, b, false)
	} else {
		p.hold(b) // behind the peer's refused records
	}
	p.mu.Lock()
	if s.mode == pushPending && p.fetches.get(id) == s {
		s.bufferLocked(t.pbufs) // unexpected, or refused for now
	}
	p.mu.Unlock()
	return true, nil
}

// bufferLocked switches a push slot to reading its payload into a buffer
// of its own. The peer's mu is held.
func (s *fetchSlot) bufferLocked(bufs *bufList) {
	s.mode = pushBuffered
	s.buf = bufs.get(int(s.cap))
	s.user = append(s.user[:0], s.dst...) // a Fetch that came first (none yet)
	s.dst = append(s.dst[:0], *s.buf)
}

// putRec writes a handoff record header for frame f.
func putRec(b []byte, idx transport.Peer, epoch uint32, f *frame, cookie uint64) {
	binary.LittleEndian.PutUint32(b[0:], uint32(idx))
	binary.LittleEndian.PutUint32(b[4:], epoch)
	b[8], b[9], b[10], b[11] = f.op, f.flags, f.kind, 0
	binary.LittleEndian.PutUint32(b[12:], f.group)
	binary.LittleEndian.PutUint64(b[16:], f.tag)
	binary.LittleEndian.PutUint64(b[24:], f.data)
	binary.LittleEndian.PutUint64(b[32:], f.length)
	binary.LittleEndian.PutUint64(b[40:], cookie)
}

// drainHandoff delivers the handoff ring's records to the sink (Poll's
// goroutine, from inside the decoder).
func (t *Transport) drainHandoff() {
	t.deliverEvents(t.sink) // Poll hands these over before ring records too
	if t.lis.committed {
		t.lis.committed = false
		t.ho.publish()
	}
	for {
		rec := t.ho.peek()
		if rec == nil {
			break
		}
		t.deliver(t.sink, rec, false)
		t.ho.consume()
	}
	t.ho.release()
}

// fetchPush answers the engine's Fetch of a pushed message. The peer's mu
// is held.
func (p *peer) fetchPushLocked(s *fetchSlot, id uint32, dst [][]byte, total uint64, op transport.Op) (bool, int, transport.Code) {
	if total == 0 {
		return true, 0, p.discardPushLocked(s, id)
	}
	switch s.mode {
	case pushPending: // inside Arrive, the header just decoded: read straight into dst
		p.t.pushDirect.Add(1)
		s.mode, s.op, s.hasOp = pushDirect, op, true
		s.dst = append(s.dst[:0], dst...)
		return false, 0, transport.OK
	case pushBuffered:
		if s.hasOp {
			return true, 0, transport.EInval // fetched twice
		}
		if !s.done {
			s.op, s.hasOp = op, true
			s.user = append(s.user[:0], dst...)
			return false, 0, transport.OK
		}
		n := scatter(dst, (*s.buf)[:s.got])
		p.freePushLocked(s, id)
		return true, n, transport.OK
	}
	return true, 0, transport.EInval
}

// discardPushLocked drops a pushed message unread. The peer's mu is held.
func (p *peer) discardPushLocked(s *fetchSlot, id uint32) transport.Code {
	switch {
	case s.mode == pushPending:
		s.mode = pushDiscard
		s.dst = s.dst[:0]
	case s.mode == pushBuffered && s.done:
		p.freePushLocked(s, id)
	case s.mode == pushBuffered:
		s.mode = pushDiscard
		p.t.pbufs.put(s.buf)
		s.buf = nil
		s.dst = s.dst[:0]
	}
	return transport.OK
}

// pushEndLocked ends a push's payload (its last byte was read). The peer's
// mu is held.
func (p *peer) pushEndLocked(s *fetchSlot, id uint32) {
	s.done = true
	switch s.mode {
	case pushDirect:
		p.t.push(event{kind: evFetchDone, op: s.op, n: int(s.got)})
		p.freePushLocked(s, id)
	case pushDiscard:
		p.freePushLocked(s, id)
	case pushBuffered:
		if s.hasOp {
			n := scatter(s.user, (*s.buf)[:s.got])
			p.t.push(event{kind: evFetchDone, op: s.op, n: n})
			p.freePushLocked(s, id)
		}
	}
}

// freePushLocked releases a push slot and returns its payload's credit.
// The peer's mu is held.
func (p *peer) freePushLocked(s *fetchSlot, id uint32) {
	p.t.pbufs.put(s.buf)
	s.buf = nil
	clear(s.user)
	s.user = s.user[:0]
	if s.epoch == p.epoch && p.tx != nil {
		p.creditLocked(int64(s.cap))
	}
	p.fetches.put(id)
}

// scatter copies src into dst's buffers in order and returns the bytes
// copied.
func scatter(dst [][]byte, src []byte) int {
	n := 0
	for _, d := range dst {
		if len(src) == 0 {
			break
		}
		k := copy(d, src)
		src = src[k:]
		n += k
	}
	return n
}

// sendPushLocked writes a PUSH frame: the header and the sender's buffers
// with one writev when nothing is queued, the rest (or all of it) queued
// by reference; SendDone follows the last byte unless all went at once.
// The peer's mu is held.
func (t *Transport) sendPushLocked(p *peer, tc *tconn, f *frame, iov [][]byte, op transport.Op, cost int64, direct bool) (bool, transport.Code) {
	p.credit -= cost
	tc.header(tc.hbuf[:], f)
	if !direct {
		tc.enqueueRef(tc.hbuf[:], iov, 0, op)
		return false, transport.OK
	}
	n, err := tc.writeDirect(tc.hbuf[:], iov)
	switch {
	case err == nil && n == int(cost):
		if t.nDone.Load() != 0 { // completions come in send order (see Send)
			t.push(event{kind: evSendDone, op: op})
			return false, transport.OK
		}
		return true, transport.OK
	case err == nil || err == unix.EAGAIN:
		tc.enqueueRef(tc.hbuf[:], iov, n, op)
		if err := t.fl.arm(tc); err != nil {
			p.breakLocked(tc, err)
		}
		return false, transport.OK
	default:
		p.breakLocked(tc, err)
		return true, codeOf(err)
	}
}

// arriveNow hands an EAGER or RTS frame to the engine from inside the
// decoder when Poll is decoding (tc.owner) and the payload is in pre: the
// eager payload is passed as a slice of pre, with no copy through the
// handoff ring and no record. Records queued before it are delivered
// first; behind a refused message of the peer (held) it is not handled
// here, and the ring path keeps the order. A message the engine refuses
// is held like one from the ring. handled == false leaves the frame to
// the ring path.
func (tc *tconn) arriveNow(f *frame) (handled bool, err error) {
	t, p := tc.t, tc.peer
	plen := 0
	if f.op == opEager {
		plen = int(f.length)
	}
	if len(tc.pre) < plen {
		return false, nil
	}
	t.drainHandoff()
	if len(p.held) > 0 {
		return false, nil
	}
	cost := int64(hdrSize + plen)
	p.mu.Lock()
	if tc.detached {
		p.mu.Unlock()
		return false, errDetached
	}
	p.recvUsed += cost
	over := p.recvUsed > int64(t.cfg.Window)
	epoch := p.epoch
	p.mu.Unlock()
	if over {
		return false, fmt.Errorf("%w: peer exceeded the receive window", errProto)
	}
	payload := tc.pre[:plen]
	h := &t.hdr
	h.Kind, h.Flags, h.Group, h.Tag, h.Data, h.Len = transport.Kind(f.kind), f.flags, f.group, f.tag, f.data, f.length
	var eager []byte
	var cookie uint64
	if f.op == opEager {
		eager = payload
	} else {
		cookie = uint64(epoch)<<32 | f.cookie&0xffffffff
	}
	t.arrivedNow.Add(1)
	if t.sink.Arrive(p.idx, h, eager, cookie) {
		p.returnCredit(epoch, int(cost))
	} else { // refused: offered again later, first of the peer's
		b := heldPool.Get().(*[]byte)
		if cap(*b) < msgRecHdr+plen {
			*b = make([]byte, msgRecHdr+plen)
		}
		*b = (*b)[:msgRecHdr+plen]
		putRec(*b, p.idx, epoch, f, f.cookie)
		copy((*b)[msgRecHdr:], payload)
		p.held = append(p.held, b)
		t.blocked = append(t.blocked, p)
	}
	tc.pre = tc.pre[plen:]
	return true, nil
}
