package engine

import (
	"github.com/gofi-dev/fi/transport"
)

// One-sided operations: RMA writes and reads and atomics. The engine
// keeps the request, its fences and the remote CQ data of writes; the
// transport (transport.RMATransport) moves the bytes and the target
// executes without its application.

// RMAArgs describe one RMA or atomic operation. Local buffers are Buf, or
// IOV when it is not nil; remote ranges are {Addr, Len of the local data,
// Key}, or RIOV when it is not nil. Compare and Result (atomics) likewise
// take a buffer or an iov.
type RMAArgs struct {
	Kind     transport.RMAKind
	Buf      []byte
	IOV      [][]byte
	Dest     uint64 // fi_addr
	Addr     uint64
	Key      uint64
	RIOV     []transport.RMAIOV
	ElemSize uint64 // > 0: RIOV lengths count elements of this size (fi_rma_ioc)
	Datatype uint8
	Op       uint8
	Compare  []byte
	CIOV     [][]byte
	Result   []byte
	ResIOV   [][]byte
	Data     uint64 // remote CQ data (FlagRemoteCQData)
	Flags    uint64 // FlagCompletion, FlagInject, FlagRemoteCQData, FlagFence
}

// rmaOp is the engine's copy of an operation's request, kept with its tx
// slot until completion (pooled: no allocation per operation).
type rmaOp struct {
	req     transport.RMAReq
	local   [1][]byte
	locals  [][]byte
	cmp     [1][]byte
	cmps    [][]byte
	res     [1][]byte
	ress    [][]byte
	remote  [1]transport.RMAIOV
	remotes []transport.RMAIOV
	// remote CQ data: sent as a KindRMAData message once the write is done
	data      uint64
	notify    bool
	notifying bool
	written   uint64
	// a fenced operation waiting: Inject payloads are copied here
	deferred bool
	copies   [][]byte
}

// RMA starts one RMA or atomic operation. It returns CodeOpNotSupp when
// the transport carries none, CodeAgain when the transmit queue is full,
// the transport has no room, or a fenced operation to the same peer is
// waiting for earlier ones (FI_FENCE): progress and retry.
func (ep *Endpoint) RMA(a *RMAArgs, ctx any) Code {
	ep.ser.Lock()
	defer ep.ser.Unlock()
	if ep.closed {
		return CodeInval
	}
	rt, ok := ep.tr.(transport.RMATransport)
	if !ok {
		return CodeOpNotSupp
	}
	peer, c := ep.peer(a.Dest)
	if c != 0 {
		return c
	}
	if ep.ntx >= ep.cfg.TxSize {
		return CodeAgain
	}
	if ep.nfenced > 0 && ep.fenceWaits(peer) {
		return CodeAgain
	}
	idx := ep.txAlloc()
	op := ep.tx[idx]
	op.ctx, op.flags, op.live = ctx, a.Flags, true
	r := ep.newRMAOp()
	op.rma = r
	ep.fillRMA(r, a)
	if a.Flags&FlagFence != 0 && int(peer) < len(ep.outst) && ep.outst[peer] > 0 {
		// Deferred until every earlier operation to the peer completed.
		ep.track(idx, peer)
		ep.deferFenced(idx, peer)
		return 0
	}
	ep.track(idx, peer)
	done, tc := rt.RMA(peer, &r.req, transport.Op(tokTx|uint64(idx)))
	if !done && tc != 0 {
		ep.txPut(idx)
		if tc == transport.EAgain {
			return CodeAgain
		}
		return Code(tc)
	}
	if done {
		ep.rmaDone(idx, Code(tc))
		if len(ep.notifyQ) > 0 {
			ep.runDeferred()
		}
	}
	return 0
}

func (ep *Endpoint) newRMAOp() *rmaOp {
	if n := len(ep.rmaFree); n > 0 {
		r := ep.rmaFree[n-1]
		ep.rmaFree = ep.rmaFree[:n-1]
		return r
	}
	return &rmaOp{}
}

func (ep *Endpoint) putRMAOp(r *rmaOp) {
	clear(r.locals)
	clear(r.cmps)
	clear(r.ress)
	// Field by field: a composite literal assigned to *r is built aside and
	// copied with write barriers (callgrind: 132 instructions per
	// operation, against 30 or so for these stores).
	r.req = transport.RMAReq{}
	r.local[0], r.cmp[0], r.res[0] = nil, nil, nil
	r.locals, r.cmps, r.ress, r.remotes = r.locals[:0], r.cmps[:0], r.ress[:0], r.remotes[:0]
	r.remote[0] = transport.RMAIOV{}
	r.data, r.notify, r.notifying, r.written, r.deferred, r.copies = 0, false, false, 0, false, nil
	ep.rmaFree = append(ep.rmaFree, r)
}

// fillRMA copies the caller's arguments into storage the engine owns.
func (ep *Endpoint) fillRMA(r *rmaOp, a *RMAArgs) {
	q := &r.req
	q.Kind, q.Datatype, q.Op = a.Kind, a.Datatype, a.Op
	q.Inject = a.Flags&FlagInject != 0
	q.Local = setIOV(&r.local, &r.locals, a.Buf, a.IOV)
	q.Compare, q.Result = nil, nil
	if a.Compare != nil || a.CIOV != nil {
		q.Compare = setIOV(&r.cmp, &r.cmps, a.Compare, a.CIOV)
	}
	if a.Result != nil || a.ResIOV != nil {
		q.Result = setIOV(&r.res, &r.ress, a.Result, a.ResIOV)
	}
	if a.RIOV != nil {
		r.remotes = append(r.remotes[:0], a.RIOV...)
		if a.ElemSize > 0 {
			for i := range r.remotes {
				r.remotes[i].Len *= a.ElemSize
			}
		}
		q.Remote = r.remotes
	} else {
		n := iovBytes(q.Local)
		if a.Kind == transport.RMAFetch && q.Result != nil && n == 0 {
			n = iovBytes(q.Result) // atomic read: no operands
		}
		r.remote[0] = transport.RMAIOV{Addr: a.Addr, Len: n, Key: a.Key}
		q.Remote = r.remote[:]
	}
	if a.Flags&FlagRemoteCQData != 0 && a.Kind == transport.RMAWrite {
		r.notify, r.data = true, a.Data
		for _, v := range q.Remote {
			r.written += v.Len
		}
	}
}

func iovBytes(iov [][]byte) uint64 {
	var n uint64
	for _, b := range iov {
		n += uint64(len(b))
	}
	return n
}

// track counts a transmit in flight to peer p (for FI_FENCE).
func (ep *Endpoint) track(idx uint32, p transport.Peer) {
	ep.peerSlots(p)
	ep.tx[idx].peer = p
	ep.outst[p]++
}

// peerSlots makes room for peer p in the per-peer counters (track; and
// Prepare, so that the first send to a prepared peer allocates nothing).
func (ep *Endpoint) peerSlots(p transport.Peer) {
	for int(p) >= len(ep.outst) {
		ep.outst = append(ep.outst, 0)
		ep.fenced = append(ep.fenced, 0)
	}
}

// untrack drops a finished transmit from its peer's count (txPut).
func (ep *Endpoint) untrack(op *txOp) {
	if int(op.peer) < len(ep.outst) && ep.outst[op.peer] > 0 {
		ep.outst[op.peer]--
	}
	if op.rma != nil {
		ep.putRMAOp(op.rma)
		op.rma = nil
	}
}

// fenceWaits reports whether a fenced operation to p is waiting: later
// operations to p must not pass it.
func (ep *Endpoint) fenceWaits(p transport.Peer) bool {
	return int(p) < len(ep.fenced) && ep.fenced[p] != 0
}

func (ep *Endpoint) deferFenced(idx uint32, p transport.Peer) {
	op := ep.tx[idx]
	r := op.rma
	r.deferred = true
	if r.req.Inject { // the caller's buffers are free again on return
		for i, b := range r.req.Local {
			c := append([]byte(nil), b...)
			r.copies = append(r.copies, c)
			r.req.Local[i] = c
		}
		for i, b := range r.req.Compare {
			c := append([]byte(nil), b...)
			r.copies = append(r.copies, c)
			r.req.Compare[i] = c
		}
	}
	ep.fenced[p] = idx + 1
	ep.nfenced++
}

// runDeferred issues fenced operations whose peer has nothing else in
// flight, and sends pending remote CQ data. Called outside the
// transport's Poll (from Progress and RMA), with the Serial held.
func (ep *Endpoint) runDeferred() bool {
	did := false
	rt, _ := ep.tr.(transport.RMATransport)
	for p := range ep.fenced {
		if ep.fenced[p] == 0 || ep.outst[p] != 1 { // 1: the fenced op itself
			continue
		}
		idx := ep.fenced[p] - 1
		op := ep.tx[idx]
		done, tc := rt.RMA(transport.Peer(p), &op.rma.req, transport.Op(tokTx|uint64(idx)))
		if !done && tc == transport.EAgain {
			continue // no room yet: try again on the next progress
		}
		ep.fenced[p] = 0
		ep.nfenced--
		op.rma.deferred = false
		did = true
		if done || tc != 0 {
			ep.rmaDone(idx, Code(tc))
		}
	}
	for len(ep.notifyQ) > 0 {
		idx := ep.notifyQ[0]
		op := ep.tx[idx]
		r := op.rma
		op.hdr = transport.Header{Kind: transport.KindRMAData, Flags: transport.FlagRemoteData, Data: r.data, Tag: r.written}
		done, tc := ep.tr.Send(op.peer, &op.hdr, nil, transport.Op(tokTx|uint64(idx)))
		if !done && tc == transport.EAgain {
			break // in order: the rest wait too
		}
		ep.notifyQ = ep.notifyQ[:copy(ep.notifyQ, ep.notifyQ[1:])]
		did = true
		if done || tc != 0 {
			ep.rmaDone(idx, Code(tc))
		}
	}
	return did
}

// rmaDone completes an RMA operation (or, for a write with remote CQ
// data, queues the data message first).
func (ep *Endpoint) rmaDone(i uint32, c Code) {
	op := ep.tx[i]
	r := op.rma
	if c == 0 && r.notify && !r.notifying {
		r.notifying = true
		ep.notifyQ = append(ep.notifyQ, i)
		return
	}
	var flags uint64
	var k Counter
	switch r.req.Kind {
	case transport.RMAWrite:
		flags, k = FlagRMA|FlagWrite, ep.cfg.WriteCntr
	case transport.RMARead:
		flags, k = FlagRMA|FlagRead, ep.cfg.ReadCntr
	case transport.RMAAtomic:
		flags, k = FlagAtomic|FlagWrite, ep.cfg.WriteCntr
	default:
		flags, k = FlagAtomic|FlagRead, ep.cfg.ReadCntr
	}
	count(k, c)
	if cq := ep.cfg.TxCQ; cq != nil {
		switch {
		case c != 0:
			// Errors are reported even for injected operations (with a
			// nil context): a refused write must not vanish.
			cq.Push(&Entry{Context: op.ctx, Flags: flags, Err: c, Src: AddrUnknown})
		case op.flags&FlagInject != 0:
		case !ep.cfg.TxSelective || op.flags&FlagCompletion != 0:
			cq.Push(&Entry{Context: op.ctx, Flags: flags})
		}
	}
	ep.txPut(i)
}

// rmaData reports the remote CQ data of a write that landed here, without
// FI_RX_CQ_DATA: a completion of its own on the receive CQ.
func (ep *Endpoint) rmaData(p transport.Peer, hdr *transport.Header) {
	cq := ep.cfg.RxCQ
	if cq == nil {
		return
	}
	cq.Push(&Entry{Flags: FlagRMA | FlagRemoteWrite | FlagRemoteCQData, Len: int(min(hdr.Tag, uint64(1)<<62)),
		Data: hdr.Data, Src: ep.srcField(ep.source(p))})
}

// failDeferred completes every waiting fenced operation and pending CQ
// data with c (Close).
func (ep *Endpoint) failDeferred(c Code) {
	for p := range ep.fenced {
		if ep.fenced[p] != 0 {
			idx := ep.fenced[p] - 1
			ep.fenced[p] = 0
			ep.nfenced--
			ep.tx[idx].rma.notify = false
			ep.rmaDone(idx, c)
		}
	}
	q := ep.notifyQ
	ep.notifyQ = nil
	for _, idx := range q {
		ep.rmaDone(idx, c)
	}
}
