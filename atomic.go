package fi

import (
	"unsafe"

	"github.com/gofi-dev/fi/dtype"
	"github.com/gofi-dev/fi/dtype/kernel"
	"github.com/gofi-dev/fi/engine"
	"github.com/gofi-dev/fi/rma"
	"github.com/gofi-dev/fi/transport"
)

// Atomics (fi_atomic(3)). Buffers are []byte holding whole elements of
// the datatype in host byte order; count is in elements. The target's
// application takes no part: on tcp its event loop executes the operation
// against the registered region (package rma); on shm the initiator
// executes it on its own mapping of AllocMR memory with the processor's
// atomic instructions, or, for registered Go memory and 16-byte types,
// the target's executor goroutine does (package shm); the element kernels
// are package dtype/kernel's.
//
// Atomicity: each element is one atomic operation with respect to every
// other atomic on that location, whichever peer issued it and whichever
// transport carried it, and, for 4- and 8-byte integers, with respect to
// the target's own sync/atomic operations on MR.Bytes(). A call covering
// several elements is not atomic as a whole.
//
// Ordering: atomics and RMA from one initiator endpoint to one peer are
// executed at the target in the order they were issued, on both
// providers (TxAttr.MsgOrder has the OrderAtomic and OrderRMA bits): an
// atomic after a Write sees the written bytes, a Write after an atomic
// overwrites its result. On tcp one connection carries them and the
// target's event loop executes them as it reads them; on shm an operation
// never passes one still in the peer's channel, and the others (copies
// into AllocMR memory, atomics on it) are done before the call returns.
// Nothing orders operations of different initiators, nor an atomic
// against a plain (non-atomic) access by another party to the same bytes
// (an RMA Write to the same word may tear against it); Fence orders
// anything after every earlier operation to the same peer. A completion
// means the target executed the operation (delivery complete): results
// are in place and later operations of anyone see it.

// AtomicIOV is one remote range of an atomic (struct fi_rma_ioc): Count
// elements at address Addr of the region registered under Key.
type AtomicIOV struct {
	Addr, Count, Key uint64
}

// atomicMsg views AtomicIOV as RMAIOV: the layouts must agree.
var _ = [1]struct{}{}[unsafe.Sizeof(AtomicIOV{})-unsafe.Sizeof(RMAIOV{})+
	unsafe.Offsetof(AtomicIOV{}.Count)-unsafe.Offsetof(RMAIOV{}.Len)+
	unsafe.Offsetof(AtomicIOV{}.Key)-unsafe.Offsetof(RMAIOV{}.Key)]

// AtomicMsg describes an atomic for AtomicMsg, FetchAtomicMsg and
// CompareAtomicMsg (struct fi_msg_atomic): the local operand buffers
// MsgIOV (whole elements each; ignored for OpAtomicRead; Desc is ignored,
// no local registration), the peer Addr, its ranges RMAIOV (as many
// elements in all as the local buffers hold), the Datatype and Op, and the
// completion Context. Data is remote CQ data, which gofi's atomics do not
// carry (the RemoteCQData flag is refused).
type AtomicMsg struct {
	MsgIOV   [][]byte
	Desc     []MRDesc
	Addr     Addr
	RMAIOV   []AtomicIOV
	Datatype Datatype
	Op       AtomicOp
	Context  any
	Data     uint64
}

// QueryAtomic flags (fi_atomic(3)): ask about FetchAtomic or
// CompareAtomic rather than Atomic.
const (
	FetchAtomicFlag   Flags = 1 << 58 // FI_FETCH_ATOMIC
	CompareAtomicFlag Flags = 1 << 59 // FI_COMPARE_ATOMIC
)

// Flags the ...Msg forms accept. Inject applies to AtomicMsg only (a
// fetching atomic's results must be reported).
const (
	atomicMsgFlags = Completion | Inject | More | InjectComplete | TransmitComplete | DeliveryComplete | Fence
	fetchMsgFlags  = Completion | More | InjectComplete | TransmitComplete | DeliveryComplete | Fence
)

var (
	errNoAtomic    = opErr("Endpoint", ErrOpNotSupp, "endpoint lacks the Atomic capability")
	errAtomicFlags = opErr("Endpoint", ErrBadFlags, "flag not valid for this atomic operation")
	errAtomicIOV   = opErr("Endpoint", ErrInval, "atomic: remote ranges must number 1 to TxAttr.RMAIOVLimit, each of 1 or more elements")
	errAtomicLen   = opErr("Endpoint", ErrInval, "atomic: a buffer is shorter than count elements, not whole elements, or differs in length from the remote ranges")
)

const errAtomicLongDbl = "%s: Go has no exact x87 extended-precision arithmetic; refused rather than computed approximately"

// atomicFamily maps the transport's kinds to the call families of package
// dtype.
func atomicFamily(k transport.RMAKind) dtype.Kind {
	switch k {
	case transport.RMAFetch:
		return dtype.KindFetch
	case transport.RMACompare:
		return dtype.KindCompare
	}
	return dtype.KindBase
}

// atomicAttr says whether (dt, op) is supported for the call family of k
// and returns its limits.
func atomicAttr(op string, k transport.RMAKind, dt Datatype, o AtomicOp) (AtomicAttr, error) {
	if dt == LongDouble || dt == LongDoubleComplex {
		return AtomicAttr{}, opErr(op, ErrOpNotSupp, errAtomicLongDbl, dt)
	}
	t := dtype.Type(dt)
	if dt < 0 || dt > 255 || o < 0 || o > 255 || !kernel.Supported(t, dtype.Op(o), atomicFamily(k)) {
		return AtomicAttr{}, opErr(op, ErrOpNotSupp, "%s on %s is not a %s operation (fi_atomic(3))", o, dt, [...]string{"base", "fetch", "compare"}[k-transport.RMAAtomic])
	}
	return AtomicAttr{Count: rma.MaxAtomic / t.Size(), Size: t.Size()}, nil
}

// atomicReady checks the endpoint may initiate atomics of kind k: Write
// for Atomic, Read for the fetching forms.
func (ep *Endpoint) atomicReady(k transport.RMAKind) error {
	if !ep.enabled || ep.closed {
		return errNotEnabled
	}
	if ep.caps&Atomic == 0 {
		return errNoAtomic
	}
	if k == transport.RMAAtomic && ep.caps&Write == 0 {
		return errNoWrite
	}
	if k != transport.RMAAtomic && ep.caps&Read == 0 {
		return errNoRead
	}
	return nil
}

// atomicValid answers the three validity queries.
func (ep *Endpoint) atomicValid(op string, k transport.RMAKind, dt Datatype, o AtomicOp) (int, error) {
	if ep == nil || ep.closed {
		return 0, opErr(op, ErrOpBadState, "endpoint closed")
	}
	if ep.caps&Atomic == 0 {
		return 0, errNoAtomic
	}
	a, err := atomicAttr(op, k, dt, o)
	return a.Count, err
}

// AtomicValid reports the most elements one Atomic of dt with op may
// cover (fi_atomicvalid), or ErrOpNotSupp when the endpoint cannot
// perform it: the combination is not in fi_atomic(3)'s table for Atomic,
// the endpoint lacks the Atomic capability, or dt is LongDouble or
// LongDoubleComplex, which Go cannot compute bit-exactly.
func (ep *Endpoint) AtomicValid(dt Datatype, op AtomicOp) (count int, err error) {
	return ep.atomicValid("Endpoint.AtomicValid", transport.RMAAtomic, dt, op)
}

// FetchAtomicValid is AtomicValid for FetchAtomic (fi_fetch_atomicvalid).
func (ep *Endpoint) FetchAtomicValid(dt Datatype, op AtomicOp) (count int, err error) {
	return ep.atomicValid("Endpoint.FetchAtomicValid", transport.RMAFetch, dt, op)
}

// CompareAtomicValid is AtomicValid for CompareAtomic
// (fi_compare_atomicvalid).
func (ep *Endpoint) CompareAtomicValid(dt Datatype, op AtomicOp) (count int, err error) {
	return ep.atomicValid("Endpoint.CompareAtomicValid", transport.RMACompare, dt, op)
}

// QueryAtomic reports the limits of atomics of dt with op on the domain
// (fi_query_atomic): flags 0 asks about Atomic, FetchAtomicFlag about
// FetchAtomic, CompareAtomicFlag about CompareAtomic. ErrOpNotSupp when
// the provider has no atomics or the combination is not supported
// (LongDouble and LongDoubleComplex never are); ErrBadFlags for other
// flags.
func (d *Domain) QueryAtomic(dt Datatype, op AtomicOp, flags Flags) (AtomicAttr, error) {
	const name = "Domain.QueryAtomic"
	if !d.open() {
		return AtomicAttr{}, notOpenDomain(name)
	}
	k := transport.RMAAtomic
	switch flags {
	case 0:
	case FetchAtomicFlag:
		k = transport.RMAFetch
	case CompareAtomicFlag:
		k = transport.RMACompare
	default:
		return AtomicAttr{}, opErr(name, ErrBadFlags, "flags %s (0, FetchAtomicFlag or CompareAtomicFlag)", flags)
	}
	if p := findProvider(d.info.FabricAttr.ProvName); p == nil || p.defaults().Caps&Atomic == 0 {
		return AtomicAttr{}, opErr(name, ErrOpNotSupp, "provider %s has no atomics", d.info.FabricAttr.ProvName)
	}
	return atomicAttr(name, k, dt, op)
}

// atomicCall is one atomic call's arguments as the root checks them.
type atomicCall struct {
	name     string
	count    int // elements (basic forms)
	buf, cmp []byte
	res      []byte
	dt       Datatype
	op       AtomicOp
}

// atomic checks and starts a basic-form atomic: a holds the kind, the
// remote address and key.
func (ep *Endpoint) atomic(a *engine.RMAArgs, c *atomicCall, dest Addr, flags Flags, ctx any) error {
	if err := ep.atomicReady(a.Kind); err != nil {
		return err
	}
	attr, err := atomicAttr(c.name, a.Kind, c.dt, c.op)
	if err != nil {
		return err
	}
	if c.count < 1 || c.count > attr.Count {
		return opErr(c.name, ErrInval, "count %d (1 to %d elements of %s)", c.count, attr.Count, c.dt)
	}
	n := c.count * attr.Size
	read := a.Kind == transport.RMAFetch && c.op == OpAtomicRead
	switch {
	case !read && len(c.buf) < n, a.Kind == transport.RMACompare && len(c.cmp) < n,
		a.Kind != transport.RMAAtomic && len(c.res) < n:
		return errAtomicLen
	}
	if !read {
		a.Buf = c.buf[:n]
	} else {
		a.Buf = []byte{}
	}
	if a.Kind == transport.RMACompare {
		a.Compare = c.cmp[:n]
	}
	if a.Kind != transport.RMAAtomic {
		a.Result = c.res[:n]
	}
	if flags&Inject != 0 && n > ep.injectSize {
		return errInject
	}
	a.Datatype, a.Op, a.Dest, a.Flags = uint8(c.dt), uint8(c.op), uint64(dest), uint64(flags)
	return codeErr(ep.eng.RMA(a, ctx))
}

// atomicMsg checks and starts a ...Msg form.
func (ep *Endpoint) atomicMsg(name string, k transport.RMAKind, msg *AtomicMsg, cmpv, resv [][]byte, flags, allowed Flags) error {
	if err := ep.atomicReady(k); err != nil {
		return err
	}
	if msg == nil {
		return opErr(name, ErrInval, "nil msg")
	}
	if flags&^allowed != 0 {
		return errAtomicFlags
	}
	attr, err := atomicAttr(name, k, msg.Datatype, msg.Op)
	if err != nil {
		return err
	}
	if len(msg.RMAIOV) == 0 || len(msg.RMAIOV) > rmaIOVLimit {
		return errAtomicIOV
	}
	var total uint64
	for _, v := range msg.RMAIOV {
		if v.Count == 0 || v.Count > uint64(attr.Count) {
			return errAtomicIOV
		}
		total += v.Count * uint64(attr.Size)
	}
	if total > rma.MaxAtomic {
		return opErr(name, ErrInval, "%d elements of %s (at most %d)", total/uint64(attr.Size), msg.Datatype, attr.Count)
	}
	// AtomicIOV has RMAIOV's layout with Count for Len: the engine copies
	// the ranges and scales them by ElemSize.
	riov := rmaIOVs(*(*[]RMAIOV)(unsafe.Pointer(&msg.RMAIOV)))
	a := engine.RMAArgs{Kind: k, RIOV: riov, ElemSize: uint64(attr.Size), Datatype: uint8(msg.Datatype), Op: uint8(msg.Op),
		Dest: uint64(msg.Addr), Flags: uint64(flags)}
	if k == transport.RMAFetch && msg.Op == OpAtomicRead {
		a.IOV = [][]byte{}
	} else if a.IOV, err = ep.atomicIOV(msg.MsgIOV, attr.Size, total); err != nil {
		return err
	}
	if k == transport.RMACompare {
		if a.CIOV, err = ep.atomicIOV(cmpv, attr.Size, total); err != nil {
			return err
		}
	}
	if k != transport.RMAAtomic {
		if a.ResIOV, err = ep.atomicIOV(resv, attr.Size, total); err != nil {
			return err
		}
	}
	if flags&Inject != 0 && total > uint64(ep.injectSize) {
		return errInject
	}
	return codeErr(ep.eng.RMA(&a, msg.Context))
}

// atomicIOV checks a local iov holds whole elements adding up to total
// bytes.
func (ep *Endpoint) atomicIOV(iov [][]byte, size int, total uint64) ([][]byte, error) {
	if len(iov) > ep.iovLimit {
		return nil, errIOVLimit
	}
	var n uint64
	for _, b := range iov {
		if len(b)%size != 0 {
			return nil, errAtomicLen
		}
		n += uint64(len(b))
	}
	if n != total {
		return nil, errAtomicLen
	}
	return nonNil(iov), nil
}

// Atomic applies op with the count elements of buf to count elements at
// remote address addr of the peer's region key (fi_atomic): OpMin to
// OpBXor and OpAtomicWrite, on the datatypes AtomicValid accepts. The
// completion, with the Atomic and Write flags, means the target executed
// it. Refusals complete in error and touch no target byte: ErrAccess for a
// key that is unknown or closed at the target or lacks RemoteWrite,
// ErrInval for a range outside the region or an address not aligned to the
// element (8 bytes for the 16-byte types), ErrOpNotSupp for a datatype or
// operation the target does not support. Argument errors are returned at
// once: ErrOpNotSupp for an unsupported (dt, op), ErrInval for a count
// below 1 or above AtomicValid's or a buffer shorter than count elements.
func (ep *Endpoint) Atomic(buf []byte, count int, desc MRDesc, dest Addr, addr, key uint64, dt Datatype, op AtomicOp, ctx any) error {
	c := atomicCall{name: "Endpoint.Atomic", count: count, buf: buf, dt: dt, op: op}
	return ep.atomic(&engine.RMAArgs{Kind: transport.RMAAtomic, Addr: addr, Key: key}, &c, dest, ep.rmaOpFlags(), ctx)
}

// InjectAtomic is Atomic with a small buffer (at most TxAttr.InjectSize
// bytes) that is free again when the call returns (fi_inject_atomic); it
// makes no completion (a failure still makes an error completion, with a
// nil Context).
func (ep *Endpoint) InjectAtomic(buf []byte, count int, dest Addr, addr, key uint64, dt Datatype, op AtomicOp) error {
	c := atomicCall{name: "Endpoint.InjectAtomic", count: count, buf: buf, dt: dt, op: op}
	return ep.atomic(&engine.RMAArgs{Kind: transport.RMAAtomic, Addr: addr, Key: key}, &c, dest, Inject, nil)
}

// FetchAtomic is Atomic that also returns in result the values the
// target held before (fi_fetch_atomic); it takes OpAtomicRead too (buf is
// then ignored and may be nil). The completion carries the Atomic and Read
// flags; the region needs RemoteRead, and RemoteWrite unless op is
// OpAtomicRead.
func (ep *Endpoint) FetchAtomic(buf []byte, count int, desc MRDesc, result []byte, resultDesc MRDesc, dest Addr, addr, key uint64, dt Datatype, op AtomicOp, ctx any) error {
	c := atomicCall{name: "Endpoint.FetchAtomic", count: count, buf: buf, res: result, dt: dt, op: op}
	return ep.atomic(&engine.RMAArgs{Kind: transport.RMAFetch, Addr: addr, Key: key}, &c, dest, ep.rmaOpFlags(), ctx)
}

// CompareAtomic applies a compare operation (OpCSwap to OpMSwap) with
// operands buf and compare to count elements at addr, returning the old
// values in result (fi_compare_atomic): OpCSwap writes buf's element where
// the target's equals compare's, OpCSwapNE to OpCSwapGT where compare's
// element is not equal, <=, <, >=, > the target's, OpMSwap writes the bits
// of buf selected by compare's. Comparisons are IEEE (NaN equals nothing,
// -0 equals +0). The region needs RemoteRead and RemoteWrite.
func (ep *Endpoint) CompareAtomic(buf []byte, count int, desc MRDesc, compare []byte, compareDesc MRDesc, result []byte, resultDesc MRDesc, dest Addr, addr, key uint64, dt Datatype, op AtomicOp, ctx any) error {
	c := atomicCall{name: "Endpoint.CompareAtomic", count: count, buf: buf, cmp: compare, res: result, dt: dt, op: op}
	return ep.atomic(&engine.RMAArgs{Kind: transport.RMACompare, Addr: addr, Key: key}, &c, dest, ep.rmaOpFlags(), ctx)
}

// AtomicMsg is Atomic with several ranges and explicit flags
// (fi_atomicmsg): Completion, Inject, More, the completion levels and
// Fence.
func (ep *Endpoint) AtomicMsg(msg *AtomicMsg, flags Flags) error {
	return ep.atomicMsg("Endpoint.AtomicMsg", transport.RMAAtomic, msg, nil, nil, flags, atomicMsgFlags)
}

// FetchAtomicMsg is FetchAtomic with several ranges and explicit flags
// (fi_fetch_atomicmsg): resultv receives the old values, as many bytes
// as the ranges cover.
func (ep *Endpoint) FetchAtomicMsg(msg *AtomicMsg, resultv [][]byte, resultDesc []MRDesc, flags Flags) error {
	return ep.atomicMsg("Endpoint.FetchAtomicMsg", transport.RMAFetch, msg, nil, resultv, flags, fetchMsgFlags)
}

// CompareAtomicMsg is CompareAtomic with several ranges and explicit
// flags (fi_compare_atomicmsg).
func (ep *Endpoint) CompareAtomicMsg(msg *AtomicMsg, comparev [][]byte, compareDesc []MRDesc, resultv [][]byte, resultDesc []MRDesc, flags Flags) error {
	return ep.atomicMsg("Endpoint.CompareAtomicMsg", transport.RMACompare, msg, comparev, resultv, flags, fetchMsgFlags)
}
