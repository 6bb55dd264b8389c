package fi

import (
	"bytes"
	"math"
	"os"

	"github.com/gofi-dev/fi/coll"
	"github.com/gofi-dev/fi/dtype"
	"github.com/gofi-dev/fi/engine"
	flink "github.com/gofi-dev/fi/link"
)

// Collectives (fi_collective(3)).
//
// Members of a group build the same AVSet (same addresses, same order:
// rank i is the set's i-th address) and call Endpoint.JoinCollective; the
// join completes on the endpoint's transmit CQ with an entry whose
// Context is the join's ctx and whose Flags include Collective. Then every
// member calls the same collectives in the same order, each naming the
// group by MC.Addr(); each completes on the transmit CQ with the
// Collective flag (error entries carry the Errno). A group whose member
// died, left, or called a different collective fails: the operation in
// flight and every later one complete with an error (the members learn
// it from each other, so no member waits for a dead one), and the group
// must be closed.
//
// Buffers hold count elements of the datatype in host byte order (count
// per rank block where a buffer holds one block per rank, see each
// method). They belong to gofi until the operation's completion is read.
// The collective algorithms and the order in which floating-point values
// are combined are described in package coll.

// CollectiveAttr describes what a provider supports for one collective
// (struct fi_collective_attr, Domain.QueryCollective). Op and Datatype are
// inputs; the rest is filled in.
type CollectiveAttr struct {
	Op       AtomicOp // the reduction (allreduce, reduce, reduce-scatter)
	Datatype Datatype
	// DatatypeAttr.Count is the most elements one operation takes;
	// DatatypeAttr.Size the size of one element.
	DatatypeAttr AtomicAttr
	// MaxMembers is the largest group the collective runs on.
	MaxMembers int
	// Mode is reserved and must be 0.
	Mode uint64
}

// Limits QueryCollective reports.
const (
	collMaxMembers = 1 << 20
	collMaxCount   = math.MaxInt32
)

// QueryCollective reports whether the domain's endpoints run collective c
// for attr.Op and attr.Datatype (fi_query_collective), and fills in the
// limits. Barrier takes no data (its datatype and op are ignored);
// broadcast, allgather, alltoall, scatter and gather take every datatype
// but Void (the op is ignored); allreduce, reduce and reduce-scatter take
// the (datatype, op) pairs coll.Reducible lists: MIN to BXOR on the 8- to
// 64-bit integers, MIN, MAX, SUM, PROD on Float and Double, SUM and PROD
// on the complex types, MIN, MAX, SUM on Float16 and BFloat16.
//
// Errors: ErrOpNotSupp (not supported), ErrInval (nil attr, Mode not 0,
// unknown collective), ErrBadFlags (flags not 0).
func (d *Domain) QueryCollective(c CollectiveOp, attr *CollectiveAttr, flags Flags) error {
	const op = "Domain.QueryCollective"
	switch {
	case !d.open():
		return notOpenDomain(op)
	case attr == nil:
		return opErr(op, ErrInval, "nil attr")
	case attr.Mode != 0:
		return opErr(op, ErrInval, "mode %#x (reserved, must be 0)", attr.Mode)
	case flags != 0:
		return opErr(op, ErrBadFlags, "flags %s (none apply)", flags)
	case d.info.Caps != 0 && d.info.Caps&Collective == 0:
		return opErr(op, ErrOpNotSupp, "provider %s has no collectives", d.info.FabricAttr.ProvName)
	}
	t, o := dtype.Type(attr.Datatype), dtype.Op(attr.Op)
	size := 0
	switch c {
	case CollBarrier:
	case CollBroadcast, CollAllgather, CollAlltoall, CollScatter, CollGather:
		if !coll.Movable(t) {
			return opErr(op, ErrOpNotSupp, "%s of %s", c, attr.Datatype)
		}
		size = t.Size()
	case CollAllreduce, CollReduce, CollReduceScatter:
		if !coll.Reducible(t, o) {
			return opErr(op, ErrOpNotSupp, "%s of %s with %s", c, attr.Datatype, attr.Op)
		}
		size = t.Size()
	default:
		return opErr(op, ErrInval, "unknown collective %d", int(c))
	}
	attr.DatatypeAttr = AtomicAttr{Count: collMaxCount, Size: size}
	if c == CollBarrier {
		attr.DatatypeAttr.Count = 0
	}
	attr.MaxMembers = collMaxMembers
	return nil
}

// MC is a joined collective group (struct fid_mc): JoinCollective returns
// it, its Addr names the group in every collective, Close leaves it.
//
// An MC is safe for concurrent use exactly when its endpoint is.
type MC struct {
	ep      *Endpoint
	g       *coll.Group
	addr    Addr
	members []Addr
	closed  bool
}

// Addr returns the group's collective address (fi_mc_addr).
func (m *MC) Addr() Addr { return m.addr }

// Rank returns this endpoint's rank in the group: its index in the set.
func (m *MC) Rank() int { return m.g.Rank() }

// Size returns the number of members.
func (m *MC) Size() int { return len(m.members) }

// Close leaves the group. ErrBusy while collectives of the group are in
// flight (a failed group's are already complete).
func (m *MC) Close() error {
	const op = "MC.Close"
	if m.closed {
		return opErr(op, ErrOpBadState, "already closed")
	}
	ep := m.ep
	ep.eng.Lock()
	defer ep.eng.Unlock()
	if !ep.closed {
		if c := ep.coll.Leave(m.g); c == engine.CodeBusy {
			return opErr(op, ErrBusy, "collectives of the group are in flight")
		}
	}
	m.closed = true
	delete(ep.mcs, m.addr)
	if ep.mcLast == m {
		ep.mcLast = nil
	}
	return nil
}

// JoinCollective joins the endpoint to the group of set's members
// (fi_join_collective). collAddr is set.Addr() (or AddrNotAvail), or the
// Addr of a joined group holding every member of set (a subgroup).
// Every member must join, with sets holding the same addresses in the
// same order; the join completes asynchronously on the transmit CQ (an
// entry with Context ctx and the Collective flag, or an error entry). The
// returned MC's Addr is valid at once: collectives posted before the join
// completes run after it. Members join their groups in the same order.
//
// Errors: ErrOpNotSupp (endpoint without the Collective capability),
// ErrOpBadState (not enabled), ErrNoCQ (no transmit CQ bound), ErrInval
// (nil or foreign set, this endpoint not a member, bad collAddr),
// ErrBadFlags (flags other than Collective).
func (ep *Endpoint) JoinCollective(collAddr Addr, set *AVSet, flags Flags, ctx any) (*MC, error) {
	const op = "Endpoint.JoinCollective"
	if err := ep.collReady(op); err != nil {
		return nil, err
	}
	switch {
	case set == nil:
		return nil, opErr(op, ErrInval, "nil set")
	case set.av != ep.av:
		return nil, opErr(op, ErrInval, "the set belongs to another AV")
	case flags&^Collective != 0:
		return nil, opErr(op, ErrBadFlags, "flags %s", flags&^Collective)
	case ep.txcq == nil:
		return nil, opErr(op, ErrNoCQ, "collectives complete on the transmit CQ: bind one")
	}
	members := set.Addrs()
	if collAddr != AddrNotAvail && collAddr != set.Addr() {
		ep.eng.Lock()
		parent := ep.mcs[collAddr]
		ep.eng.Unlock()
		if parent == nil {
			return nil, opErr(op, ErrInval, "collAddr %#x names neither the set nor a joined group", uint64(collAddr))
		}
		for _, a := range members {
			if parentRank(parent, a) < 0 {
				return nil, opErr(op, ErrInval, "fi_addr %d is not a member of the parent group", uint64(a))
			}
		}
	}
	if len(members) == 0 {
		return nil, opErr(op, ErrInval, "empty set")
	}
	own, err := ep.Name()
	if err != nil {
		return nil, err
	}
	var scratch [maxSockaddrLen]byte
	own, err = canonAddr(ep.av.format, ep.av.prov, own, scratch[:0])
	if err != nil {
		return nil, opErr(op, ErrInval, "own address: %v", err)
	}
	names := make([][]byte, len(members))
	fiAddrs := make([]uint64, len(members))
	self := -1
	for i, a := range members {
		b, err := ep.av.Lookup(a)
		if err != nil {
			return nil, opErr(op, ErrInval, "member %d (fi_addr %d) is no longer in the AV", i, uint64(a))
		}
		fiAddrs[i] = uint64(a)
		if self < 0 && bytes.Equal(b, own) {
			self = i
		}
		if ep.av.prov == linkName {
			b = flink.Unrouted(b) // the same on every member, whatever its route
		}
		names[i] = b
	}
	if self < 0 {
		return nil, opErr(op, ErrInval, "this endpoint's address is not in the set")
	}
	ep.eng.Lock()
	defer ep.eng.Unlock()
	g, c := ep.coll.Join(fiAddrs, names, self, ctx)
	if c != 0 {
		return nil, opErr(op, Errno(c), "join refused")
	}
	m := &MC{ep: ep, g: g, members: members}
	ep.mcSeq++
	m.addr = mcAddrBase | Addr(ep.mcSeq)&collIDMask
	if ep.mcs == nil {
		ep.mcs = map[Addr]*MC{}
	}
	ep.mcs[m.addr] = m
	return m, nil
}

func parentRank(m *MC, a Addr) int {
	for i, x := range m.members {
		if x == a {
			return i
		}
	}
	return -1
}

// collReady checks the endpoint may run collectives.
func (ep *Endpoint) collReady(op string) error {
	switch {
	case !ep.enabled || ep.closed:
		return opErr(op, ErrOpBadState, "endpoint not enabled (or closed)")
	case ep.caps&Collective == 0 || ep.coll == nil:
		return opErr(op, ErrOpNotSupp, "endpoint lacks the Collective capability")
	}
	return nil
}

var (
	errNoColl      = opErr("Endpoint", ErrOpNotSupp, "endpoint lacks the Collective capability")
	errCollAddr    = opErr("Endpoint", ErrInval, "collective address names no joined group")
	errCollRoot    = opErr("Endpoint", ErrInval, "root is not a member of the group")
	errCollCount   = opErr("Endpoint", ErrInval, "negative count")
	errCollBuf     = opErr("Endpoint", ErrInval, "buffer shorter than the collective needs")
	errCollType    = opErr("Endpoint", ErrOpNotSupp, "datatype not supported by this collective (see Domain.QueryCollective)")
	errCollReduce  = opErr("Endpoint", ErrOpNotSupp, "(datatype, op) not supported for reduction (see Domain.QueryCollective)")
	errCollFlags   = opErr("Endpoint", ErrBadFlags, "flag not valid for a collective")
	errCollTooMany = opErr("Endpoint", ErrInval, "count beyond the collective's limit")
)

// collFlags are the flags a collective takes: Completion asks for a
// success entry under SelectiveCompletion.
const collFlags = Completion | Collective

// postColl checks a collective's arguments and queues it. bufBlocks and
// resBlocks say how much Buf and Result must hold (0: unused, one: count
// elements, perRank: count*size); rootBuf / rootRes: only at the root.
func (ep *Endpoint) postColl(a *coll.Args, collAddr, root Addr, flags Flags, ctx any, bufBlocks, resBlocks int, rootBuf, rootRes bool) error {
	if !ep.enabled || ep.closed {
		return errNotEnabled
	}
	if ep.coll == nil {
		return errNoColl
	}
	if flags&^collFlags != 0 {
		return errCollFlags
	}
	if a.Count < 0 {
		return errCollCount
	}
	if a.Count > collMaxCount {
		return errCollTooMany
	}
	ep.eng.Lock()
	m := ep.mcLast
	if m == nil || m.addr != collAddr || m.closed {
		if m = ep.mcs[collAddr]; m == nil || m.closed {
			ep.eng.Unlock()
			return errCollAddr
		}
		ep.mcLast = m
	}
	n := len(m.members)
	if root != AddrNotAvail {
		a.Root = parentRank(m, root)
		if a.Root < 0 {
			ep.eng.Unlock()
			return errCollRoot
		}
	}
	me := m.g.Rank()
	es := a.Type.Size()
	enough := func(b []byte, blocks int, onlyRoot bool) bool {
		if blocks == 0 || (onlyRoot && me != a.Root) {
			return true
		}
		elems := a.Count
		if blocks == perRank {
			elems *= n
		}
		return len(b) >= elems*es
	}
	if !enough(a.Buf, bufBlocks, rootBuf) || !enough(a.Result, resBlocks, rootRes) {
		ep.eng.Unlock()
		return errCollBuf
	}
	a.Flags = uint64(flags & Completion)
	c := m.g.Post(a, ctx) // never panics: coll checks what it is given
	ep.eng.Unlock()
	if c == 0 {
		return nil
	}
	if c != engine.CodeAgain {
		return opErr("Endpoint", Errno(c), "collective group failed")
	}
	return codeErr(c)
}

// Block counts for postColl: 1 means count elements, perRank count*size.
const (
	one     = 1
	perRank = -1
)

// Barrier returns at once and completes when every member has entered it
// (fi_barrier).
func (ep *Endpoint) Barrier(collAddr Addr, ctx any) error {
	a := coll.Args{Coll: dtype.Barrier, Type: dtype.Void}
	return ep.postColl(&a, collAddr, AddrNotAvail, 0, ctx, 0, 0, false, false)
}

// checkMove checks a datatype for a collective that moves data.
func checkMove(dt Datatype) error {
	if !coll.Movable(dtype.Type(dt)) {
		return errCollType
	}
	return nil
}

func checkReduce(dt Datatype, op AtomicOp) error {
	if !coll.Reducible(dtype.Type(dt), dtype.Op(op)) {
		return errCollReduce
	}
	return nil
}

// Broadcast copies count elements of buf at root (an address of a member)
// into buf at every other member (fi_broadcast).
func (ep *Endpoint) Broadcast(buf []byte, count int, desc MRDesc, collAddr, root Addr, dt Datatype, flags Flags, ctx any) error {
	if err := checkMove(dt); err != nil {
		return err
	}
	a := coll.Args{Coll: dtype.Broadcast, Type: dtype.Type(dt), Op: dtype.Noop, Count: count, Buf: buf}
	return ep.postColl(&a, collAddr, root, flags, ctx, one, 0, false, false)
}

// Allreduce combines count elements of buf from every member with op and
// writes the result to result on every member (fi_allreduce). result may
// be buf.
func (ep *Endpoint) Allreduce(buf []byte, count int, desc MRDesc, result []byte, resultDesc MRDesc, collAddr Addr, dt Datatype, op AtomicOp, flags Flags, ctx any) error {
	if err := checkReduce(dt, op); err != nil {
		return err
	}
	a := coll.Args{Coll: dtype.Allreduce, Type: dtype.Type(dt), Op: dtype.Op(op), Count: count, Buf: buf, Result: result}
	return ep.postColl(&a, collAddr, AddrNotAvail, flags, ctx, one, one, false, false)
}

// Reduce combines count elements of buf from every member with op into
// result at root (fi_reduce); result is unused elsewhere (may be nil).
func (ep *Endpoint) Reduce(buf []byte, count int, desc MRDesc, result []byte, resultDesc MRDesc, collAddr, root Addr, dt Datatype, op AtomicOp, flags Flags, ctx any) error {
	if err := checkReduce(dt, op); err != nil {
		return err
	}
	a := coll.Args{Coll: dtype.Reduce, Type: dtype.Type(dt), Op: dtype.Op(op), Count: count, Buf: buf, Result: result}
	return ep.postColl(&a, collAddr, root, flags, ctx, one, one, false, true)
}

// Allgather writes every member's count elements of buf into result, the
// block of rank i at element i*count: result holds count*size elements
// (fi_allgather).
func (ep *Endpoint) Allgather(buf []byte, count int, desc MRDesc, result []byte, resultDesc MRDesc, collAddr Addr, dt Datatype, flags Flags, ctx any) error {
	if err := checkMove(dt); err != nil {
		return err
	}
	a := coll.Args{Coll: dtype.Allgather, Type: dtype.Type(dt), Op: dtype.Noop, Count: count, Buf: buf, Result: result}
	return ep.postColl(&a, collAddr, AddrNotAvail, flags, ctx, one, perRank, false, false)
}

// ReduceScatter combines the members' buf (count*size elements: one block
// of count per rank) with op and writes block r of the result to result
// at rank r (count elements) (fi_reduce_scatter).
func (ep *Endpoint) ReduceScatter(buf []byte, count int, desc MRDesc, result []byte, resultDesc MRDesc, collAddr Addr, dt Datatype, op AtomicOp, flags Flags, ctx any) error {
	if err := checkReduce(dt, op); err != nil {
		return err
	}
	a := coll.Args{Coll: dtype.ReduceScatter, Type: dtype.Type(dt), Op: dtype.Op(op), Count: count, Buf: buf, Result: result}
	return ep.postColl(&a, collAddr, AddrNotAvail, flags, ctx, perRank, one, false, false)
}

// Alltoall sends block j of buf (count elements at j*count) to rank j,
// which stores it as block i of its result, i being the sender's rank;
// buf and result hold count*size elements (fi_alltoall).
func (ep *Endpoint) Alltoall(buf []byte, count int, desc MRDesc, result []byte, resultDesc MRDesc, collAddr Addr, dt Datatype, flags Flags, ctx any) error {
	if err := checkMove(dt); err != nil {
		return err
	}
	a := coll.Args{Coll: dtype.Alltoall, Type: dtype.Type(dt), Op: dtype.Noop, Count: count, Buf: buf, Result: result}
	return ep.postColl(&a, collAddr, AddrNotAvail, flags, ctx, perRank, perRank, false, false)
}

// Scatter sends block i of buf at root (count*size elements) to rank i,
// into its result (count elements) (fi_scatter); buf is unused elsewhere.
func (ep *Endpoint) Scatter(buf []byte, count int, desc MRDesc, result []byte, resultDesc MRDesc, collAddr, root Addr, dt Datatype, flags Flags, ctx any) error {
	if err := checkMove(dt); err != nil {
		return err
	}
	a := coll.Args{Coll: dtype.Scatter, Type: dtype.Type(dt), Op: dtype.Noop, Count: count, Buf: buf, Result: result}
	return ep.postColl(&a, collAddr, root, flags, ctx, perRank, one, true, false)
}

// Gather collects every member's count elements of buf into result at
// root, rank i's at block i (count*size elements) (fi_gather); result is
// unused elsewhere.
func (ep *Endpoint) Gather(buf []byte, count int, desc MRDesc, result []byte, resultDesc MRDesc, collAddr, root Addr, dt Datatype, flags Flags, ctx any) error {
	if err := checkMove(dt); err != nil {
		return err
	}
	a := coll.Args{Coll: dtype.Gather, Type: dtype.Type(dt), Op: dtype.Noop, Count: count, Buf: buf, Result: result}
	return ep.postColl(&a, collAddr, root, flags, ctx, one, perRank, false, true)
}

// nodeKey is the shared-memory domain collectives of this endpoint may use
// (0: none, every collective runs over point-to-point messages): on shm
// and on the linked shm+tcp, the node's (members of a group on one node
// share a region; on shm+tcp the nodes' representatives talk over tcp).
func (ep *Endpoint) nodeKey() uint64 {
	switch fa := ep.info.FabricAttr; {
	case fa == nil:
	case fa.ProvName == shmName:
		return coll.NodeKey()
	case fa.ProvName == "shm+tcp":
		// GOFI_LINK_DOMAIN tells processes of one host apart as if on
		// different hosts: their groups then talk over tcp too.
		return coll.NodeKeySalted(os.Getenv("GOFI_LINK_DOMAIN"))
	}
	return 0
}
