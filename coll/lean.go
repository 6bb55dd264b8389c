package coll

import (
	"github.com/gofi-dev/fi/dtype"
	"github.com/gofi-dev/fi/engine"
)

// The lean path runs the smallest operations over a node-local region
// holding every member: a barrier, and an allreduce or reduce whose
// operands travel inline in the control lines (at most inlineMax bytes,
// not widened). They are one phase of the one-step path (startOneStep)
// with its generic set-up and dispatch taken out: the post enters the
// phase, writes its check word and operand into its control line and
// publishes its arrival; the pass that sees every rank arrived (the post
// itself when this rank is the last) compares the check words, folds and
// completes (leanDone). The state it leaves is the one-step path's, so
// the generic code (shmAdvance, fail, watch, close) handles a lean
// operation too.

// leanStart starts the head operation o on the lean path; false when o
// does not qualify.
func (g *Group) leanStart(o *opState) bool {
	r := g.region
	if r == nil || r.n != g.size || r.ph == 0 {
		return false
	}
	kind, nb, es := shmBarrier, 0, 0
	switch o.Coll {
	case dtype.Barrier:
	case dtype.Allreduce, dtype.Reduce:
		es = o.Type.Size()
		nb = o.Count * es
		if nb == 0 || nb > inlineMax || nb > ShmFoldMax || nb > r.slot || Widen(o.Type) != o.Type {
			return false
		}
		kind = shmAllreduce
		if o.Coll == dtype.Reduce {
			kind = shmReduce
		}
		g.fn = g.kernel(o.Type, o.Op)
	default:
		return false
	}
	st := g.oneStepAct()
	st.kind, st.check = kind, o.check
	g.running, g.round, g.pending = true, 0, 1
	s := &g.sh
	s.act, s.st, s.k, s.K, s.waiting, s.lean = 0, st, 0, 1, true, true
	s.sleepers = g.e.ringer != nil
	if nb > 0 {
		// What the generic code reads of a folded inline reduction
		// (a barrier needs only its kind and check word).
		st.t, st.op, st.root, st.count = o.Type, o.Op, o.Root, o.Count
		st.in, st.out = o.Buf, o.Result
		s.t, s.es, s.wes, s.wide, s.chunk, s.acc = o.Type, es, es, false, r.slot/es, nil
		s.fold, s.inl = true, true
	}

	r.enter()
	set := int(r.ph) & 1
	storeRel(r.chk[set][r.me], o.check)
	if nb > 0 {
		// The operand goes to my control line for the others and to
		// r.own for my own fold (see arrived: this rank does not read
		// its control line back).
		copy(r.own[:nb], o.Buf[:nb])
		copy(r.inline(r.me, set), r.own[:nb])
	}
	r.publish()
	if !r.arrived() {
		if !s.sleepers {
			r.fence() // see shmAdvance
		}
		if !r.arrived() {
			if c := r.aborted(); c != 0 {
				r.wph.Store(0) // not waiting
				g.remoteAbort(c)
				return true
			}
			g.shmList()
			return true
		}
	}
	g.leanDone(true)
	return true
}

// leanDone ends the lean operation's phase once every rank arrived
// (fresh: seen by the post, this rank being the last to arrive).
//
// Who wakes a rank asleep in Sread: in the generic protocol the last to
// arrive rings the others, and a rank that finds someone missing fences
// before it concludes it is not the last (two ranks arriving together
// might otherwise each miss the other and neither ring). That fence
// waits until this rank's arrival is visible to the others, a cache-line
// round trip between CPUs (about 450 ns when they are far apart), on the
// path of every rank that arrives first. With a transport that rings
// (transport.Ringer, whose sleepers test the regions' arrive words) the
// lean path skips it: a rank about to sleep stores the phase it waits in
// into its sleep word (region.ready, the wait condition, before the rank
// announces itself in its doorbell's waiter count, a locked instruction,
// and looks at the arrive words again), and every rank, once its phase
// completed, fences and rings those whose sleep word names the phase
// (ringSleepers). A rank S asleep in phase ph was missing some W when it
// last looked; W completes ph only after seeing S arrived, and its
// fence comes after its own arrival became visible, so after S looked,
// so after S stored its sleep word: W sees it and rings S. The fence
// costs little there (W's arrival is long visible unless W was the last
// to arrive, whose fence the completion's work overlaps), and the sleep
// words sit on lines nobody writes while no one sleeps.
func (g *Group) leanDone(fresh bool) {
	s, r := &g.sh, g.region
	st := s.st
	if fresh {
		g.e.shmRecent = true
	}
	s.waiting = false
	g.moved = true
	set := int(r.ph) & 1
	for j, w := range r.chk[set] {
		if j != r.me && w.Load() != st.check { // mine is st.check (see arrived)
			r.wph.Store(0)           // not waiting
			g.fail(engine.CodeInval) // ranks called different collectives
			g.pokeLocal()            // the others may be asleep
			return
		}
	}
	if st.kind == shmAllreduce || (st.kind == shmReduce && r.me == st.root) {
		nb := st.count * s.es
		if g.kinl != nil {
			g.kinl(st.out[:nb], r.fin[set])
		} else {
			g.foldSlotsOwn(st.out[:nb], set, 0, nb, r.own[:nb])
		}
	}
	sleepers, ph := s.sleepers, r.ph
	g.leanComplete()
	switch {
	case sleepers && g.region != nil:
		g.ringSleepers(r, ph)
	case fresh && g.region != nil:
		// The last to arrive rings the others, once its completion is
		// written: the fence in the doorbell's ring waits until this
		// rank's arrival is visible to all, and the completion's work
		// overlaps that wait instead of following it.
		g.pokeLocal()
	}
}

// leanComplete completes the lean operation: complete's one-step case
// (no transport operation was ever in flight for it), then starts what
// is queued behind it.
func (g *Group) leanComplete() {
	o := g.head()
	ctx, flags := o.ctx, o.Flags
	st := &g.pl.acts[0].shm // kept for the next one-step operation; drop the buffers
	st.in, st.out = nil, nil
	g.running, g.round, g.pending = false, -1, 0
	g.sh.act, g.sh.st = -1, nil
	o.ctx, o.Buf, o.Result = nil, nil, nil // the rest is rewritten by Post
	g.qHead = (g.qHead + 1) & (qCap - 1)
	g.qLen--
	g.e.eng.CollComplete(ctx, flags, 0)
	if g.qLen > 0 {
		g.startHead()
	}
}

// ringSleepers rings the local ranks that went to sleep waiting in phase
// ph (their sleep words say ph), once this rank completed it.
func (g *Group) ringSleepers(r *region, ph uint64) {
	// My arrival before my loads of their sleep words: a fence. When
	// nothing started since (a phase of the next operation), the fence
	// also marks the region idle for the wait condition.
	if r.wph.Load() == ph {
		r.wph.Store(0)
	} else {
		r.fence()
	}
	for j, w := range r.slp {
		if j != r.me && w.Load() == ph {
			g.e.ringer.RingPeer(g.peers[r.local[j]])
		}
	}
}

// kernel returns Kernel(t, op), looked up again only when they change
// (with the inline fold of the pair, g.kinl).
func (g *Group) kernel(t dtype.Type, op dtype.Op) Func {
	if g.kfn == nil || g.kt != t || g.kop != op {
		g.kt, g.kop, g.kfn, g.kinl = t, op, Kernel(t, op), inlineFoldOf(t, op)
	}
	return g.kfn
}
