package match

import (
	"cmp"
	"math"
	"math/bits"
	"reflect"
	"slices"
)

// AnySource as a receive's source means "from any source" (FI_ADDR_UNSPEC).
// As a message's source it means "unknown sender" (FI_ADDR_NOTAVAIL, the
// same value): such a message only matches receives from AnySource.
const AnySource = ^uint64(0)

// DefaultMinMultiRecv is the minimum free space (bytes) a multi-receive
// buffer must keep to stay posted, until SetMinMultiRecv changes it. It is
// gofi's default for FI_OPT_MIN_MULTI_RECV.
const DefaultMinMultiRecv = 64

// DefaultBuckets is the initial number of hash buckets of each queue.
const DefaultBuckets = 1024

// Want selects messages: by tag under an ignore mask, by source and by peer
// group. It is what a receive, a Peek or a Peek+Claim asks for. A plain
// value: copying it shares nothing, so it is safe to use from anywhere.
type Want struct {
	Tag    uint64 // tag bits to compare
	Ignore uint64 // bits of Tag that do not take part (0: exact tag)
	Src    uint64 // source, or AnySource; ignored without DirectedRecv
	Group  uint32 // peer group (fi_av(3) PEER GROUPS); must equal the message's
}

// Recv is a receive to post. A plain value (the matcher copies it).
type Recv[R any] struct {
	Want
	// Ctx identifies the receive for Cancel. It is compared by identity
	// (==), so pass a pointer or another comparable value; a receive whose
	// context is not comparable can never be canceled.
	Ctx any
	// Op is the engine's receive-operation descriptor, handed back when a
	// message lands in this receive.
	Op R
}

// Msg is a message as the matcher sees it: its match fields, its length in
// bytes, and the engine's descriptor of where its data is (a ring slot, a
// buffered copy, a rendezvous handle). A plain value (the matcher copies it).
type Msg[U any] struct {
	Tag   uint64
	Src   uint64 // as the engine gave it; AnySource means unknown sender
	Group uint32
	Len   int
	Data  U
}

// Match reports the posted receive an arriving message landed in, or a
// receive removed by Cancel or Drain. (It leaves out the receive's context:
// the engine's descriptor Op carries whatever it needs, and a small Match
// travels in registers.) A plain value, owned by the caller.
type Match[R any] struct {
	Op R // the receive's descriptor
	// Offset is where this message goes in a multi-receive buffer and Len
	// how many bytes of the message fit there (Truncated when fewer than
	// the message's length). For a plain receive Offset is 0 and Len is
	// the message length.
	Offset int
	Len    int
	// Multi is set when the receive is a multi-receive buffer.
	Multi     bool
	Truncated bool
	// Released is set when the receive is no longer posted after this
	// message: always for a plain receive, and for a multi-receive buffer
	// once its free space fell below the minimum (the engine reports it
	// with the FI_MULTI_RECV completion flag).
	Released bool
}

// Placed reports an unexpected message absorbed by a multi-receive buffer
// when it was posted (PostMultiRecv), with the same Offset, Len, Truncated
// and Released meanings as in Match. A plain value, owned by the caller.
type Placed[U any] struct {
	Msg       Msg[U]
	Offset    int
	Len       int
	Truncated bool
	Released  bool
}

// Option configures a Matcher in New. Options are pure functions of their
// arguments and may be shared between goroutines.
type Option func(*config) error

type config struct {
	directed bool
	buckets  int
}

// DirectedRecv makes receives match on source (FI_DIRECTED_RECV). Without
// it the Src of receives, Peeks and Claims is ignored.
func DirectedRecv(on bool) Option {
	return func(c *config) error { c.directed = on; return nil }
}

// Buckets sets the initial number of hash buckets of each queue (rounded
// up to a power of two). Tables double when their load passes 2, so this
// is only a starting size.
func Buckets(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 1<<24 {
			return ErrBuckets
		}
		c.buckets = n
		return nil
	}
}

// link is one pair of list pointers: slab indices, -1 for none.
type link struct{ next, prev int32 }

// list is a doubly linked FIFO over slab indices.
type list struct {
	head, tail int32
	n          int32
}

var emptyList = list{head: -1, tail: -1}

// Posted-entry states (pent.bkt holds the bucket index when >= 0).
const (
	inWild = -1 // in the wildcard list
	isFree = -2 // on the free list
)

// pent is the part of a posted receive that searches read (48 bytes, so
// walking a list touches little memory; a walk past a non-matching
// entry reads only the first 24 bytes); pcold, at the same index in a
// parallel slab, is the rest.
type pent struct {
	tag, ignore uint64
	l           link // bucket or wildcard list; free list when free
	src, seq    uint64
	group       uint32
	bkt         int32 // bucket index, inWild or isFree
}

type pcold[R any] struct {
	multi     bool
	size, off int
	ctx       any
	op        R
}

// Links of an unexpected entry.
const (
	lkAll  = 0 // arrival-order list of queued messages, or the claimed list
	lkHash = 1 // (tag, group) bucket
	lkSrc  = 2 // per-source list
)

// Unexpected-entry states.
const (
	uFree    = 0
	uQueued  = 1
	uClaimed = 2
)

// uent is an unexpected message.
type uent[U any] struct {
	tag, src, seq uint64
	group         uint32
	state         uint8
	hb            int32 // hash bucket
	sl            int32 // source list, -1 when not in one
	lk            [3]link
	len           int
	ctx           any // claiming context
	data          U
}

// Matcher is the pair of queues (posted receives, unexpected messages) of
// one endpoint for one kind of traffic. R is the engine's receive
// descriptor, U its message descriptor.
//
// A Matcher is not safe for concurrent use: its owner (the endpoint's
// progress path) serializes every call. Values returned are copies; the
// matcher keeps no reference to them.
type Matcher[R, U any] struct {
	directed bool
	minMulti int

	// posted receives
	pseq    uint64
	pe      []pent
	pc      []pcold[R]
	pfree   int32
	pb      []list // exact receives by (tag, src, group)
	pshift  uint   // 64 - log2(len(pb))
	wild    list   // wildcard receives in post order
	nexact  int
	nexAny  int // exact receives from AnySource (all of them without DirectedRecv)
	nposted int

	// unexpected messages
	useq     uint64
	ue       []uent[U]
	ufree    int32
	ub       []list // by (tag, group)
	ushift   uint
	all      list // queued messages in arrival order
	claimed  list // claimed messages in claim order
	srcIdx   map[uint64]int32
	srcs     []list
	nqueued  int
	nclaimed int
}

// New returns an empty Matcher.
func New[R, U any](opts ...Option) (*Matcher[R, U], error) {
	c := config{buckets: DefaultBuckets}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	n := 1 << bits.Len(uint(c.buckets-1)) // next power of two
	m := &Matcher[R, U]{
		directed: c.directed,
		minMulti: DefaultMinMultiRecv,
		pfree:    -1,
		ufree:    -1,
		// room for the first posted receives: an endpoint whose first
		// receives were held apart from the matcher (the engine's fast
		// path) posts its first ones here later, allocating nothing
		pe:      make([]pent, 0, 16),
		pc:      make([]pcold[R], 0, 16),
		wild:    emptyList,
		all:     emptyList,
		claimed: emptyList,
	}
	m.pb, m.pshift = newBuckets(n)
	m.ub, m.ushift = newBuckets(n)
	if c.directed {
		m.srcIdx = make(map[uint64]int32)
	}
	return m, nil
}

func newBuckets(n int) ([]list, uint) {
	b := make([]list, n)
	for i := range b {
		b[i] = emptyList
	}
	return b, uint(64 - bits.TrailingZeros(uint(n)))
}

// DirectedRecv reports whether receives match on source.
func (m *Matcher[R, U]) DirectedRecv() bool { return m.directed }

// MinMultiRecv returns the minimum free space of multi-receive buffers.
func (m *Matcher[R, U]) MinMultiRecv() int { return m.minMulti }

// SetMinMultiRecv sets the minimum free space (FI_OPT_MIN_MULTI_RECV) a
// multi-receive buffer must keep to stay posted; n must be at least 1. It
// applies from the next message placed, including into buffers already
// posted.
func (m *Matcher[R, U]) SetMinMultiRecv(n int) error {
	if n < 1 {
		return ErrMinMultiRecv
	}
	m.minMulti = n
	return nil
}

// Posted returns the number of posted receives (multi-receive buffers
// count once).
func (m *Matcher[R, U]) Posted() int { return m.nposted }

// Unexpected returns the number of unexpected messages waiting, not
// counting claimed ones.
func (m *Matcher[R, U]) Unexpected() int { return m.nqueued }

// Claimed returns the number of messages claimed by Peek+Claim and not yet
// taken by Claim.
func (m *Matcher[R, U]) Claimed() int { return m.nclaimed }

// norm drops the source when receives do not match on it.
func (m *Matcher[R, U]) norm(w Want) Want {
	if !m.directed {
		w.Src = AnySource
	}
	return w
}

// hashing

func mix(x uint64) uint64 {
	x ^= x >> 32
	x *= 0xd6e8feb86659fd93
	x ^= x >> 32
	x *= 0xd6e8feb86659fd93
	x ^= x >> 32
	return x
}

func pkey(tag, src uint64, g uint32) uint64 {
	return mix(tag ^ src*0x9e3779b97f4a7c15 ^ uint64(g)*0xc2b2ae3d27d4eb4f)
}

func ukey(tag uint64, g uint32) uint64 {
	return mix(tag ^ uint64(g)*0xc2b2ae3d27d4eb4f)
}

// ---------------------------------------------------------------------------
// posted queue

func (m *Matcher[R, U]) palloc() int32 {
	if i := m.pfree; i >= 0 {
		m.pfree = m.pe[i].l.next
		return i
	}
	if len(m.pe) >= math.MaxInt32 {
		panic("match: more than 2^31 posted receives") // memory is gone long before
	}
	m.pe = append(m.pe, pent{})
	m.pc = append(m.pc, pcold[R]{})
	return int32(len(m.pe) - 1)
}

func (m *Matcher[R, U]) pput(i int32) {
	m.pc[i] = pcold[R]{} // drop references for the GC
	e := &m.pe[i]        // post rewrites every field; only mark it free
	e.bkt, e.l.next = isFree, m.pfree
	m.pfree = i
}

func (m *Matcher[R, U]) ppush(l *list, i int32) {
	e := &m.pe[i]
	e.l.next, e.l.prev = -1, l.tail
	if l.tail >= 0 {
		m.pe[l.tail].l.next = i
	} else {
		l.head = i
	}
	l.tail = i
	l.n++
}

func (m *Matcher[R, U]) punlink(l *list, i int32) {
	e := &m.pe[i]
	if e.l.prev >= 0 {
		m.pe[e.l.prev].l.next = e.l.next
	} else {
		l.head = e.l.next
	}
	if e.l.next >= 0 {
		m.pe[e.l.next].l.prev = e.l.prev
	} else {
		l.tail = e.l.prev
	}
	l.n--
}

// post appends a receive (already normalized) to the posted queue.
func (m *Matcher[R, U]) post(w Want, ctx any, op R, multi bool, size, off int) {
	if w.Ignore == 0 && m.nexact >= 2*len(m.pb) {
		m.growPosted()
	}
	i := m.palloc()
	e := &m.pe[i]
	m.pseq++
	e.tag, e.ignore, e.src, e.group, e.seq = w.Tag, w.Ignore, w.Src, w.Group, m.pseq
	// Field by field: a struct literal here goes through a stack
	// temporary and costs a store-forwarding stall on the copy.
	c := &m.pc[i]
	c.multi, c.size, c.off, c.ctx, c.op = multi, size, off, ctx, op
	if w.Ignore == 0 {
		b := int32(pkey(w.Tag, w.Src, w.Group) >> m.pshift)
		e.bkt = b
		m.ppush(&m.pb[b], i)
		m.nexact++
		if w.Src == AnySource {
			m.nexAny++
		}
	} else {
		e.bkt = inWild
		m.ppush(&m.wild, i)
	}
	m.nposted++
}

// premove takes a posted receive out of its list and frees it.
func (m *Matcher[R, U]) premove(i int32) {
	if b := m.pe[i].bkt; b >= 0 {
		m.punlink(&m.pb[b], i)
		m.nexact--
		if m.pe[i].src == AnySource {
			m.nexAny--
		}
	} else {
		m.punlink(&m.wild, i)
	}
	m.nposted--
	m.pput(i)
}

// growPosted doubles the exact-receive table. Every new bucket draws from
// exactly one old bucket, walked in order, so per-bucket FIFO order holds.
func (m *Matcher[R, U]) growPosted() {
	old := m.pb
	m.pb, m.pshift = newBuckets(2 * len(old))
	for _, ob := range old {
		for i := ob.head; i >= 0; {
			next := m.pe[i].l.next
			e := &m.pe[i]
			b := int32(pkey(e.tag, e.src, e.group) >> m.pshift)
			e.bkt = b
			m.ppush(&m.pb[b], i)
			i = next
		}
	}
}

// scanExact returns the earliest exact receive with this key, or -1.
func (m *Matcher[R, U]) scanExact(tag, src uint64, g uint32) int32 {
	for i := m.pb[pkey(tag, src, g)>>m.pshift].head; i >= 0; {
		e := &m.pe[i]
		if e.tag == tag && e.src == src && e.group == g {
			return i
		}
		i = e.l.next
	}
	return -1
}

// findPosted returns the earliest posted receive matching a message, or -1.
func (m *Matcher[R, U]) findPosted(tag, src uint64, g uint32) int32 {
	best, bseq := int32(-1), uint64(math.MaxUint64)
	// Look up only the buckets that can hold something: receives naming
	// a source, and receives from any source, are counted apart.
	if src != AnySource && m.nexact > m.nexAny {
		if i := m.scanExact(tag, src, g); i >= 0 {
			best, bseq = i, m.pe[i].seq
		}
	}
	if m.nexAny > 0 {
		if i := m.scanExact(tag, AnySource, g); i >= 0 && m.pe[i].seq < bseq {
			best, bseq = i, m.pe[i].seq
		}
	}
	pe := m.pe
	if best < 0 { // no exact candidate: the first matching wildcard wins
		for i := m.wild.head; i >= 0; {
			e := &pe[i]
			if (tag^e.tag)&^e.ignore == 0 && e.group == g && (e.src == AnySource || e.src == src) {
				return i
			}
			i = e.l.next
		}
		return -1
	}
	// Only wildcards posted before the exact candidate can beat it.
	for i := m.wild.head; i >= 0; {
		e := &pe[i]
		if e.seq > bseq {
			break
		}
		if (tag^e.tag)&^e.ignore == 0 && e.group == g && (e.src == AnySource || e.src == src) {
			return i
		}
		i = e.l.next
	}
	return best
}

// deliver consumes posted receive i for a message of length n.
func (m *Matcher[R, U]) deliver(i int32, n int) Match[R] {
	c := &m.pc[i]
	if !c.multi {
		op := c.op
		m.premove(i)
		return Match[R]{Op: op, Len: n, Released: true}
	}
	return m.deliverMulti(i, n)
}

func (m *Matcher[R, U]) deliverMulti(i int32, n int) Match[R] {
	c := &m.pc[i]
	r := Match[R]{Op: c.op}
	r.Multi, r.Offset, r.Len, r.Truncated, r.Released = m.place(&c.off, c.size, n)
	if r.Released {
		m.premove(i)
	}
	return r
}

// place puts n bytes at *off in a multi-receive buffer of the given size.
func (m *Matcher[R, U]) place(off *int, size, n int) (multi bool, at, put int, trunc, released bool) {
	at, put = *off, n
	if free := size - at; put > free {
		put, trunc = free, true
	}
	*off += put
	return true, at, put, trunc, size-*off < m.minMulti
}

// ---------------------------------------------------------------------------
// unexpected queue

func (m *Matcher[R, U]) ualloc() int32 {
	if i := m.ufree; i >= 0 {
		m.ufree = m.ue[i].lk[lkAll].next
		return i
	}
	if len(m.ue) >= math.MaxInt32 {
		panic("match: more than 2^31 unexpected messages")
	}
	var zero uent[U]
	m.ue = append(m.ue, zero)
	return int32(len(m.ue) - 1)
}

func (m *Matcher[R, U]) uput(i int32) {
	e := &m.ue[i]
	*e = uent[U]{}
	e.lk[lkAll].next = m.ufree
	m.ufree = i
}

func (m *Matcher[R, U]) upush(l *list, i int32, k int) {
	e := &m.ue[i]
	e.lk[k].next, e.lk[k].prev = -1, l.tail
	if l.tail >= 0 {
		m.ue[l.tail].lk[k].next = i
	} else {
		l.head = i
	}
	l.tail = i
	l.n++
}

func (m *Matcher[R, U]) uunlink(l *list, i int32, k int) {
	e := &m.ue[i]
	if p := e.lk[k].prev; p >= 0 {
		m.ue[p].lk[k].next = e.lk[k].next
	} else {
		l.head = e.lk[k].next
	}
	if n := e.lk[k].next; n >= 0 {
		m.ue[n].lk[k].prev = e.lk[k].prev
	} else {
		l.tail = e.lk[k].prev
	}
	l.n--
}

// enqueue stores an unexpected message.
func (m *Matcher[R, U]) enqueue(msg Msg[U]) {
	if m.nqueued >= 2*len(m.ub) {
		m.growUnexpected()
	}
	i := m.ualloc()
	e := &m.ue[i]
	m.useq++
	e.tag, e.src, e.group, e.seq, e.len, e.data = msg.Tag, msg.Src, msg.Group, m.useq, msg.Len, msg.Data
	e.state = uQueued
	e.hb = int32(ukey(msg.Tag, msg.Group) >> m.ushift)
	e.sl = -1
	m.upush(&m.all, i, lkAll)
	m.upush(&m.ub[e.hb], i, lkHash)
	if m.directed {
		s, ok := m.srcIdx[msg.Src]
		if !ok {
			s = int32(len(m.srcs))
			m.srcs = append(m.srcs, emptyList)
			m.srcIdx[msg.Src] = s
		}
		m.ue[i].sl = s
		m.upush(&m.srcs[s], i, lkSrc)
	}
	m.nqueued++
}

// unqueue takes a queued message out of the search lists.
func (m *Matcher[R, U]) unqueue(i int32) {
	e := &m.ue[i]
	m.uunlink(&m.all, i, lkAll)
	m.uunlink(&m.ub[e.hb], i, lkHash)
	if e.sl >= 0 {
		m.uunlink(&m.srcs[e.sl], i, lkSrc)
	}
	m.nqueued--
}

func (m *Matcher[R, U]) umsg(i int32) Msg[U] {
	e := &m.ue[i]
	return Msg[U]{Tag: e.tag, Src: e.src, Group: e.group, Len: e.len, Data: e.data}
}

// utake removes a queued message and returns it. The result is built from
// scalars at the return: building a Msg (40 bytes, too big to live in
// registers) and copying it costs store-forwarding stalls.
func (m *Matcher[R, U]) utake(i int32) Msg[U] {
	e := &m.ue[i]
	tag, src, group, n, data := e.tag, e.src, e.group, e.len, e.data
	m.unqueue(i)
	m.uput(i)
	return Msg[U]{Tag: tag, Src: src, Group: group, Len: n, Data: data}
}

// growUnexpected doubles the (tag, group) table, keeping per-bucket order.
func (m *Matcher[R, U]) growUnexpected() {
	old := m.ub
	m.ub, m.ushift = newBuckets(2 * len(old))
	for _, ob := range old {
		for i := ob.head; i >= 0; {
			next := m.ue[i].lk[lkHash].next
			e := &m.ue[i]
			e.hb = int32(ukey(e.tag, e.group) >> m.ushift)
			m.upush(&m.ub[e.hb], i, lkHash)
			i = next
		}
	}
	// Claimed entries left their bucket when claimed; their stale hb is
	// never read again.
}

// findUnexpected returns the earliest queued message a (normalized) Want
// matches, or -1. It walks the smallest list that holds every candidate.
func (m *Matcher[R, U]) findUnexpected(w Want) int32 {
	if m.nqueued == 0 {
		return -1
	}
	src := int32(-1)
	if w.Src != AnySource {
		s, ok := m.srcIdx[w.Src]
		if !ok {
			return -1
		}
		src = s
	}
	if w.Ignore == 0 {
		hb := &m.ub[ukey(w.Tag, w.Group)>>m.ushift]
		if src < 0 || hb.n <= m.srcs[src].n {
			for i := hb.head; i >= 0; {
				e := &m.ue[i]
				if e.tag == w.Tag && e.group == w.Group && (src < 0 || e.src == w.Src) {
					return i
				}
				i = e.lk[lkHash].next
			}
			return -1
		}
	}
	if src >= 0 {
		for i := m.srcs[src].head; i >= 0; {
			e := &m.ue[i]
			if (w.Tag^e.tag)&^w.Ignore == 0 && e.group == w.Group {
				return i
			}
			i = e.lk[lkSrc].next
		}
		return -1
	}
	for i := m.all.head; i >= 0; {
		e := &m.ue[i]
		if (w.Tag^e.tag)&^w.Ignore == 0 && e.group == w.Group {
			return i
		}
		i = e.lk[lkAll].next
	}
	return -1
}

// ---------------------------------------------------------------------------
// operations

// PostRecv posts a receive. If an unexpected message already matches it,
// the earliest such message is removed and returned with true, and nothing
// is posted. Otherwise the receive is queued and false is returned.
func (m *Matcher[R, U]) PostRecv(r Recv[R]) (Msg[U], bool) {
	w := m.norm(r.Want)
	if m.nqueued > 0 {
		if i := m.findUnexpected(w); i >= 0 {
			return m.utake(i), true
		}
	}
	m.post(w, r.Ctx, r.Op, false, 0, 0)
	return Msg[U]{}, false
}

// PostMultiRecv posts a multi-receive buffer of size bytes (FI_MULTI_RECV).
// First it absorbs waiting unexpected messages that match, earliest first,
// appending one Placed per message to dst (reuse dst[:0] to avoid
// allocation), until the buffer is released. It returns the extended dst and
// whether the buffer stayed posted (false when the last Placed is Released).
// A size below the minimum free space is refused with ErrMultiRecvSize.
func (m *Matcher[R, U]) PostMultiRecv(r Recv[R], size int, dst []Placed[U]) ([]Placed[U], bool, error) {
	if size < m.minMulti {
		return dst, false, ErrMultiRecvSize
	}
	w := m.norm(r.Want)
	off := 0
	for {
		i := m.findUnexpected(w)
		if i < 0 {
			break
		}
		msg := m.utake(i)
		p := Placed[U]{Msg: msg}
		_, p.Offset, p.Len, p.Truncated, p.Released = m.place(&off, size, msg.Len)
		dst = append(dst, p)
		if p.Released {
			return dst, false, nil
		}
	}
	m.post(w, r.Ctx, r.Op, true, size, off)
	return dst, true, nil
}

// Arrive matches an incoming message against the posted receives. On a
// match it returns the receive (the earliest posted that matches) and true;
// a plain receive is removed, a multi-receive buffer advances and is removed
// once Released. Otherwise the message is queued as unexpected and false is
// returned.
func (m *Matcher[R, U]) Arrive(msg Msg[U]) (Match[R], bool) {
	if m.nposted > 0 {
		src := msg.Src
		if !m.directed {
			src = AnySource
		}
		if i := m.findPosted(msg.Tag, src, msg.Group); i >= 0 {
			return m.deliver(i, msg.Len), true
		}
	}
	m.enqueue(msg)
	return Match[R]{}, false
}

// MatchPosted is Arrive without the queuing: on no match it returns false
// and leaves the message to the caller, who may then copy its data out of a
// transport buffer and call Enqueue. Nothing may be posted in between.
func (m *Matcher[R, U]) MatchPosted(msg Msg[U]) (Match[R], bool) {
	if m.nposted == 0 {
		return Match[R]{}, false
	}
	src := msg.Src
	if !m.directed {
		src = AnySource
	}
	i := m.findPosted(msg.Tag, src, msg.Group)
	if i < 0 {
		return Match[R]{}, false
	}
	return m.deliver(i, msg.Len), true
}

// Enqueue queues a message as unexpected. It must only follow a
// MatchPosted that returned false for the same message, with no receive
// posted in between; otherwise a waiting receive would miss it.
func (m *Matcher[R, U]) Enqueue(msg Msg[U]) { m.enqueue(msg) }

// Peek searches the unexpected messages without removing anything
// (FI_PEEK). It returns the earliest match and true, or false when none
// matches (the endpoint reports FI_ENOMSG).
func (m *Matcher[R, U]) Peek(w Want) (Msg[U], bool) {
	if i := m.findUnexpected(m.norm(w)); i >= 0 {
		return m.umsg(i), true
	}
	return Msg[U]{}, false
}

// PeekClaim is Peek with FI_CLAIM: the message found is set aside for ctx,
// so no receive or search sees it again, until Claim(ctx) takes it. The
// context must be comparable (ErrContext otherwise, nothing claimed).
func (m *Matcher[R, U]) PeekClaim(w Want, ctx any) (Msg[U], bool, error) {
	if !comparableCtx(ctx) {
		return Msg[U]{}, false, ErrContext
	}
	i := m.findUnexpected(m.norm(w))
	if i < 0 {
		return Msg[U]{}, false, nil
	}
	m.unqueue(i)
	e := &m.ue[i]
	e.state, e.ctx = uClaimed, ctx
	m.upush(&m.claimed, i, lkAll)
	m.nclaimed++
	return m.umsg(i), true, nil
}

// PeekDiscard is Peek with FI_DISCARD: the message found is removed and
// returned so the engine can free its data.
func (m *Matcher[R, U]) PeekDiscard(w Want) (Msg[U], bool) {
	if i := m.findUnexpected(m.norm(w)); i >= 0 {
		return m.utake(i), true
	}
	return Msg[U]{}, false
}

// Claim takes the message claimed by an earlier PeekClaim with the same
// context (a receive with FI_CLAIM); with several, the earliest claimed.
// FI_CLAIM|FI_DISCARD is the same call with the data dropped. It returns
// false when ctx holds no claimed message.
func (m *Matcher[R, U]) Claim(ctx any) (Msg[U], bool) {
	for i := m.claimed.head; i >= 0; i = m.ue[i].lk[lkAll].next {
		if sameCtx(m.ue[i].ctx, ctx) {
			msg := m.umsg(i)
			m.uunlink(&m.claimed, i, lkAll)
			m.nclaimed--
			m.uput(i)
			return msg, true
		}
	}
	return Msg[U]{}, false
}

// Cancel removes the earliest-posted receive whose context is ctx and
// returns it (the engine completes it with ErrCanceled); for a
// multi-receive buffer Offset tells how much of it was used. It returns
// false when no posted receive has that context. Contexts are compared by
// identity and never panic: an uncomparable context matches nothing. Cancel
// walks the whole slab of posted receives (O(capacity)); it is not a fast
// path.
func (m *Matcher[R, U]) Cancel(ctx any) (Match[R], bool) {
	best, bseq := int32(-1), uint64(math.MaxUint64)
	for i := range m.pe {
		e := &m.pe[i]
		if e.bkt != isFree && e.seq < bseq && sameCtx(m.pc[i].ctx, ctx) {
			best, bseq = int32(i), e.seq
		}
	}
	if best < 0 {
		return Match[R]{}, false
	}
	e := &m.pc[best]
	r := Match[R]{Op: e.op, Multi: e.multi, Offset: e.off, Released: true}
	m.premove(best)
	return r, true
}

// Drain empties the matcher, for endpoint close: it appends every posted
// receive (in post order, as Cancel would return them) to recvs and every
// unexpected or claimed message (in arrival order) to msgs.
func (m *Matcher[R, U]) Drain(recvs []Match[R], msgs []Msg[U]) ([]Match[R], []Msg[U]) {
	idx := make([]int32, 0, max(m.nposted, m.nqueued+m.nclaimed))
	for i := range m.pe {
		if m.pe[i].bkt != isFree {
			idx = append(idx, int32(i))
		}
	}
	slices.SortFunc(idx, func(a, b int32) int { return cmp.Compare(m.pe[a].seq, m.pe[b].seq) })
	for _, i := range idx {
		e := &m.pc[i]
		recvs = append(recvs, Match[R]{Op: e.op, Multi: e.multi, Offset: e.off, Released: true})
		m.premove(i)
	}
	idx = idx[:0]
	for i := range m.ue {
		if m.ue[i].state != uFree {
			idx = append(idx, int32(i))
		}
	}
	slices.SortFunc(idx, func(a, b int32) int { return cmp.Compare(m.ue[a].seq, m.ue[b].seq) })
	for _, i := range idx {
		msgs = append(msgs, m.umsg(i))
		if m.ue[i].state == uClaimed {
			m.uunlink(&m.claimed, i, lkAll)
			m.nclaimed--
			m.uput(i)
		} else {
			m.utake(i)
		}
	}
	return recvs, msgs
}

// comparableCtx reports whether ctx can be compared with == without a
// run-time panic.
func comparableCtx(ctx any) bool {
	if ctx == nil {
		return true
	}
	t := reflect.TypeOf(ctx)
	switch t.Kind() {
	case reflect.Pointer, reflect.UnsafePointer, reflect.Chan, reflect.Uintptr,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.String, reflect.Bool:
		return true
	}
	return reflect.ValueOf(ctx).Comparable()
}

// sameCtx compares two contexts by identity, never panicking: values that
// cannot be compared are equal to nothing.
func sameCtx(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		return false
	}
	return comparableCtx(a) && comparableCtx(b) && a == b
}
