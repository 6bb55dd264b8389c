package coll

import "github.com/gofi-dev/fi/dtype"

// Algorithm thresholds, in bytes of the buffer being reduced or moved
// (after widening FLOAT16 / BFLOAT16 to float32). Chosen from the
// measurements in doc.go; variables so tests can force either side.
var (
	// AllreduceRingMin: allreduce from this size uses the ring
	// (reduce-scatter + allgather), below it recursive doubling.
	AllreduceRingMin = 256 << 10
	// ReduceScatterRingMin: reduce-scatter of a total input from this size
	// uses the ring, below it recursive doubling on the whole input.
	ReduceScatterRingMin = 64 << 10
)

// build writes the head operation's plan. Every rank of the group builds
// the same algorithm for the same operation: the choice depends only on
// the operation, the sizes and the group.
func (g *Group) build(o *opState) {
	v := ranks{me: g.rank, n: g.size}
	p := &g.pl
	g.fn = nil
	if o.Coll != collJoin && (g.buildShm(o) || g.buildHier(o)) {
		return
	}
	es := o.Type.Size()
	switch o.Coll {
	case collJoin:
		p.allgatherRing(v, g.join, recSize)
		// Every member learns the nodes (even one alone on its node: the
		// others' plans depend on them); members sharing one map its
		// region.
		p.shmStep(shmStep{kind: shmAttach})
		p.endRound()

	case dtype.Barrier:
		p.barrierDissemination(v)

	case dtype.Broadcast:
		p.bcastBinomial(v, o.Root, o.Buf[:o.Count*es])

	case dtype.Allreduce:
		if n := o.Count * Widen(o.Type).Size(); n >= AllreduceRingMin && o.Count >= g.size {
			// The ring reads the input where it is: no copy into the
			// result first (a pass over the whole buffer before the first
			// send).
			res, in, wes := g.accFrom(o, o.Result, o.Count)
			_, sl := seg(o.Count, wes, g.size, 0)
			p.allreduceRing(v, res, in, g.scratchBuf(1, sl), o.Count, wes)
			g.accOut(o, o.Result, res, o.Count)
			break
		}
		res, wes := g.accIn(o, o.Result, o.Count)
		p.allreduceRD(v, res, g.scratchBuf(1, o.Count*wes))
		g.accOut(o, o.Result, res, o.Count)

	case dtype.Reduce:
		var dst []byte
		if g.rank == o.Root {
			dst = o.Result
		}
		acc, wes := g.accIn(o, dst, o.Count)
		p.reduceBinomial(v, o.Root, acc, g.scratchBuf(1, o.Count*wes))
		if g.rank == o.Root {
			g.accOut(o, o.Result, acc, o.Count)
		}

	case dtype.ReduceScatter:
		total := o.Count * g.size
		w, wes := g.accIn(o, nil, total)
		bs := o.Count * wes
		mine := w[g.rank*bs : (g.rank+1)*bs]
		if total*wes >= ReduceScatterRingMin {
			p.reduceScatterRing(v, w, w, g.scratchBuf(1, bs), total, wes, 1)
		} else {
			p.allreduceRD(v, w, g.scratchBuf(1, total*wes))
		}
		g.accOut(o, o.Result, mine, o.Count)

	case dtype.Allgather:
		bs := o.Count * es
		p.copy(o.Result[g.rank*bs:(g.rank+1)*bs], o.Buf[:bs])
		p.allgatherRing(v, o.Result[:g.size*bs], bs)

	case dtype.Alltoall:
		p.alltoallLinear(v, o.Buf, o.Result, o.Count*es)

	case dtype.Scatter:
		p.scatterLinear(v, o.Root, o.Buf, o.Result, o.Count*es)

	case dtype.Gather:
		p.gatherLinear(v, o.Root, o.Buf, o.Result, o.Count*es)
	}
}

// accIn sets the kernel and returns the buffer a reduction accumulates in,
// holding count elements of this rank's input (o.Buf) in the reduction's
// datatype: dst itself when it can be (same datatype, dst not nil), else
// scratch 0. It returns the accumulator's element size.
func (g *Group) accIn(o *opState, dst []byte, count int) ([]byte, int) {
	acc, in, wes := g.accFrom(o, dst, count)
	g.pl.copy(acc, in)
	return acc, wes
}

// accFrom is accIn for an algorithm that reads the input where it is
// rather than from the accumulator: it returns the accumulator (dst
// itself when it can be, else scratch 0; not holding the input unless it
// is the input), the input in the reduction's datatype (o.Buf, or the
// accumulator holding the widened input) and the element size.
func (g *Group) accFrom(o *opState, dst []byte, count int) (acc, in []byte, wes int) {
	wt := Widen(o.Type)
	g.fn = Kernel(wt, o.Op)
	wes = wt.Size()
	n := count * wes
	in = o.Buf[:count*o.Type.Size()]
	if wt != o.Type {
		acc = g.scratchBuf(0, n)
		g.pl.widen(acc, in)
		return acc, acc, wes
	}
	if dst == nil {
		return g.scratchBuf(0, n), in, wes
	}
	return dst[:n], in, wes
}

// accOut writes count accumulated elements to dst in the caller's
// datatype (rounding FLOAT16 / BFLOAT16 once).
func (g *Group) accOut(o *opState, dst, acc []byte, count int) {
	if Widen(o.Type) != o.Type {
		g.pl.narrow(dst[:count*o.Type.Size()], acc)
		return
	}
	g.pl.copy(dst[:count*o.Type.Size()], acc)
}
