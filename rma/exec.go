package rma

import (
	"github.com/gofi-dev/fi/dtype"
	"github.com/gofi-dev/fi/dtype/kernel"
)

// Target is the target side of one endpoint: its domain's key table and
// the endpoint's counters of remote writes and reads (nil: none). The
// executors of the target process (the tcp event loop, the shm executor)
// run requests through it. Safe for concurrent use.
type Target struct {
	Table       *Table
	RemoteWrite *Counter
	RemoteRead  *Counter
}

// Rights returns the access rights a request of kind k with operation op
// needs on its regions: writes and atomics that change memory need
// RemoteWrite, reads and fetching atomics RemoteRead.
func Rights(k Kind, op uint8) uint64 {
	switch k {
	case KindWrite, KindAtomic:
		return AccessRemoteWrite
	case KindRead:
		return AccessRemoteRead
	case KindFetch:
		if op == opAtomicRead {
			return AccessRemoteRead
		}
	}
	return AccessRemoteRead | AccessRemoteWrite
}

func atomicKind(k Kind) dtype.Kind {
	switch k {
	case KindFetch:
		return dtype.KindFetch
	case KindCompare:
		return dtype.KindCompare
	}
	return dtype.KindBase
}

// CheckAtomic validates an atomic's datatype, operation and ranges
// without looking at the table: EOpNotSupp for a datatype or operation
// not supported for the kind (LongDouble and unknown values included),
// EInval for a count that is zero, not whole elements or above MaxAtomic.
func CheckAtomic(k Kind, dt, op uint8, total uint64, lens func(i int) uint64, n int) Code {
	t, o := dtype.Type(dt), dtype.Op(op)
	if !kernel.Supported(t, o, atomicKind(k)) {
		return EOpNotSupp
	}
	sz := uint64(t.Size())
	if total == 0 || total > MaxAtomic {
		return EInval
	}
	for i := 0; i < n; i++ {
		if l := lens(i); l == 0 || l%sz != 0 {
			return EInval
		}
	}
	return OK
}

// Validate checks everything about r the target can check before
// touching memory: datatype and operation, counts, and for every range
// the key, the rights and the range (and for atomics the alignment). It
// returns OK or the status to answer with; it changes nothing.
func (x *Target) Validate(r *Request) Code {
	if r.Kind.IsAtomic() {
		if c := CheckAtomic(r.Kind, r.Datatype, r.Op, r.Total(), func(i int) uint64 { return r.IOV[i].Len }, r.NIOV); c != OK {
			return c
		}
	} else if r.Kind == KindRead && r.Total() > MaxRead {
		return EInval
	}
	want := Rights(r.Kind, r.Op)
	for i := 0; i < r.NIOV; i++ {
		v := &r.IOV[i]
		h, off, c := x.Table.Access(v.Key, v.Addr, v.Len, want)
		if c != OK {
			return c
		}
		if r.Kind.IsAtomic() && (h.Addr+off)%uint64(kernel.Align(dtype.Type(r.Datatype))) != 0 {
			c = EInval
		}
		h.Release()
		if c != OK {
			return c
		}
	}
	return OK
}

// Access takes a holder cell on key's region for an access of n bytes at
// addr needing rights want, and returns the hold and addr's offset in the
// region: EAccess for an unknown or closed key or a missing right, EInval
// for a range outside the region. On OK the caller accesses the region
// (the owner through Hold.Mem[off:off+n]) and then calls Release.
func (t *Table) Access(key, addr, n, want uint64) (Hold, uint64, Code) {
	var h Hold
	off, c := t.AccessTo(&h, key, addr, n, want)
	return h, off, c
}

// AccessTo is Access filling *h (which must hold nothing) in place, for
// callers keeping holds in an array: the hold is not copied on its way
// there (a Hold is 15 words). On failure *h holds nothing.
func (t *Table) AccessTo(h *Hold, key, addr, n, want uint64) (uint64, Code) {
	if c := t.AcquireTo(h, key); c != OK {
		return 0, c
	}
	if !h.Allows(want) {
		h.Release()
		*h = Hold{}
		return 0, EAccess
	}
	off, c := h.Range(addr, n)
	if c != OK {
		h.Release()
		*h = Hold{}
		return 0, c
	}
	return off, OK
}

// Peek checks an access of n bytes at addr needing rights want like
// Access, without taking a holder cell: a snapshot of the region's slot
// and addr's offset in it, or the code Access would give. Nothing keeps
// the region from closing after it returns: it decides which path an
// access takes, the executor checks again.
func (t *Table) Peek(key, addr, n, want uint64) (Slot, uint64, Code) {
	for try := 0; try < 4; try++ {
		i := t.find(key)
		if i < 0 {
			return Slot{}, 0, EAccess
		}
		st := t.state(i)
		s := st.Load()
		if s&stMask != stLive {
			continue
		}
		sl := t.snapshot(i, s)
		if sl.Key != key || st.Load() != s {
			continue
		}
		if !sl.Allows(want) {
			return Slot{}, 0, EAccess
		}
		off, c := sl.Range(addr, n)
		if c != OK {
			return Slot{}, 0, c
		}
		return sl, off, OK
	}
	return Slot{}, 0, EAccess
}

// Run validates and executes r, whose payload (write data, atomic
// operands) is data[:r.Payload] and whose answer (read data, atomic
// results) goes to data: EMsgSize when either does not fit in data. res
// is scratch for atomic results (MaxAtomic bytes). With count, a request
// that succeeds is counted as Done counts it. It returns the status and
// the answer's length. Every range is checked before a byte is touched; a
// request of one range holds its region once for the check, the copy and
// the count.
func (x *Target) Run(r *Request, data, res []byte, count bool) (Code, uint64) {
	total := r.Total()
	switch {
	case r.Payload > uint64(len(data)):
		return EMsgSize, 0
	case r.Kind == KindRead && total > uint64(len(data)):
		return EMsgSize, 0
	}
	if r.NIOV == 1 && !r.Kind.IsAtomic() {
		return x.runOne(r, data, count)
	}
	if c := x.Validate(r); c != OK {
		return c, 0
	}
	var ans uint64
	switch r.Kind {
	case KindWrite:
		if c := x.WriteAt(r, 0, data[:r.Payload]); c != OK {
			return c, 0
		}
	case KindRead:
		if c := x.ReadAt(r, 0, data[:total]); c != OK {
			return c, 0
		}
		ans = total
	default:
		var out []byte
		if r.Kind != KindAtomic {
			out = res[:total] // Validate bounded total by MaxAtomic
		}
		if c := x.Atomic(r, data[:r.Payload], out); c != OK {
			return c, 0
		}
		ans = uint64(copy(data, out))
	}
	if count {
		x.Done(r)
	}
	return OK, ans
}

// runOne runs a write or read of one range under one hold.
func (x *Target) runOne(r *Request, data []byte, count bool) (Code, uint64) {
	v := &r.IOV[0]
	if r.Kind == KindRead && v.Len > MaxRead {
		return EInval, 0
	}
	want := Rights(r.Kind, r.Op)
	h, off, c := x.Table.Access(v.Key, v.Addr, v.Len, want)
	if c != OK {
		return c, 0
	}
	var ans uint64
	if r.Kind == KindWrite {
		copy(h.Mem[off:off+v.Len], data[:v.Len])
	} else {
		copy(data[:v.Len], h.Mem[off:off+v.Len])
		ans = v.Len
	}
	if count && r.Flags&FlagCont == 0 {
		if r.Kind == KindWrite {
			x.Table.Count(h.CntrW)
		} else {
			x.Table.Count(h.CntrR)
		}
	}
	h.Release()
	if count && r.Flags&FlagMore == 0 {
		if r.Kind == KindWrite && x.RemoteWrite != nil {
			x.RemoteWrite.Add(1)
		}
		if r.Kind == KindRead && x.RemoteRead != nil {
			x.RemoteRead.Add(1)
		}
	}
	return OK, ans
}

// Locate maps position pos of the request's byte stream to a range index
// and the offset in it; ok is false past the end.
func (r *Request) Locate(pos uint64) (int, uint64, bool) {
	for i := 0; i < r.NIOV; i++ {
		if pos < r.IOV[i].Len {
			return i, pos, true
		}
		pos -= r.IOV[i].Len
	}
	return 0, 0, false
}

// WriteAt copies data to position pos of the request's target byte
// stream (the concatenation of its ranges), re-taking the region for each
// range it touches: a region closed since Validate gives EAccess for the
// bytes not yet written.
func (x *Target) WriteAt(r *Request, pos uint64, data []byte) Code {
	for len(data) > 0 {
		i, off, ok := r.Locate(pos)
		if !ok {
			return EInval
		}
		v := &r.IOV[i]
		n := min(uint64(len(data)), v.Len-off)
		h, roff, c := x.Table.Access(v.Key, v.Addr+off, n, AccessRemoteWrite)
		if c != OK {
			return c
		}
		copy(h.Mem[roff:roff+n], data[:n])
		h.Release()
		data = data[n:]
		pos += n
	}
	return OK
}

// ReadAt copies len(dst) bytes from position pos of the request's target
// byte stream into dst.
func (x *Target) ReadAt(r *Request, pos uint64, dst []byte) Code {
	for len(dst) > 0 {
		i, off, ok := r.Locate(pos)
		if !ok {
			return EInval
		}
		v := &r.IOV[i]
		n := min(uint64(len(dst)), v.Len-off)
		h, roff, c := x.Table.Access(v.Key, v.Addr+off, n, AccessRemoteRead)
		if c != OK {
			return c
		}
		copy(dst[:n], h.Mem[roff:roff+n])
		h.Release()
		dst = dst[n:]
		pos += n
	}
	return OK
}

// Atomic executes an atomic request against the owner's memory: payload
// holds the operands (then, for compare, the compare operands), res
// receives the old values (len r.Total() for fetch and compare, else
// nil). Every element is atomic with respect to every other executor (see
// the package doc); 16-byte elements take Lock16.
func (x *Target) Atomic(r *Request, payload, res []byte) Code {
	total := r.Total()
	var src, cmp []byte
	switch {
	case r.Kind == KindCompare:
		if uint64(len(payload)) != 2*total {
			return EInval
		}
		src, cmp = payload[:total], payload[total:]
	case r.Kind == KindFetch && r.Op == opAtomicRead:
	default:
		if uint64(len(payload)) != total {
			return EInval
		}
		src = payload
	}
	if r.Kind != KindAtomic && uint64(len(res)) < total {
		return EInval
	}
	dt, op := dtype.Type(r.Datatype), dtype.Op(r.Op)
	want := Rights(r.Kind, r.Op)
	var pos uint64
	for i := 0; i < r.NIOV; i++ {
		v := &r.IOV[i]
		h, off, c := x.Table.Access(v.Key, v.Addr, v.Len, want)
		if c != OK {
			return c
		}
		mem := h.Mem[off : off+v.Len]
		var s, cm, out []byte
		if src != nil {
			s = src[pos : pos+v.Len]
		}
		if cmp != nil {
			cm = cmp[pos : pos+v.Len]
		}
		if r.Kind != KindAtomic {
			out = res[pos : pos+v.Len]
		}
		ok := ExecAtomic(x.Table, dt, op, mem, s, cm, out)
		h.Release()
		if !ok {
			return EInval
		}
		pos += v.Len
	}
	return OK
}

// ExecAtomic runs kernel.Exec on memory of the owner of t, taking the
// owner's 16-byte lock where the datatype needs it.
func ExecAtomic(t *Table, dt dtype.Type, op dtype.Op, mem, src, cmp, res []byte) bool {
	if !kernel.Locked(dt) {
		return kernel.Exec(dt, op, mem, src, cmp, res)
	}
	sz := dt.Size()
	for i := 0; i+sz <= len(mem); i += sz {
		var s, c, o []byte
		if src != nil {
			s = src[i : i+sz]
		}
		if cmp != nil {
			c = cmp[i : i+sz]
		}
		if res != nil {
			o = res[i : i+sz]
		}
		mu := t.Lock16(uintptr(Addr(mem[i:])))
		mu.Lock()
		ok := kernel.Exec(dt, op, mem[i:i+sz], s, c, o)
		mu.Unlock()
		if !ok {
			return false
		}
	}
	return true
}

// Done counts a request that completed successfully: once per range in
// its region's counters (bound with MR.BindCntr), once in the endpoint's.
// Writes and atomics that may change memory count as remote writes;
// reads and fetching atomics as remote reads. A part of a split operation
// counts only what its flags leave to it (FlagMore, FlagCont), so the
// operation counts once in all.
func (x *Target) Done(r *Request) {
	w, rd := Counts(r.Kind, r.Op)
	for i := 0; i < r.NIOV; i++ {
		if i == 0 && r.Flags&FlagCont != 0 {
			continue
		}
		h, c := x.Table.Acquire(r.IOV[i].Key)
		if c != OK {
			continue
		}
		if w {
			x.Table.Count(h.CntrW)
		}
		if rd {
			x.Table.Count(h.CntrR)
		}
		h.Release()
	}
	x.doneRemote(r, w, rd)
}

// DoneHolds is Done for a request whose ranges the caller holds (holds[i]
// the region of range i, every range): it counts through the holds
// instead of taking each region again (an Acquire, ~270 instructions).
func (x *Target) DoneHolds(r *Request, holds []Hold) {
	w, rd := Counts(r.Kind, r.Op)
	for i := range holds {
		if i == 0 && r.Flags&FlagCont != 0 {
			continue
		}
		if w {
			x.Table.Count(holds[i].CntrW)
		}
		if rd {
			x.Table.Count(holds[i].CntrR)
		}
	}
	x.doneRemote(r, w, rd)
}

// doneRemote counts a done request in the endpoint's remote counters.
func (x *Target) doneRemote(r *Request, w, rd bool) {
	if r.Flags&FlagMore != 0 {
		return
	}
	if w && x.RemoteWrite != nil {
		x.RemoteWrite.Add(1)
	}
	if rd && x.RemoteRead != nil {
		x.RemoteRead.Add(1)
	}
}

// Counts says which remote counters a completed request of kind k counts
// in: writes and atomics other than an atomic read count as writes,
// reads and fetching atomics as reads.
func Counts(k Kind, op uint8) (write, read bool) {
	switch k {
	case KindWrite, KindAtomic:
		return true, false
	case KindRead:
		return false, true
	case KindFetch:
		return op != opAtomicRead, true
	}
	return true, true
}

// Count adds one to counter i of the table, if there is one (i < 0:
// none). It allocates nothing, in a view too.
func (t *Table) Count(i int) {
	if i >= 0 { // most operations count nothing: inlined, no call
		t.count(i)
	}
}

func (t *Table) count(i int) {
	if i >= t.l.Counters {
		return
	}
	if t.owner {
		t.cntrs[i].Add(1)
		return
	}
	c := Counter{}
	off := t.l.CntrOff + i*CounterSize
	c.val, c.errs, c.seq, c.waiters = word64(t.mem, off), word64(t.mem, off+8), word32(t.mem, off+16), word32(t.mem, off+20)
	c.Add(1)
}
