package fi

import (
	"github.com/gofi-dev/fi/coll"
	"github.com/gofi-dev/fi/engine"
	"github.com/gofi-dev/fi/transport"
)

// Message describes a message for SendMsg and RecvMsg (struct fi_msg).
// IOV holds the buffers (no memory descriptors: gofi needs no
// registration). It is not called Msg because fi.Msg is the FI_MSG
// capability bit, which hints use far more often.
type Message struct {
	IOV     [][]byte
	Addr    Addr // destination (send) or source filter (receive)
	Context any
	Data    uint64 // remote CQ data, sent with the RemoteCQData flag
}

// TaggedMsg describes a tagged message for TSendMsg and TRecvMsg (struct
// fi_msg_tagged).
type TaggedMsg struct {
	IOV     [][]byte
	Addr    Addr
	Tag     uint64
	Ignore  uint64 // receive only: tag bits that do not take part
	Context any
	Data    uint64
}

// Endpoint is a reliable-datagram endpoint (fi_endpoint(3), FI_EP_RDM).
// Open it with Domain.OpenEndpoint, bind an AV and CQs, Enable it, then
// move messages. Completions arrive on the bound CQs as they are read.
//
// Concurrency: safe for concurrent use when the domain is ThreadSafe;
// otherwise the application serialises calls on the domain's endpoints
// and CQs (FI_THREAD_DOMAIN). Buffers passed to Send and Recv belong to
// gofi until their completion is read (Inject buffers only during the
// call).
type Endpoint struct {
	dom  *Domain
	info *Info
	caps Flags
	tr   transport.Transport
	eng  *engine.Endpoint

	av         *AV
	txcq, rxcq *CQ
	txSel      bool
	rxSel      bool
	enabled    bool
	closed     bool

	cntrs epCntrs // bound counters (cntr_ep.go)

	txOpFlags  Flags
	rxOpFlags  Flags
	injectSize int
	maxMsg     int
	iovLimit   int
	minMulti   int

	coll   *coll.Endpoint // collectives (Collective capability), from Enable
	mcs    map[Addr]*MC   // joined groups by collective address
	mcLast *MC            // the last one posted to (postColl skips the map for it)
	mcSeq  uint64
}

// transportOpener is implemented by provider domains that can open
// endpoints: each returns its transport (shm region, tcp listener).
type transportOpener interface {
	openTransport(info *Info) (transport.Transport, error)
}

// OpenEndpoint opens an endpoint described by info (as GetInfo returned
// it, possibly edited): its EpAttr.Type must be EpRDM (or EpUnspec), its
// provider this domain's. The endpoint's address is assigned now, so Name
// works before Enable.
func (d *Domain) OpenEndpoint(info *Info) (*Endpoint, error) {
	const op = "Domain.OpenEndpoint"
	if info == nil {
		return nil, opErr(op, ErrInval, "nil info")
	}
	info = info.Dup()
	fillInfo(info, d.info)
	if t := info.EpAttr.Type; t != EpRDM && t != EpUnspec {
		return nil, opErr(op, ErrInval, "endpoint type %s not supported (only FI_EP_RDM)", t)
	}
	if info.Caps == 0 {
		info.Caps = d.info.Caps
	}
	if extra := info.Caps &^ d.info.Caps; d.info.Caps != 0 && extra != 0 {
		return nil, opErr(op, ErrNoData, "capabilities %s not supported by domain %q", extra, d.info.DomainAttr.Name)
	}
	opener, ok := d.pd.(transportOpener)
	if !ok {
		return nil, opErr(op, ErrNoSys, "provider %s cannot open endpoints", d.info.FabricAttr.ProvName)
	}
	if err := d.addChild(childEndpoint); err != nil {
		return nil, err
	}
	tr, err := opener.openTransport(info)
	if err != nil {
		d.dropChild(childEndpoint)
		return nil, err
	}
	ep := &Endpoint{dom: d, info: info, caps: info.Caps, tr: tr,
		txOpFlags: info.TxAttr.OpFlags, rxOpFlags: info.RxAttr.OpFlags,
		injectSize: info.TxAttr.InjectSize, maxMsg: info.EpAttr.MaxMsgSize, iovLimit: info.TxAttr.IOVLimit}
	if ep.injectSize <= 0 || ep.injectSize > tr.MaxEager() {
		ep.injectSize = tr.MaxEager()
	}
	if ep.iovLimit <= 0 {
		ep.iovLimit = 4
	}
	return ep, nil
}

// fillInfo allocates missing attribute structs of info, taking the
// domain's values for them.
func fillInfo(info, dom *Info) {
	if info.TxAttr == nil {
		info.TxAttr = &TxAttr{}
		if dom.TxAttr != nil {
			*info.TxAttr = *dom.TxAttr
		}
	}
	if info.RxAttr == nil {
		info.RxAttr = &RxAttr{}
		if dom.RxAttr != nil {
			*info.RxAttr = *dom.RxAttr
		}
	}
	if info.EpAttr == nil {
		info.EpAttr = &EpAttr{}
		if dom.EpAttr != nil {
			*info.EpAttr = *dom.EpAttr
		}
	}
	if info.DomainAttr == nil {
		info.DomainAttr = &DomainAttr{}
		if dom.DomainAttr != nil {
			*info.DomainAttr = *dom.DomainAttr
		}
	}
}

// Info returns a copy of the endpoint's info.
func (ep *Endpoint) Info() *Info { return ep.info.Dup() }

// BindAV binds the address vector the endpoint sends to and names its
// peers with. It must come before Enable; an AV of another domain gives
// ErrInval.
func (ep *Endpoint) BindAV(av *AV) error {
	const op = "Endpoint.BindAV"
	switch {
	case ep.closed:
		return opErr(op, ErrOpBadState, "endpoint closed")
	case av == nil:
		return opErr(op, ErrInval, "nil AV")
	case ep.enabled:
		return opErr(op, ErrOpBadState, "endpoint already enabled")
	case ep.av != nil:
		return opErr(op, ErrInval, "an AV is already bound")
	case av.dom != ep.dom:
		return opErr(op, ErrInval, "AV belongs to another domain")
	}
	if err := av.bind(ep); err != nil {
		return err
	}
	ep.av = av
	return nil
}

// BindCQ binds a completion queue for transmit completions (Transmit),
// receive completions (Recv) or both. With SelectiveCompletion only
// operations that ask for a completion (the Completion flag, or the
// endpoint's default op flags) report one on success; errors always do.
func (ep *Endpoint) BindCQ(cq *CQ, flags Flags) error {
	const op = "Endpoint.BindCQ"
	switch {
	case ep.closed:
		return opErr(op, ErrOpBadState, "endpoint closed")
	case cq == nil:
		return opErr(op, ErrInval, "nil CQ")
	case cq.closed:
		return opErr(op, ErrInval, "CQ closed")
	case ep.enabled:
		return opErr(op, ErrOpBadState, "endpoint already enabled")
	case cq.dom != ep.dom:
		return opErr(op, ErrInval, "CQ belongs to another domain")
	case flags&^(Transmit|Recv|SelectiveCompletion) != 0:
		return opErr(op, ErrBadFlags, "flags %s", flags&^(Transmit|Recv|SelectiveCompletion))
	case flags&(Transmit|Recv) == 0:
		return opErr(op, ErrBadFlags, "neither Transmit nor Recv given")
	case flags&Transmit != 0 && ep.txcq != nil, flags&Recv != 0 && ep.rxcq != nil:
		return opErr(op, ErrInval, "a CQ is already bound for that direction")
	}
	sel := flags&SelectiveCompletion != 0
	if flags&Transmit != 0 {
		ep.txcq, ep.txSel = cq, sel
	}
	if flags&Recv != 0 {
		ep.rxcq, ep.rxSel = cq, sel
	}
	return nil
}

// Enable makes the endpoint ready to move data. An AV must be bound
// (ErrNoAV otherwise); CQs are optional (operations then complete
// silently, and receives still need a CQ to be observed).
func (ep *Endpoint) Enable() error {
	const op = "Endpoint.Enable"
	switch {
	case ep.closed:
		return opErr(op, ErrOpBadState, "endpoint closed")
	case ep.enabled:
		return nil
	case ep.av == nil:
		return opErr(op, ErrNoAV, "no AV bound")
	}
	cfg := engine.Config{
		Transport:    ep.tr,
		Addrs:        &avBook{av: ep.av},
		Serial:       ep.dom.serial(),
		TxSelective:  ep.txSel,
		RxSelective:  ep.rxSel,
		DirectedRecv: ep.caps&DirectedRecv != 0,
		Source:       ep.caps&Source != 0,
		RxCQData:     ep.info.Mode&RxCQData != 0,
		TxSize:       ep.info.TxAttr.Size,
		RxSize:       ep.info.RxAttr.Size,
		MinMultiRecv: ep.minMulti,
	}
	if ep.txcq != nil {
		cfg.TxCQ = ep.txcq.eng
	}
	if ep.rxcq != nil {
		cfg.RxCQ = ep.rxcq.eng
	}
	ep.cntrs.config(&cfg)
	if err := ep.serveRMA(); err != nil {
		return err
	}
	eng, c := engine.NewEndpoint(cfg)
	if c != 0 {
		return opErr(op, Errno(c), "engine refused the configuration")
	}
	ep.eng = eng
	if ep.caps&Collective != 0 {
		ep.coll = coll.Attach(eng, coll.Config{NodeKey: ep.nodeKey()})
	}
	for _, cq := range ep.cqs() {
		cq.eng.Bind(eng, eng.Waiter())
	}
	ep.cntrs.enable(eng)
	ep.enabled = true
	return nil
}

// cqs lists the distinct bound CQs.
func (ep *Endpoint) cqs() []*CQ {
	var out []*CQ
	if ep.txcq != nil {
		out = append(out, ep.txcq)
	}
	if ep.rxcq != nil && ep.rxcq != ep.txcq {
		out = append(out, ep.rxcq)
	}
	return out
}

// Name returns the endpoint's address (fi_getname), in the info's address
// format: what peers insert into their AVs.
func (ep *Endpoint) Name() ([]byte, error) {
	if ep.closed {
		return nil, opErr("Endpoint.Name", ErrOpBadState, "endpoint closed")
	}
	return append([]byte(nil), ep.tr.Name()...), nil
}

// SetMinMultiRecv sets FI_OPT_MIN_MULTI_RECV: a multi-receive buffer is
// released once its free space falls below n bytes.
func (ep *Endpoint) SetMinMultiRecv(n int) error {
	if n < 1 {
		return opErr("Endpoint.SetMinMultiRecv", ErrInval, "minimum %d below 1", n)
	}
	ep.minMulti = n
	if ep.eng != nil {
		if c := ep.eng.SetMinMultiRecv(n); c != 0 {
			return opErr("Endpoint.SetMinMultiRecv", Errno(c), "refused")
		}
	}
	return nil
}

// MinMultiRecv reports FI_OPT_MIN_MULTI_RECV.
func (ep *Endpoint) MinMultiRecv() int {
	if ep.eng != nil {
		return ep.eng.MinMultiRecv()
	}
	if ep.minMulti > 0 {
		return ep.minMulti
	}
	return 64
}

// Close closes the endpoint: posted receives complete with ErrCanceled on
// the receive CQ, its address is released and it is unbound from its AV
// and CQs. Sends already reported complete are still delivered: the shm
// provider waits (at most 2 s, and only for live peers) until every peer
// it sent to has taken up its ring.
func (ep *Endpoint) Close() error {
	if ep.closed {
		return opErr("Endpoint.Close", ErrOpBadState, "already closed")
	}
	ep.closed = true
	var err error
	if ep.eng != nil {
		if c := ep.eng.Close(); c != 0 {
			err = opErr("Endpoint.Close", Errno(c), "transport close failed")
		}
		for _, cq := range ep.cqs() {
			cq.eng.Unbind(ep.eng, ep.eng.Waiter())
		}
	} else if e := ep.tr.Close(); e != nil {
		err = opErr("Endpoint.Close", ErrIO, "%v", e)
	}
	ep.cntrs.release(ep.eng)
	if ep.av != nil {
		ep.av.unbind(ep)
	}
	ep.dom.dropChild(childEndpoint)
	return err
}

// ---------------------------------------------------------------------------
// data path

// ready checks the endpoint may move data with the given capability.
func (ep *Endpoint) ready(cap Flags) error {
	if !ep.enabled || ep.closed {
		return errNotEnabled
	}
	if ep.caps&cap == 0 {
		if cap == Tagged {
			return errNoTagged
		}
		return errNoMsg
	}
	return nil
}

var (
	errNotEnabled = opErr("Endpoint", ErrOpBadState, "endpoint not enabled (or closed)")
	errNoTagged   = opErr("Endpoint", ErrOpNotSupp, "endpoint lacks the Tagged capability")
	errNoMsg      = opErr("Endpoint", ErrOpNotSupp, "endpoint lacks the Msg capability")
	errIOVLimit   = opErr("Endpoint", ErrInval, "more buffers than the endpoint's iov_limit")
	errMsgSize    = opErr("Endpoint", ErrMsgSize, "message longer than max_msg_size")
	errInject     = opErr("Endpoint", ErrMsgSize, "message longer than inject_size")
	errSendFlags  = opErr("Endpoint", ErrBadFlags, "flag not valid for a send")
	errRecvFlags  = opErr("Endpoint", ErrBadFlags, "flag not valid for a receive")
)

// Flags a send accepts (fi_msg(3), fi_tagged(3)). The completion-level
// flags are all satisfied by gofi's transports: data is copied or
// delivered before the completion is written.
const sendFlags = RemoteCQData | Completion | Inject | More | InjectComplete | TransmitComplete | DeliveryComplete

const recvFlags = Completion | More | MultiRecv

const tagRecvFlags = Completion | More | Peek | Claim | Discard

func (ep *Endpoint) send(a *engine.SendArgs, dest Addr, flags Flags, ctx any) error {
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
	if ep.maxMsg > 0 && n > ep.maxMsg {
		return errMsgSize
	}
	if flags&Inject != 0 && n > ep.injectSize {
		return errInject
	}
	d, group := splitGroupAddr(dest)
	a.Dest, a.Group, a.Flags = uint64(d), group, uint64(flags)
	c := ep.eng.Send(a, ctx)
	if c == engine.Code(ErrNoSpc) {
		return ep.transportErr("Endpoint.Send", ErrNoSpc)
	}
	return codeErr(c)
}

// transportErr returns code with the transport's account of why, when it
// keeps one (the shm transport names the directory and the bytes it could
// not get). Off the hot path: it allocates.
func (ep *Endpoint) transportErr(op string, code Errno) error {
	if d, ok := ep.tr.(interface{ LastError() error }); ok {
		if e := d.LastError(); e != nil {
			return opErr(op, code, "%v", e)
		}
	}
	return code
}

func (ep *Endpoint) recv(a *engine.RecvArgs, src Addr, flags Flags, ctx any) error {
	if a.IOV != nil && len(a.IOV) > ep.iovLimit {
		return errIOVLimit
	}
	s, group := splitGroupAddr(src)
	if src == AddrUnspec {
		s, group = AddrUnspec, 0
	}
	a.Src, a.Group, a.Flags = uint64(s), group, uint64(flags)
	c := ep.eng.Recv(a, ctx)
	if c == engine.CodeNoMsg {
		return opErr("Endpoint", ErrNoMsg, "no message claimed with this context")
	}
	return codeErr(c)
}

// Both helpers take the engine's argument struct by pointer from the
// caller's stack: it does not escape, and a single buffer travels as Buf
// so no iov array is built per call.

// Send sends buf to dest (fi_send). ctx comes back in the completion.
func (ep *Endpoint) Send(buf []byte, dest Addr, ctx any) error {
	if err := ep.ready(Msg); err != nil {
		return err
	}
	return ep.send(&engine.SendArgs{Buf: buf, Kind: transport.KindMsg}, dest, ep.txOpFlags&sendFlags, ctx)
}

// SendV sends the concatenation of iov (fi_sendv).
func (ep *Endpoint) SendV(iov [][]byte, dest Addr, ctx any) error {
	if err := ep.ready(Msg); err != nil {
		return err
	}
	return ep.send(&engine.SendArgs{IOV: nonNil(iov), Kind: transport.KindMsg}, dest, ep.txOpFlags&sendFlags, ctx)
}

// SendData sends buf with remote CQ data (fi_senddata): the receiver's
// completion carries data and the RemoteCQData flag.
func (ep *Endpoint) SendData(buf []byte, data uint64, dest Addr, ctx any) error {
	if err := ep.ready(Msg); err != nil {
		return err
	}
	return ep.send(&engine.SendArgs{Buf: buf, Kind: transport.KindMsg, Data: data}, dest, ep.txOpFlags&sendFlags|RemoteCQData, ctx)
}

// Inject sends a small message (at most TxAttr.InjectSize bytes) whose
// buffer is free again when the call returns; it generates no completion.
func (ep *Endpoint) Inject(buf []byte, dest Addr) error {
	if err := ep.ready(Msg); err != nil {
		return err
	}
	return ep.send(&engine.SendArgs{Buf: buf, Kind: transport.KindMsg}, dest, Inject, nil)
}

// SendMsg sends msg with explicit flags (fi_sendmsg): RemoteCQData,
// Completion, Inject, More and the completion-level flags.
func (ep *Endpoint) SendMsg(msg *Message, flags Flags) error {
	if err := ep.ready(Msg); err != nil {
		return err
	}
	if msg == nil {
		return opErr("Endpoint.SendMsg", ErrInval, "nil msg")
	}
	if flags&^sendFlags != 0 {
		return errSendFlags
	}
	return ep.send(&engine.SendArgs{IOV: nonNil(msg.IOV), Kind: transport.KindMsg, Data: msg.Data}, msg.Addr, flags, msg.Context)
}

// Recv posts a receive buffer (fi_recv). src filters the sender when the
// endpoint has DirectedRecv (AddrUnspec accepts any); otherwise it is
// ignored.
func (ep *Endpoint) Recv(buf []byte, src Addr, ctx any) error {
	if err := ep.ready(Msg); err != nil {
		return err
	}
	return ep.recv(&engine.RecvArgs{Buf: buf, Kind: transport.KindMsg}, src, ep.rxOpFlags&recvFlags, ctx)
}

// RecvV posts a vectored receive (fi_recvv).
func (ep *Endpoint) RecvV(iov [][]byte, src Addr, ctx any) error {
	if err := ep.ready(Msg); err != nil {
		return err
	}
	return ep.recv(&engine.RecvArgs{IOV: nonNil(iov), Kind: transport.KindMsg}, src, ep.rxOpFlags&recvFlags, ctx)
}

// RecvMsg posts a receive with explicit flags (fi_recvmsg): Completion,
// More, and MultiRecv (one buffer absorbs several messages; its last
// completion carries the MultiRecv flag when it is released).
func (ep *Endpoint) RecvMsg(msg *Message, flags Flags) error {
	if err := ep.ready(Msg); err != nil {
		return err
	}
	if msg == nil {
		return opErr("Endpoint.RecvMsg", ErrInval, "nil msg")
	}
	if flags&^recvFlags != 0 {
		return errRecvFlags
	}
	if flags&MultiRecv != 0 && ep.caps&MultiRecv == 0 {
		return opErr("Endpoint.RecvMsg", ErrOpNotSupp, "endpoint lacks the MultiRecv capability")
	}
	return ep.recv(&engine.RecvArgs{IOV: nonNil(msg.IOV), Kind: transport.KindMsg}, msg.Addr, flags, msg.Context)
}

// TSend sends a tagged message (fi_tsend).
func (ep *Endpoint) TSend(buf []byte, dest Addr, tag uint64, ctx any) error {
	if err := ep.ready(Tagged); err != nil {
		return err
	}
	return ep.send(&engine.SendArgs{Buf: buf, Kind: transport.KindTagged, Tag: tag}, dest, ep.txOpFlags&sendFlags, ctx)
}

// TSendV sends a vectored tagged message (fi_tsendv).
func (ep *Endpoint) TSendV(iov [][]byte, dest Addr, tag uint64, ctx any) error {
	if err := ep.ready(Tagged); err != nil {
		return err
	}
	return ep.send(&engine.SendArgs{IOV: nonNil(iov), Kind: transport.KindTagged, Tag: tag}, dest, ep.txOpFlags&sendFlags, ctx)
}

// TSendData sends a tagged message with remote CQ data (fi_tsenddata).
func (ep *Endpoint) TSendData(buf []byte, data uint64, dest Addr, tag uint64, ctx any) error {
	if err := ep.ready(Tagged); err != nil {
		return err
	}
	return ep.send(&engine.SendArgs{Buf: buf, Kind: transport.KindTagged, Tag: tag, Data: data}, dest, ep.txOpFlags&sendFlags|RemoteCQData, ctx)
}

// TInject sends a small tagged message with no completion (fi_tinject).
func (ep *Endpoint) TInject(buf []byte, dest Addr, tag uint64) error {
	if err := ep.ready(Tagged); err != nil {
		return err
	}
	return ep.send(&engine.SendArgs{Buf: buf, Kind: transport.KindTagged, Tag: tag}, dest, Inject, nil)
}

// TSendMsg sends a tagged message with explicit flags (fi_tsendmsg).
func (ep *Endpoint) TSendMsg(msg *TaggedMsg, flags Flags) error {
	if err := ep.ready(Tagged); err != nil {
		return err
	}
	if msg == nil {
		return opErr("Endpoint.TSendMsg", ErrInval, "nil msg")
	}
	if flags&^sendFlags != 0 {
		return errSendFlags
	}
	return ep.send(&engine.SendArgs{IOV: nonNil(msg.IOV), Kind: transport.KindTagged, Tag: msg.Tag, Data: msg.Data}, msg.Addr, flags, msg.Context)
}

// TRecv posts a tagged receive (fi_trecv): it takes a message whose tag
// equals tag in every bit not set in ignore.
func (ep *Endpoint) TRecv(buf []byte, src Addr, tag, ignore uint64, ctx any) error {
	if err := ep.ready(Tagged); err != nil {
		return err
	}
	return ep.recv(&engine.RecvArgs{Buf: buf, Kind: transport.KindTagged, Tag: tag, Ignore: ignore}, src, ep.rxOpFlags&recvFlags, ctx)
}

// TRecvV posts a vectored tagged receive (fi_trecvv).
func (ep *Endpoint) TRecvV(iov [][]byte, src Addr, tag, ignore uint64, ctx any) error {
	if err := ep.ready(Tagged); err != nil {
		return err
	}
	return ep.recv(&engine.RecvArgs{IOV: nonNil(iov), Kind: transport.KindTagged, Tag: tag, Ignore: ignore}, src, ep.rxOpFlags&recvFlags, ctx)
}

// TRecvMsg posts a tagged receive with explicit flags (fi_trecvmsg):
//   - Peek: look for a matching unexpected message without taking it; the
//     completion carries its length, tag and data, or an ErrNoMsg error
//     completion says there is none. Peek|Claim also reserves it for
//     msg.Context; Peek|Discard drops it.
//   - Claim: take the message reserved by an earlier Peek|Claim with the
//     same Context (Claim|Discard drops it).
func (ep *Endpoint) TRecvMsg(msg *TaggedMsg, flags Flags) error {
	if err := ep.ready(Tagged); err != nil {
		return err
	}
	if msg == nil {
		return opErr("Endpoint.TRecvMsg", ErrInval, "nil msg")
	}
	if flags&^tagRecvFlags != 0 {
		return errRecvFlags
	}
	if flags&Discard != 0 && flags&(Peek|Claim) == 0 {
		return opErr("Endpoint.TRecvMsg", ErrBadFlags, "Discard needs Peek or Claim")
	}
	return ep.recv(&engine.RecvArgs{IOV: nonNil(msg.IOV), Kind: transport.KindTagged, Tag: msg.Tag, Ignore: msg.Ignore}, msg.Addr, flags, msg.Context)
}

// Cancel cancels the posted receive whose context is ctx (fi_cancel): it
// completes with an ErrCanceled error entry. ErrNoEnt when no posted
// receive has that context.
func (ep *Endpoint) Cancel(ctx any) error {
	if !ep.enabled || ep.closed {
		return errNotEnabled
	}
	if c := ep.eng.Cancel(ctx); c != 0 {
		return opErr("Endpoint.Cancel", ErrNoEnt, "no posted receive with this context")
	}
	return nil
}

// avChanged drops the engine's address caches after the bound AV changed
// (the AV calls it after every insert or remove).
func (ep *Endpoint) avChanged(*AV) {
	if ep.eng != nil {
		ep.eng.AddrChanged()
	}
}

// avInserted lets the engine connect ahead to the addresses just inserted
// into the bound AV (engine.Endpoint.Prepare; those that failed are
// AddrNotAvail and skipped).
func (ep *Endpoint) avInserted(_ *AV, addrs []Addr) {
	if ep.eng == nil {
		return
	}
	as := make([]uint64, 0, len(addrs))
	for _, a := range addrs {
		if a != AddrNotAvail {
			as = append(as, uint64(a))
		}
	}
	ep.eng.Prepare(as)
}

// avBook adapts an AV to the engine's AddrBook. The engine calls it on its
// serialised path, so the scratch buffer is not shared concurrently.
type avBook struct {
	av      *AV
	scratch [maxSockaddrLen]byte
}

func (b *avBook) Lookup(a uint64) ([]byte, bool) { return b.av.lookupBytes(Addr(a), b.scratch[:0]) }

func (b *avBook) Reverse(addr []byte) (uint64, bool) { return b.av.reverse(addr) }

// nonNil keeps an empty vectored call vectored: a nil iov would read as
// "use Buf" in the engine's arguments.
func nonNil(iov [][]byte) [][]byte {
	if iov == nil {
		return [][]byte{}
	}
	return iov
}
