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
//   - allgather: a node gather to the leader, a ring allgather of the
//     nodes' blocks among the leaders (one segment per node, its ranks'
//     blocks in rank order), a node broadcast of the whole result.
//   - reduce-scatter: a node reduce of the whole input to the leader, a
//     ring reduce-scatter among the leaders in which each node's segment
//     holds its ranks' blocks, a node scatter of those blocks.
//   - gather: a node gather to the representative, which sends its
//     node's blocks to the root in one message.
//   - scatter: the root sends each node's blocks to its representative
//     in one message, then a node scatter from each.
//
//   - alltoall, when every node holds consecutive ranks: a node gather of
//     the whole buffers to the leader, which transposes them and sends
//     each other node's leader, in one message, what its ranks get from
//     this node's; then a node scatter of each rank's result. Otherwise
//     point to point over the whole group (the transport takes the
//     shortest path to each peer).
//
// Where nodes do not hold consecutive ranks, the segments are laid out
// node by node in scratch and copied into or out of rank order.
//
// Order: within a node a left fold over its ranks in increasing order;
// across nodes the tree or ring of the point-to-point algorithm over the
// nodes' partials (nodes ordered by their lowest rank; for reduce,
// starting at the root's node; for reduce-scatter, node k's segment
// starting after node k). Every rank gets the same bits.

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
	case dtype.Broadcast, dtype.Reduce, dtype.Gather, dtype.Scatter:
		root = o.Root
	case dtype.Allgather, dtype.ReduceScatter:
	case dtype.Alltoall:
		if !g.nodeIdent {
			return false // the leaders' exchange needs each node's ranks consecutive
		}
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
	stepN := func(kind shmKind, t dtype.Type, in, out []byte, count int) {
		if r == nil {
			return
		}
		p.shmStep(shmStep{kind: kind, t: t, op: o.Op, root: lrep, in: in, out: out, count: count, check: o.check})
		p.endRound()
	}
	step := func(kind shmKind, t dtype.Type, in, out []byte) { stepN(kind, t, in, out, o.Count) }
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
				p.allreduceRing(v, acc, acc, g.scratchBuf(1, sl), o.Count, wes)
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

	case dtype.Allgather:
		bs := o.Count * o.Type.Size()
		res := o.Result[:g.size*bs]
		x := res // the blocks node by node
		if !g.nodeIdent {
			x = g.scratchBuf(0, g.size*bs)
		}
		offs := g.nodeOffs(bs)
		if r == nil {
			p.copy(x[offs[node]:offs[node+1]], o.Buf[:bs])
			p.endRound()
		}
		stepN(shmGather, o.Type, o.Buf[:bs], x[offs[node]:offs[node+1]], o.Count)
		if amRep {
			p.allgatherRingV(v, x, offs)
			if !g.nodeIdent {
				for i, rk := range g.nodeOrd {
					p.copy(res[rk*bs:(rk+1)*bs], x[i*bs:(i+1)*bs])
				}
				p.endRound()
			}
		}
		stepN(shmBcast, o.Type, res, res, g.size*o.Count)

	case dtype.ReduceScatter:
		total := o.Count * g.size
		acc, wes := g.accIn(o, nil, total)
		wt := Widen(o.Type)
		bs := o.Count * wes
		stepN(shmReduce, wt, acc, acc, total)
		var mine []byte // the leader's blocks of its node's ranks
		if amRep {
			y := acc // the blocks node by node
			if !g.nodeIdent {
				y = g.scratchBuf(2, total*wes)
				for i, rk := range g.nodeOrd {
					p.copy(y[i*bs:(i+1)*bs], acc[rk*bs:(rk+1)*bs])
				}
				p.endRound()
			}
			offs := g.nodeOffs(bs)
			most := 0
			for k := range len(reps) {
				most = max(most, offs[k+1]-offs[k])
			}
			p.reduceScatterRingV(v, y, g.scratchBuf(1, most), offs)
			mine = y[offs[node]:offs[node+1]]
		}
		if r == nil {
			g.accOut(o, o.Result, mine, o.Count)
			break
		}
		var out []byte
		if wt != o.Type {
			out = g.scratchBuf(3, bs)
		} else {
			out = o.Result[:bs]
		}
		stepN(shmScatter, wt, mine, out, o.Count)
		if wt != o.Type {
			g.accOut(o, o.Result, out, o.Count)
		}

	case dtype.Gather:
		bs := o.Count * o.Type.Size()
		offs := g.nodeOffs(bs)
		rn := int(g.nodeOf[root])
		var x []byte // my node's blocks (at the root: every node's, node by node)
		switch {
		case g.rank == root && g.nodeIdent:
			x = o.Result[:g.size*bs]
		case g.rank == root:
			x = g.scratchBuf(0, g.size*bs)
		case amRep:
			x = g.scratchBuf(0, offs[node+1]-offs[node])
		}
		mine := x
		if g.rank == root {
			mine = x[offs[node]:offs[node+1]]
		}
		if r == nil {
			p.copy(mine, o.Buf[:bs])
			p.endRound()
		}
		stepN(shmGather, o.Type, o.Buf[:bs], mine, o.Count)
		if amRep && g.rank != root {
			p.send(root, mine)
			p.endRound()
		}
		if g.rank == root {
			for k, rep := range reps {
				if k != rn {
					p.recv(rep, x[offs[k]:offs[k+1]])
				}
			}
			p.endRound()
			if !g.nodeIdent {
				for i, rk := range g.nodeOrd {
					p.copy(o.Result[rk*bs:(rk+1)*bs], x[i*bs:(i+1)*bs])
				}
				p.endRound()
			}
		}

	case dtype.Scatter:
		bs := o.Count * o.Type.Size()
		offs := g.nodeOffs(bs)
		rn := int(g.nodeOf[root])
		var mine []byte // my node's blocks, at its representative
		if g.rank == root {
			y := o.Buf[:g.size*bs] // every node's blocks, node by node
			if !g.nodeIdent {
				y = g.scratchBuf(0, g.size*bs)
				for i, rk := range g.nodeOrd {
					p.copy(y[i*bs:(i+1)*bs], o.Buf[rk*bs:(rk+1)*bs])
				}
				p.endRound()
			}
			for k, rep := range reps {
				if k != rn {
					p.send(rep, y[offs[k]:offs[k+1]])
				}
			}
			p.endRound()
			mine = y[offs[rn]:offs[rn+1]]
		} else if amRep {
			mine = g.scratchBuf(0, offs[node+1]-offs[node])
			p.recv(root, mine)
			p.endRound()
		}
		if r == nil {
			p.copy(o.Result[:bs], mine)
			p.endRound()
		}
		stepN(shmScatter, o.Type, mine, o.Result[:bs], o.Count)

	case dtype.Alltoall:
		// Blocks of bs bytes; n ranks, my node's nk from rank st. The
		// leader gathers its ranks' whole buffers (g: nk rows of n
		// blocks), transposes them (t: n rows of nk blocks, row j what
		// my ranks send to rank j), sends node m its rows and receives
		// from node m its blocks for my ranks (rows b of nm blocks),
		// and lays every rank's result out (res: nk rows of n blocks) for
		// the node scatter.
		bs := o.Count * o.Type.Size()
		n := g.size
		st, nk := g.nodeStart[node], g.nodeStart[node+1]-g.nodeStart[node]
		if !amRep {
			stepN(shmGather, o.Type, o.Buf[:n*bs], nil, n*o.Count)
			stepN(shmScatter, o.Type, nil, o.Result[:n*bs], n*o.Count)
			break
		}
		gb := o.Buf[:n*bs]
		if r != nil {
			gb = g.scratchBuf(0, nk*n*bs)
			stepN(shmGather, o.Type, o.Buf[:n*bs], gb, n*o.Count)
		}
		t := gb // one rank: its buffer is its transpose
		if nk > 1 {
			t = g.scratchBuf(1, n*nk*bs)
			for a := 0; a < nk; a++ {
				p.strided(t[a*bs:], gb[a*n*bs:], n, bs, nk*bs, bs)
			}
			p.endRound()
		}
		res := o.Result[:n*bs] // row b: rank st+b's result
		if r != nil {
			res = g.scratchBuf(3, nk*n*bs)
		}
		rb := g.scratchBuf(2, (n-nk)*nk*bs)
		off := 0
		for m := range reps {
			if m == node {
				continue
			}
			ms, nm := g.nodeStart[m], g.nodeStart[m+1]-g.nodeStart[m]
			p.send(reps[m], t[ms*nk*bs:(ms+nm)*nk*bs])
			p.recv(reps[m], rb[off:off+nk*nm*bs])
			off += nk * nm * bs
		}
		p.endRound()
		off = 0
		for m := range reps {
			ms, nm := g.nodeStart[m], g.nodeStart[m+1]-g.nodeStart[m]
			if m == node {
				p.strided(res[ms*bs:], t[st*nk*bs:], nk, nk*bs, n*bs, nk*bs)
				continue
			}
			p.strided(res[ms*bs:], rb[off:], nk, nm*bs, n*bs, nm*bs)
			off += nk * nm * bs
		}
		p.endRound()
		stepN(shmScatter, o.Type, res, o.Result[:n*bs], n*o.Count)
	}
	p.endRound()
	return true
}

// nodeOffs returns the byte offsets of the nodes' segments in a buffer of
// bs bytes per rank laid out node by node (len: nodes + 1).
func (g *Group) nodeOffs(bs int) []int {
	g.offs = g.offs[:0]
	for _, st := range g.nodeStart {
		g.offs = append(g.offs, st*bs)
	}
	return g.offs
}
