package fi

import (
	"time"

	"github.com/gofi-dev/fi/engine"
)

// CQFormat selects what a completion entry carries (fi_cq(3)
// FI_CQ_FORMAT_*). Go's CQEntry always has every field; the format says
// which of them the CQ fills: Context only, plus Flags and Len (Msg), plus
// Buf and Data (Data), plus Tag (Tagged).
type CQFormat int

// CQ formats, numbered as libfabric's enum fi_cq_format.
const (
	CQFormatUnspec  CQFormat = 0
	CQFormatContext CQFormat = 1
	CQFormatMsg     CQFormat = 2
	CQFormatData    CQFormat = 3
	CQFormatTagged  CQFormat = 4
)

// WaitObj is the wait object a CQ blocks on in Sread (enum fi_wait_obj).
// gofi sleeps on the provider's doorbell (a futex for shm, the event
// loop's hand-off for tcp) for every wait object but two: WaitYield never
// sleeps (Sread yields the CPU between polls, as FI_WAIT_YIELD says), and
// WaitNone opens a CQ that may not be waited on.
type WaitObj int

// Wait objects, numbered as libfabric's enum fi_wait_obj.
const (
	WaitNone      WaitObj = 0
	WaitUnspec    WaitObj = 1
	WaitSet       WaitObj = 2
	WaitFD        WaitObj = 3
	WaitMutexCond WaitObj = 4
	WaitYield     WaitObj = 5
	WaitPollFD    WaitObj = 6
)

// CQAttr describes a completion queue to open (struct fi_cq_attr).
type CQAttr struct {
	Size    int      // minimum number of entries; 0 picks the default (1024)
	Flags   Flags    // must be 0 (FI_AFFINITY is not supported)
	Format  CQFormat // CQFormatUnspec picks CQFormatTagged
	WaitObj WaitObj  // WaitUnspec (0 is WaitNone: Sread then fails)
}

// CQEntry is one completion. Which fields are filled depends on the CQ's
// format (see CQFormat). Buf points into the application's receive buffer
// at the received data (receives only; nil for vectored receives). Src is
// the sender's fi_addr (or its AV user id) when the endpoint has the
// Source capability, AddrNotAvail when the sender is not in the AV or
// Source is off.
type CQEntry struct {
	Context any
	Flags   Flags
	Len     int
	Buf     []byte
	Data    uint64
	Tag     uint64
	Src     Addr
}

// CQErrEntry is an error completion: Err is an Errno (ErrTrunc with the
// overflow length in OLen, ErrCanceled, ErrNoMsg for a peek that found
// nothing, ErrConnReset for a dead peer ...). Len is the number of bytes
// delivered before the error.
type CQErrEntry struct {
	CQEntry
	Err       error
	OLen      int
	ProvErrno int
}

// CQ is a completion queue (fi_cq(3)). Reading it drives the progress of
// every endpoint bound to it: no goroutine works behind the application's
// back on the shm data path.
//
// Concurrency: safe for concurrent use when the domain was opened with
// ThreadSafe; otherwise calls on a domain's CQs and endpoints must not
// overlap (FI_THREAD_DOMAIN). Signal is always safe.
type CQ struct {
	dom    *Domain
	eng    *engine.CQ
	format CQFormat
	wait   bool
	closed bool
}

// OpenCQ opens a completion queue on the domain. A nil attr takes the
// defaults. Unknown formats, wait objects or flags give ErrInval (wait
// sets and FDs are not supported: ErrNoSys).
func (d *Domain) OpenCQ(attr *CQAttr) (*CQ, error) {
	const op = "Domain.OpenCQ"
	a := CQAttr{WaitObj: WaitUnspec}
	if attr != nil {
		a = *attr
	}
	switch {
	case a.Size < 0:
		return nil, opErr(op, ErrInval, "negative size %d", a.Size)
	case a.Size > 1<<24:
		return nil, opErr(op, ErrInval, "size %d above the limit %d", a.Size, 1<<24)
	case a.Flags != 0:
		return nil, opErr(op, ErrBadFlags, "flags %s not supported", a.Flags)
	case a.Format < CQFormatUnspec || a.Format > CQFormatTagged:
		return nil, opErr(op, ErrInval, "unknown CQ format %d", int(a.Format))
	}
	switch a.WaitObj {
	case WaitNone, WaitUnspec, WaitYield, WaitMutexCond:
	case WaitSet, WaitFD, WaitPollFD:
		return nil, opErr(op, ErrNoSys, "wait object %d not supported", int(a.WaitObj))
	default:
		return nil, opErr(op, ErrInval, "unknown wait object %d", int(a.WaitObj))
	}
	if a.Format == CQFormatUnspec {
		a.Format = CQFormatTagged
	}
	if err := d.addChild(childCQ); err != nil {
		return nil, err
	}
	eng := engine.NewCQ(a.Size, d.serial())
	eng.SetYield(a.WaitObj == WaitYield)
	return &CQ{dom: d, eng: eng, format: a.Format, wait: a.WaitObj != WaitNone}, nil
}

// Read reads up to len(entries) completions without blocking. It returns
// ErrAgain when none is available and ErrAvail when the next completion is
// an error (read it with ReadErr). Reading drives progress; a read that
// finds completions queued right after a read that drove it returns them
// without another pass (never two such reads in a row).
func (cq *CQ) Read(entries []CQEntry) (int, error) {
	if cq.closed {
		return 0, errClosedCQ
	}
	return cq.read(entries, 0, false)
}

// Sread is Read that blocks until a completion (or error completion)
// arrives, timeout passes (ErrAgain) or Signal is called (ErrAgain). A
// negative timeout waits forever. It spins briefly, then sleeps on the
// provider's doorbell, always in bounded slices so a dead peer cannot
// hold it past its timeout. On a CQ opened with WaitYield it never sleeps:
// it gives the CPU back to the OS scheduler (sched_yield) after every pass
// that found nothing, which is what pays when a host runs more ranks than
// it has CPUs (Open MPI's yield_when_idle).
func (cq *CQ) Sread(entries []CQEntry, timeout time.Duration) (int, error) {
	if cq.closed {
		return 0, errClosedCQ
	}
	if !cq.wait {
		return 0, opErr("CQ.Sread", ErrNoSys, "CQ opened with WaitNone")
	}
	return cq.read(entries, timeout, true)
}

func (cq *CQ) read(entries []CQEntry, timeout time.Duration, block bool) (int, error) {
	if !block {
		// Read: the engine's entries converted in this loop, inlined.
		eng := cq.eng
		eng.BeginRead()
		n := 0
		for n < len(entries) {
			e := eng.Next()
			if e == nil {
				break
			}
			if cq.format == CQFormatTagged { // the default: every field
				// Field by field: a struct literal goes through a stack
				// temporary and a copy.
				d := &entries[n]
				d.Context, d.Flags, d.Len, d.Buf = e.Context, Flags(e.Flags), e.Len, e.Buf
				d.Data, d.Tag, d.Src = e.Data, e.Tag, Addr(e.Src)
			} else {
				cq.convert(&entries[n], e)
			}
			eng.Pop()
			n++
		}
		n, c := eng.EndRead(n)
		if c != 0 {
			return n, codeErr(c)
		}
		return n, nil
	}
	i := 0
	put := func(e *engine.Entry) { cq.convert(&entries[i], e); i++ }
	var n int
	var c engine.Code
	if block {
		n, c = cq.eng.SreadTo(len(entries), put, timeout)
	} else {
		n, c = cq.eng.ReadTo(len(entries), put)
	}
	if c != 0 {
		return n, codeErr(c)
	}
	return n, nil
}

func (cq *CQ) convert(dst *CQEntry, e *engine.Entry) {
	if cq.format == CQFormatTagged { // the default: every field, one write each
		*dst = CQEntry{Context: e.Context, Flags: Flags(e.Flags), Len: e.Len, Buf: e.Buf, Data: e.Data, Tag: e.Tag, Src: Addr(e.Src)}
		return
	}
	*dst = CQEntry{Context: e.Context, Src: Addr(e.Src)}
	if cq.format >= CQFormatMsg {
		dst.Flags, dst.Len = Flags(e.Flags), e.Len
	}
	if cq.format >= CQFormatData {
		dst.Buf, dst.Data = e.Buf, e.Data
	}
	if cq.format >= CQFormatTagged {
		dst.Tag = e.Tag
	}
}

// ReadErr reads the error completion at the head of the queue. It returns
// ErrAgain when the next completion is not an error.
func (cq *CQ) ReadErr() (CQErrEntry, error) {
	if cq.closed {
		return CQErrEntry{}, errClosedCQ
	}
	e, c := cq.eng.ReadErr()
	if c != 0 {
		return CQErrEntry{}, codeErr(c)
	}
	out := CQErrEntry{OLen: e.OLen, ProvErrno: e.ProvErrno, Err: codeErr(e.Err)}
	out.CQEntry = CQEntry{Context: e.Context, Flags: Flags(e.Flags), Len: e.Len, Buf: e.Buf, Data: e.Data, Tag: e.Tag, Src: Addr(e.Src)}
	return out, nil
}

// Signal wakes a goroutine blocked in Sread, which returns ErrAgain
// (fi_cq_signal). Safe for concurrent use.
func (cq *CQ) Signal() { cq.eng.Signal() }

// Close closes the CQ. It fails with ErrBusy while endpoints are bound.
func (cq *CQ) Close() error {
	if cq.closed {
		return opErr("CQ.Close", ErrOpBadState, "already closed")
	}
	if n := cq.eng.Bound(); n > 0 {
		return opErr("CQ.Close", ErrBusy, "%d endpoint(s) still bound", n)
	}
	cq.closed = true
	cq.dom.dropChild(childCQ)
	return nil
}

var errClosedCQ = opErr("CQ", ErrOpBadState, "CQ is closed")

// codeErr turns an engine code into the public error, without allocating
// for the codes the hot path returns.
func codeErr(c engine.Code) error {
	switch c {
	case 0:
		return nil
	case engine.CodeAgain:
		return ErrAgain
	case engine.CodeAvail:
		return errAvail
	case engine.CodeTrunc:
		return errTrunc
	}
	return Errno(c)
}

// Preallocated errors for codes above 255 (an Errno that large would
// allocate when boxed into an error).
var (
	errAvail error = ErrAvail
	errTrunc error = ErrTrunc
)
