package coll

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gofi-dev/fi/engine"
	"github.com/gofi-dev/fi/internal/getcpu"
	"github.com/gofi-dev/fi/transport"
)

// Config sets up the collectives of one endpoint.
type Config struct {
	// NodeKey names the shared-memory domain this process is in: members
	// whose keys are equal and non-zero share node-local regions (see
	// NodeKey). 0 keeps every collective on point-to-point messages.
	NodeKey uint64
	// MaxEarlyBytes caps the payload buffered for collective messages that
	// arrive before their operation runs (0: 8 MiB). Above it the sender's
	// stream is pushed back.
	MaxEarlyBytes int
}

// Endpoint is the collective engine of one engine endpoint: it implements
// engine.CollSink, holds the joined groups and routes their traffic.
//
// Concurrency: every method must be called with the engine endpoint's
// Serial held (engine.Endpoint.Lock), as the root package does.
type Endpoint struct {
	eng *engine.Endpoint
	cfg Config

	groups  map[uint32]*Group
	closed  [64]uint32 // ids of recently closed groups: their late traffic is dropped
	nclosed int
	joins   map[uint64]uint32 // joins so far per membership hash

	pending []pendingMsg // traffic for groups not joined yet
	used    int          // bytes buffered for early messages
	pool    engine.BufPool

	toks    []tokEntry
	tokFree []uint32

	poker  transport.Poker  // wakes local ranks asleep in Sread (nil: none)
	ringer transport.Ringer // instead of poker when the transport has it
	// The regions of the groups waiting in a shared-memory step, for the
	// transport's wait condition (waitCond), which runs concurrently.
	watch     [4]atomic.Pointer[region]
	watchAll  atomic.Bool  // more groups wait than watch holds: never sleep
	inCond    atomic.Int32 // waitConds running (unwatch waits for 0)
	ready     []*Group     // transfers of the running round all done
	shmActive []*Group     // waiting in a shared-memory step
	shmRecent bool         // a lean operation ended in its post (CollShmWait)
	blocked   []*Group     // sends to retry, aborts to send
	spare     []*Group
	polls     uint32

	shut bool
}

type pendingMsg struct {
	group uint32
	early
}

type tokEntry struct {
	g     *Group
	act   int32
	seq   uint32 // the operation it belongs to: completions of a finished one are stale
	fetch bool
	peer  transport.Peer
}

// Attach builds the collective engine of eng and installs it as eng's
// collective sink.
func Attach(eng *engine.Endpoint, cfg Config) *Endpoint {
	if cfg.MaxEarlyBytes <= 0 {
		cfg.MaxEarlyBytes = 8 << 20
	}
	e := &Endpoint{eng: eng, cfg: cfg, groups: map[uint32]*Group{}, joins: map[uint64]uint32{}, pool: engine.BufPool{Keep: 16}}
	e.poker, _ = eng.Transport().(transport.Poker)
	if e.ringer, _ = eng.Transport().(transport.Ringer); e.ringer != nil {
		e.poker = nil
		e.ringer.SetWaitCond(e.waitCond)
	}
	eng.SetColl(e)
	return e
}

// recSize is the size of one rank's join record: membership hash, node
// key, pid, flags, nonce.
const recSize = 32

// MembershipHash is the FNV-1a hash of the members' addresses in order:
// every rank of a group computes the same one.
func MembershipHash(names [][]byte) uint64 {
	h := uint64(14695981039346656037)
	var n [4]byte
	for _, b := range names {
		binary.LittleEndian.PutUint32(n[:], uint32(len(b)))
		for _, c := range n {
			h = (h ^ uint64(c)) * 1099511628211
		}
		for _, c := range b {
			h = (h ^ uint64(c)) * 1099511628211
		}
	}
	return h
}

// Join starts joining the group whose members are the fi_addrs members
// (names: their addresses, the same on every rank), this endpoint being
// member self. It returns the group at once; the join runs as the group's
// first operation (every member exchanges a record with every other) and
// completes on the transmit CQ with FI_COLLECTIVE and ctx. Operations
// posted before that run after it.
//
// The group's id is derived from the membership and from how many times
// this endpoint joined the same membership before, so every member finds
// the same id without talking (MPI's rule: members join their groups in
// the same order).
func (e *Endpoint) Join(members []uint64, names [][]byte, self int, ctx any) (*Group, engine.Code) {
	if e.shut || self < 0 || self >= len(members) || len(names) != len(members) {
		return nil, engine.CodeInval
	}
	if !e.eng.HasTxCQ() {
		return nil, engine.CodeInval
	}
	hash := MembershipHash(names)
	ord := e.joins[hash]
	id := groupID(hash, ord)
	if _, dup := e.groups[id]; dup {
		return nil, engine.CodeBusy
	}
	n := len(members)
	g := &Group{e: e, id: id, hash: hash, rank: self, size: n, round: -1, sh: shmRun{act: -1},
		members: append([]uint64(nil), members...),
		peers:   make([]transport.Peer, n),
		fifos:   make([]fifo, n),
	}
	for r, a := range members {
		if r == self {
			continue
		}
		p, c := e.eng.CollResolve(a)
		if c != 0 {
			return nil, c
		}
		g.peers[r] = p
		for int(p) >= len(g.rankOf) {
			g.rankOf = append(g.rankOf, 0)
		}
		if g.rankOf[p] != 0 {
			return nil, engine.CodeInval // one peer twice in the set
		}
		g.rankOf[p] = int32(r) + 1
	}
	e.joins[hash] = ord + 1
	e.groups[id] = g
	// Traffic that came before the join.
	k := 0
	for _, m := range e.pending {
		if m.group != id {
			e.pending[k] = m
			k++
			continue
		}
		r := g.rankOfPeer(m.peer)
		switch {
		case r < 0 && m.rndv:
			e.eng.CollDiscard(m.peer, m.cookie)
		case r < 0:
			e.release(m.buf)
		case m.hdr.Data>>60 == ctrlAbort:
			g.remoteAbort(engine.Code(uint32(m.hdr.Data)))
		default:
			g.fifos[r].push(m.early)
		}
	}
	clear(e.pending[k:])
	e.pending = e.pending[:k]

	g.join = make([]byte, n*recSize)
	rec := g.join[self*recSize:]
	binary.LittleEndian.PutUint64(rec[0:], hash)
	binary.LittleEndian.PutUint64(rec[8:], e.cfg.NodeKey)
	binary.LittleEndian.PutUint32(rec[16:], uint32(os.Getpid()))
	binary.LittleEndian.PutUint64(rec[24:], rand.Uint64()|1) // names the region if this rank leads one
	if c := g.Post(&Args{Coll: collJoin, Count: n}, ctx); c != 0 {
		delete(e.groups, id)
		return nil, c
	}
	return g, 0
}

func groupID(hash uint64, ord uint32) uint32 {
	x := hash ^ uint64(ord)*0x9e3779b97f4a7c15
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return uint32(x)
}

func (g *Group) rankOfPeer(p transport.Peer) int {
	if int(p) < len(g.rankOf) {
		return int(g.rankOf[p]) - 1
	}
	return -1
}

// joined checks the exchanged join records once the join's plan ran.
func (g *Group) joined() engine.Code {
	g.nodeKeys = make([]uint64, g.size)
	for r := 0; r < g.size; r++ {
		rec := g.join[r*recSize:]
		if binary.LittleEndian.Uint64(rec) != g.hash {
			return engine.CodeInval // the members disagree on the membership
		}
		g.nodeKeys[r] = binary.LittleEndian.Uint64(rec[8:])
	}
	g.joinDone = true
	return g.setupRegion()
}

// Leave closes group g. It returns CodeBusy while operations are queued.
func (e *Endpoint) Leave(g *Group) engine.Code {
	if g.closed {
		return engine.CodeInval
	}
	if g.qLen > 0 && g.failed == 0 {
		return engine.CodeBusy
	}
	g.drainFailed()
	g.close()
	delete(e.groups, g.id)
	e.closed[e.nclosed%len(e.closed)] = g.id
	e.nclosed++
	return 0
}

func (e *Endpoint) recentlyClosed(id uint32) bool {
	for i := 0; i < min(e.nclosed, len(e.closed)); i++ {
		if e.closed[i] == id {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------------------
// engine.CollSink

// CollArrive routes a collective message to its group.
func (e *Endpoint) CollArrive(p transport.Peer, hdr *transport.Header, eager []byte, cookie uint64) bool {
	g := e.groups[hdr.Group]
	if g == nil && hdr.Data>>60 == ctrlPing {
		if eager == nil {
			e.eng.CollDiscard(p, cookie)
		}
		return true
	}
	if g == nil {
		if e.shut || e.recentlyClosed(hdr.Group) {
			if eager == nil {
				e.eng.CollDiscard(p, cookie)
			}
			return true
		}
		m := pendingMsg{group: hdr.Group, early: early{peer: p, hdr: *hdr, cookie: cookie, rndv: eager == nil}}
		if eager != nil {
			if !e.reserve(p, len(eager)) {
				return false
			}
			m.buf = e.pool.Get(len(eager))
			copy(m.buf, eager)
		}
		e.pending = append(e.pending, m)
		return true
	}
	r := g.rankOfPeer(p)
	if r < 0 || r == g.rank {
		if eager == nil {
			e.eng.CollDiscard(p, cookie)
		}
		return true // not a member: ignored
	}
	switch hdr.Data >> 60 {
	case ctrlAbort:
		if eager == nil {
			e.eng.CollDiscard(p, cookie)
		}
		g.remoteAbort(engine.Code(uint32(hdr.Data)))
		return true
	case ctrlPing:
		if eager == nil {
			e.eng.CollDiscard(p, cookie)
		}
		return true
	}
	return g.arrive(r, p, hdr, eager, cookie)
}

// CollSendDone completes a send.
func (e *Endpoint) CollSendDone(tok uint64, c engine.Code) {
	if tok == abortTok || tok >= uint64(len(e.toks)) {
		return
	}
	t := e.toks[tok]
	e.freeTok(uint32(tok))
	switch {
	case t.g == nil:
	case t.act < 0: // a ping
		if c != 0 {
			t.g.fail(c)
		}
	case t.g.stale(t.seq):
	default:
		t.g.sendDone(int(t.act), c)
	}
}

// CollFetchDone completes a fetch.
func (e *Endpoint) CollFetchDone(tok uint64, n int, c engine.Code) {
	if tok >= uint64(len(e.toks)) {
		return
	}
	t := e.toks[tok]
	e.freeTok(uint32(tok))
	e.eng.CollFetchEnd(t.peer)
	if t.g != nil && !t.g.stale(t.seq) {
		t.g.fetchDone(int(t.act), n, c)
	}
}

// CollPeerDown fails every group the peer is a member of.
func (e *Endpoint) CollPeerDown(p transport.Peer, c engine.Code) {
	for _, g := range e.groups {
		if r := g.rankOfPeer(p); r >= 0 && r != g.rank {
			g.peerDown(c)
		}
	}
	k := 0
	for _, m := range e.pending {
		if m.peer == p {
			e.release(m.buf)
			continue
		}
		e.pending[k] = m
		k++
	}
	clear(e.pending[k:])
	e.pending = e.pending[:k]
}

// CollProgress sends what waited for room, runs the locals and next rounds
// of groups whose transfers completed, and polls shared-memory steps.
func (e *Endpoint) CollProgress() bool {
	e.shmRecent = false
	if len(e.shmActive) == 1 && len(e.blocked) == 0 && len(e.ready) == 0 {
		// The usual waiting pass: one group waits in a phase and its
		// peers have not all arrived. Only the watch's clock is due now
		// and then.
		g := e.shmActive[0]
		if g.sh.waiting && g.failed == 0 && !g.closed {
			r := g.region
			switch {
			case !r.arrived():
				if r.aborted() != 0 {
					break // the general path fails the group
				}
				if e.polls++; e.polls&63 != 0 {
					return false
				}
				now := time.Now()
				for _, g := range e.groups {
					g.watch(now)
				}
				return false
			case g.sh.lean:
				// Everyone arrived at a lean operation's phase: complete
				// it, and take the group off the list unless the next
				// operation waits in its turn.
				g.leanDone(false)
				if g.sh.act < 0 || g.failed != 0 || g.closed {
					g.sh.listed = false
					if e.poker != nil {
						e.poker.WaitPokes(-1)
					}
					e.shmActive[0] = nil
					e.shmActive = e.shmActive[:0]
					if !e.watchOff(r) {
						e.rewatch()
					}
				}
				if len(e.blocked) > 0 {
					e.unblock()
				}
				e.polls++
				return true
			}
		}
	}
	did := len(e.blocked) > 0 && e.unblock()
	if e.shmPoll() {
		did = true
	}
	for len(e.ready) > 0 {
		g := e.ready[len(e.ready)-1]
		e.ready = e.ready[:len(e.ready)-1]
		g.advance()
		did = true
	}
	// What the rounds run just now failed or blocked goes out before the
	// caller sees the completions (and perhaps stops progressing).
	if len(e.blocked) > 0 && e.unblock() {
		did = true
	}
	// The watch looks at the clock every 4096 passes, or every 64 while a
	// shared-memory step waits (its passes may each sleep in Sread).
	if e.polls++; (e.polls&4095 == 0 || e.polls&63 == 0 && len(e.shmActive) > 0) && len(e.groups) > 0 {
		now := time.Now()
		for _, g := range e.groups {
			g.watch(now)
		}
	}
	return did
}

// CollPeersElsewhere reports whether the one group this endpoint waits
// on in a shared-memory phase waits only for ranks that last waited on
// another CPU than this thread's (region.othersElsewhere), publishing
// this thread's CPU for them (engine.CollSink). Sread's yielding wait then
// skips its sched_yield: 4 ranks on 2 CPUs, a yield every empty pass
// costs ~4x the context switches of the minimum, and under other
// programs' load each yield may hand them the CPU for their slice.
func (e *Endpoint) CollPeersElsewhere() bool {
	if len(e.shmActive) != 1 {
		return false
	}
	g := e.shmActive[0]
	r := g.region
	if r == nil || r.mem == nil || !g.sh.waiting || g.failed != 0 || g.closed {
		return false
	}
	cpu := getcpu.Current()
	if cpu < 0 {
		return false
	}
	return r.othersElsewhere(cpu)
}

// CollShmWait reports whether a shared-memory step waits, or one ended
// in the post that started it since the last pass (and nothing waits for
// room in the transport): progress may look at the regions alone on most
// passes (engine.CollSink). The second case is the caller's read of the
// completion its post made: in a loop of collectives, the transport
// (which has nothing for them) is then left out of that read as of the
// waiting ones, on seven passes in eight.
func (e *Endpoint) CollShmWait() bool {
	return (len(e.shmActive) > 0 || e.shmRecent) && len(e.blocked) == 0
}

// unblock sends the aborts and retries the sends that waited for room.
func (e *Endpoint) unblock() bool {
	if len(e.blocked) == 0 {
		return false
	}
	bl := e.blocked
	e.blocked = e.spare[:0] // sendAborts may queue its group again
	for _, g := range bl {
		if g.abortTo {
			g.sendAborts()
		}
		if g.blocked {
			g.retrySends()
		}
	}
	clear(bl)
	e.spare = bl[:0]
	return true
}

// CollClose fails every group: the endpoint is closing.
func (e *Endpoint) CollClose() {
	e.shut = true
	for _, g := range e.groups {
		if g.failed == 0 {
			g.failed = engine.CodeCanceled
		}
		if g.running {
			g.running = false
			ctx := g.head().ctx
			*g.head() = opState{}
			g.qHead = (g.qHead + 1) % qCap
			g.qLen--
			e.eng.CollComplete(ctx, 0, g.failed)
		}
		g.drainFailed()
		g.close()
	}
	clear(e.groups)
	for _, g := range e.shmActive {
		g.sh.listed = false
		if e.poker != nil {
			e.poker.WaitPokes(-1)
		}
	}
	clear(e.shmActive)
	e.shmActive = e.shmActive[:0]
	e.rewatch()
	for _, m := range e.pending {
		e.release(m.buf)
	}
	e.pending = nil
}

// flush runs what a post made ready at once (rounds that completed
// synchronously are already run by startRound).
func (e *Endpoint) flush() {
	for len(e.ready) > 0 {
		g := e.ready[len(e.ready)-1]
		e.ready = e.ready[:len(e.ready)-1]
		g.advance()
	}
}

func (e *Endpoint) markReady(g *Group) {
	if !g.ready {
		g.ready = true
		e.ready = append(e.ready, g)
	}
}

func (e *Endpoint) markBlocked(g *Group) {
	for _, x := range e.blocked {
		if x == g {
			return
		}
	}
	e.blocked = append(e.blocked, g)
}

func (e *Endpoint) newTok(g *Group, act int, fetch bool) uint32 {
	var i uint32
	if n := len(e.tokFree); n > 0 {
		i = e.tokFree[n-1]
		e.tokFree = e.tokFree[:n-1]
	} else {
		e.toks = append(e.toks, tokEntry{})
		i = uint32(len(e.toks) - 1)
	}
	e.toks[i] = tokEntry{g: g, act: int32(act), fetch: fetch}
	if g.qLen > 0 {
		e.toks[i].seq = g.head().seq
	}
	return i
}

func (e *Endpoint) freeTok(i uint32) {
	e.toks[i] = tokEntry{}
	e.tokFree = append(e.tokFree, i)
}

// reserve accounts n bytes of early payload from peer p; false pushes the
// peer back (never while a fetch from it is in flight: its payload may
// follow on the same stream).
func (e *Endpoint) reserve(p transport.Peer, n int) bool {
	if e.used+n > e.cfg.MaxEarlyBytes && e.used > 0 && !e.eng.Fetching(p) {
		return false
	}
	e.used += n
	return true
}

func (e *Endpoint) release(b []byte) {
	if b == nil {
		return
	}
	e.used -= len(b)
	e.pool.Put(b)
}

// waitCond is the transport's wait condition (transport.Ringer): true when
// a watched group's ranks have all arrived at its phase (or one aborted),
// so a rank asleep in Sread wakes without a poke from the last to arrive.
// It runs concurrently with everything else.
func (e *Endpoint) waitCond() bool {
	e.inCond.Add(1)
	ok := e.watchAll.Load()
	for i := range e.watch {
		if ok {
			break
		}
		if r := e.watch[i].Load(); r != nil {
			ok = r.ready()
		}
	}
	e.inCond.Add(-1)
	return ok
}

// rewatch publishes the regions of the groups on shmActive for waitCond.
func (e *Endpoint) rewatch() {
	if e.ringer == nil {
		return
	}
	// Only what changes is stored: a store here is a locked instruction,
	// and a rank lists and unlists its group on every collective.
	n := 0
	for _, g := range e.shmActive {
		if r := g.region; r != nil && r.mem != nil && r.ph > 0 {
			if n < len(e.watch) && e.watch[n].Load() != r {
				e.watch[n].Store(r)
			}
			n++
		}
	}
	for i := n; i < len(e.watch); i++ {
		if e.watch[i].Load() != nil {
			e.watch[i].Store(nil)
		}
	}
	if all := n > len(e.watch); e.watchAll.Load() != all {
		e.watchAll.Store(all)
	}
}

// watchOn adds the region of a group that starts waiting to the watch:
// what rewatch would do, without going over every waiting group (a rank
// lists its group and takes it off again on every collective). A region
// keeps its slot while its group is idle (watchOff marks it so), so a
// group running collective after collective finds it there and stores
// nothing.
func (e *Endpoint) watchOn(r *region) {
	if e.ringer == nil || r == nil || r.mem == nil || r.ph == 0 {
		return
	}
	if e.watch[r.wslot].Load() == r {
		return
	}
	free := -1
	for i := range e.watch {
		switch x := e.watch[i].Load(); {
		case x == r:
			r.wslot = i
			return
		case x == nil || x.idle():
			if free < 0 {
				free = i
			}
		}
	}
	if free < 0 {
		e.watchAll.Store(true)
		return
	}
	e.watch[free].Store(r)
	r.wslot = free
}

// watchOff marks the region of a group that stopped waiting idle (the
// wait condition ignores it until its next phase; it keeps its slot);
// false when more groups waited than the watch holds (the caller then
// runs rewatch once the list is updated).
func (e *Endpoint) watchOff(r *region) bool {
	if e.ringer == nil || r == nil {
		return true
	}
	if r.wph.Load() != 0 {
		r.wph.Store(0)
	}
	return !e.watchAll.Load()
}

// unwatch takes region r off the watch before it is unmapped, and waits
// until no waitCond can still be reading it.
func (e *Endpoint) unwatch(r *region) {
	for i := range e.watch {
		if e.watch[i].Load() == r {
			e.watch[i].Store(nil)
		}
	}
	for e.inCond.Load() != 0 {
		runtime.Gosched()
	}
}
