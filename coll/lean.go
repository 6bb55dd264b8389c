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
	p := &g.pl
	if !g.oneStep {
		p.reset()
		p.shmStep(shmStep{})
		p.endRound()
		g.oneStep = true
	}
	a := &p.acts[0]
	a.done = false
	st := &a.shm
	st.kind, st.t, st.op, st.root, st.count, st.check = kind, o.Type, o.Op, o.Root, o.Count, o.check
	st.in, st.out = o.Buf, o.Result
	g.running, g.round, g.pending = true, 0, 1
	s := &g.sh
	s.act, s.st, s.k, s.K, s.waiting, s.lean = 0, st, 0, 1, true, true
	s.t, s.es, s.wes, s.wide, s.chunk, s.acc = o.Type, es, es, false, 0, nil
	s.fold, s.inl = nb > 0, nb > 0
	if nb > 0 {
		s.chunk = r.slot / es
	}

	r.enter()
	set := int(r.ph) & 1
	storeRel(r.chk[set][r.me], o.check)
	if nb > 0 {
		copy(r.inline(r.me, set), o.Buf[:nb])
	}
	r.publish()
	if !r.arrived() {
		r.fence() // see shmAdvance
		if !r.arrived() {
			if c := r.aborted(); c != 0 {
				g.remoteAbort(c)
				return true
			}
			r.waitFor()
			g.shmList()
			return true
		}
	}
	g.leanDone(true)
	return true
}

// leanDone ends the lean operation's phase once every rank arrived
// (fresh: seen by the post, this rank being the last to arrive).
func (g *Group) leanDone(fresh bool) {
	s, r := &g.sh, g.region
	st := s.st
	if fresh {
		g.pokeLocal() // the last to arrive: the others may be asleep
		g.e.shmRecent = true
	}
	s.waiting = false
	g.moved = true
	set := int(r.ph) & 1
	for _, w := range r.chk[set] {
		if w.Load() != st.check {
			g.fail(engine.CodeInval) // ranks called different collectives
			return
		}
	}
	if st.kind == shmAllreduce || (st.kind == shmReduce && r.me == st.root) {
		nb := st.count * s.es
		if g.kinl != nil {
			g.kinl(st.out[:nb], r, set)
		} else {
			g.foldSlots(st.out[:nb], set, 0, nb)
		}
	}
	g.shmDone()
}

// kernel returns Kernel(t, op), looked up again only when they change
// (with the inline fold of the pair, g.kinl).
func (g *Group) kernel(t dtype.Type, op dtype.Op) Func {
	if g.kfn == nil || g.kt != t || g.kop != op {
		g.kt, g.kop, g.kfn, g.kinl = t, op, Kernel(t, op), inlineFoldOf(t, op)
	}
	return g.kfn
}
