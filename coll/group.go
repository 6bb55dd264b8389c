package coll

import (
	"time"

	"github.com/gofi-dev/fi/dtype"
	"github.com/gofi-dev/fi/engine"
	"github.com/gofi-dev/fi/transport"
)

// Args describe one collective operation, as the root package's methods
// take it. Buffers hold elements of Type in host byte order:
//
//	Barrier        no buffers
//	Broadcast      Buf: Count elements on every rank (the root's are sent)
//	Allreduce      Buf, Result: Count elements
//	Reduce         Buf: Count; Result: Count at the root (ignored elsewhere)
//	Allgather      Buf: Count; Result: Count*size
//	ReduceScatter  Buf: Count*size; Result: Count (block rank of the result)
//	Alltoall       Buf, Result: Count*size (block j goes to rank j)
//	Scatter        Buf: Count*size at the root; Result: Count
//	Gather         Buf: Count; Result: Count*size at the root
//
// The caller (package fi) has checked the lengths, the datatype and the
// operation; Group.Post trusts them.
type Args struct {
	Coll   dtype.CollOp
	Type   dtype.Type
	Op     dtype.Op
	Count  int
	Buf    []byte
	Result []byte
	Root   int    // group rank of the root
	Flags  uint64 // engine.FlagCompletion
}

// collJoin is the internal operation code of a join (not a CollOp).
const collJoin dtype.CollOp = 15

// Control values in the top four bits of a message's Data.
const (
	ctrlPing  = 13 // liveness probe, ignored by the receiver
	ctrlAbort = 14 // the group failed; low 32 bits: the errno
	ctrlJoin  = 15
)

// qCap bounds the collectives one group queues (posting more returns
// CodeAgain until some complete). A power of two: indexes wrap with a mask.
const qCap = 64

var _ = [1]struct{}{}[qCap&(qCap-1)] // fails to compile unless qCap is a power of two

type opState struct {
	Args
	ctx   any
	seq   uint32
	check uint64 // Data word every message of this operation carries
}

// checkWord packs what every rank of one operation must agree on into the
// Data word of its messages, so mismatched calls are caught where their
// messages meet: the operation, datatype, reduction, root (low 10 bits)
// and count (low 32 bits).
func checkWord(coll dtype.CollOp, t dtype.Type, op dtype.Op, root, count int) uint64 {
	return uint64(coll&0xf)<<60 | uint64(t&0x1ff)<<51 | uint64(op&0x1ff)<<42 |
		uint64(root&0x3ff)<<32 | uint64(uint32(count))
}

// early is a message that arrived before the plan asked for it.
type early struct {
	peer   transport.Peer
	hdr    transport.Header
	buf    []byte // eager payload (pooled); nil for rendezvous
	cookie uint64
	rndv   bool
}

// fifo is a queue of early messages from one rank, in arrival order.
type fifo struct {
	q    []early
	head int
}

func (f *fifo) empty() bool  { return f.head == len(f.q) }
func (f *fifo) push(m early) { f.q = append(f.q, m) }
func (f *fifo) pop() early {
	m := f.q[f.head]
	f.q[f.head] = early{}
	f.head++
	if f.head == len(f.q) {
		f.q, f.head = f.q[:0], 0
	}
	return m
}

// Group is one joined collective group (an fi_mc). Its operations run one
// at a time in posting order; each runs a plan (see plan.go) chosen by
// size, and completes on the endpoint's transmit CQ with FI_COLLECTIVE.
//
// Concurrency: every method must be called with the endpoint's Serial held
// (the root package takes it), like the engine's.
type Group struct {
	e       *Endpoint
	id      uint32
	hash    uint64 // membership hash (names in order)
	rank    int
	size    int
	members []uint64         // fi_addr per rank
	peers   []transport.Peer // transport peer per rank (self: unused)
	rankOf  []int32          // transport peer -> rank + 1 (0: not a member)

	q     [qCap]opState
	qHead int
	qLen  int
	seq   uint32 // next sequence number to assign

	pl        planner
	oneStep   bool // pl is one shared-memory step in one round (startOneStep)
	fn        Func // kernel of the running operation
	kt        dtype.Type
	kop       dtype.Op
	kfn       Func       // Kernel(kt, kop), the last looked up
	kinl      inlineFold // inlineFoldOf(kt, kop)
	round     int        // running round; -1 when no plan runs
	pending   int        // transfers of the round not done
	ready     bool       // queued on e.ready: the round's transfers are done
	blocked   bool       // a send met a full transport; retry on progress
	running   bool       // the head operation's plan has started
	starting  bool       // startRound is starting transfers
	inflight  int        // transport operations of the head operation in flight
	fetching  int        // of which fetches (they write into the caller's buffers)
	failed    engine.Code
	abortTo   bool   // abort messages still to send
	abortLeft []bool // per rank: abort not sent yet
	closed    bool

	fifos   []fifo
	scratch [4][]byte

	join     []byte // join records, recSize per rank
	nodeKeys []uint64
	joinDone bool

	abortHdr transport.Header
	pingHdr  transport.Header
	moved    bool      // a transfer completed since the last watch
	lastMove time.Time // when the watch last saw the operation move
	region   *region   // node-local shared memory (nil: none)
	sh       shmRun    // the running shared-memory step

	// Nodes (set by the join's attach step): ranks sharing a node key
	// form a node (key 0, or a key only one rank has: a node of its own);
	// nodes are numbered in the order of their lowest rank.
	nodeOf    []int32 // rank -> node
	nodeLead  []int   // node -> lowest rank
	reps      []int   // node -> its representative in the running plan
	nodeOrd   []int   // the ranks node by node, each node's in rank order
	nodeStart []int   // node -> its first index in nodeOrd; one more entry: size
	nodeIdent bool    // nodeOrd is 0, 1, ..., size-1 (nodes hold consecutive ranks)
	offs      []int   // scratch: byte offsets of the nodes' segments in a plan
}

// Rank returns this endpoint's rank in the group.
func (g *Group) Rank() int { return g.rank }

// Size returns the number of members.
func (g *Group) Size() int { return g.size }

// Broken returns the errno that broke the group, 0 if none.
func (g *Group) Broken() engine.Code { return g.failed }

// Local returns how many members share this rank's node-local
// shared-memory region, 0 when the group runs point to point only.
func (g *Group) Local() int {
	if g.region == nil || g.region.mem == nil {
		return 0
	}
	return g.region.n
}

// Busy reports whether operations are queued or running.
func (g *Group) Busy() bool { return g.qLen > 0 }

// Post queues a collective; it starts at once when nothing is ahead of it.
// CodeAgain: too many queued; other codes: the group is broken or closed.
func (g *Group) Post(a *Args, ctx any) engine.Code {
	switch {
	case g.closed:
		return engine.CodeInval
	case g.failed != 0:
		return g.failed
	case g.qLen == qCap:
		return engine.CodeAgain
	}
	o := &g.q[(g.qHead+g.qLen)&(qCap-1)]
	op := a.Op
	if a.Coll != dtype.Allreduce && a.Coll != dtype.Reduce && a.Coll != dtype.ReduceScatter {
		op = dtype.Noop
	}
	o.Args, o.ctx, o.seq, o.check = *a, ctx, g.seq, checkWord(a.Coll, a.Type, op, a.Root, a.Count) // every field
	g.seq++
	g.qLen++
	if g.qLen == 1 {
		g.startHead()
		g.e.flush()
	}
	return 0
}

func (g *Group) head() *opState { return &g.q[g.qHead] }

// stale reports whether a transport completion of operation seq comes
// after that operation finished (a failed one completes without waiting
// for the sends a transport still holds).
func (g *Group) stale(seq uint32) bool { return !g.running || g.head().seq != seq }

// scratchBuf returns scratch buffer i with n bytes (grown, never shrunk:
// no allocation once a group has run its largest operation).
func (g *Group) scratchBuf(i, n int) []byte {
	if cap(g.scratch[i]) < n {
		g.scratch[i] = make([]byte, n)
	}
	return g.scratch[i][:n]
}

// startHead builds the head operation's plan and starts its first round.
func (g *Group) startHead() {
	o := g.head()
	if g.leanStart(o) || g.startOneStep(o) {
		return
	}
	g.pl.reset()
	g.oneStep = false
	g.build(o)
	g.pl.endRound()
	g.running, g.round, g.pending = true, 0, 0
	g.startRound()
}

// startRound starts the running round's transfers; a round with none
// finishes at once (in a loop, not recursively).
func (g *Group) startRound() {
	for g.failed == 0 {
		if g.round >= len(g.pl.rounds) {
			g.complete(0)
			return
		}
		lo, hi := g.roundRange()
		g.pending = 0
		g.starting = true
		for i := lo; i < hi; i++ {
			a := &g.pl.acts[i]
			switch a.kind {
			case actSend:
				g.pending++
				g.trySend(i)
			case actRecv:
				g.pending++
				g.tryRecv(i)
			case actShm:
				g.pending++
				g.startShm(i)
			}
			if g.failed != 0 {
				g.starting = false
				return
			}
		}
		g.starting = false
		if g.pending > 0 {
			return
		}
		g.runLocals()
	}
}

func (g *Group) roundRange() (int, int) {
	lo := 0
	if g.round > 0 {
		lo = int(g.pl.rounds[g.round-1])
	}
	return lo, int(g.pl.rounds[g.round])
}

// runLocals runs the running round's local actions and moves to the next
// round.
func (g *Group) runLocals() {
	lo, hi := g.roundRange()
	o := g.head()
	for i := lo; i < hi; i++ {
		a := &g.pl.acts[i]
		switch a.kind {
		case actReduce:
			g.fn(a.dst, a.a, a.b)
		case actCopy:
			copy(a.dst, a.a)
		case actWiden:
			widen(o.Type, a.dst, a.a)
		case actNarrow:
			narrow(o.Type, a.dst, a.a)
		case actStrided:
			w := a.rows
			for k := 0; k < w.n; k++ {
				copy(a.dst[k*w.dst:k*w.dst+w.size], a.a[k*w.src:k*w.src+w.size])
			}
		}
	}
	g.round++
}

// transferDone counts a finished transfer of the running round; when it
// was the last, the group is queued for its locals and next round (run
// from progress, never inside a transport callback).
func (g *Group) transferDone(i int) {
	a := &g.pl.acts[i]
	if a.done {
		return
	}
	a.done = true
	g.moved = true
	g.pending--
	if g.pending == 0 && !g.starting {
		g.e.markReady(g)
	}
}

// advance continues after the running round's transfers completed.
func (g *Group) advance() {
	g.ready = false
	if !g.running || g.pending != 0 || g.failed != 0 {
		return
	}
	g.runLocals()
	g.startRound()
}

// ---------------------------------------------------------------------------
// sends

func (g *Group) trySend(i int) {
	a := &g.pl.acts[i]
	o := g.head()
	a.hdr = transport.Header{Kind: transport.KindColl, Group: g.id,
		Tag: uint64(o.seq)<<32 | uint64(uint32(g.rank)), Data: o.check, Len: uint64(len(a.a))}
	a.iov[0] = a.a
	tok := g.e.newTok(g, i, false)
	done, c := g.e.eng.CollSend(g.peers[a.peer], &a.hdr, a.iov[:], uint64(tok))
	switch {
	case c == engine.CodeAgain:
		g.e.freeTok(tok)
		a.blocked = true
		g.blocked = true
		g.e.markBlocked(g)
	case c != 0:
		g.e.freeTok(tok)
		g.fail(c)
	case done:
		g.e.freeTok(tok)
		g.transferDone(i)
	default:
		a.busy = true
		g.inflight++
	}
}

// retrySends retries sends of the running round that met a full
// transport.
func (g *Group) retrySends() {
	g.blocked = false
	if !g.running || g.failed != 0 {
		return
	}
	lo, hi := g.roundRange()
	for i := lo; i < hi && g.failed == 0; i++ {
		if a := &g.pl.acts[i]; a.kind == actSend && a.blocked {
			a.blocked = false
			g.trySend(i)
		}
	}
}

func (g *Group) sendDone(i int, c engine.Code) {
	g.inflight--
	a := &g.pl.acts[i]
	a.busy = false
	if c != 0 {
		g.fail(c)
	} else if g.failed == 0 {
		g.transferDone(i)
	}
	g.maybeFinishFailed()
}

// ---------------------------------------------------------------------------
// receives

// tryRecv posts receive i: it takes the rank's oldest early message, if
// any; otherwise the message lands when it arrives.
func (g *Group) tryRecv(i int) {
	a := &g.pl.acts[i]
	f := &g.fifos[a.peer]
	if f.empty() {
		a.busy = false
		return
	}
	m := f.pop()
	g.land(i, m.peer, &m.hdr, m.buf, m.cookie, m.rndv)
	if m.buf != nil {
		g.e.release(m.buf)
	}
}

// land moves a message into receive i after checking it belongs there.
func (g *Group) land(i int, p transport.Peer, hdr *transport.Header, eager []byte, cookie uint64, rndv bool) {
	a := &g.pl.acts[i]
	o := g.head()
	if uint32(hdr.Tag>>32) != o.seq || hdr.Data != o.check || hdr.Len != uint64(len(a.dst)) {
		if rndv {
			g.e.eng.CollDiscard(p, cookie)
		}
		g.fail(engine.CodeInval) // ranks called different collectives
		return
	}
	if !rndv {
		copy(a.dst, eager)
		g.transferDone(i)
		return
	}
	tok := g.e.newTok(g, i, true)
	g.e.toks[tok].peer = p
	a.iov[0] = a.dst
	done, n, c := g.e.eng.CollFetch(p, cookie, a.iov[:], uint64(tok))
	if done {
		g.e.freeTok(tok)
		g.fetched(i, n, c)
		return
	}
	a.busy = true
	g.inflight++
	g.fetching++
}

func (g *Group) fetched(i, n int, c engine.Code) {
	a := &g.pl.acts[i]
	switch {
	case c != 0:
		g.fail(c)
	case n != len(a.dst):
		g.fail(engine.CodeIO)
	case g.failed == 0:
		g.transferDone(i)
	}
}

func (g *Group) fetchDone(i, n int, c engine.Code) {
	g.inflight--
	g.fetching--
	g.pl.acts[i].busy = false
	g.fetched(i, n, c)
	g.maybeFinishFailed()
}

// arrive handles a message of this group from rank r.
func (g *Group) arrive(r int, p transport.Peer, hdr *transport.Header, eager []byte, cookie uint64) bool {
	f := &g.fifos[r]
	if f.empty() && g.running && g.failed == 0 && uint32(hdr.Tag>>32) == g.head().seq {
		if i := g.waitingRecv(r); i >= 0 {
			g.land(i, p, hdr, eager, cookie, eager == nil)
			return true
		}
	}
	if g.failed != 0 || g.closed {
		if eager == nil {
			g.e.eng.CollDiscard(p, cookie)
		}
		return true
	}
	m := early{peer: p, hdr: *hdr, cookie: cookie, rndv: eager == nil}
	if eager != nil {
		if !g.e.reserve(p, len(eager)) {
			return false
		}
		m.buf = g.e.pool.Get(len(eager))
		copy(m.buf, eager)
	}
	f.push(m)
	return true
}

// waitingRecv returns the running round's posted, unfilled receive from
// rank r, or -1.
func (g *Group) waitingRecv(r int) int {
	lo, hi := g.roundRange()
	for i := lo; i < hi; i++ {
		a := &g.pl.acts[i]
		if a.kind == actRecv && int(a.peer) == r && !a.done && !a.busy {
			return i
		}
	}
	return -1
}

// ---------------------------------------------------------------------------
// completion and failure

// complete finishes the head operation with c and starts the next.
func (g *Group) complete(c engine.Code) {
	o := g.head()
	if o.Coll == collJoin {
		if c == 0 {
			c = g.joined()
		}
		if c != 0 && g.failed == 0 {
			g.failed = c
		}
	}
	ctx, flags := o.ctx, o.Flags
	if o.Coll == collJoin {
		flags |= engine.FlagCompletion // a join always reports
	}
	switch {
	case g.inflight == 0 && g.oneStep:
		st := &g.pl.acts[0].shm // kept for the next one-step operation; drop the buffers
		st.in, st.out = nil, nil
	case g.inflight == 0:
		g.pl.reset()
	default:
		g.pl = planner{} // transports still hold headers in the old one
		g.oneStep = false
		g.inflight, g.fetching = 0, 0
	}
	g.running, g.round = false, -1
	g.sh.act, g.sh.st, g.sh.acc = -1, nil, nil
	o.ctx, o.Buf, o.Result = nil, nil, nil // the rest is rewritten by Post
	g.qHead = (g.qHead + 1) & (qCap - 1)
	g.qLen--
	g.e.eng.CollComplete(ctx, flags, c)
	if g.qLen > 0 {
		if g.failed != 0 {
			g.drainFailed()
			return
		}
		g.startHead()
	}
}

// fail breaks the group: every rank is told (abort messages), the running
// operation completes with c once the transport has given back the
// buffers it held, and every queued or later one fails too.
func (g *Group) fail(c engine.Code) {
	if g.failed != 0 {
		return
	}
	g.failed = c
	if g.region != nil && g.region.mem != nil {
		g.region.setAbort(c) // node-local members poll it
	}
	g.abortTo = true
	g.e.markBlocked(g)
	g.maybeFinishFailed()
}

// A failed operation completes once no fetch writes into its buffers any
// more. Sends may still be held by a transport (a peer that stopped
// polling never takes them): they only read the caller's buffers, and the
// plan that holds their headers is then kept, not reused.
func (g *Group) maybeFinishFailed() {
	if g.failed == 0 || g.fetching > 0 || !g.running {
		return
	}
	g.complete(g.failed)
}

// drainFailed completes every queued operation with the group's errno.
func (g *Group) drainFailed() {
	for g.qLen > 0 {
		o := g.head()
		ctx := o.ctx
		*o = opState{}
		g.qHead = (g.qHead + 1) & (qCap - 1)
		g.qLen--
		g.e.eng.CollComplete(ctx, 0, g.failed)
	}
}

// sendAborts tells every other member that the group failed, retrying
// (from progress) a member whose transport has no room or is still
// connecting, until each abort is sent or its send fails (a dead peer
// learns nothing, and needs to).
func (g *Group) sendAborts() {
	if g.abortLeft == nil {
		g.abortLeft = make([]bool, g.size)
		for r := range g.abortLeft {
			g.abortLeft[r] = r != g.rank
		}
		g.abortHdr = transport.Header{Kind: transport.KindColl, Group: g.id,
			Tag: uint64(g.rank), Data: ctrlAbort<<60 | uint64(uint32(g.failed))}
	}
	g.abortTo = false
	for r, left := range g.abortLeft {
		if !left {
			continue
		}
		_, c := g.e.eng.CollSend(g.peers[r], &g.abortHdr, nil, uint64(abortTok))
		if c == engine.CodeAgain {
			g.abortTo = true
			continue
		}
		g.abortLeft[r] = false
	}
	if g.abortTo {
		g.e.markBlocked(g)
	}
}

// abortTok marks abort sends (their completions are ignored).
const abortTok = 1<<32 - 1

// remoteAbort handles a member's abort message.
func (g *Group) remoteAbort(c engine.Code) {
	if c <= 0 || c > 4096 {
		c = engine.CodeIO
	}
	if g.failed == 0 {
		g.failed = c
		g.maybeFinishFailed()
	}
}

// peerDown handles the failure of a member's transport peer.
func (g *Group) peerDown(c engine.Code) {
	if c == 0 {
		c = engine.CodeConnReset
	}
	g.fail(c)
}

// close leaves the group; queued operations must have completed.
func (g *Group) close() {
	g.closed = true
	for r := range g.fifos {
		f := &g.fifos[r]
		for !f.empty() {
			m := f.pop()
			if m.rndv {
				g.e.eng.CollDiscard(m.peer, m.cookie)
			} else {
				g.e.release(m.buf)
			}
		}
	}
	if g.region != nil {
		if g.region.mem != nil {
			g.region.setAbort(engine.CodeCanceled) // members still posting fail, not wait
		}
		g.e.unwatch(g.region)
		g.region.close()
		g.region = nil
	}
}

// pingAfter is how long a receive may wait without the operation moving
// before its sender is pinged: a ping to a dead peer fails in its
// transport (connection refused, region gone), which breaks the group,
// so a rank never waits forever for a peer no transport noticed die.
var pingAfter = time.Second

// watch is called now and then while operations run (see CollProgress).
func (g *Group) watch(now time.Time) {
	if !g.running || g.failed != 0 {
		return
	}
	if g.moved || g.lastMove.IsZero() {
		g.moved = false
		g.lastMove = now
		return
	}
	if now.Sub(g.lastMove) < pingAfter {
		return
	}
	g.lastMove = now
	lo, hi := g.roundRange()
	for i := lo; i < hi && g.failed == 0; i++ {
		if a := &g.pl.acts[i]; a.kind == actRecv && !a.done && !a.busy {
			g.ping(int(a.peer))
		}
	}
	if r := g.region; g.sh.act >= 0 && r != nil {
		// A shared-memory step waits for the local ranks that have not
		// arrived (or, before the region is mapped, for its leader).
		for j := 0; j < r.n && g.failed == 0; j++ {
			if r.local[j] == g.rank {
				continue
			}
			if (r.mem == nil && j == 0) || (r.mem != nil && r.ph > 0 && r.arriveWord(j, r.ph).Load() < r.ph) {
				g.ping(r.local[j])
			}
		}
	}
}

// ping sends a zero-byte control message the receiver ignores; only its
// failure matters.
func (g *Group) ping(r int) {
	g.pingHdr = transport.Header{Kind: transport.KindColl, Group: g.id, Tag: uint64(g.rank), Data: ctrlPing << 60}
	tok := g.e.newTok(g, -1, false)
	done, c := g.e.eng.CollSend(g.peers[r], &g.pingHdr, nil, uint64(tok))
	if done || c != 0 {
		g.e.freeTok(tok)
	}
	if c != 0 && c != engine.CodeAgain {
		g.fail(c)
	}
}
