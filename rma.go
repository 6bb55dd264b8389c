package fi

import (
	"unsafe"

	"github.com/gofi-dev/fi/engine"
	"github.com/gofi-dev/fi/rma"
	"github.com/gofi-dev/fi/transport"
)

// RMAIOV is one remote range of an RMA operation (struct fi_rma_iov):
// Len bytes at address Addr (the region's registration offset plus a
// position in it) of the region registered under Key.
type RMAIOV struct {
	Addr, Len, Key uint64
}

// RMAMsg describes an RMA operation for WriteMsg and ReadMsg (struct
// fi_msg_rma): the local buffers MsgIOV (Desc is ignored: no local
// registration), the peer Addr, its ranges RMAIOV (their lengths add up
// to the local buffers'), the completion Context, and the remote CQ Data
// sent with the RemoteCQData flag.
type RMAMsg struct {
	MsgIOV  [][]byte
	Desc    []MRDesc
	Addr    Addr
	RMAIOV  []RMAIOV
	Context any
	Data    uint64
}

// rmaIOVLimit is TxAttr.RMAIOVLimit: remote ranges per operation.
const rmaIOVLimit = rma.MaxIOV

// Flags WriteMsg and ReadMsg accept (fi_rma(3)). Every completion-level
// flag is satisfied: an RMA completion is written once the target holds
// (write) or gave (read) the bytes: DeliveryComplete semantics always.
const (
	writeFlags = RemoteCQData | Completion | Inject | More | InjectComplete | TransmitComplete | DeliveryComplete | Fence
	readFlags  = Completion | More | InjectComplete | TransmitComplete | DeliveryComplete | Fence
)

var (
	errNoRMA    = opErr("Endpoint", ErrOpNotSupp, "endpoint lacks the RMA capability")
	errNoWrite  = opErr("Endpoint", ErrOpNotSupp, "endpoint lacks the Write capability (RMA writes)")
	errNoRead   = opErr("Endpoint", ErrOpNotSupp, "endpoint lacks the Read capability (RMA reads)")
	errRMAIOV   = opErr("Endpoint", ErrInval, "more remote ranges than TxAttr.RMAIOVLimit")
	errRMALen   = opErr("Endpoint", ErrInval, "local and remote lengths differ")
	errRMAFlags = opErr("Endpoint", ErrBadFlags, "flag not valid for this RMA operation")
)

// rmaReady checks the endpoint may initiate RMA with the modifier want
// (Write or Read).
func (ep *Endpoint) rmaReady(want Flags) error {
	if !ep.enabled || ep.closed {
		return errNotEnabled
	}
	if ep.caps&RMA == 0 {
		return errNoRMA
	}
	if ep.caps&want == 0 {
		if want == Write {
			return errNoWrite
		}
		return errNoRead
	}
	return nil
}

// rma hands one operation to the engine. The argument struct comes by
// pointer from the caller's stack, so nothing escapes per call.
func (ep *Endpoint) rma(a *engine.RMAArgs, dest Addr, flags Flags, ctx any) error {
	n := len(a.Buf)
	if a.IOV != nil {
		if len(a.IOV) > ep.iovLimit {
			return errIOVLimit
		}
		n = 0
		for _, b := range a.IOV {
			n += len(b)
		}
	}
	if a.RIOV != nil {
		if len(a.RIOV) == 0 || len(a.RIOV) > rmaIOVLimit {
			return errRMAIOV
		}
		var r uint64
		for _, v := range a.RIOV {
			r += v.Len
		}
		if r != uint64(n) {
			return errRMALen
		}
	}
	if flags&Inject != 0 && n > ep.injectSize {
		return errInject
	}
	a.Dest, a.Flags = uint64(dest), uint64(flags)
	return codeErr(ep.eng.RMA(a, ctx))
}

// txFlags are the endpoint's default transmit flags that apply to RMA.
func (ep *Endpoint) rmaOpFlags() Flags {
	return ep.txOpFlags & (Completion | DeliveryComplete | TransmitComplete | InjectComplete)
}

// Write copies buf into the peer's region key at remote address addr
// (fi_write). The completion, with the Write and RMA flags, means the
// bytes are in the target's memory (delivery complete); the target's
// application takes no part. A key that is unknown or closed at the
// target, or lacks RemoteWrite, completes with ErrAccess; a range outside
// the region with ErrInval; no target byte is touched then.
func (ep *Endpoint) Write(buf []byte, desc MRDesc, dest Addr, addr, key uint64, ctx any) error {
	if err := ep.rmaReady(Write); err != nil {
		return err
	}
	return ep.rma(&engine.RMAArgs{Kind: transport.RMAWrite, Buf: buf, Addr: addr, Key: key}, dest, ep.rmaOpFlags(), ctx)
}

// WriteV writes the concatenation of iov to addr (fi_writev).
func (ep *Endpoint) WriteV(iov [][]byte, desc []MRDesc, dest Addr, addr, key uint64, ctx any) error {
	if err := ep.rmaReady(Write); err != nil {
		return err
	}
	return ep.rma(&engine.RMAArgs{Kind: transport.RMAWrite, IOV: nonNil(iov), Addr: addr, Key: key}, dest, ep.rmaOpFlags(), ctx)
}

// WriteData writes buf like Write and, once the bytes are in place,
// delivers data to the target as remote CQ data (fi_writedata): a
// completion on the target's receive CQ with RemoteCQData, RemoteWrite
// and RMA, carrying data and the length written. In RxCQData mode it
// consumes a posted receive (whose completion carries those flags);
// otherwise it is a completion of its own with a nil Context.
func (ep *Endpoint) WriteData(buf []byte, desc MRDesc, data uint64, dest Addr, addr, key uint64, ctx any) error {
	if err := ep.rmaReady(Write); err != nil {
		return err
	}
	return ep.rma(&engine.RMAArgs{Kind: transport.RMAWrite, Buf: buf, Addr: addr, Key: key, Data: data}, dest, ep.rmaOpFlags()|RemoteCQData, ctx)
}

// InjectWrite writes a small buffer (at most TxAttr.InjectSize bytes)
// that is free again when the call returns (fi_inject_write); it makes no
// completion (a failure still makes an error completion, with a nil
// Context).
func (ep *Endpoint) InjectWrite(buf []byte, dest Addr, addr, key uint64) error {
	if err := ep.rmaReady(Write); err != nil {
		return err
	}
	return ep.rma(&engine.RMAArgs{Kind: transport.RMAWrite, Buf: buf, Addr: addr, Key: key}, dest, Inject, nil)
}

// InjectWriteData is InjectWrite with remote CQ data
// (fi_inject_writedata).
func (ep *Endpoint) InjectWriteData(buf []byte, data uint64, dest Addr, addr, key uint64) error {
	if err := ep.rmaReady(Write); err != nil {
		return err
	}
	return ep.rma(&engine.RMAArgs{Kind: transport.RMAWrite, Buf: buf, Addr: addr, Key: key, Data: data}, dest, Inject|RemoteCQData, nil)
}

// WriteMsg writes msg with explicit flags (fi_writemsg): RemoteCQData,
// Completion, Inject, More, the completion levels and Fence (the write,
// and everything after it to the same peer, waits until every earlier
// operation to that peer completed; later operations to that peer return
// ErrAgain until it has started).
func (ep *Endpoint) WriteMsg(msg *RMAMsg, flags Flags) error {
	if err := ep.rmaReady(Write); err != nil {
		return err
	}
	if msg == nil {
		return opErr("Endpoint.WriteMsg", ErrInval, "nil msg")
	}
	if flags&^writeFlags != 0 {
		return errRMAFlags
	}
	return ep.rma(&engine.RMAArgs{Kind: transport.RMAWrite, IOV: nonNil(msg.MsgIOV), RIOV: rmaIOVs(msg.RMAIOV), Data: msg.Data},
		msg.Addr, flags, msg.Context)
}

// Read copies len(buf) bytes from the peer's region key at remote
// address addr into buf (fi_read). The completion, with the Read and RMA
// flags, means buf holds them. Refusals are as for Write (the region needs
// RemoteRead).
func (ep *Endpoint) Read(buf []byte, desc MRDesc, src Addr, addr, key uint64, ctx any) error {
	if err := ep.rmaReady(Read); err != nil {
		return err
	}
	return ep.rma(&engine.RMAArgs{Kind: transport.RMARead, Buf: buf, Addr: addr, Key: key}, src, ep.rmaOpFlags(), ctx)
}

// ReadV reads into the concatenation of iov (fi_readv).
func (ep *Endpoint) ReadV(iov [][]byte, desc []MRDesc, src Addr, addr, key uint64, ctx any) error {
	if err := ep.rmaReady(Read); err != nil {
		return err
	}
	return ep.rma(&engine.RMAArgs{Kind: transport.RMARead, IOV: nonNil(iov), Addr: addr, Key: key}, src, ep.rmaOpFlags(), ctx)
}

// ReadMsg reads with explicit flags (fi_readmsg): Completion, More, the
// completion levels and Fence.
func (ep *Endpoint) ReadMsg(msg *RMAMsg, flags Flags) error {
	if err := ep.rmaReady(Read); err != nil {
		return err
	}
	if msg == nil {
		return opErr("Endpoint.ReadMsg", ErrInval, "nil msg")
	}
	if flags&^readFlags != 0 {
		return errRMAFlags
	}
	return ep.rma(&engine.RMAArgs{Kind: transport.RMARead, IOV: nonNil(msg.MsgIOV), RIOV: rmaIOVs(msg.RMAIOV)}, msg.Addr, flags, msg.Context)
}

// rmaIOVs views remote ranges as the transport's type, which has the same
// layout (checked below), without copying: the engine copies them. An
// empty or nil list stays non-nil, so it is refused rather than read as
// "use Addr and Key".
func rmaIOVs(v []RMAIOV) []transport.RMAIOV {
	if len(v) == 0 {
		return []transport.RMAIOV{}
	}
	return unsafe.Slice((*transport.RMAIOV)(unsafe.Pointer(unsafe.SliceData(v))), len(v))
}

// The conversion above needs identical layouts.
var _ = [1]struct{}{}[unsafe.Sizeof(RMAIOV{})-unsafe.Sizeof(transport.RMAIOV{})]

var _ = transport.RMAIOV(RMAIOV{}) // same fields, same order

// rmaServer is implemented by transports that execute peers' one-sided
// requests (the target side).
type rmaServer interface {
	ServeRMA(x *rma.Target) error
}

// serveRMA gives the transport the endpoint's target side: the domain's
// key table and the endpoint's remote counters (Enable).
func (ep *Endpoint) serveRMA() error {
	if ep.caps&(RMA|Atomic) == 0 {
		return nil
	}
	srv, ok := ep.tr.(rmaServer)
	if !ok {
		return nil
	}
	t, err := ep.dom.table("Endpoint.Enable")
	if err != nil {
		return err
	}
	x := &rma.Target{Table: t, RemoteWrite: ep.cntrs.remoteWrite.counter(), RemoteRead: ep.cntrs.remoteRead.counter()}
	if err := srv.ServeRMA(x); err != nil {
		return opErr("Endpoint.Enable", ErrIO, "serving RMA: %v", err)
	}
	return nil
}
