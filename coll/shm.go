package coll

import (
	"os"
	"strconv"

	"github.com/gofi-dev/fi/dtype"
	"github.com/gofi-dev/fi/dtype/kernel"
	"github.com/gofi-dev/fi/engine"
)

// Shared-memory collectives (within one node): the local ranks map the
// group's region (region.go) and run every collective as a sequence of
// phases, with no point-to-point message at all. In a phase each rank
//
//  1. writes what it contributes into buffer set ph&1 of the region
//     (its own slot, or the whole set for the root of a one-writer
//     operation),
//  2. arrives: stores ph in its control line,
//  3. waits until every local rank has arrived at ph (polled from
//     progress: the operation never blocks the caller),
//  4. reads what it needs from buffer set ph&1 (and writes results into
//     the result slot of that set, read in the next phase only).
//
// Because every phase waits for every rank, a buffer set written in phase
// ph is rewritten no earlier than phase ph+2, when every rank has finished
// reading it: double buffering without any acknowledgement. Large buffers
// run in chunks of a slot, one phase per chunk, so copying in the next
// chunk overlaps reading the previous one.
//
// Algorithms (S is the slot size, n the local ranks):
//
//   - barrier: one phase.
//   - broadcast, scatter: the root writes chunks of the whole set
//     ((n+1)S bytes), the others copy them out.
//   - allgather, gather, alltoall: every rank writes its chunk (block j of
//     alltoall in part j of the slot), the readers copy.
//   - allreduce and reduce of at most ShmFoldMax bytes: one phase; every
//     rank (reduce: the root) folds all n slots itself. Up to 48 bytes
//     the operands travel in the ranks' control lines instead of slots,
//     in the cache line that says they arrived.
//   - larger allreduce and reduce: per chunk of S bytes, rank i folds slice
//     i of the chunk across the n slots into the result slot (parallel
//     slices), and in the next phase every rank (reduce: the root) copies
//     the whole reduced chunk out.
//   - reduce-scatter: every rank writes part j of its chunk of block j into
//     part j of its slot; rank i folds part i across the n slots.
//
// Order: every element is a left fold over the local ranks in increasing
// order, ((x0 op x1) op x2) ... op x(n-1), computed by one rank or
// identically by each; the same for every size.
//
// Mismatched calls: the first phase of every operation publishes the
// operation's check word (collective, datatype, op, root, count); every
// rank compares all of them before using any data and the group fails
// with FI_EINVAL on a difference. A failing rank stores its errno in the
// region's abort word, which waiting ranks poll.

// ShmFoldMax: an allreduce or reduce of at most this many bytes (in the
// reduction's datatype) over shared memory runs in one phase, each rank
// folding every slot; above it, in parallel slices (two phases per
// chunk). A variable so tests and benchmarks can force either side.
//
// Measured with perftest coll (float32 SUM, 2 vCPUs, load 22-23,
// alternating runs, p50 us fold / slices): 2 ranks spinning 1 KiB
// 1.9-2.0 / 2.5, 4 KiB 3.4 / 3.6-4.1, 16 KiB 7.6 / 7.7, 64 KiB 25 / 24;
// 4 ranks on the 2 vCPUs 1 KiB 79-171 / 229-349, 64 KiB 120-174 /
// 325-392. Folding pays up to 64 KiB (the phase it saves costs most when
// ranks share CPUs), slices beyond.
var ShmFoldMax = envInt(ShmFoldEnv, 64<<10)

// ShmFoldEnv names the environment variable that sets ShmFoldMax (bytes),
// for measuring where the switch pays.
const ShmFoldEnv = "GOFI_COLL_SHM_FOLD_MAX"

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

// shmKind says what an actShm step does.
type shmKind uint8

const (
	shmAttach shmKind = iota + 1
	shmBarrier
	shmBcast
	shmAllreduce
	shmReduce
	shmAllgather
	shmAlltoall
	shmScatter
	shmGather
	shmReduceScatter
)

// shmStep is one shared-memory step of a plan.
type shmStep struct {
	kind  shmKind
	t     dtype.Type // datatype of in and out (FLOAT16 / BFLOAT16 reduced in float32)
	op    dtype.Op
	root  int    // local index of the root
	in    []byte // this rank's input (broadcast: the buffer)
	out   []byte // this rank's output
	count int    // elements (per block for block operations)
	check uint64 // the operation's check word
}

// shmRun is the state of the running shared-memory step.
type shmRun struct {
	act      int // plan action; -1: none
	st       *shmStep
	k, K     int  // phase within the step, number of phases
	waiting  bool // arrived at phase k, waiting for the others
	listed   bool // on the endpoint's shmActive list
	lean     bool // started by leanStart (lean.go)
	sleepers bool // and rings sleepers when it completes (ringSleepers)

	t       dtype.Type // the caller's datatype
	es, wes int        // its size, the reduction's
	wide    bool       // FLOAT16 / BFLOAT16 reduced in float32
	chunk   int        // elements (reductions) or bytes (moves) per phase
	fold    bool       // allreduce/reduce folded whole in one phase
	inl     bool       // and small enough to travel inline (region.inline)
	acc     []byte     // wide results before narrowing
}

// shmKindOf returns the shared-memory step that runs collective c over a
// node-local region (0: none).
func shmKindOf(c dtype.CollOp) shmKind {
	switch c {
	case dtype.Barrier:
		return shmBarrier
	case dtype.Broadcast:
		return shmBcast
	case dtype.Allreduce:
		return shmAllreduce
	case dtype.Reduce:
		return shmReduce
	case dtype.Allgather:
		return shmAllgather
	case dtype.Alltoall:
		return shmAlltoall
	case dtype.Scatter:
		return shmScatter
	case dtype.Gather:
		return shmGather
	case dtype.ReduceScatter:
		return shmReduceScatter
	}
	return 0
}

// shmStepOf is the shared-memory step of operation o.
func shmStepOf(o *opState, kind shmKind) shmStep {
	st := shmStep{kind: kind, t: o.Type, op: o.Op, root: o.Root, in: o.Buf, out: o.Result, count: o.Count, check: o.check}
	if kind == shmBcast {
		st.out = o.Buf
	}
	return st
}

// buildShm writes a plan over the node-local region; false when the
// operation does not use it (the group is not all on one node).
func (g *Group) buildShm(o *opState) bool {
	r := g.region
	if r == nil || r.n != g.size {
		return false
	}
	kind := shmKindOf(o.Coll)
	if kind == 0 {
		return false
	}
	g.pl.shmStep(shmStepOf(o, kind))
	g.pl.endRound()
	return true
}

// startOneStep starts the head operation when it runs over the node-local
// region alone: its plan is one shared-memory step in one round, so the
// plan of the previous such operation is reused (only the step is
// rewritten) and the step's end completes the operation at once
// (shmDone), without the rounds' bookkeeping. False when o needs a plan
// built (point to point, hierarchical, the join).
func (g *Group) startOneStep(o *opState) bool {
	r := g.region
	if r == nil || r.n != g.size || o.Coll == collJoin {
		return false
	}
	kind := shmKindOf(o.Coll)
	if kind == 0 {
		return false
	}
	st := g.oneStepAct() // field by field: cheaper than a whole new step
	st.kind, st.t, st.op, st.root, st.count, st.check = kind, o.Type, o.Op, o.Root, o.Count, o.check
	st.in, st.out = o.Buf, o.Result
	if kind == shmBcast {
		st.out = o.Buf
	}
	g.fn = nil
	g.running, g.round, g.pending = true, 0, 1
	g.startShm(0)
	return true
}

// oneStepAct makes the plan one shared-memory step in one round, unless
// the previous operation left it so, and returns that step for the caller
// to rewrite (startOneStep, leanStart).
func (g *Group) oneStepAct() *shmStep {
	if !g.oneStep {
		g.makeOneStep()
	}
	a := &g.pl.acts[0]
	a.done = false
	return &a.shm
}

func (g *Group) makeOneStep() {
	p := &g.pl
	p.reset()
	p.shmStep(shmStep{})
	p.endRound()
	g.oneStep = true
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// startShm starts shared-memory step i of the running round.
func (g *Group) startShm(i int) {
	a := &g.pl.acts[i]
	s := &g.sh
	*s = shmRun{act: i, st: &a.shm, listed: s.listed}
	if a.shm.kind == shmAttach {
		if g.attachStart() {
			g.shmDone()
		} else if g.failed == 0 {
			g.shmList()
		}
		return
	}
	g.shmPlan()
	g.shmAdvance()
}

// shmPlan sets the phase count and chunking of the step.
func (g *Group) shmPlan() {
	s, r := &g.sh, g.region
	st := s.st
	if st.kind == shmBarrier {
		s.K = 1
		return
	}
	s.t = st.t
	s.es = st.t.Size()
	wt := Widen(st.t)
	s.wes = wt.Size()
	s.wide = wt != st.t
	n, S := r.n, r.slot
	switch st.kind {
	case shmBarrier:
		s.K = 1
	case shmBcast:
		s.chunk = (n + 1) * S
		s.K = max(1, ceilDiv(st.count*s.es, s.chunk))
	case shmScatter:
		s.chunk = (n + 1) * S / n
		s.K = max(1, ceilDiv(st.count*s.es, s.chunk))
	case shmAllgather, shmGather:
		s.chunk = S
		s.K = max(1, ceilDiv(st.count*s.es, s.chunk))
	case shmAlltoall:
		s.chunk = S / n
		s.K = max(1, ceilDiv(st.count*s.es, s.chunk))
	case shmAllreduce, shmReduce:
		g.fn = g.kernel(wt, st.op)
		s.chunk = S / s.wes
		if st.count*s.wes <= min(ShmFoldMax, S) {
			s.fold, s.K = true, 1
			s.inl = st.count*s.wes <= inlineMax
		} else {
			s.K = ceilDiv(st.count, s.chunk) + 1
		}
		if s.wide {
			s.acc = g.scratchBuf(0, min(st.count, s.chunk)*s.wes)
		}
	case shmReduceScatter:
		g.fn = g.kernel(wt, st.op)
		s.chunk = max(1, S/s.wes/n)
		s.K = max(1, ceilDiv(st.count, s.chunk))
		if s.wide {
			s.acc = g.scratchBuf(0, min(st.count, s.chunk)*s.wes)
		}
	}
}

// shmList puts the group on the endpoint's list of groups whose
// shared-memory step progress polls.
func (g *Group) shmList() {
	if !g.sh.listed {
		g.sh.listed = true
		g.e.shmActive = append(g.e.shmActive, g)
		if g.e.poker != nil {
			g.e.poker.WaitPokes(1)
		}
		g.e.watchOn(g.region)
	}
}

// shmDone finishes the running step.
func (g *Group) shmDone() {
	i := g.sh.act
	if r := g.region; r != nil && r.wph.Load() != 0 {
		r.wph.Store(0) // idle for the wait condition (see enter)
	}
	g.sh.act, g.sh.st, g.sh.acc = -1, nil, nil
	g.moved = true
	if g.oneStep && g.running {
		// The operation's only step: it is complete (what may start
		// next runs from here too, as from any completion).
		g.pl.acts[i].done = true
		g.pending, g.round = 0, 1
		g.complete(0)
		return
	}
	g.transferDone(i)
}

// shmAdvance runs phases of the running step as far as the other ranks
// allow; true when it did something.
func (g *Group) shmAdvance() bool {
	s, r := &g.sh, g.region
	if s.act < 0 || g.failed != 0 {
		return false
	}
	if s.st.kind == shmAttach {
		var ok bool
		if r.leader || r.ph > 0 {
			ok = g.attachArrive()
		} else {
			ok = g.attachOpen()
		}
		if ok {
			g.shmDone()
		}
		return ok
	}
	if s.lean {
		// A lean operation (one phase; it arrived in leanStart).
		if !r.arrived() {
			if c := r.aborted(); c != 0 {
				g.remoteAbort(c)
				return true
			}
			return false
		}
		g.leanDone(false)
		return true
	}
	did := false
	for {
		fresh := false
		if !s.waiting {
			r.enter()
			g.shmPre()
			r.publish()
			s.waiting, fresh = true, true
		}
		ok := r.arrived()
		if !ok && fresh {
			// Two ranks arriving together may each load the other's
			// word before its own store is visible, and then neither
			// knows it is the last, whose pokes wake ranks asleep in
			// Sread. After a fence at least one of them sees the other
			// (the first to arrive fences; the last, who sees everyone
			// at once, fences in its poke).
			r.fence()
			ok = r.arrived()
		}
		if !ok {
			if c := r.aborted(); c != 0 {
				g.remoteAbort(c)
				return true
			}
			g.shmList()
			return did
		}
		if fresh {
			g.pokeLocal() // the last to arrive: the others may be asleep
		}
		did = true
		s.waiting = false
		g.moved = true
		if !g.shmPost() {
			return true // failed
		}
		s.k++
		if s.k == s.K {
			g.shmDone()
			return true
		}
	}
}

// pokeLocal wakes the other local ranks, which wait for this rank's
// arrival and may sleep in Sread on their transport.
func (g *Group) pokeLocal() {
	r := g.region
	switch {
	case g.e.ringer != nil:
		// The others' wait condition reads the arrive words: ring only
		// those asleep (a load of their doorbell for the others).
		for j, gr := range r.local {
			if j != r.me {
				g.e.ringer.RingPeer(g.peers[gr])
			}
		}
	case g.e.poker != nil:
		for j, gr := range r.local {
			if j != r.me {
				g.e.poker.Poke(g.peers[gr])
			}
		}
	}
}

// shmPoll advances the shared-memory steps of every group that waits in
// one.
func (e *Endpoint) shmPoll() bool {
	if len(e.shmActive) == 0 {
		return false
	}
	did, recount := false, false
	if len(e.shmActive) == 1 {
		// One group waits (the usual case): no list to rebuild unless its
		// step ended.
		g := e.shmActive[0]
		if g.sh.act >= 0 && g.failed == 0 && !g.closed {
			did = g.shmAdvance()
		}
		if g.sh.act >= 0 && g.failed == 0 && !g.closed {
			return did
		}
	}
	k := 0
	for _, g := range e.shmActive {
		if g.sh.act >= 0 && g.failed == 0 && !g.closed {
			if g.shmAdvance() {
				did = true
			}
		}
		if g.sh.act >= 0 && g.failed == 0 && !g.closed {
			if k < len(e.shmActive) && e.shmActive[k] != g {
				e.shmActive[k] = g
			}
			k++
		} else {
			g.sh.listed = false
			if e.poker != nil {
				e.poker.WaitPokes(-1)
			}
			if !e.watchOff(g.region) {
				recount = true
			}
		}
	}
	if k < len(e.shmActive) {
		clear(e.shmActive[k:])
		e.shmActive = e.shmActive[:k]
		if recount {
			e.rewatch()
		}
	}
	return did
}

// load writes elements of the caller's datatype into dst in the
// reduction's datatype.
func (s *shmRun) load(dst, src []byte) {
	if s.wide {
		widen(s.t, dst, src)
	} else {
		copy(dst, src)
	}
}

// store writes reduced elements back in the caller's datatype.
func (s *shmRun) store(dst, src []byte) {
	if s.wide {
		narrow(s.t, dst, src)
	} else {
		copy(dst, src)
	}
}

// span returns the range [lo, hi) of chunk k of a length of n units.
func span(k, chunk, n int) (int, int) {
	lo := min(k*chunk, n)
	return lo, min(lo+chunk, n)
}

// shmPre writes this rank's contribution to phase k.
func (g *Group) shmPre() {
	s, r := &g.sh, g.region
	st := s.st
	set := int(r.ph) & 1 // the phase entered (not published yet)
	if s.k == 0 {
		storeRel(r.checkWord(r.me, set), st.check)
	}
	me, n := r.me, r.n
	switch st.kind {
	case shmBcast, shmScatter:
		if me != st.root {
			return
		}
		bs := st.count * s.es
		area := r.area(set)
		if st.kind == shmBcast {
			lo, hi := span(s.k, s.chunk, bs)
			copy(area, st.in[lo:hi])
			return
		}
		lo, hi := span(s.k, s.chunk, bs)
		for j := 0; j < n; j++ {
			copy(area[j*s.chunk:], st.in[j*bs+lo:j*bs+hi])
		}
	case shmAllgather, shmGather:
		lo, hi := span(s.k, s.chunk, st.count*s.es)
		copy(r.slotBuf(set, me), st.in[lo:hi])
	case shmAlltoall:
		bs := st.count * s.es
		lo, hi := span(s.k, s.chunk, bs)
		sl := r.slotBuf(set, me)
		for j := 0; j < n; j++ {
			copy(sl[j*s.chunk:], st.in[j*bs+lo:j*bs+hi])
		}
	case shmAllreduce, shmReduce:
		if s.fold {
			dst := r.slotBuf(set, me)
			if s.inl {
				dst = r.inline(me, set)
			}
			s.load(dst, st.in[:st.count*s.es])
			return
		}
		lo, hi := span(s.k, s.chunk, st.count)
		if lo < hi {
			src, dst := st.in[lo*s.es:hi*s.es], r.slotBuf(set, me)
			if s.wide {
				s.load(dst, src)
				return
			}
			// My own slice I fold straight from the input (shmPost):
			// only the others' slices go through the slot.
			off, sz := seg(hi-lo, s.wes, n, me)
			copy(dst[:off], src[:off])
			copy(dst[off+sz:len(src)], src[off+sz:])
		}
	case shmReduceScatter:
		lo, hi := span(s.k, s.chunk, st.count)
		sl := r.slotBuf(set, me)
		for j := 0; j < n; j++ {
			b := st.in[(j*st.count+lo)*s.es : (j*st.count+hi)*s.es]
			s.load(sl[j*s.chunk*s.wes:], b)
		}
	}
}

// shmPost reads what phase k produced; false when the group failed.
func (g *Group) shmPost() bool {
	s, r := &g.sh, g.region
	st := s.st
	set := int(r.ph) & 1
	me, n := r.me, r.n
	if s.k == 0 {
		for j := 0; j < n; j++ {
			if j != me && r.checkWord(j, set).Load() != st.check { // mine is st.check (see arrived)
				g.fail(engine.CodeInval) // ranks called different collectives
				return false
			}
		}
	}
	switch st.kind {
	case shmBcast:
		if me != st.root {
			lo, hi := span(s.k, s.chunk, st.count*s.es)
			copy(st.out[lo:hi], r.area(set))
		}
	case shmScatter:
		lo, hi := span(s.k, s.chunk, st.count*s.es)
		copy(st.out[lo:hi], r.area(set)[me*s.chunk:])
	case shmAllgather:
		bs := st.count * s.es
		lo, hi := span(s.k, s.chunk, bs)
		for j := 0; j < n; j++ {
			copy(st.out[j*bs+lo:j*bs+hi], r.slotBuf(set, j))
		}
	case shmGather:
		if me == st.root {
			bs := st.count * s.es
			lo, hi := span(s.k, s.chunk, bs)
			for j := 0; j < n; j++ {
				copy(st.out[j*bs+lo:j*bs+hi], r.slotBuf(set, j))
			}
		}
	case shmAlltoall:
		bs := st.count * s.es
		lo, hi := span(s.k, s.chunk, bs)
		for j := 0; j < n; j++ {
			copy(st.out[j*bs+lo:j*bs+hi], r.slotBuf(set, j)[me*s.chunk:])
		}
	case shmAllreduce, shmReduce:
		mine := st.kind == shmAllreduce || me == st.root
		if s.fold {
			if mine {
				nb := st.count * s.wes
				if s.wide {
					g.foldSlots(s.acc[:nb], set, 0, nb)
					s.store(st.out[:st.count*s.es], s.acc[:nb])
				} else {
					g.foldSlots(st.out[:nb], set, 0, nb)
				}
			}
			break
		}
		if lo, hi := span(s.k, s.chunk, st.count); lo < hi {
			off, sz := seg(hi-lo, s.wes, n, me)
			var own []byte // my slice, from the input when it is in the reduction's type
			if !s.wide {
				own = st.in[lo*s.es+off : lo*s.es+off+sz]
			}
			g.foldSlotsOwn(r.slotBuf(set, n)[off:off+sz], set, off, off+sz, own)
		}
		if lo, hi := span(s.k-1, s.chunk, st.count); s.k > 0 && lo < hi && mine {
			s.store(st.out[lo*s.es:hi*s.es], r.slotBuf(set^1, n)[:(hi-lo)*s.wes])
		}
	case shmReduceScatter:
		lo, hi := span(s.k, s.chunk, st.count)
		if lo == hi {
			break
		}
		off, nb := me*s.chunk*s.wes, (hi-lo)*s.wes
		if s.wide {
			g.foldSlots(s.acc[:nb], set, off, off+nb)
			s.store(st.out[lo*s.es:hi*s.es], s.acc[:nb])
		} else {
			g.foldSlots(st.out[lo*s.es:hi*s.es], set, off, off+nb)
		}
	}
	return true
}

// foldSlots writes into dst the left fold of bytes [lo, hi) of every
// local rank's slot of buffer set.
func (g *Group) foldSlots(dst []byte, set, lo, hi int) { g.foldSlotsOwn(dst, set, lo, hi, nil) }

// foldSlotsOwn is foldSlots taking this rank's operand from own instead
// of its slot when own is not nil.
func (g *Group) foldSlotsOwn(dst []byte, set, lo, hi int, own []byte) {
	r := g.region
	if len(dst) <= kernel.ReduceBlock {
		// One block (every small reduction): kernel.ReduceN's order,
		// ((s0 op s1) op s2) ..., without filling its table of sources.
		if r.n == 1 {
			copy(dst, g.foldSrc(0, set, lo, hi, own))
			return
		}
		g.fn(dst, g.foldSrc(0, set, lo, hi, own), g.foldSrc(1, set, lo, hi, own))
		for j := 2; j < r.n; j++ {
			g.fn(dst, dst, g.foldSrc(j, set, lo, hi, own))
		}
		return
	}
	for j := 0; j < r.n; j++ {
		if g.sh.inl {
			r.srcs[j] = r.inline(j, set)[lo:hi]
		} else {
			r.srcs[j] = r.slotBuf(set, j)[lo:hi]
		}
	}
	if own != nil {
		r.srcs[r.me] = own
	}
	kernel.ReduceN(g.fn, dst, r.srcs)
	clear(r.srcs)
}

// foldSrc is local rank j's operand of foldSlotsOwn.
func (g *Group) foldSrc(j, set, lo, hi int, own []byte) []byte {
	r := g.region
	switch {
	case j == r.me && own != nil:
		return own
	case g.sh.inl:
		return r.inline(j, set)[lo:hi]
	}
	return r.slotBuf(set, j)[lo:hi]
}
