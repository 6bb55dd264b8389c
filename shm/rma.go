package shm

import (
	"errors"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gofi-dev/fi/rma"
	"github.com/gofi-dev/fi/transport"
)

// One-sided operations over shm (transport.RMATransport), the initiator
// side. The target's application never runs for them:
//
//   - A write or read whose every range lies in memory the target got
//     from AllocMR is a plain copy into or out of that memory, which the
//     initiator maps (the region's segment, named by its key table slot).
//   - Otherwise, when the kernel lets this process reach the target's
//     memory (single copy on, the same pid namespace), it is one
//     process_vm_writev / process_vm_readv per local buffer into or out
//     of the target's registered Go memory (a pwrite / pread on the
//     target's /proc/<pid>/mem, opened once, for windows up to 2 KiB:
//     procmem.go).
//   - An atomic whose every range lies in AllocMR memory is executed by
//     the initiator on its mapping with the processor's atomic
//     instructions (rma_atomic.go), except for 16-byte datatypes.
//   - Everything else (single copy refused, other atomics) goes through a
//     channel the target's executor goroutine serves (rmachan.go): the
//     payload crosses in shared memory, ChanData bytes per request,
//     ChanSlots requests in flight, executed in posting order.
//
// Every range is checked against the target's key table (which this side
// maps read-only in effect) before a byte moves, holding the region's
// holder cell across the copy, so a refused operation touches nothing and
// MR.Close never races a copy; the executor checks again (the initiator is
// untrusted to it). Counters bound to the target's regions and endpoint
// live in its table's shared memory; whoever executes counts. The first
// two paths complete inside RMA; the channel completes in Poll. An
// operation does not pass one in the channel to the same peer, so
// operations to one peer execute in order.

// rmaState is a transport's RMA state.
type rmaState struct {
	exec   *executor // serving our endpoint (ServeRMA)
	svc    *svc
	tables map[string]*rmaTable // peers' key tables by segment name
	busy   []*peer              // peers with channel operations
	busyN  atomic.Int32
	nudge  atomic.Uint32 // our region's nudge word when Poll last looked
	holds  [rma.MaxIOV]rma.Hold
	offs   [rma.MaxIOV]uint64
	opFree []*chanOp
	// quick requests (rmafast.go): ours to targets, and serving ours
	freq rma.Request
	fast fastServer
	// direct atomics (rma_atomic.go): the ranges' memory, the operands
	// and the results
	amem [rma.MaxIOV][]byte
	abuf [2 * rma.MaxAtomic]byte
	ares [rma.MaxAtomic]byte
}

// rmaTable is a peer's key table as this transport maps it, with the
// AllocMR segments it mapped.
type rmaTable struct {
	seg    *Segment
	t      *rma.Table
	allocs map[int]allocMap
	last   allocMap // the entry mapAlloc returned last (seg nil: none), of slot lastIx
	lastIx int
	mem    procMem // the owner's /proc/<pid>/mem (procmem.go)
}

type allocMap struct {
	gen uint32
	seg *Segment
}

// rmaPeer is the RMA side of a peer.
type rmaPeer struct {
	svc    *svc
	tbl    *rmaTable
	sameNS bool
	self   bool // the target is this process: its executor needs our CPU
	own    bool // the target is this transport: it cannot poll while we wait
	// fast is our quick slot in the target's service (or fastUnclaimed,
	// fastNone), fastTok its owner token
	fast    int
	fastTok uint64
	// after a withdrawn quick request the next fastSkip operations do
	// not offer theirs; fastBack doubles with every withdrawal in a row
	// (a target sharing our CPU or our lock never takes one in time)
	fastSkip, fastBack int
	// aliveAt is when the target was last seen alive: copies into its
	// AllocMR memory would succeed after its death, so the direct path
	// checks its service segment's lock every PeerTimeout.
	aliveAt time.Time
	// channel
	ch       *Segment
	chMem    []byte
	ent      int
	seq      uint64
	subs     [ChanSlots]chanSub
	queue    []*chanOp
	inflight int
	since    time.Time
	busy     bool
}

type chanSub struct {
	o      *chanOp
	pos, n uint64
}

// chanOp is an operation going through a channel.
type chanOp struct {
	op       transport.Op
	req      *transport.RMAReq
	local    [][]byte // req.Local, or the copy of an injected payload
	compare  [][]byte
	buf      []byte // the copy (kept when the op is recycled)
	lv, cv   [1][]byte
	total    uint64
	next     uint64 // bytes of the remote stream posted
	issued   bool   // its last request is posted
	inflight int
	code     transport.Code
}

// ServeRMA makes this endpoint a target: it publishes its service segment
// (naming x's key table, which must be a shared segment, and x's counters)
// and starts the executor goroutine. Called once, before peers send RMA.
func (t *Transport) ServeRMA(x *rma.Target) error {
	if t.rma.svc != nil {
		return errors.New("shm: ServeRMA called twice")
	}
	if x == nil || x.Table == nil || x.Table.Name() == "" {
		return errors.New("shm: RMA needs a key table in a shared segment")
	}
	idx := func(c *rma.Counter) int {
		if c == nil {
			return -1
		}
		return c.Index()
	}
	s, err := createSvc(t.name, x.Table.Name(), idx(x.RemoteWrite), idx(x.RemoteRead))
	if err != nil {
		return err
	}
	t.rma.svc = s
	t.rma.exec = startExecutor(s, x)
	return nil
}

var _ transport.RMATransport = (*Transport)(nil)

// RMA starts one operation to peer pi (transport.RMATransport).
func (t *Transport) RMA(pi transport.Peer, req *transport.RMAReq, op transport.Op) (bool, transport.Code) {
	if t.closed {
		return true, transport.ECanceled
	}
	if int(pi) >= len(t.peers) || len(req.Remote) == 0 || len(req.Remote) > rma.MaxIOV ||
		req.Kind < transport.RMAWrite || req.Kind > transport.RMACompare {
		return true, transport.EInval
	}
	p := t.peers[pi]
	if p.dead {
		return true, p.errCode()
	}
	rp, c := t.rmaAttach(p)
	if c != transport.OK {
		return true, c
	}
	// Check every range before anything moves.
	st := &t.rma
	want := rma.Rights(rma.Kind(req.Kind), req.Op)
	n := len(req.Remote)
	atom := req.Kind > transport.RMARead
	direct := (!atom || atomicDirectOK(req.Datatype)) && rp.inflight == 0 && len(rp.queue) == 0
	cma := t.SingleCopy(pi) && rp.sameNS
	if rp.fastSkip > 0 {
		rp.fastSkip--
	} else if !rp.own && rp.inflight == 0 && len(rp.queue) == 0 && rp.svc.active().Load() != 0 {
		// The target is in its progress loop: offer the operation to it
		// (rmafast.go), unless plain copies or atomics on memory we map
		// do better.
		if c, done := t.rmaTryFast(rp, req, want, atom); done {
			return true, c
		}
	}
	var total uint64
	for i, v := range req.Remote {
		h := &st.holds[i]
		off, code := rp.tbl.t.AccessTo(h, v.Key, v.Addr, v.Len, want)
		if code != rma.OK {
			releaseAll(st.holds[:i])
			return true, transport.Code(code)
		}
		st.offs[i] = off
		direct = direct && (h.Allocated || cma && !atom)
		total += v.Len
	}
	if direct && atom {
		c := t.rmaAtomicDirect(rp, req, n, total)
		releaseAll(st.holds[:n])
		return true, c
	}
	if direct {
		c, denied := t.rmaDirect(p, rp, req, n)
		releaseAll(st.holds[:n])
		if !denied {
			return true, c
		}
		t.DenySingleCopy(pi)
	} else {
		releaseAll(st.holds[:n])
	}
	return t.rmaChannel(p, rp, req, op, total)
}

func releaseAll(hs []rma.Hold) {
	for i := range hs {
		hs[i].Release()
	}
}

// rmaAttach opens the peer's service segment and key table on first use.
// A target that serves no RMA (no service segment) refuses with
// EOPNOTSUPP; a dead one with ECONNRESET.
func (t *Transport) rmaAttach(p *peer) (*rmaPeer, transport.Code) {
	if p.rma != nil {
		return p.rma, transport.OK
	}
	s, err := openSvc(p.name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if alive, aerr := Alive(p.name); aerr == nil && !alive {
				return nil, transport.EConnReset
			}
			return nil, transport.Code(rma.EOpNotSupp)
		}
		return nil, t.failed(err, transport.EIO)
	}
	if alive, err := s.seg.Alive(); err == nil && !alive {
		_ = s.seg.Close()
		return nil, transport.EConnReset
	}
	tb := t.rma.tables[s.table]
	if tb == nil {
		seg, err := OpenSegment(s.table)
		if err != nil {
			_ = s.seg.Close()
			return nil, t.failed(err, transport.EIO)
		}
		tt, err := rma.OpenTable(seg.Bytes())
		if err == nil && tt.OwnerPID() != s.pid {
			err = ErrCorrupt
		}
		if err != nil {
			_ = seg.Close()
			_ = s.seg.Close()
			return nil, t.failed(err, transport.EIO)
		}
		tb = &rmaTable{seg: seg, t: tt, allocs: map[int]allocMap{}}
		if t.rma.tables == nil {
			t.rma.tables = map[string]*rmaTable{}
		}
		t.rma.tables[s.table] = tb
	}
	ns := PidNS()
	p.rma = &rmaPeer{svc: s, tbl: tb, sameNS: ns != 0 && s.pidNS == ns, ent: -1, self: s.pid == os.Getpid(),
		own: p.name == t.name, fast: fastUnclaimed}
	return p.rma, transport.OK
}

// mapAlloc returns the memory of the allocated region h holds, mapping
// its segment on first use (and dropping the mapping of an earlier
// registration in the same slot).
func (tb *rmaTable) mapAlloc(h *rma.Hold) ([]byte, transport.Code) {
	m := tb.last
	if m.seg == nil || tb.lastIx != h.Index || m.gen != h.Gen {
		var ok bool
		m, ok = tb.allocs[h.Index]
		if !ok || m.gen != h.Gen {
			if ok {
				_ = m.seg.Close()
				delete(tb.allocs, h.Index)
			}
			seg, err := OpenSegment(rma.AllocName(tb.t.Name(), h.Index, h.Gen))
			if err != nil {
				tb.last = allocMap{}
				return nil, transport.EIO
			}
			m = allocMap{gen: h.Gen, seg: seg}
			tb.allocs[h.Index] = m
		}
		tb.last, tb.lastIx = m, h.Index
	}
	b := m.seg.Bytes()
	if uint64(len(b)) < h.Len {
		return nil, transport.EIO
	}
	return b[:h.Len], transport.OK
}

// rmaDirect moves the bytes of a write or read whose ranges are all held
// (t.rma.holds): plain copies for allocated regions, single copy for the
// others. denied reports that the kernel refused single copy (nothing is
// counted then; the caller goes through the channel).
func (t *Transport) rmaDirect(p *peer, rp *rmaPeer, req *transport.RMAReq, n int) (code transport.Code, denied bool) {
	st := &t.rma
	write := req.Kind == transport.RMAWrite
	var pos uint64
	for i := 0; i < n; i++ {
		h := &st.holds[i]
		v := req.Remote[i]
		if h.Allocated {
			if c := t.rmaAlive(rp); c != transport.OK {
				return c, false
			}
			mem, c := rp.tbl.mapAlloc(h)
			if c != transport.OK {
				return c, false
			}
			if err := copyLocal(mem[st.offs[i]:st.offs[i]+v.Len], req.Local, pos, write); err != nil {
				return transport.EIO, false
			}
		} else {
			err := copyPeer(&rp.tbl.mem, rp.svc.pid, uintptr(h.Addr+st.offs[i]), v.Len, req.Local, pos, write)
			switch {
			case err == nil:
			case errors.Is(err, ErrPeerDenied):
				return 0, true
			case errors.Is(err, ErrPeerGone):
				return transport.EConnReset, false
			default:
				return t.failed(err, transport.EIO), false
			}
		}
		pos += v.Len
	}
	tb := rp.tbl.t
	for i := 0; i < n; i++ {
		if write {
			tb.Count(st.holds[i].CntrW)
		} else {
			tb.Count(st.holds[i].CntrR)
		}
	}
	if write {
		tb.Count(rp.svc.cntrW)
	} else {
		tb.Count(rp.svc.cntrR)
	}
	return transport.OK, false
}

// rmaAlive checks, at most every PeerTimeout, that the target still
// lives: ECONNRESET once it died.
func (t *Transport) rmaAlive(rp *rmaPeer) transport.Code {
	now := time.Now()
	if now.Sub(rp.aliveAt) < t.cfg.PeerTimeout {
		return transport.OK
	}
	if alive, err := rp.svc.seg.Alive(); err == nil && !alive {
		return transport.EConnReset
	}
	rp.aliveAt = now
	return transport.OK
}

// copyLocal copies between mem and the window [pos, pos+len(mem)) of the
// local buffers, guarded against a fault on the mapping.
func copyLocal(mem []byte, local [][]byte, pos uint64, write bool) error {
	return Guard(func() {
		if write {
			gather(mem, local, int(pos))
		} else {
			scatter(local, int(pos), mem)
		}
	})
}

// copyPeer copies the window [pos, pos+n) of the local buffers to or from
// address addr of process pid, one system call per local buffer: through
// pm (pid's /proc/<pid>/mem) when n is at most procMemMax and that works,
// else process_vm_writev/readv.
func copyPeer(pm *procMem, pid int, addr uintptr, n uint64, local [][]byte, pos uint64, write bool) error {
	small := n <= procMemMax
	for _, b := range local {
		if n == 0 {
			break
		}
		if pos >= uint64(len(b)) {
			pos -= uint64(len(b))
			continue
		}
		k := min(uint64(len(b))-pos, n)
		var err error
		switch {
		case small && pm.copy(pid, b[pos:pos+k], addr, write):
		case write:
			_, err = WritePeer(pid, b[pos:pos+k], addr)
		default:
			_, err = ReadPeer(pid, b[pos:pos+k], addr)
		}
		if err != nil {
			return err
		}
		addr += uintptr(k)
		n -= k
		pos = 0
	}
	return nil
}

// ---------------------------------------------------------------------------
// the channel, initiator side

// rmaChannel queues an operation on the peer's channel and posts what
// fits. An injected operation is posted whole at once or refused with
// EAgain (its buffers are the caller's again on return).
func (t *Transport) rmaChannel(p *peer, rp *rmaPeer, req *transport.RMAReq, op transport.Op, total uint64) (bool, transport.Code) {
	if rp.ch == nil {
		if c := t.openChan(p, rp); c != transport.OK {
			return true, c
		}
	}
	o := t.newChanOp()
	*o = chanOp{op: op, req: req, total: total, local: req.Local, compare: req.Compare, buf: o.buf}
	if req.Inject && (len(rp.queue) > 0 || rp.freeSlot() < 0) {
		// It waits: the caller's buffers are free again on return.
		o.buf = o.buf[:0]
		for _, b := range req.Local {
			o.buf = append(o.buf, b...)
		}
		nl := len(o.buf)
		for _, b := range req.Compare {
			o.buf = append(o.buf, b...)
		}
		o.lv[0] = o.buf[:nl:nl]
		o.local = o.lv[:]
		if req.Compare != nil {
			o.cv[0] = o.buf[nl:]
			o.compare = o.cv[:]
		}
	}
	rp.queue = append(rp.queue, o)
	if !rp.busy {
		rp.busy = true
		rp.since = time.Now()
		t.rma.busy = append(t.rma.busy, p)
		t.rma.busyN.Store(int32(len(t.rma.busy)))
	}
	t.rmaIssue(rp)
	return false, transport.OK
}

func (t *Transport) newChanOp() *chanOp {
	if n := len(t.rma.opFree); n > 0 {
		o := t.rma.opFree[n-1]
		t.rma.opFree = t.rma.opFree[:n-1]
		return o
	}
	return new(chanOp)
}

// openChan creates the peer's channel and names it in the target's
// service.
func (t *Transport) openChan(p *peer, rp *rmaPeer) transport.Code {
	seg, err := createChan(t.name)
	if err != nil {
		if errors.Is(err, ErrNoSpace) {
			return t.failed(err, transport.ENoSpc)
		}
		return t.failed(err, transport.EIO)
	}
	ent := rp.svc.claim(seg.Name())
	if ent < 0 {
		_ = seg.Close()
		return transport.EAgain
	}
	rp.ch, rp.chMem, rp.ent = seg, seg.Bytes(), ent
	return transport.OK
}

func (rp *rmaPeer) popQueue() {
	n := copy(rp.queue, rp.queue[1:])
	rp.queue[n] = nil
	rp.queue = rp.queue[:n]
}

func (rp *rmaPeer) freeSlot() int {
	for i := range rp.subs {
		if rp.subs[i].o == nil {
			return i
		}
	}
	return -1
}

// rmaIssue posts the queued operations' requests while slots are free. The
// last request of an operation waits until its others succeeded: it is
// the one the target counts.
func (t *Transport) rmaIssue(rp *rmaPeer) {
	for len(rp.queue) > 0 {
		o := rp.queue[0]
		for o.code == transport.OK && !o.issued {
			n := min(o.total-o.next, ChanData)
			if o.req.Kind > transport.RMARead {
				n = o.total // atomics: one request (at most rma.MaxAtomic)
			}
			last := o.next+n == o.total
			if last && o.inflight > 0 {
				return
			}
			s := rp.freeSlot()
			if s < 0 {
				return
			}
			t.rmaPost(rp, s, o, o.next, n, last)
			o.next += n
			o.issued = last
			o.inflight++
			rp.inflight++
		}
		rp.popQueue()
		if o.inflight == 0 { // failed before anything was posted
			t.chanDone(o)
		}
	}
}

// rmaPost writes request [pos, pos+n) of o into slot s and posts it.
func (t *Transport) rmaPost(rp *rmaPeer, s int, o *chanOp, pos, n uint64, last bool) {
	q := o.req
	b := rp.chMem[slotOff(s) : slotOff(s)+chanSlotSize]
	var r rma.Request
	r.Kind, r.Datatype, r.Op = rma.Kind(q.Kind), q.Datatype, q.Op
	off := pos
	for _, v := range q.Remote {
		if r.Total() == n && r.NIOV > 0 {
			break
		}
		if off >= v.Len {
			off -= v.Len
			continue
		}
		k := min(v.Len-off, n-r.Total())
		r.IOV[r.NIOV] = rma.IOV{Addr: v.Addr + off, Len: k, Key: v.Key}
		r.NIOV++
		off = 0
	}
	if r.NIOV == 0 { // an empty operation: its first range, empty
		r.IOV[0] = rma.IOV{Addr: q.Remote[0].Addr, Key: q.Remote[0].Key}
		r.NIOV = 1
	}
	data := b[slotData:]
	switch q.Kind {
	case transport.RMAWrite:
		gather(data[:n], o.local, int(pos))
		r.Payload = n
	case transport.RMAAtomic:
		r.Payload = uint64(gather2(data, o.local))
	case transport.RMAFetch:
		if q.Op != opAtomicRead {
			r.Payload = uint64(gather2(data, o.local))
		}
	case transport.RMACompare:
		k := gather2(data, o.local)
		r.Payload = uint64(k + gather2(data[k:], o.compare))
	}
	r.Encode(b[slotReq : slotReq+256])
	var flags uint32
	if last {
		flags = chanCount
		c := rma.Request{Kind: r.Kind, Datatype: q.Datatype, Op: q.Op, NIOV: len(q.Remote)}
		for i, v := range q.Remote {
			c.IOV[i] = rma.IOV{Addr: v.Addr, Len: v.Len, Key: v.Key}
		}
		c.Payload = countPayload(q, o.total)
		c.Encode(b[slotCount : slotCount+256])
	}
	ne.PutUint32(b[slotFlags:], flags)
	ne.PutUint32(b[slotStatus:], 0)
	ne.PutUint64(b[slotPayload:], 0)
	rp.seq++
	word64(b, slotSeq).Store(rp.seq)
	rp.subs[s] = chanSub{o: o, pos: pos, n: n}
	slotWord(rp.chMem, s, slotState).Swap(chPosted)
	_ = rp.svc.bell.Ring()
}

// opAtomicRead is dtype.AtomicRead's value.
const opAtomicRead = 10

// countPayload is the payload a whole operation's request would carry (so
// the counting header decodes).
func countPayload(q *transport.RMAReq, total uint64) uint64 {
	switch {
	case q.Kind == transport.RMARead, q.Kind == transport.RMAFetch && q.Op == opAtomicRead:
		return 0
	case q.Kind == transport.RMACompare:
		return 2 * total
	}
	return total
}

// gather2 copies the concatenation of iov into dst and returns its length.
func gather2(dst []byte, iov [][]byte) int {
	n := 0
	for _, v := range iov {
		n += copy(dst[n:], v)
	}
	return n
}

// rmaProgress takes the answers of every busy peer's channel, completes
// operations and posts more. Poll calls it.
func (t *Transport) rmaProgress() bool {
	st := &t.rma
	st.nudge.Store(t.region.NudgeSeq())
	did := false
	var now time.Time
	keep := st.busy[:0]
	for _, p := range st.busy {
		rp := p.rma
		if rp == nil || p.dead {
			continue
		}
		got := false
		for s := range rp.subs {
			sub := &rp.subs[s]
			if sub.o == nil || slotWord(rp.chMem, s, slotState).Load() != chAnswered {
				continue
			}
			t.rmaAnswer(rp, s, sub)
			got = true
		}
		if got {
			did = true
			rp.since = time.Time{}
			t.rmaIssue(rp)
		} else if rp.self {
			// Our own executor serves it: let it run even when the
			// caller polls on one P (GOMAXPROCS=1).
			runtime.Gosched()
		}
		if rp.inflight > 0 {
			if now.IsZero() {
				now = time.Now()
			}
			if rp.since.IsZero() {
				rp.since = now
			} else if now.Sub(rp.since) > t.cfg.PeerTimeout {
				rp.since = now
				t.rmaCheck(p, rp)
			}
		}
		if p.rma != nil && (rp.inflight > 0 || len(rp.queue) > 0) {
			keep = append(keep, p)
		} else {
			rp.busy = false
		}
	}
	clear(st.busy[len(keep):])
	st.busy = keep
	st.busyN.Store(int32(len(keep)))
	return did
}

// rmaAnswer takes the answer in slot s.
func (t *Transport) rmaAnswer(rp *rmaPeer, s int, sub *chanSub) {
	b := rp.chMem[slotOff(s) : slotOff(s)+chanSlotSize]
	o := sub.o
	code := transport.Code(ne.Uint32(b[slotStatus:]))
	pay := ne.Uint64(b[slotPayload:])
	if code == transport.OK {
		q := o.req
		switch q.Kind {
		case transport.RMARead:
			if pay != sub.n {
				code = transport.EIO
			} else {
				scatter(q.Local, int(sub.pos), b[slotData:slotData+pay])
			}
		case transport.RMAFetch, transport.RMACompare:
			if pay != o.total {
				code = transport.EIO
			} else {
				scatter(q.Result, 0, b[slotData:slotData+pay])
			}
		}
	}
	if code != transport.OK && o.code == transport.OK {
		o.code = code
	}
	*sub = chanSub{}
	slotWord(rp.chMem, s, slotState).Store(chFree)
	o.inflight--
	rp.inflight--
	if o.inflight == 0 && (o.issued || o.code != transport.OK) {
		if len(rp.queue) > 0 && rp.queue[0] == o {
			rp.popQueue()
		}
		t.chanDone(o)
	}
}

func (t *Transport) chanDone(o *chanOp) {
	op, c := o.op, o.code
	clear(o.lv[:])
	clear(o.cv[:])
	*o = chanOp{buf: o.buf[:0]}
	t.rma.opFree = append(t.rma.opFree, o)
	if t.sink != nil {
		t.sink.SendDone(op, c)
	}
}

// rmaCheck runs when a channel has owed answers for PeerTimeout: a dead
// target, or one that dropped our channel, fails the operations.
func (t *Transport) rmaCheck(p *peer, rp *rmaPeer) {
	if alive, err := rp.svc.seg.Alive(); err == nil && !alive {
		t.fail(p, transport.EConnReset)
		return
	}
	if v := rp.svc.ent(rp.ent).Load(); v>>32 != uint64(selfPID) {
		t.rmaFail(p, transport.EIO)
	}
}

// rmaFail completes every channel operation of p with c and drops the
// peer's RMA state (the next operation attaches again).
func (t *Transport) rmaFail(p *peer, c transport.Code) {
	rp := p.rma
	if rp == nil {
		return
	}
	p.rma = nil
	for s := range rp.subs {
		o := rp.subs[s].o
		if o == nil {
			continue
		}
		rp.subs[s] = chanSub{}
		if o.code == transport.OK {
			o.code = c
		}
		o.inflight--
		// Only the head of the queue can have requests posted.
		if o.inflight == 0 && (len(rp.queue) == 0 || rp.queue[0] != o) {
			t.chanDone(o)
		}
	}
	for _, o := range rp.queue {
		if o.code == transport.OK {
			o.code = c
		}
		t.chanDone(o)
	}
	rp.queue = nil
	if rp.ch != nil {
		rp.svc.giveUp(rp.ent)
		_ = rp.ch.Close()
	}
	if rp.fast >= 0 {
		rp.svc.releaseFast(rp.fast, rp.fastTok)
	}
	_ = rp.svc.seg.Close()
}

// rmaClose releases the RMA state at Close: channel operations fail with
// ECANCELED, channels are given up, peers' tables unmapped, our executor
// stopped and our service removed.
func (t *Transport) rmaClose() {
	for _, p := range t.peers {
		t.rmaFail(p, transport.ECanceled)
	}
	t.rma.busy = nil
	t.rma.busyN.Store(0)
	for _, tb := range t.rma.tables {
		for _, m := range tb.allocs {
			_ = m.seg.Close()
		}
		tb.mem.close()
		_ = tb.seg.Close()
	}
	t.rma.tables = nil
	if t.rma.exec != nil {
		t.rma.exec.close()
		t.rma.exec = nil
	}
	if t.rma.svc != nil {
		_ = t.rma.svc.seg.Close()
		t.rma.svc = nil
	}
}

// rmaWork reports, for Wait, whether a target answered since Poll last
// looked.
func (t *Transport) rmaWork() bool {
	return t.rma.busyN.Load() > 0 && t.region.NudgeSeq() != t.rma.nudge.Load()
}
