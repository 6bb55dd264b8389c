package coll

import "github.com/gofi-dev/fi/dtype"

// Hierarchical collectives, for groups spread over several nodes with
// more than one member on some (shm+tcp): every node runs its part over
// its shared-memory region (shm.go) and one representative per node
// talks to the others' point to point (plan.go):
//
//   - barrier: a node barrier, a dissemination barrier of the node
//     leaders, a node barrier.
//   - broadcast: a binomial broadcast among the representatives (the
//     root for its node, the leader elsewhere), then a node broadcast
//     from each.
//   - allreduce: a node reduce to the leader, an allreduce among the
//     leaders (recursive doubling below AllreduceRingMin, the ring from
//     it), a node broadcast of the result.
//   - reduce: a node reduce to the representative, a binomial reduce
//     among the representatives to the root.
//
// The other collectives run point to point over the whole group (the
// transport takes the shortest path to each peer).
//
// Order: within a node a left fold over its ranks in increasing order;
// across nodes the tree of the point-to-point algorithm over the nodes'
// partials (nodes ordered by their lowest rank; for reduce, starting at
// the root's node). Every rank gets the same bits.

// hierarchical reports whether the group runs hierarchical plans: more
// than one node, and some node with more than one member.
func (g *Group) hierarchical() bool {
	return len(g.nodeLead) > 1 && len(g.nodeLead) < g.size
}

// repsFor fills g.reps with each node's representative: the root for the
// root's node when root >= 0, the node's leader otherwise.
func (g *Group) repsFor(root int) []int {
	copy(g.reps, g.nodeLead)
	if root >= 0 {
		g.reps[g.nodeOf[root]] = root
	}
	return g.reps
}

// buildHier writes a hierarchical plan; false when the operation has
// none (it then runs point to point).
func (g *Group) buildHier(o *opState) bool {
	if !g.hierarchical() {
		return false
	}
	root := -1
	switch o.Coll {
	case dtype.Barrier, dtype.Allreduce:
	case dtype.Broadcast, dtype.Reduce:
		root = o.Root
	default:
		return false
	}
	p := &g.pl
	reps := g.repsFor(root)
	node := int(g.nodeOf[g.rank])
	v := ranks{me: node, n: len(reps), real: reps}
	amRep := reps[node] == g.rank
	r := g.region // nil when alone on the node
	lrep := 0
	if r != nil {
		lrep = r.localIndex(reps[node])
	}
	step := func(kind shmKind, t dtype.Type, in, out []byte) {
		if r == nil {
			return
		}
		p.shmStep(shmStep{kind: kind, t: t, op: o.Op, root: lrep, in: in, out: out, count: o.Count, check: o.check})
		p.endRound()
	}
	switch o.Coll {
	case dtype.Barrier:
		step(shmBarrier, o.Type, nil, nil)
		if amRep {
			p.barrierDissemination(v)
		}
		step(shmBarrier, o.Type, nil, nil)

	case dtype.Broadcast:
		buf := o.Buf[:o.Count*o.Type.Size()]
		if amRep {
			p.bcastBinomial(v, int(g.nodeOf[root]), buf)
		}
		step(shmBcast, o.Type, buf, buf)

	case dtype.Allreduce:
		acc, wes := g.accIn(o, o.Result, o.Count)
		wt := Widen(o.Type)
		step(shmReduce, wt, acc, acc)
		if amRep {
			if n := o.Count * wes; n >= AllreduceRingMin && o.Count >= len(reps) {
				_, sl := seg(o.Count, wes, len(reps), 0)
				p.allreduceRing(v, acc, g.scratchBuf(1, sl), o.Count, wes)
			} else {
				p.allreduceRD(v, acc, g.scratchBuf(1, n))
			}
		}
		step(shmBcast, wt, acc, acc)
		g.accOut(o, o.Result, acc, o.Count)

	case dtype.Reduce:
		var dst []byte
		if g.rank == root {
			dst = o.Result
		}
		acc, wes := g.accIn(o, dst, o.Count)
		step(shmReduce, Widen(o.Type), acc, acc)
		if amRep {
			p.reduceBinomial(v, int(g.nodeOf[root]), acc, g.scratchBuf(1, o.Count*wes))
		}
		if g.rank == root {
			g.accOut(o, o.Result, acc, o.Count)
		}
	}
	p.endRound()
	return true
}
