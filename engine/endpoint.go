package engine

import (
	"github.com/gofi-dev/fi/match"
	"github.com/gofi-dev/fi/transport"
	"math"
)

// Operation and completion flag bits, equal to libfabric's (rdma/fabric.h)
// so the root package converts them with a type conversion.
const (
	FlagMsg          uint64 = 1 << 1
	FlagRMA          uint64 = 1 << 2
	FlagTagged       uint64 = 1 << 3
	FlagAtomic       uint64 = 1 << 4
	FlagRead         uint64 = 1 << 8
	FlagWrite        uint64 = 1 << 9
	FlagRecv         uint64 = 1 << 10
	FlagSend         uint64 = 1 << 11
	FlagMultiRecv    uint64 = 1 << 16
	FlagRemoteRead   uint64 = 1 << 12
	FlagRemoteWrite  uint64 = 1 << 13
	FlagRemoteCQData uint64 = 1 << 17
	FlagPeek         uint64 = 1 << 19
	FlagFence        uint64 = 1 << 21
	FlagCompletion   uint64 = 1 << 24
	FlagInject       uint64 = 1 << 25
	FlagDiscard      uint64 = 1 << 58
	FlagClaim        uint64 = 1 << 59
)

// AddrBook is the endpoint's view of its address vector. Both calls run on
// the endpoint's serialised path and must not block.
type AddrBook interface {
	// Lookup returns the provider address stored at fi_addr a.
	Lookup(a uint64) ([]byte, bool)
	// Reverse returns the fi_addr (or AV user id) under which addr is
	// stored, for FI_SOURCE; false when the sender is not in the AV.
	Reverse(addr []byte) (uint64, bool)
}

// Config sets up an Endpoint.
type Config struct {
	Transport transport.Transport
	Addrs     AddrBook
	Serial    *Serial // the domain's; nil means not thread safe

	TxCQ, RxCQ   *CQ  // bound CQs (nil: that direction reports nothing)
	TxSelective  bool // FI_SELECTIVE_COMPLETION on the transmit binding
	RxSelective  bool // FI_SELECTIVE_COMPLETION on the receive binding
	DirectedRecv bool // FI_DIRECTED_RECV
	Source       bool // FI_SOURCE: completions carry the sender's fi_addr
	// RxCQData is FI_RX_CQ_DATA: remote CQ data of an RMA write consumes
	// a posted receive (otherwise it makes a CQ entry of its own).
	RxCQData bool

	// Counters (nil: none) of completed sends, receives, RMA reads (and
	// fetching atomics) and RMA writes (and other atomics), counting
	// whether or not a CQ entry is written.
	SendCntr, RecvCntr, ReadCntr, WriteCntr Counter

	TxSize int // outstanding transmits before ErrAgain (0: DefaultQueueSize)
	RxSize int // posted receives before ErrAgain (0: DefaultQueueSize)
	// UnexpectedBytes caps the eager payload buffered for messages that
	// arrived before their receive; above it the transport stops reading
	// the sender (0: DefaultUnexpectedBytes).
	UnexpectedBytes int
	// MinMultiRecv is FI_OPT_MIN_MULTI_RECV (0: match.DefaultMinMultiRecv).
	MinMultiRecv int
}

// Counter is a completion counter (fi_cntr): Add counts successes, AddErr
// failures. Both are safe for concurrent use.
type Counter interface {
	Add(n uint64)
	AddErr(n uint64)
}

// count adds one completion, failed when c != 0, to counter k.
func count(k Counter, c Code) {
	if k != nil {
		countIn(k, c)
	}
}

func countIn(k Counter, c Code) {
	if c != 0 {
		k.AddErr(1)
	} else {
		k.Add(1)
	}
}

// Defaults for Config's zero values.
const (
	DefaultQueueSize       = 1024
	DefaultUnexpectedBytes = 8 << 20
)

// Endpoint is the provider-neutral part of a reliable-datagram endpoint:
// the transmit and receive paths, matching and completions.
//
// Concurrency: every exported method takes the domain's Serial, so an
// Endpoint is safe for concurrent use exactly when its domain is thread
// safe; otherwise the caller serialises calls on the domain's objects.
type Endpoint struct {
	cfg   Config
	tr    transport.Transport
	eager transport.EagerSender // tr's, when it has one
	// injector: tr's, when its Send may hold an eager-sized payload
	// (inject then goes through SendInject, which copies it)
	injector transport.InjectSender
	// tr's, when it has one, found once (a type assertion to an
	// interface builds its itab at its first call, with a lock, an
	// allocation and a page fault or two: that was paid by the first
	// idle read of a wait)
	sharer transport.CPUSharer
	// discarder: tr's, when it has one (discardUx)
	discarder transport.Discarder
	// drops: FI_DISCARD completions waiting until the transport has told
	// the sender (discardUx), by the index in their op token
	drops    []heldDrop
	dropFree []uint32
	// recvPrep: tr's, when it has one and it acts on some size (from
	// recvPrepMin bytes; math.MaxInt without, so that a receive's check
	// is one compare)
	recvPrep    transport.RecvPreparer
	recvPrepMin int
	// maxEager is tr.MaxEager(), read once (a fixed figure of every
	// transport): the inject check stays off an interface call.
	maxEager int
	ser      *Serial

	msgs *match.Matcher[uint32, uint32] // untagged queue: rx op, ux index
	tags *match.Matcher[uint32, uint32] // tagged queue
	// fast holds, per matcher (0 untagged, 1 tagged), a plain receive kept
	// out of it while it is the only one posted there and nothing waits
	// unexpected: a ping-pong's receive, matched and completed in Arrive
	// without the matcher's queues or a receive slot. Any other post to
	// that matcher, a rendezvous or RMA-data arrival it would match,
	// Cancel and Close move it into the matcher first (spill), so the
	// matcher's order and semantics hold unchanged.
	fast   [2]fastRx
	noFast bool // tests: never hold a receive in fast

	rx     []*rxOp // stable addresses: transports hold slices into them
	rxFree []uint32
	nrx    int // posted receives (non-multi and multi)
	tx     []*txOp
	txFree []uint32
	ntx    int
	ux     []uxMsg
	uxFree []uint32
	uxUsed int // bytes buffered for unexpected eager messages
	fx     []fetchOp
	fxFree []uint32
	// fetching counts rendezvous fetches in flight per transport peer:
	// while a peer owes us payload, its inbound stream must keep moving
	// (see Arrive).
	fetching []int32

	pool BufPool

	// RMA (rma.go)
	outst   []int32  // per transport peer: transmits in flight
	fenced  []uint32 // per transport peer: tx index+1 of a fenced op waiting
	nfenced int      // fenced ops waiting
	notifyQ []uint32 // writes whose remote CQ data is still to be sent
	rmaFree []*rmaOp

	peerOf []int64    // fi_addr -> transport peer + 1 (0: unresolved)
	srcOf  []srcEntry // transport peer -> fi_addr
	placed []match.Placed[uint32]
	oneIOV [1][]byte
	// sendEager's header and single-buffer iov: the transport keeps
	// neither past the call, and an argument of an interface call would
	// otherwise escape to the heap.
	ehdr   transport.Header
	eiov   [1][]byte
	closed bool

	coll CollSink // collectives (package coll); nil when not attached
	// quick counts progress passes while the sink waits on shared memory
	// alone (CollShmWait): seven in eight check only that.
	quick uint32
}

// fastRx is a receive held in Endpoint.fast.
type fastRx struct {
	ctx         any
	buf         []byte
	tag, ignore uint64 // 0, 0 for untagged
	flags       uint64 // the receive's op flags (FlagCompletion)
	group       uint32
	live        bool
}

// fastIdx is the Endpoint.fast index of a receive or message kind.
func fastIdx(k transport.Kind) int {
	if k == transport.KindTagged {
		return 1
	}
	return 0
}

type rxOp struct {
	ctx     any
	iov     [][]byte // one[:] or iovs: the engine's own copy of the caller's
	one     [1][]byte
	iovs    [][]byte
	kind    transport.Kind
	flags   uint64 // op flags (FlagCompletion, FlagMultiRecv)
	size    int
	fetches int // rendezvous fetches in flight into this receive
	live    bool
}

type txOp struct {
	ctx   any
	rma   *rmaOp // RMA and atomics: the request (rma.go)
	peer  transport.Peer
	hdr   transport.Header // what the transport may hold until completion
	iov   [][]byte         // one[:] or iovs: the engine's own copy of the caller's
	one   [1][]byte
	iovs  [][]byte
	kind  transport.Kind
	flags uint64
	n     int
	live  bool
}

// setIOV copies the caller's iov headers into storage the engine owns, so
// the caller's [][]byte never escapes (a stack array works) and the
// transport may hold the copy until the operation completes.
func setIOV(one *[1][]byte, iovs *[][]byte, buf []byte, src [][]byte) [][]byte {
	if src == nil {
		one[0] = buf
		return one[:]
	}
	if len(src) == 1 {
		one[0] = src[0]
		return one[:]
	}
	*iovs = append((*iovs)[:0], src...)
	return *iovs
}

// uxMsg is an unexpected message: its header and either its eager payload
// (copied into a pooled buffer) or the transport's cookie for it.
type uxMsg struct {
	peer   transport.Peer
	hdr    transport.Header
	src    uint64
	buf    []byte // eager payload (len == hdr.Len); nil for rendezvous
	cookie uint64
	rndv   bool
}

// fetchOp is a rendezvous receive in flight.
type fetchOp struct {
	rx       uint32 // receive it lands in
	peer     transport.Peer
	hdr      transport.Header
	src      uint64
	off      int  // offset in a multi-receive buffer
	olen     int  // bytes that did not fit
	released bool // multi-receive buffer released by this message
	multi    bool
	live     bool
}

// Op token layout: the top bits say which table the index is in.
const (
	tokTx    uint64 = 1 << 62
	tokFetch uint64 = 2 << 62
	tokMask  uint64 = 1<<62 - 1
	// tokDrop marks a tokFetch token as a discard's (discardUx): its
	// index is in drops, not fx
	tokDrop uint64 = 1 << 61
)

// NewEndpoint builds an endpoint over cfg.Transport.
func NewEndpoint(cfg Config) (*Endpoint, Code) {
	if cfg.Transport == nil || cfg.Addrs == nil {
		return nil, CodeInval
	}
	if cfg.Serial == nil {
		cfg.Serial = NewSerial(false)
	}
	if cfg.TxSize <= 0 {
		cfg.TxSize = DefaultQueueSize
	}
	if cfg.RxSize <= 0 {
		cfg.RxSize = DefaultQueueSize
	}
	if cfg.UnexpectedBytes <= 0 {
		cfg.UnexpectedBytes = DefaultUnexpectedBytes
	}
	msgs, err := match.New[uint32, uint32](match.DirectedRecv(cfg.DirectedRecv))
	if err != nil {
		return nil, CodeInval
	}
	tags, err := match.New[uint32, uint32](match.DirectedRecv(cfg.DirectedRecv))
	if err != nil {
		return nil, CodeInval
	}
	if cfg.MinMultiRecv > 0 {
		if msgs.SetMinMultiRecv(cfg.MinMultiRecv) != nil || tags.SetMinMultiRecv(cfg.MinMultiRecv) != nil {
			return nil, CodeInval
		}
	}
	ep := &Endpoint{cfg: cfg, tr: cfg.Transport, ser: cfg.Serial, msgs: msgs, tags: tags,
		// room for the first rendezvous fetches: a message size met for the
		// first time allocates nothing
		fx: make([]fetchOp, 0, 16), fxFree: make([]uint32, 0, 16), fetching: make([]int32, 0, 16),
		txFree: make([]uint32, 0, 16), rxFree: make([]uint32, 0, 16)}
	ep.eager, _ = cfg.Transport.(transport.EagerSender)
	ep.injector, _ = cfg.Transport.(transport.InjectSender)
	ep.discarder, _ = cfg.Transport.(transport.Discarder)
	ep.sharer, _ = cfg.Transport.(transport.CPUSharer)
	ep.maxEager = cfg.Transport.MaxEager()
	ep.recvPrepMin = math.MaxInt
	if rp, ok := cfg.Transport.(transport.RecvPreparer); ok {
		if m := rp.RecvPrepareMin(); m > 0 {
			ep.recvPrep, ep.recvPrepMin = rp, m
		}
	}
	// Receive slots for the first receives the matcher queues: with
	// receives held apart (fast) the first ones may come only with the
	// first rendezvous, and should not allocate then.
	ops := make([]rxOp, 4)
	for i := range ops {
		ep.rx = append(ep.rx, &ops[i])
		ep.rxFree = append(ep.rxFree, uint32(len(ops)-1-i))
	}
	// Transmit slots likewise: a send that cannot complete inside the
	// transport (the first ones to a peer still connecting, the first
	// rendezvous) takes one.
	txs := make([]txOp, 4)
	for i := range txs {
		ep.tx = append(ep.tx, &txs[i])
		ep.txFree = append(ep.txFree, uint32(len(txs)-1-i))
	}
	return ep, 0
}

// Progress drives the transport once; CQs call it (with the Serial held).
func (ep *Endpoint) Progress() bool {
	if ep.closed {
		return false
	}
	if ep.coll != nil && ep.coll.CollShmWait() {
		// A collective waits for its peers' flags in shared memory: most
		// passes look only at those, so the pass that sees the last
		// arrival comes sooner; every eighth runs the transport too.
		if ep.quick++; ep.quick&7 != 0 {
			return ep.coll.CollProgress()
		}
	}
	did := ep.tr.Poll(ep)
	if ep.nfenced > 0 || len(ep.notifyQ) > 0 {
		did = ep.runDeferred() || did
	}
	if ep.coll != nil && ep.coll.CollProgress() {
		did = true
	}
	return did
}

// SetMinMultiRecv changes FI_OPT_MIN_MULTI_RECV.
func (ep *Endpoint) SetMinMultiRecv(n int) Code {
	ep.ser.Lock()
	defer ep.ser.Unlock()
	if ep.msgs.SetMinMultiRecv(n) != nil || ep.tags.SetMinMultiRecv(n) != nil {
		return CodeInval
	}
	return 0
}

// MinMultiRecv reports FI_OPT_MIN_MULTI_RECV.
func (ep *Endpoint) MinMultiRecv() int { return ep.msgs.MinMultiRecv() }

// AddrChanged drops the endpoint's address caches; the AV calls it after
// Insert and Remove so stale fi_addr <-> peer mappings are never used.
func (ep *Endpoint) AddrChanged() {
	ep.ser.Lock()
	clear(ep.peerOf)
	clear(ep.srcOf)
	ep.ser.Unlock()
}

// Prepare resolves the fi_addrs just inserted into the AV and lets a
// transport that can (transport.Preparer) make each peer's state and
// connection now rather than on its first message (issue 12). An insert
// of more than prepareMax addresses prepares none: a job inserting every
// rank of a big host at once connects on first use, as before (every
// rank preparing the same first ranks would pile their connection
// requests onto those). Failures are left to the first send.
func (ep *Endpoint) Prepare(addrs []uint64) {
	pr, ok := ep.tr.(transport.Preparer)
	if !ok || len(addrs) > prepareMax {
		return
	}
	ep.ser.Lock()
	defer ep.ser.Unlock()
	if ep.closed {
		return
	}
	for _, a := range addrs {
		if p, c := ep.peer(a); c == 0 {
			ep.peerSlots(p)
			pr.Prepare(p)
		}
	}
}

// prepareMax is the largest AV insert whose peers Prepare prepares.
const prepareMax = 16

// ---------------------------------------------------------------------------
// transmit

// SendArgs describe one transmit: the payload is Buf, or IOV when it is
// not nil. The context travels as a separate argument so that escape
// analysis does not tie the caller's iov array to it.
type SendArgs struct {
	Buf   []byte
	IOV   [][]byte
	Dest  uint64 // fi_addr (group bits already split off)
	Group uint32
	Kind  transport.Kind
	Tag   uint64
	Data  uint64
	Flags uint64 // FlagRemoteCQData, FlagCompletion, FlagInject
}

// Send starts a message. With FlagInject the payload must fit the
// transport's eager size and no completion is generated. It returns
// CodeAgain when the transmit queue or the transport has no room.
func (ep *Endpoint) Send(a *SendArgs, ctx any) Code {
	ep.ser.Lock()
	c := ep.sendLocked(a, ctx)
	ep.ser.Unlock()
	return c
}

// sendLocked is Send under the domain lock (no defer on this path; nothing
// below panics on any input).
func (ep *Endpoint) sendLocked(a *SendArgs, ctx any) Code {
	if ep.closed {
		return CodeInval
	}
	peer, c := ep.peer(a.Dest)
	if c != 0 {
		return c
	}
	n := len(a.Buf)
	if a.IOV != nil {
		n = 0
		for _, b := range a.IOV {
			n += len(b)
		}
	}
	inject := a.Flags&FlagInject != 0
	if inject && n > ep.maxEager {
		return CodeMsgSize
	}
	if ep.ntx >= ep.cfg.TxSize {
		return CodeAgain
	}
	if ep.nfenced > 0 && ep.fenceWaits(peer) {
		return CodeAgain // FI_FENCE: a fenced operation to this peer waits
	}
	if ep.eager != nil {
		if sent, c := ep.sendEager(peer, a, n, ctx); sent || c != 0 {
			return c
		}
	}
	idx := ep.txAlloc()
	op := ep.tx[idx]
	op.ctx, op.kind, op.flags, op.n, op.live = ctx, a.Kind, a.Flags, n, true
	ep.track(idx, peer)
	op.hdr = transport.Header{Kind: a.Kind, Group: a.Group, Tag: a.Tag, Len: uint64(n)}
	if a.Flags&FlagRemoteCQData != 0 {
		op.hdr.Flags |= transport.FlagRemoteData
		op.hdr.Data = a.Data
	}
	op.iov = setIOV(&op.one, &op.iovs, a.Buf, a.IOV)
	var done bool
	var tc transport.Code
	if inject && ep.injector != nil {
		// the caller reuses the buffer on return: the transport copies it
		done, tc = ep.injector.SendInject(peer, &op.hdr, op.iov, transport.Op(tokTx|uint64(idx)))
	} else {
		done, tc = ep.tr.Send(peer, &op.hdr, op.iov, transport.Op(tokTx|uint64(idx)))
	}
	if tc != 0 {
		ep.txPut(idx)
		if tc == transport.EAgain {
			// A fault reported while trying (refused connection, dead peer)
			// arrives as an error completion later; EAgain means "retry".
			return CodeAgain
		}
		return Code(tc)
	}
	if done {
		if inject {
			count(ep.cfg.SendCntr, 0)
			ep.txPut(idx)
			return 0
		}
		ep.txComplete(idx, 0)
	}
	return 0
}

// sendEager tries the transport's in-call send (transport.EagerSender):
// a message it completes at once needs no transmit slot, so its
// completion is written here. False with code 0: use the general path.
func (ep *Endpoint) sendEager(peer transport.Peer, a *SendArgs, n int, ctx any) (bool, Code) {
	h := &ep.ehdr
	*h = transport.Header{Kind: a.Kind, Group: a.Group, Tag: a.Tag, Len: uint64(n)}
	if a.Flags&FlagRemoteCQData != 0 {
		h.Flags, h.Data = transport.FlagRemoteData, a.Data
	}
	iov := a.IOV
	if iov == nil {
		ep.eiov[0] = a.Buf
		iov = ep.eiov[:]
	}
	sent, tc := ep.eager.SendEager(peer, h, iov)
	ep.eiov[0] = nil
	if tc != 0 {
		if tc == transport.EAgain {
			return false, CodeAgain
		}
		return false, Code(tc)
	}
	if !sent {
		return false, 0
	}
	count(ep.cfg.SendCntr, 0)
	if cq := ep.cfg.TxCQ; cq != nil && a.Flags&FlagInject == 0 &&
		(!ep.cfg.TxSelective || a.Flags&FlagCompletion != 0) {
		e := cq.next() // filled in place, every field
		e.Context, e.Flags, e.Len, e.Buf, e.Data, e.Tag, e.Src = ctx, FlagSend|kindFlag(a.Kind), 0, nil, 0, 0, 0
		e.Err, e.ProvErrno, e.OLen = 0, 0, 0
	}
	return true, 0
}

func (ep *Endpoint) txAlloc() uint32 {
	ep.ntx++
	if n := len(ep.txFree); n > 0 {
		i := ep.txFree[n-1]
		ep.txFree = ep.txFree[:n-1]
		return i
	}
	ep.tx = append(ep.tx, &txOp{})
	return uint32(len(ep.tx) - 1)
}

func (ep *Endpoint) txPut(i uint32) {
	op := ep.tx[i]
	ep.untrack(op)
	clear(op.iovs)
	*op = txOp{iovs: op.iovs[:0]}
	ep.txFree = append(ep.txFree, i)
	ep.ntx--
}

// txComplete reports a finished transmit and frees its slot.
func (ep *Endpoint) txComplete(i uint32, c Code) {
	op := ep.tx[i]
	count(ep.cfg.SendCntr, c)
	if op.flags&FlagInject == 0 && ep.cfg.TxCQ != nil {
		if c != 0 {
			ep.cfg.TxCQ.Push(&Entry{Context: op.ctx, Flags: FlagSend | kindFlag(op.kind), Err: c, Src: AddrUnknown})
		} else if !ep.cfg.TxSelective || op.flags&FlagCompletion != 0 {
			ep.cfg.TxCQ.Push(&Entry{Context: op.ctx, Flags: FlagSend | kindFlag(op.kind)})
		}
	}
	ep.txPut(i)
}

func kindFlag(k transport.Kind) uint64 {
	if k == transport.KindTagged {
		return FlagTagged
	}
	return FlagMsg
}

// peer resolves fi_addr a to a transport peer through the AV, caching it.
func (ep *Endpoint) peer(a uint64) (transport.Peer, Code) {
	if a < uint64(len(ep.peerOf)) && ep.peerOf[a] != 0 {
		return transport.Peer(ep.peerOf[a] - 1), 0
	}
	addr, ok := ep.cfg.Addrs.Lookup(a)
	if !ok {
		return 0, CodeAddrNotAvail
	}
	p, c := ep.tr.Resolve(addr)
	if c != 0 {
		return 0, Code(c)
	}
	if a < 1<<24 { // cache dense AV indices only
		for uint64(len(ep.peerOf)) <= a {
			ep.peerOf = append(ep.peerOf, 0)
		}
		ep.peerOf[a] = int64(p) + 1
	}
	return p, 0
}

// source returns the fi_addr a peer's messages report, or AddrUnknown.
// Neither matching nor completions need it without FI_SOURCE or
// FI_DIRECTED_RECV, so then it costs nothing. Misses are cached too, until
// the AV changes.
func (ep *Endpoint) source(p transport.Peer) uint64 {
	if !ep.cfg.Source && !ep.cfg.DirectedRecv {
		return AddrUnknown
	}
	if int(p) < len(ep.srcOf) && ep.srcOf[p].known {
		return ep.srcOf[p].addr
	}
	a, ok := ep.cfg.Addrs.Reverse(ep.tr.PeerAddr(p))
	if !ok {
		a = AddrUnknown
	}
	for len(ep.srcOf) <= int(p) {
		ep.srcOf = append(ep.srcOf, srcEntry{})
	}
	ep.srcOf[p] = srcEntry{addr: a, known: true}
	return a
}

// srcEntry caches the fi_addr a transport peer's messages report.
type srcEntry struct {
	addr  uint64
	known bool
}

// ---------------------------------------------------------------------------
// receive

// RecvArgs describe one receive (or a peek / claim search): the buffer is
// Buf, or IOV when it is not nil.
type RecvArgs struct {
	Buf    []byte
	IOV    [][]byte
	Src    uint64 // fi_addr or AddrUnspec (^0); ignored without DirectedRecv
	Group  uint32
	Kind   transport.Kind
	Tag    uint64
	Ignore uint64
	Flags  uint64 // FlagMultiRecv, FlagPeek, FlagClaim, FlagDiscard, FlagCompletion
}

// Recv posts a receive, or with FlagPeek searches the unexpected messages
// (completion with the message's details, or an FI_ENOMSG error entry),
// with FlagClaim takes a message claimed by an earlier Peek|Claim, with
// FlagDiscard drops what it finds.
func (ep *Endpoint) Recv(a *RecvArgs, ctx any) Code {
	ep.ser.Lock()
	c := ep.recvLocked(a, ctx)
	ep.ser.Unlock()
	return c
}

// recvLocked is Recv under the domain lock (no defer on this path).
func (ep *Endpoint) recvLocked(a *RecvArgs, ctx any) Code {
	if ep.closed {
		return CodeInval
	}
	m := ep.matcher(a.Kind)
	w := match.Want{Tag: a.Tag, Ignore: a.Ignore, Src: a.Src, Group: a.Group}
	if a.Kind != transport.KindTagged {
		w.Tag, w.Ignore = 0, 0
	}
	switch {
	case a.Flags&FlagPeek != 0:
		return ep.peek(m, w, a, ctx)
	case a.Flags&FlagClaim != 0:
		msg, ok := m.Claim(ctx)
		if !ok {
			return CodeNoMsg
		}
		if a.Flags&FlagDiscard != 0 {
			u := &ep.ux[msg.Data]
			ep.discardUx(msg.Data, Entry{Context: ctx, Flags: FlagRecv | kindFlag(a.Kind), Tag: u.hdr.Tag, Src: ep.srcField(msg.Src)})
			ep.uxPut(msg.Data)
			return 0
		}
		return ep.deliverUx(ep.newRx(a, ctx), msg)
	}
	if ep.nrx >= ep.cfg.RxSize {
		return CodeAgain
	}
	if f := &ep.fast[fastIdx(a.Kind)]; f.live {
		ep.spill(fastIdx(a.Kind)) // it was posted first
	} else if !ep.noFast && a.Flags&FlagMultiRecv == 0 && (a.Kind == transport.KindMsg || a.Kind == transport.KindTagged) &&
		(a.IOV == nil || len(a.IOV) == 1) && (!ep.cfg.DirectedRecv || w.Src == match.AnySource) &&
		m.Posted() == 0 && m.Unexpected() == 0 {
		buf := a.Buf
		if a.IOV != nil {
			buf = a.IOV[0]
		}
		if len(buf) >= ep.recvPrepMin {
			ep.recvPrep.PrepareRecv(buf)
		}
		f.ctx, f.buf, f.tag, f.ignore, f.flags, f.group, f.live = ctx, buf, w.Tag, w.Ignore, a.Flags, w.Group, true
		ep.nrx++
		return 0
	}
	if len(a.Buf) >= ep.recvPrepMin || a.IOV != nil {
		ep.prepareRecv(a)
	}
	if a.Flags&FlagMultiRecv != 0 {
		if a.IOV != nil && len(a.IOV) != 1 {
			return CodeInval // a multi-receive buffer is one contiguous region
		}
		ri := ep.newRx(a, ctx)
		size := ep.rx[ri].size
		var err error
		var stays bool
		ep.placed, stays, err = m.PostMultiRecv(match.Recv[uint32]{Want: w, Ctx: ctx, Op: ri}, size, ep.placed[:0])
		if err != nil {
			ep.rxPut(ri)
			return CodeInval
		}
		for _, p := range ep.placed {
			ep.landUx(ri, p.Msg, match.Match[uint32]{Op: ri, Multi: true, Offset: p.Offset, Len: p.Len, Truncated: p.Truncated, Released: p.Released})
		}
		if stays {
			ep.nrx++
		} else if ep.rx[ri].fetches == 0 {
			ep.rxPut(ri)
		}
		return 0
	}
	ri := ep.newRx(a, ctx)
	msg, found := m.PostRecv(match.Recv[uint32]{Want: w, Ctx: ctx, Op: ri})
	if found {
		return ep.deliverUx(ri, msg)
	}
	ep.nrx++
	return 0
}

// prepareRecv hands the posted buffers of a that are large enough to the
// transport's PrepareRecv.
func (ep *Endpoint) prepareRecv(a *RecvArgs) {
	if ep.recvPrep == nil {
		return
	}
	if a.IOV == nil {
		ep.recvPrep.PrepareRecv(a.Buf)
		return
	}
	for _, b := range a.IOV {
		if len(b) >= ep.recvPrepMin {
			ep.recvPrep.PrepareRecv(b)
		}
	}
}

// spill moves the receive held in ep.fast[i] into its matcher, as it
// would have been posted there.
func (ep *Endpoint) spill(i int) {
	f := &ep.fast[i]
	if !f.live {
		return
	}
	kind := transport.KindMsg
	if i == 1 {
		kind = transport.KindTagged
	}
	ctx := f.ctx
	ri := ep.newRx(&RecvArgs{Buf: f.buf, Kind: kind, Flags: f.flags}, ctx)
	w := match.Want{Tag: f.tag, Ignore: f.ignore, Src: match.AnySource, Group: f.group}
	*f = fastRx{}
	// Nothing unexpected can match: the queue was empty when the receive
	// was held, and every later arrival it matched went to it.
	if msg, found := ep.matcher(kind).PostRecv(match.Recv[uint32]{Want: w, Ctx: ctx, Op: ri}); found {
		ep.nrx--
		ep.deliverUx(ri, msg)
	}
}

// arriveFast lands an eager message in the held receive f (it matched)
// and writes its completion, as completeRx does for a plain receive.
func (ep *Endpoint) arriveFast(f *fastRx, p transport.Peer, hdr *transport.Header, eager []byte) {
	var n int
	if len(eager) == 8 && len(f.buf) >= 8 {
		// One word move, inlined: copy calls memmove (a 16-instruction
		// call for the 8 bytes of the latency path).
		*(*[8]byte)(f.buf) = [8]byte(eager)
		n = 8
	} else {
		n = copy(f.buf, eager)
	}
	olen := len(eager) - n
	ctx, buf, opFlags := f.ctx, f.buf[:n], f.flags
	*f = fastRx{}
	ep.nrx--
	flags := FlagRecv | kindFlag(hdr.Kind)
	if hdr.Flags&transport.FlagRemoteData != 0 {
		flags |= FlagRemoteCQData
	}
	if olen > 0 {
		count(ep.cfg.RecvCntr, CodeTrunc)
	} else {
		count(ep.cfg.RecvCntr, 0)
	}
	cq := ep.cfg.RxCQ
	if cq == nil || olen == 0 && ep.cfg.RxSelective && opFlags&FlagCompletion == 0 {
		return
	}
	var tag uint64
	if hdr.Kind == transport.KindTagged {
		tag = hdr.Tag
	}
	src := AddrUnknown
	if ep.cfg.Source {
		src = ep.source(p)
	}
	e := cq.next() // filled in place, every field
	e.Context, e.Flags, e.Len, e.Buf, e.Data, e.Tag, e.Src = ctx, flags, n, buf, hdr.Data, tag, src
	e.Err, e.ProvErrno, e.OLen = 0, 0, 0
	if olen > 0 {
		e.Err, e.OLen = CodeTrunc, olen
	}
}

func (ep *Endpoint) matcher(k transport.Kind) *match.Matcher[uint32, uint32] {
	if k == transport.KindTagged {
		return ep.tags
	}
	return ep.msgs
}

func (ep *Endpoint) newRx(a *RecvArgs, ctx any) uint32 {
	var i uint32
	if n := len(ep.rxFree); n > 0 {
		i = ep.rxFree[n-1]
		ep.rxFree = ep.rxFree[:n-1]
	} else {
		ep.rx = append(ep.rx, &rxOp{})
		i = uint32(len(ep.rx) - 1)
	}
	op := ep.rx[i]
	op.ctx, op.kind, op.flags, op.live = ctx, a.Kind, a.Flags, true
	op.iov = setIOV(&op.one, &op.iovs, a.Buf, a.IOV)
	for _, b := range op.iov {
		op.size += len(b)
	}
	return i
}

func (ep *Endpoint) rxPut(i uint32) {
	op := ep.rx[i]
	clear(op.iovs)
	*op = rxOp{iovs: op.iovs[:0]}
	ep.rxFree = append(ep.rxFree, i)
}

func (ep *Endpoint) peek(m *match.Matcher[uint32, uint32], w match.Want, a *RecvArgs, ctx any) Code {
	var msg match.Msg[uint32]
	var ok bool
	switch {
	case a.Flags&FlagClaim != 0:
		var err error
		msg, ok, err = m.PeekClaim(w, ctx)
		if err != nil {
			return CodeInval
		}
	case a.Flags&FlagDiscard != 0:
		msg, ok = m.PeekDiscard(w)
	default:
		msg, ok = m.Peek(w)
	}
	cq := ep.cfg.RxCQ
	if !ok {
		count(ep.cfg.RecvCntr, CodeNoMsg)
		if cq != nil {
			cq.Push(&Entry{Context: ctx, Flags: FlagRecv | kindFlag(a.Kind), Err: CodeNoMsg, Src: AddrUnknown})
		}
		return 0
	}
	u := &ep.ux[msg.Data]
	flags := FlagRecv | kindFlag(a.Kind)
	if u.hdr.Flags&transport.FlagRemoteData != 0 {
		flags |= FlagRemoteCQData
	}
	e := Entry{Context: ctx, Flags: flags, Len: int(u.hdr.Len), Data: u.hdr.Data, Tag: u.hdr.Tag, Src: ep.srcField(msg.Src)}
	if a.Flags&FlagDiscard != 0 {
		ep.discardUx(msg.Data, e)
		ep.uxPut(msg.Data)
		return 0
	}
	count(ep.cfg.RecvCntr, 0)
	if cq != nil {
		cq.Push(&e)
	}
	return 0
}

func (ep *Endpoint) srcField(src uint64) uint64 {
	if !ep.cfg.Source {
		return AddrUnknown
	}
	return src
}

// deliverUx lands an unexpected message in a freshly made plain receive.
func (ep *Endpoint) deliverUx(ri uint32, msg match.Msg[uint32]) Code {
	n := min(ep.rx[ri].size, msg.Len)
	ep.landUx(ri, msg, match.Match[uint32]{Op: ri, Len: n, Truncated: n < msg.Len, Released: true})
	if ep.rx[ri].fetches == 0 {
		ep.rxPut(ri)
	}
	return 0
}

// landUx moves an unexpected message's data into receive ri as mt says
// and completes it (or starts its fetch). It frees the unexpected entry.
func (ep *Endpoint) landUx(ri uint32, msg match.Msg[uint32], mt match.Match[uint32]) {
	u := &ep.ux[msg.Data]
	if u.rndv {
		ep.startFetch(ri, u.peer, &u.hdr, msg.Src, u.cookie, mt)
	} else {
		ep.copyIn(ri, mt.Offset, u.buf[:mt.Len])
		ep.completeRx(ri, &u.hdr, msg.Src, mt.Offset, mt.Len, msg.Len-mt.Len, mt.Multi, mt.Released)
		ep.pool.Put(u.buf)
		ep.uxUsed -= len(u.buf)
	}
	ep.uxPut(msg.Data)
}

// copyIn copies p into receive ri's buffers starting at byte off.
func (ep *Endpoint) copyIn(ri uint32, off int, p []byte) {
	for _, b := range ep.rx[ri].iov {
		if len(p) == 0 {
			return
		}
		if off >= len(b) {
			off -= len(b)
			continue
		}
		n := copy(b[off:], p)
		p = p[n:]
		off = 0
	}
}

// window returns the part of receive ri's buffers from off, n bytes long,
// as an iov for Fetch (reusing a scratch array for the single-buffer case).
func (ep *Endpoint) window(ri uint32, off, n int) [][]byte {
	iov := ep.rx[ri].iov
	if len(iov) == 1 {
		ep.oneIOV[0] = iov[0][off : off+n]
		return ep.oneIOV[:]
	}
	var out [][]byte // vectored rendezvous receive: rare, allowed to allocate
	for _, b := range iov {
		if n == 0 {
			break
		}
		if off >= len(b) {
			off -= len(b)
			continue
		}
		k := min(len(b)-off, n)
		out = append(out, b[off:off+k])
		n -= k
		off = 0
	}
	return out
}

// completeRx pushes a receive completion: n bytes at off, olen bytes lost.
func (ep *Endpoint) completeRx(ri uint32, hdr *transport.Header, src uint64, off, n, olen int, multi, released bool) {
	op := ep.rx[ri]
	flags := FlagRecv | kindFlag(op.kind)
	if hdr.Flags&transport.FlagRemoteData != 0 {
		flags |= FlagRemoteCQData
	}
	if multi && released {
		flags |= FlagMultiRecv
	}
	var buf []byte
	if len(op.iov) == 1 {
		buf = op.iov[0][off : off+n]
	}
	if hdr.Kind == transport.KindRMAData { // FI_RX_CQ_DATA: an RMA write's data
		flags = FlagRMA | FlagRemoteWrite | FlagRemoteCQData | flags&FlagMultiRecv
		n, buf = int(min(hdr.Tag, uint64(1)<<62)), nil
	}
	if olen > 0 {
		count(ep.cfg.RecvCntr, CodeTrunc)
	} else {
		count(ep.cfg.RecvCntr, 0)
	}
	cq := ep.cfg.RxCQ
	if cq == nil || olen == 0 && ep.cfg.RxSelective && op.flags&FlagCompletion == 0 && !(multi && released) {
		return
	}
	var tag uint64
	if op.kind == transport.KindTagged {
		tag = hdr.Tag
	}
	e := cq.next() // filled in place, every field
	e.Context, e.Flags, e.Len, e.Buf, e.Data, e.Tag, e.Src = op.ctx, flags, n, buf, hdr.Data, tag, ep.srcField(src)
	e.Err, e.ProvErrno, e.OLen = 0, 0, 0
	if olen > 0 {
		e.Err, e.OLen = CodeTrunc, olen
	}
}

func (ep *Endpoint) startFetch(ri uint32, p transport.Peer, hdr *transport.Header, src, cookie uint64, mt match.Match[uint32]) {
	var fi uint32
	if n := len(ep.fxFree); n > 0 {
		fi = ep.fxFree[n-1]
		ep.fxFree = ep.fxFree[:n-1]
	} else {
		ep.fx = append(ep.fx, fetchOp{})
		fi = uint32(len(ep.fx) - 1)
	}
	ep.fx[fi] = fetchOp{rx: ri, peer: p, hdr: *hdr, src: src, off: mt.Offset, olen: int(hdr.Len) - mt.Len,
		released: mt.Released, multi: mt.Multi, live: true}
	ep.rx[ri].fetches++
	for int(p) >= len(ep.fetching) {
		ep.fetching = append(ep.fetching, 0)
	}
	ep.fetching[p]++
	done, n, c := ep.tr.Fetch(p, cookie, ep.window(ri, mt.Offset, mt.Len), transport.Op(tokFetch|uint64(fi)))
	if done {
		ep.fetchDone(fi, n, Code(c), false)
	}
}

func (ep *Endpoint) fetchDone(fi uint32, n int, c Code, freeRx bool) {
	f := ep.fx[fi]
	ep.fx[fi] = fetchOp{}
	ep.fxFree = append(ep.fxFree, fi)
	ep.rx[f.rx].fetches--
	ep.fetching[f.peer]--
	if c != 0 {
		op := ep.rx[f.rx]
		count(ep.cfg.RecvCntr, c)
		if ep.cfg.RxCQ != nil {
			ep.cfg.RxCQ.Push(&Entry{Context: op.ctx, Flags: FlagRecv | kindFlag(op.kind), Err: c, Tag: f.hdr.Tag, Src: ep.srcField(f.src)})
		}
	} else {
		ep.completeRx(f.rx, &f.hdr, f.src, f.off, n, f.olen, f.multi, f.released)
	}
	// A plain receive (or a released multi-receive buffer) is finished when
	// its last fetch is; a buffer still posted stays.
	if freeRx && (!f.multi || f.released) && ep.rx[f.rx].fetches == 0 {
		ep.rxPut(f.rx)
	}
}

// Cancel removes the posted receive with context ctx and completes it
// with an FI_ECANCELED error entry. It returns CodeNoMsg when no posted
// receive has that context.
func (ep *Endpoint) Cancel(ctx any) Code {
	ep.ser.Lock()
	defer ep.ser.Unlock()
	ep.spill(0)
	ep.spill(1)
	for _, m := range [2]*match.Matcher[uint32, uint32]{ep.tags, ep.msgs} {
		mt, ok := m.Cancel(ctx)
		if !ok {
			continue
		}
		op := ep.rx[mt.Op]
		flags := FlagRecv | kindFlag(op.kind)
		if mt.Multi {
			flags |= FlagMultiRecv
		}
		count(ep.cfg.RecvCntr, CodeCanceled)
		if ep.cfg.RxCQ != nil {
			ep.cfg.RxCQ.Push(&Entry{Context: op.ctx, Flags: flags, Err: CodeCanceled, Len: mt.Offset, Src: AddrUnknown})
		}
		ep.nrx--
		if ep.rx[mt.Op].fetches == 0 {
			ep.rxPut(mt.Op)
		}
		return 0
	}
	return CodeNoMsg
}

// ---------------------------------------------------------------------------
// transport.Sink: called from inside Poll

// Arrive matches an inbound message or queues it as unexpected.
func (ep *Endpoint) Arrive(p transport.Peer, hdr *transport.Header, eager []byte, cookie uint64) bool {
	if hdr.Kind == transport.KindRMAData && !ep.cfg.RxCQData {
		ep.rmaData(p, hdr)
		return true
	}
	if hdr.Kind == transport.KindColl {
		return ep.collArrive(p, hdr, eager, cookie)
	}
	if f := &ep.fast[fastIdx(hdr.Kind)]; f.live && hdr.Group == f.group &&
		(hdr.Kind != transport.KindTagged || (hdr.Tag^f.tag)&^f.ignore == 0) {
		if eager != nil && (hdr.Kind == transport.KindMsg || hdr.Kind == transport.KindTagged) {
			ep.arriveFast(f, p, hdr, eager)
			return true
		}
		ep.spill(fastIdx(hdr.Kind)) // the general path below takes it
	}
	m := ep.matcher(hdr.Kind)
	src := ep.source(p)
	msg := match.Msg[uint32]{Tag: hdr.Tag, Src: src, Group: hdr.Group, Len: int(hdr.Len)}
	if hdr.Kind != transport.KindTagged {
		msg.Tag = 0
	}
	mt, ok := m.MatchPosted(msg)
	if ok {
		ri := mt.Op
		if !mt.Multi { // the matcher does not know a plain receive's size
			mt.Len = min(ep.rx[ri].size, msg.Len)
		}
		if mt.Released {
			ep.nrx--
		}
		if eager == nil {
			ep.startFetch(ri, p, hdr, src, cookie, mt)
		} else {
			ep.copyIn(ri, mt.Offset, eager[:mt.Len])
			ep.completeRx(ri, hdr, src, mt.Offset, mt.Len, int(hdr.Len)-mt.Len, mt.Multi, mt.Released)
		}
		if mt.Released && ep.rx[ri].fetches == 0 {
			ep.rxPut(ri)
		}
		return true
	}
	// Unexpected: keep the header, and the payload when it came eagerly.
	var buf []byte
	if eager != nil {
		// Back-pressure: the transport stops reading this peer. Not while
		// the peer owes us the payload of a fetch: a transport may carry
		// that payload behind this message on the same stream (shm
		// segments), and stopping would deadlock with every receive
		// waiting for its fetch. The excess is bounded by what the peer
		// queued ahead of the payload.
		if ep.uxUsed+len(eager) > ep.cfg.UnexpectedBytes && ep.uxUsed > 0 &&
			(int(p) >= len(ep.fetching) || ep.fetching[p] == 0) {
			return false
		}
		buf = ep.pool.Get(len(eager))
		copy(buf, eager)
		ep.uxUsed += len(buf)
	}
	ui := ep.uxAlloc()
	ep.ux[ui] = uxMsg{peer: p, hdr: *hdr, src: src, buf: buf, cookie: cookie, rndv: eager == nil}
	msg.Data = ui
	m.Enqueue(msg)
	return true
}

// SendDone completes a transmit the transport held.
func (ep *Endpoint) SendDone(op transport.Op, c transport.Code) {
	if uint64(op)&^tokMask == tokColl {
		ep.collSendDone(op, c)
		return
	}
	if uint64(op)&^tokMask != tokTx {
		return
	}
	i := uint32(uint64(op) & tokMask)
	if int(i) < len(ep.tx) && ep.tx[i].live {
		if ep.tx[i].rma != nil {
			ep.rmaDone(i, Code(c))
			return
		}
		ep.txComplete(i, Code(c))
	}
}

// FetchDone completes a rendezvous receive.
func (ep *Endpoint) FetchDone(op transport.Op, n int, c transport.Code) {
	if uint64(op)&^tokMask == tokColl {
		ep.collFetchDone(op, n, c)
		return
	}
	if uint64(op)&^tokMask != tokFetch {
		return
	}
	if uint64(op)&tokDrop != 0 {
		ep.dropDone(uint32(uint64(op) & (tokMask &^ tokDrop)))
		return
	}
	i := uint32(uint64(op) & tokMask)
	if int(i) < len(ep.fx) && ep.fx[i].live {
		ep.fetchDone(i, n, Code(c), true)
	}
}

// PeerDown forgets cached routes to a failed peer; the transport has
// already failed the operations it held for it.
func (ep *Endpoint) PeerDown(p transport.Peer, c transport.Code) {
	for a, v := range ep.peerOf {
		if v == int64(p)+1 {
			ep.peerOf[a] = 0
		}
	}
	if ep.coll != nil {
		ep.coll.CollPeerDown(p, Code(c))
	}
}

func (ep *Endpoint) uxAlloc() uint32 {
	if n := len(ep.uxFree); n > 0 {
		i := ep.uxFree[n-1]
		ep.uxFree = ep.uxFree[:n-1]
		return i
	}
	ep.ux = append(ep.ux, uxMsg{})
	return uint32(len(ep.ux) - 1)
}

func (ep *Endpoint) uxPut(i uint32) {
	ep.ux[i] = uxMsg{}
	ep.uxFree = append(ep.uxFree, i)
}

// discardUx drops unexpected message i for a discard the application is
// told of (FI_DISCARD with FI_PEEK or FI_CLAIM), whose completion is e:
// the completion and the receive counter go out once the transport has
// told the sender (transport.Discarder; FetchDone on a tokDrop token),
// at once where it did so in the call or has nothing to tell. A discard
// reported while the sender was still to be told (shm: the ACK waiting
// for room in the ring to the sender) left the sender's send waiting on
// progress that a receiver done with the message need not make
// (TestEndpointOverShm_DiscardCompletesOnlyWhenTheSenderIsTold).
func (ep *Endpoint) discardUx(i uint32, e Entry) {
	u := &ep.ux[i]
	if !u.rndv || ep.discarder == nil {
		ep.dropUx(i)
		ep.dropReport(&e)
		return
	}
	var di uint32
	if n := len(ep.dropFree); n > 0 {
		di = ep.dropFree[n-1]
		ep.dropFree = ep.dropFree[:n-1]
	} else {
		ep.drops = append(ep.drops, heldDrop{})
		di = uint32(len(ep.drops) - 1)
	}
	ep.drops[di] = heldDrop{e: e, live: true}
	if !ep.discarder.DiscardOp(u.peer, u.cookie, transport.Op(tokFetch|tokDrop|uint64(di))) {
		return // dropDone reports it
	}
	ep.dropDone(di)
}

// heldDrop is a discard's completion held until the transport has told
// the sender (live while held).
type heldDrop struct {
	e    Entry
	live bool
}

// dropDone reports the discard held in drops[di] (discardUx).
func (ep *Endpoint) dropDone(di uint32) {
	if int(di) >= len(ep.drops) || !ep.drops[di].live {
		return
	}
	e := ep.drops[di].e
	ep.drops[di] = heldDrop{}
	ep.dropFree = append(ep.dropFree, di)
	ep.dropReport(&e)
}

// dropReport counts a discard and writes its completion.
func (ep *Endpoint) dropReport(e *Entry) {
	count(ep.cfg.RecvCntr, 0)
	if cq := ep.cfg.RxCQ; cq != nil {
		cq.Push(e)
	}
}

// dropUx releases an unexpected message's data unread.
func (ep *Endpoint) dropUx(i uint32) {
	u := &ep.ux[i]
	if u.rndv {
		ep.tr.Discard(u.peer, u.cookie)
		return
	}
	ep.pool.Put(u.buf)
	ep.uxUsed -= len(u.buf)
	u.buf = nil
}

// Close fails every posted receive with FI_ECANCELED, drops unexpected
// messages and closes the transport.
func (ep *Endpoint) Close() Code {
	ep.ser.Lock()
	defer ep.ser.Unlock()
	if ep.closed {
		return 0
	}
	ep.closed = true
	ep.spill(0)
	ep.spill(1)
	ep.failDeferred(CodeCanceled)
	if ep.coll != nil {
		ep.coll.CollClose()
	}
	for _, m := range [2]*match.Matcher[uint32, uint32]{ep.tags, ep.msgs} {
		recvs, msgs := m.Drain(nil, nil)
		for _, r := range recvs {
			op := ep.rx[r.Op]
			count(ep.cfg.RecvCntr, CodeCanceled)
			if ep.cfg.RxCQ != nil {
				ep.cfg.RxCQ.Push(&Entry{Context: op.ctx, Flags: FlagRecv | kindFlag(op.kind), Err: CodeCanceled, Src: AddrUnknown})
			}
		}
		for _, u := range msgs {
			ep.dropUx(u.Data)
		}
	}
	if err := ep.tr.Close(); err != nil {
		return CodeIO
	}
	return 0
}

// Outstanding reports transmits in flight and receives posted, for tests
// and for Close's busy check.
func (ep *Endpoint) Outstanding() (tx, rx int) {
	ep.ser.Lock()
	defer ep.ser.Unlock()
	return ep.ntx, ep.nrx
}

// Waiter returns the transport's waiter for the CQ to sleep on.
func (ep *Endpoint) Waiter() Waiter { return ep.tr }

// PeerShares reports whether the transport says a peer that stays put
// polls on cpu (transport.CPUSharer; false without one).
func (ep *Endpoint) PeerShares(cpu int) bool {
	return ep.sharer != nil && ep.sharer.PeerShares(cpu)
}
