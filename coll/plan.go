package coll

import "github.com/gofi-dev/fi/transport"

// A collective runs as a plan: rounds of actions. A round's transfers
// (sends, receives, shared-memory steps) start together; when all of them
// are done its local actions (reductions, copies) run in order, and the
// next round starts. Sends of a round therefore never race with the
// reductions that overwrite their buffers, and a rank's messages to one
// peer leave in plan order, which is the order that peer's plan receives
// them in (transports keep order per peer).

type actKind uint8

const (
	actSend    actKind = iota + 1 // send a to peer
	actRecv                       // receive into dst from peer (len(dst) bytes exactly)
	actReduce                     // dst = a op b
	actCopy                       // copy(dst, a)
	actShm                        // a shared-memory step (see region.go)
	actWiden                      // dst (float32) = a (FLOAT16 / BFLOAT16), exactly
	actNarrow                     // dst (FLOAT16 / BFLOAT16) = a (float32), rounded
	actStrided                    // rows: row i of rows.n, rows.size bytes, from a[i*rows.src:] to dst[i*rows.dst:]
)

// rows describes a strided copy (actStrided).
type rows struct {
	n, size  int // rows, bytes per row
	dst, src int // strides in bytes
}

// action is one step of a plan. peer is a rank of the group.
type action struct {
	kind actKind
	peer int32
	dst  []byte
	a, b []byte
	shm  shmStep // actShm only
	rows rows    // actStrided only

	// execution state
	done    bool
	busy    bool // transport operation in flight
	blocked bool // send met a full transport: retried on progress
	hdr     transport.Header
	iov     [1][]byte
}

// planner builds a plan into reused slices: no allocation once they have
// grown to the group's largest plan. A round holds transfers, then local
// actions: appending a transfer after a local action starts a new round,
// and endRound starts one explicitly.
type planner struct {
	acts     []action
	rounds   []int32 // end index (exclusive) of each round in acts
	start    int     // first action of the open round
	hasLocal bool    // the open round has local actions
}

func (p *planner) reset() {
	clear(p.acts) // drop buffer references
	p.acts = p.acts[:0]
	p.rounds = p.rounds[:0]
	p.start, p.hasLocal = 0, false
}

// endRound closes the open round (an empty one is not recorded).
func (p *planner) endRound() {
	if len(p.acts) > p.start {
		p.rounds = append(p.rounds, int32(len(p.acts)))
		p.start = len(p.acts)
	}
	p.hasLocal = false
}

func (p *planner) transfer(a action) {
	if p.hasLocal {
		p.endRound()
	}
	p.acts = append(p.acts, a)
}

func (p *planner) local(a action) {
	p.acts = append(p.acts, a)
	p.hasLocal = true
}

func (p *planner) send(peer int, b []byte) {
	p.transfer(action{kind: actSend, peer: int32(peer), a: b})
}

func (p *planner) recv(peer int, dst []byte) {
	p.transfer(action{kind: actRecv, peer: int32(peer), dst: dst})
}

func (p *planner) shmStep(s shmStep) {
	p.transfer(action{kind: actShm, shm: s})
}

func (p *planner) reduce(dst, a, b []byte) {
	if len(dst) == 0 {
		return
	}
	p.local(action{kind: actReduce, dst: dst, a: a, b: b})
}

func (p *planner) widen(dst, src []byte) {
	if len(dst) > 0 {
		p.local(action{kind: actWiden, dst: dst, a: src})
	}
}

func (p *planner) narrow(dst, src []byte) {
	if len(dst) > 0 {
		p.local(action{kind: actNarrow, dst: dst, a: src})
	}
}

func (p *planner) copy(dst, src []byte) {
	if len(dst) == 0 || len(src) == 0 || &dst[0] == &src[0] {
		return
	}
	p.local(action{kind: actCopy, dst: dst, a: src})
}

// strided copies n rows of size bytes, row i from src[i*ss:] to
// dst[i*ds:].
func (p *planner) strided(dst, src []byte, n, size, ds, ss int) {
	if n == 0 || size == 0 {
		return
	}
	p.local(action{kind: actStrided, dst: dst, a: src, rows: rows{n: n, size: size, dst: ds, src: ss}})
}

// ranks maps the plan's virtual ranks to group ranks: the identity for a
// flat group, the list of node leaders for the inter-node level of a
// hierarchical one.
type ranks struct {
	me   int   // my virtual rank
	n    int   // number of virtual ranks
	real []int // virtual -> group rank; nil: identity
}

func (v ranks) of(i int) int {
	if v.real == nil {
		return i
	}
	return v.real[i]
}

// seg returns the byte range of segment i of a buffer of count elements of
// size es split into n segments: the first count%n segments hold one
// element more.
func seg(count, es, n, i int) (off, size int) {
	q, r := count/n, count%n
	lo := i*q + min(i, r)
	cnt := q
	if i < r {
		cnt++
	}
	return lo * es, cnt * es
}

// ---------------------------------------------------------------------------
// point-to-point algorithms. Buffers are in the reduction's datatype (the
// widened one for FLOAT16 / BFLOAT16). fn is the kernel.

// barrierDissemination: ceil(log2 n) rounds; in round k each rank sends a
// zero-byte message to me+2^k and receives one from me-2^k (any n).
func (p *planner) barrierDissemination(v ranks) {
	for k := 1; k < v.n; k <<= 1 {
		p.send(v.of((v.me+k)%v.n), nil)
		p.recv(v.of((v.me-k+v.n)%v.n), nil)
		p.endRound()
	}
}

// allreduceRD is recursive doubling, for small buffers: res starts as my
// contribution and ends as the result; tmp has len(res) bytes. With n not
// a power of two, the first 2*rem ranks fold pairwise first (odd ranks
// take their even neighbour's data) and get the result back at the end.
//
// Order: every exchange combines the partial of the lower block of ranks
// (as a) with the higher one's (as b), so each element is a balanced tree
// over the ranks in increasing order, the same bits on every rank.
func (p *planner) allreduceRD(v ranks, res, tmp []byte) {
	pof2 := 1
	for pof2*2 <= v.n {
		pof2 *= 2
	}
	rem := v.n - pof2
	me := v.me
	newRank := -1
	switch {
	case me < 2*rem && me%2 == 0:
		p.send(v.of(me+1), res)
		p.endRound()
	case me < 2*rem:
		p.recv(v.of(me-1), tmp)
		p.endRound()
		p.reduce(res, tmp, res)
		newRank = me / 2
	default:
		newRank = me - rem
	}
	if newRank >= 0 {
		for mask := 1; mask < pof2; mask <<= 1 {
			np := newRank ^ mask
			peer := np + rem
			if np < rem {
				peer = np*2 + 1
			}
			p.send(v.of(peer), res)
			p.recv(v.of(peer), tmp)
			p.endRound()
			if peer < me {
				p.reduce(res, tmp, res)
			} else {
				p.reduce(res, res, tmp)
			}
		}
	}
	if me < 2*rem {
		if me%2 == 1 {
			p.send(v.of(me-1), res)
		} else {
			p.recv(v.of(me+1), res)
		}
		p.endRound()
	}
	p.endRound()
}

// reduceScatterRing runs the ring reduce-scatter on res (count elements of
// size es, split into n segments): after n-1 rounds, segment
// (me+1+shift) mod n of res holds the reduction of every rank's segment.
// in holds this rank's input (it may be res itself): the first round
// sends its segment from in and every reduction takes this rank's
// operand from in, so res need not hold a copy of the input (each
// segment of res is reduced into at most once, segment (me-shift) never).
// tmp holds at least one segment.
//
// Order: segment i is reduced along the ring, starting at rank
// i+1-shift... each element ((x[j] op x[j+1]) op ...) op x[j-1], ranks
// taken cyclically from where the segment starts; one rank computes it.
func (p *planner) reduceScatterRing(v ranks, res, in, tmp []byte, count, es, shift int) {
	n, me := v.n, v.me
	right, left := v.of((me+1)%n), v.of((me-1+n)%n)
	src := in
	for s := 0; s < n-1; s++ {
		so, sl := seg(count, es, n, ((me-s-shift)%n+2*n)%n)
		ro, rl := seg(count, es, n, ((me-s-1-shift)%n+2*n)%n)
		p.send(right, src[so:so+sl])
		p.recv(left, tmp[:rl])
		p.endRound()
		p.reduce(res[ro:ro+rl], tmp[:rl], in[ro:ro+rl])
		src = res // from the second round: the segment reduced the round before
	}
	p.endRound()
}

// allgatherRingSegs circulates segments of res: rank me starts owning
// segment (me+1+shift) mod n; after n-1 rounds every rank has all.
func (p *planner) allgatherRingSegs(v ranks, res []byte, count, es, shift int) {
	n, me := v.n, v.me
	right, left := v.of((me+1)%n), v.of((me-1+n)%n)
	for s := 0; s < n-1; s++ {
		so, sl := seg(count, es, n, ((me+1-s+shift)%n+2*n)%n)
		ro, rl := seg(count, es, n, ((me-s+shift)%n+2*n)%n)
		p.send(right, res[so:so+sl])
		p.recv(left, res[ro:ro+rl])
		p.endRound()
	}
}

// reduceScatterRingV is the ring reduce-scatter over segments of given
// bounds: segment i is res[offs[i]:offs[i+1]] (len(offs) == n+1); after
// n-1 rounds segment me of res holds the reduction of every rank's
// segment me. tmp holds the largest segment.
//
// Order: segment i is reduced along the ring starting after rank i:
// ((x[i+1] op x[i+2]) op ...) op x[i] (ranks modulo n), computed by rank
// i alone.
func (p *planner) reduceScatterRingV(v ranks, res, tmp []byte, offs []int) {
	n, me := v.n, v.me
	right, left := v.of((me+1)%n), v.of((me-1+n)%n)
	for s := 0; s < n-1; s++ {
		si := ((me-s-1)%n + n) % n
		ri := ((me-s-2)%n + n) % n
		rl := offs[ri+1] - offs[ri]
		p.send(right, res[offs[si]:offs[si+1]])
		p.recv(left, tmp[:rl])
		p.endRound()
		p.reduce(res[offs[ri]:offs[ri+1]], tmp[:rl], res[offs[ri]:offs[ri+1]])
	}
	p.endRound()
}

// allgatherRingV is the ring allgather over segments of given bounds:
// segment i is res[offs[i]:offs[i+1]], mine (me) already in place; n-1
// rounds each passing one segment to the right.
func (p *planner) allgatherRingV(v ranks, res []byte, offs []int) {
	n, me := v.n, v.me
	right, left := v.of((me+1)%n), v.of((me-1+n)%n)
	for s := 0; s < n-1; s++ {
		sb := ((me-s)%n + n) % n
		rb := ((me-s-1)%n + n) % n
		p.send(right, res[offs[sb]:offs[sb+1]])
		p.recv(left, res[offs[rb]:offs[rb+1]])
		p.endRound()
	}
}

// allreduceRing is reduce-scatter then allgather around the ring, for
// large buffers: 2(n-1) rounds, each moving 1/n of the buffer. in holds
// this rank's input (it may be res): no segment of res is read before
// the ring wrote it, so the input is never copied into res first.
func (p *planner) allreduceRing(v ranks, res, in, tmp []byte, count, es int) {
	if v.n == 1 {
		p.copy(res, in) // no rounds
		return
	}
	p.reduceScatterRing(v, res, in, tmp, count, es, 0)
	p.allgatherRingSegs(v, res, count, es, 0)
}

// bcastBinomial sends buf from virtual rank root down a binomial tree:
// ceil(log2 n) levels; a rank receives once from its parent, then sends
// to its children (largest subtree first) in one round.
func (p *planner) bcastBinomial(v ranks, root int, buf []byte) {
	n := v.n
	vr := (v.me - root + n) % n
	mask := 1
	for mask < n {
		if vr&mask != 0 {
			p.recv(v.of((vr-mask+root)%n), buf)
			p.endRound()
			break
		}
		mask <<= 1
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			p.send(v.of((vr+mask+root)%n), buf)
		}
	}
	p.endRound()
}

// reduceBinomial reduces acc up a binomial tree to virtual rank root; tmp
// has len(acc) bytes. At root, acc ends as the result.
//
// Order: ranks taken from the root upwards (root, root+1, ..., root-1),
// combined as a balanced tree, lower first.
func (p *planner) reduceBinomial(v ranks, root int, acc, tmp []byte) {
	n := v.n
	vr := (v.me - root + n) % n
	for mask := 1; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			p.send(v.of((vr-mask+root)%n), acc)
			p.endRound()
			return
		}
		if vr+mask < n {
			p.recv(v.of((vr+mask+root)%n), tmp)
			p.endRound()
			p.reduce(acc, acc, tmp)
		}
	}
	p.endRound()
}

// allgatherRing: res holds n blocks of bs bytes, mine already in place;
// n-1 rounds each passing one block to the right.
func (p *planner) allgatherRing(v ranks, res []byte, bs int) {
	n, me := v.n, v.me
	right, left := v.of((me+1)%n), v.of((me-1+n)%n)
	for s := 0; s < n-1; s++ {
		sb := ((me-s)%n + n) % n
		rb := ((me-s-1)%n + n) % n
		p.send(right, res[sb*bs:(sb+1)*bs])
		p.recv(left, res[rb*bs:(rb+1)*bs])
		p.endRound()
	}
}

// alltoallLinear: one round; block j of buf goes to rank j, block i of res
// comes from rank i.
func (p *planner) alltoallLinear(v ranks, buf, res []byte, bs int) {
	n, me := v.n, v.me
	p.copy(res[me*bs:(me+1)*bs], buf[me*bs:(me+1)*bs])
	p.endRound()
	for s := 1; s < n; s++ {
		to := (me + s) % n
		from := (me - s + n) % n
		p.send(v.of(to), buf[to*bs:(to+1)*bs])
		p.recv(v.of(from), res[from*bs:(from+1)*bs])
	}
	p.endRound()
}

// scatterLinear: the root sends block i of buf to rank i, all in one round.
func (p *planner) scatterLinear(v ranks, root int, buf, res []byte, bs int) {
	if v.me != root {
		p.recv(v.of(root), res[:bs])
		p.endRound()
		return
	}
	p.copy(res[:bs], buf[root*bs:(root+1)*bs])
	p.endRound()
	for i := 0; i < v.n; i++ {
		if i != root {
			p.send(v.of(i), buf[i*bs:(i+1)*bs])
		}
	}
	p.endRound()
}

// gatherLinear: every rank sends its block to the root, which receives
// each into its place, all in one round.
func (p *planner) gatherLinear(v ranks, root int, buf, res []byte, bs int) {
	if v.me != root {
		p.send(v.of(root), buf[:bs])
		p.endRound()
		return
	}
	p.copy(res[root*bs:(root+1)*bs], buf[:bs])
	p.endRound()
	for i := 0; i < v.n; i++ {
		if i != root {
			p.recv(v.of(i), res[i*bs:(i+1)*bs])
		}
	}
	p.endRound()
}
