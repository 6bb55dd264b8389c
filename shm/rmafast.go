package shm

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gofi-dev/fi/rma"
	"github.com/gofi-dev/fi/transport"
)

// Quick requests: small one-sided operations into a target that is inside
// gofi's progress at the moment.
//
// process_vm_writev/readv costs one system call (1.5 us or more on a VM)
// however small the copy, and the executor goroutine of the channel path
// must first be woken. When the target's application is polling its CQ
// anyway (as every libfabric target must for RMA to progress), a request
// it takes from shared memory in that poll is faster: the initiator writes
// the request (and the write data) into a slot of the target's service
// segment, the target's Poll copies under its key table's checks, counts,
// and answers in the same slot, while the initiator spins. Nothing waits
// for the target though:
//
//   - Each quick slot has a state word the two sides race for with
//     compare-and-swap: posted -> taken (the target executes it) or
//     posted -> free (the initiator withdraws it). Exactly one wins; the
//     loser does nothing, so every operation executes and counts once.
//   - The initiator spins at most fastWait for the target to take it, then
//     withdraws and does what it would have done without this path
//     (single copy, or the channel), and clears the service's active word
//     so that later operations do not wait again until the target's Poll
//     sets it anew. The target's Wait clears it before sleeping. A target
//     that keeps not taking them (it shares our CPU, or our lock: another
//     endpoint of our own domain) makes the initiator skip the next 1, 2,
//     4 ... 64 operations' offers, so waiting costs at most 2 us per 64
//     operations (about 30 ns each).
//   - A quick operation completes inside RMA, as single copy does, and is
//     tried only when the peer's channel is empty: operations to one peer
//     still execute in posting order, and a completion still means the
//     bytes are at the target (delivery complete). The initiator holds its
//     ranges' holder cells throughout, like a single copy, and the target
//     takes its own for the copy: an MR.Close racing the access either
//     waits for it or fails it.
//   - A target that took a request and died leaves the initiator spinning
//     only until its liveness check (every PeerTimeout) says so:
//     ECONNRESET.
//
// Slots are claimed per initiator transport (owner word pid<<32|serial, 0
// free) on first use and given back at Close; the target's executor frees
// the slots of owners that died. The target polls the state words of the
// claimed slots only (it re-reads the owner words when the claims word
// changes): an 8-byte write or read of one range crosses in one cache
// line (state, status, request header and data), larger ones in as many
// more as the data takes.
//
// Quick slot layout (fastSlotSize bytes, at svcFastOff + i*fastSlotSize):
//
//	+0   state u32: 0 free, 1 posted, 2 taken, 3 answered (answered and
//	     free are both idle to the target)
//	+4   status u32: the answer, 0 or a libfabric errno, stored with the
//	     state in one 64-bit store
//	+8   request header (package rma's wire form, HeaderLen bytes)
//	+8+HeaderLen data, up to FastData bytes: write data, atomic
//	     operands; the answer: read data or atomic results (as many
//	     bytes as the request's ranges cover)
const (
	svcOwnerOff = svcEntOff + SvcEntries*svcEntSize
	svcFastOff  = svcOwnerOff + SvcEntries*8
	// FastData is the most payload (write data, atomic operands) or
	// answer one quick request carries.
	FastData = 4096

	fState       = 0
	fStatus      = 4
	fReq         = 8
	fastSlotSize = 256 + FastData

	fFree     = 0
	fPosted   = 1
	fTaken    = 2
	fAnswered = 3
)

// fastWait is how long an initiator waits for the target's progress to
// take a quick request before it withdraws it. A target inside its poll
// loop takes it within a few hundred nanoseconds; single copy costs 1.5
// us or more, so waiting longer than that for a target that is busy
// elsewhere is a loss.
var fastWait = 2 * time.Microsecond

func (s *svc) active() *atomic.Uint32 { return word32(s.mem, svcActiveOff) }

func (s *svc) claims() *atomic.Uint32 { return word32(s.mem, svcClaimsOff) }

func (s *svc) fastOwner(i int) *atomic.Uint64 { return word64(s.mem, svcOwnerOff+8*i) }

func (s *svc) fastSlot(i int) []byte {
	o := svcFastOff + i*fastSlotSize
	return s.mem[o : o+fastSlotSize : o+fastSlotSize]
}

func fastState(slot []byte) *atomic.Uint32 { return word32(slot, fState) }

// fastData returns the data of a slot whose request header is hlen bytes.
func fastData(slot []byte, hlen int) []byte {
	o := fReq + hlen
	return slot[o : o+FastData]
}

var fastSerial atomic.Uint32

// claimFast takes a free quick slot for this transport: its index and
// owner token, or -1. A slot left by an owner that died is reset first
// (waiting, at most timeout, for a target still executing its request).
func (s *svc) claimFast(timeout time.Duration) (int, uint64) {
	tok := uint64(selfPID)<<32 | uint64(fastSerial.Add(1))
	for i := 0; i < SvcEntries; i++ {
		w := s.fastOwner(i)
		if w.Load() != 0 || !w.CompareAndSwap(0, tok) {
			continue
		}
		if !resetFast(fastState(s.fastSlot(i)), timeout) {
			w.CompareAndSwap(tok, 0)
			return -1, 0
		}
		s.claims().Add(1)
		return i, tok
	}
	return -1, 0
}

// resetFast brings a quick slot's state to free; false if the target
// kept a request taken for longer than timeout.
func resetFast(st *atomic.Uint32, timeout time.Duration) bool {
	var start time.Time
	for k := 0; ; k++ {
		v := st.Load()
		if v != fTaken {
			if st.CompareAndSwap(v, fFree) {
				return true
			}
			continue
		}
		if k&63 == 63 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > timeout {
				return false
			}
			runtime.Gosched()
		}
	}
}

// releaseFast gives quick slot i back.
func (s *svc) releaseFast(i int, tok uint64) {
	s.fastOwner(i).CompareAndSwap(tok, 0)
}

// freeDeadFast frees the quick slots of owners that died (the target's
// executor, in its housekeeping).
func (s *svc) freeDeadFast() {
	for i := 0; i < SvcEntries; i++ {
		w := s.fastOwner(i)
		if v := w.Load(); v != 0 && !ProcessAlive(int(v>>32)) {
			w.CompareAndSwap(v, 0)
		}
	}
}

// ---------------------------------------------------------------------------
// the target side (Poll)

// fastServer executes quick requests; it is Poll's (the engine serialises
// Poll).
type fastServer struct {
	claims uint32            // the service's claims word when list was made
	list   [SvcEntries]uint8 // claimed slots
	n      int
	hdr    [256]byte
	req    rma.Request
	res    [rma.MaxAtomic]byte
}

// rmaServeFast marks our service active and runs the quick requests
// posted to it. Poll calls it when the endpoint serves RMA.
func (t *Transport) rmaServeFast() bool {
	s := t.rma.svc
	if a := s.active(); a.Load() == 0 {
		a.Store(1)
	}
	f := &t.rma.fast
	if c := s.claims().Load(); c != f.claims {
		f.claims = c
		f.n = 0
		for i := 0; i < SvcEntries; i++ {
			if s.fastOwner(i).Load() != 0 {
				f.list[f.n] = uint8(i)
				f.n++
			}
		}
	}
	did := false
	for _, i := range f.list[:f.n] {
		slot := s.fastSlot(int(i))
		if fastState(slot).Load() == fPosted && f.serve(t.rma.exec.x, slot) {
			did = true
		}
	}
	return did
}

// serve takes the request in slot if it is still posted, executes it and
// answers; false if the initiator withdrew it first.
func (f *fastServer) serve(x *rma.Target, slot []byte) bool {
	st := fastState(slot)
	if !st.CompareAndSwap(fPosted, fTaken) {
		return false
	}
	code := f.execute(x, slot)
	// Status and state in one store: the initiator spins on this line, and
	// every store of ours after its load costs a cache-line transfer.
	word64(slot, fState).Store(uint64(uint32(code))<<32 | fAnswered)
	return true
}

// execute runs and counts the request of a taken slot (every byte of it
// untrusted) and returns the answer's status. The answer's data, if any,
// covers the request's ranges.
func (f *fastServer) execute(x *rma.Target, slot []byte) rma.Code {
	n, err := rma.PeekHeaderLen(slot[fReq : fReq+4])
	if err != nil {
		return rma.EInval
	}
	copy(f.hdr[:n], slot[fReq:fReq+n])
	r := &f.req
	if _, err := rma.DecodeRequest(f.hdr[:n], r); err != nil {
		return rma.EInval
	}
	c, ans := x.Run(r, fastData(slot, n), f.res[:], true)
	if c == rma.OK && r.Kind != rma.KindWrite && r.Kind != rma.KindAtomic && ans != r.Total() {
		return rma.EInval // cannot happen: Run answers every byte
	}
	return c
}

// ---------------------------------------------------------------------------
// the initiator side

// fastPayload is the payload a quick request for req carries.
func fastPayload(req *transport.RMAReq, total uint64) uint64 {
	return countPayload(req, total)
}

// rmaTryFast checks req's ranges against the target's table without
// holding them and, when none is refused, the payload fits a quick slot
// and the ranges are not all memory this process maps, offers it to the
// target (rmaFast). done reports that the operation ended here: refused,
// or taken by the target.
func (t *Transport) rmaTryFast(rp *rmaPeer, req *transport.RMAReq, want uint64, atom bool) (transport.Code, bool) {
	var total uint64
	allocated := true
	for _, v := range req.Remote {
		sl, _, code := rp.tbl.t.Peek(v.Key, v.Addr, v.Len, want)
		if code != rma.OK {
			return transport.Code(code), true
		}
		allocated = allocated && sl.Allocated
		total += v.Len
	}
	if allocated && (!atom || atomicDirectOK(req.Datatype)) || total > FastData || fastPayload(req, total) > FastData {
		return 0, false
	}
	return t.rmaFast(rp, req, len(req.Remote), total)
}

// rmaFast offers req (n ranges, total bytes) to the target's progress. taken reports that the target executed it (code
// is then the operation's result); otherwise nothing happened and the
// caller goes on without this path.
func (t *Transport) rmaFast(rp *rmaPeer, req *transport.RMAReq, n int, total uint64) (code transport.Code, taken bool) {
	s := rp.svc
	if rp.fast < 0 {
		if rp.fast == fastNone {
			return 0, false
		}
		i, tok := s.claimFast(t.cfg.PeerTimeout)
		if i < 0 {
			rp.fast = fastNone
			return 0, false
		}
		rp.fast, rp.fastTok = i, tok
	}
	slot := s.fastSlot(rp.fast)
	r := &t.rma.freq
	// Field by field (Encode reads these and the first n ranges only):
	// assigning a whole Request clears its eight ranges.
	r.Kind, r.Datatype, r.Op, r.NIOV, r.Flags, r.ID = rma.Kind(req.Kind), req.Datatype, req.Op, n, 0, 0
	for i, v := range req.Remote[:n] {
		r.IOV[i] = rma.IOV{Addr: v.Addr, Len: v.Len, Key: v.Key}
	}
	r.Payload = fastPayload(req, total)
	data := fastData(slot, r.HeaderLen())
	switch req.Kind {
	case transport.RMAWrite:
		gather(data[:total], req.Local, 0)
	case transport.RMAAtomic, transport.RMAFetch:
		gather2(data, req.Local)
	case transport.RMACompare:
		k := gather2(data, req.Local)
		gather2(data[k:], req.Compare)
	}
	r.Encode(slot[fReq:])
	st := fastState(slot)
	st.Store(fPosted)
	if !waitTaken(st, fastWait) {
		if st.CompareAndSwap(fPosted, fFree) {
			s.active().CompareAndSwap(1, 0)
			rp.fastBack = min(max(1, 2*rp.fastBack), fastBackMax)
			rp.fastSkip = rp.fastBack
			return 0, false
		}
	}
	rp.fastBack = 0
	// Taken: the target answers as soon as it has copied.
	if c := t.waitAnswered(rp, st); c != transport.OK {
		return c, true
	}
	code = transport.Code(ne.Uint32(slot[fStatus:]))
	if code == transport.OK {
		switch req.Kind {
		case transport.RMARead:
			scatter(req.Local, 0, data[:total])
		case transport.RMAFetch, transport.RMACompare:
			scatter(req.Result, 0, data[:total])
		}
	}
	// The slot stays answered until the next post: the target ignores
	// anything not posted, and a store here would only take the line
	// away from the target's next poll.
	return code, true
}

// waitTaken spins until the state leaves posted or d has passed: whether
// it left.
func waitTaken(st *atomic.Uint32, d time.Duration) bool {
	var start time.Time
	for k := 0; ; k++ {
		if st.Load() != fPosted {
			return true
		}
		if k&31 == 31 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > d {
				return false
			}
		}
	}
}

// waitAnswered waits for the target to answer a request it took:
// ECONNRESET if it died meanwhile (checked every PeerTimeout).
func (t *Transport) waitAnswered(rp *rmaPeer, st *atomic.Uint32) transport.Code {
	var last time.Time
	for k := 0; ; k++ {
		if st.Load() == fAnswered {
			return transport.OK
		}
		if k < 256 {
			continue
		}
		runtime.Gosched()
		if k&255 != 0 {
			continue
		}
		now := time.Now()
		if last.IsZero() {
			last = now
		} else if now.Sub(last) > t.cfg.PeerTimeout {
			last = now
			if alive, err := rp.svc.seg.Alive(); err == nil && !alive {
				return transport.EConnReset
			}
		}
	}
}

// fastBackMax bounds how many operations skip the quick path after
// withdrawals in a row.
const fastBackMax = 64

// Values of rmaPeer.fast other than a slot index.
const (
	fastUnclaimed = -1
	fastNone      = -2 // every slot was taken: do without
)
