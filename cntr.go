package fi

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofi-dev/fi/engine"
	"github.com/gofi-dev/fi/rma"
)

// CntrEvents says what a counter counts (enum fi_cntr_events).
type CntrEvents int

// CntrEventsComp counts completed operations (FI_CNTR_EVENTS_COMP), the
// only kind.
const CntrEventsComp CntrEvents = 0

// CntrAttr describes a counter for OpenCntr (struct fi_cntr_attr).
type CntrAttr struct {
	Events  CntrEvents // CntrEventsComp
	WaitObj WaitObj    // WaitUnspec to use Wait (WaitNone: Wait fails)
	Flags   Flags      // must be 0
}

// Cntr is a completion counter (fi_cntr(3)): a success count and an error
// count of the operations bound to it, through Endpoint.BindCntr (Send,
// Recv, Read, Write: this endpoint's operations; RemoteRead, RemoteWrite:
// peers' RMA and atomics targeting this endpoint) and MR.BindCntr (peers'
// accesses to one region). Counters update whether or not a CQ entry is
// written (selective completion and inject suppress entries, not counts).
//
// Remote accesses are counted by whoever executes them, with no work by
// this process; local completions are counted as this process drives
// progress (Read and Wait do, as do the endpoint's CQs).
//
// The counter lives in the domain's key table (shared memory for shm), so
// peers can count into it. Safe for concurrent use.
type Cntr struct {
	dom  *Domain
	c    *rma.Counter
	wait bool

	mu     sync.Mutex
	eps    atomic.Pointer[[]*engine.Endpoint] // bound endpoints, for progress
	binds  int                                // endpoints and regions bound
	closed bool
}

// OpenCntr opens a counter (fi_cntr_open). A nil attr is CntrEventsComp
// with WaitUnspec. Unknown events, wait objects or flags give ErrInval or
// ErrBadFlags; WaitSet and WaitFD give ErrNoSys.
func (d *Domain) OpenCntr(attr *CntrAttr) (*Cntr, error) {
	const op = "Domain.OpenCntr"
	a := CntrAttr{WaitObj: WaitUnspec}
	if attr != nil {
		a = *attr
	}
	switch {
	case a.Events != CntrEventsComp:
		return nil, opErr(op, ErrInval, "events %d not supported (only CntrEventsComp)", int(a.Events))
	case a.Flags != 0:
		return nil, opErr(op, ErrBadFlags, "flags %s not supported", a.Flags)
	}
	switch a.WaitObj {
	case WaitNone, WaitUnspec, WaitYield, WaitMutexCond:
	case WaitSet, WaitFD, WaitPollFD:
		return nil, opErr(op, ErrNoSys, "wait object %d not supported", int(a.WaitObj))
	default:
		return nil, opErr(op, ErrInval, "unknown wait object %d", int(a.WaitObj))
	}
	if err := d.addChild(childCntr); err != nil {
		return nil, err
	}
	t, err := d.table(op)
	if err != nil {
		d.dropChild(childCntr)
		return nil, err
	}
	rc, err := t.AllocCounter()
	if err != nil {
		d.dropChild(childCntr)
		return nil, opErr(op, ErrNoMem, "domain %q has %d counters open (CntrCnt)", d.info.DomainAttr.Name, cntrSlots)
	}
	return &Cntr{dom: d, c: rc, wait: a.WaitObj != WaitNone}, nil
}

// counter returns the shared counter (nil for a nil Cntr).
func (c *Cntr) counter() *rma.Counter {
	if c == nil {
		return nil
	}
	return c.c
}

func (c *Cntr) bind() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return opErr("Cntr", ErrOpBadState, "counter closed")
	}
	c.binds++
	return nil
}

func (c *Cntr) unbind() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.binds--
	c.mu.Unlock()
}

// addEp makes Read and Wait drive the endpoint's progress.
func (c *Cntr) addEp(e *engine.Endpoint) {
	c.mu.Lock()
	var eps []*engine.Endpoint
	if p := c.eps.Load(); p != nil {
		eps = append(eps, *p...)
	}
	for _, x := range eps {
		if x == e {
			c.mu.Unlock()
			return
		}
	}
	eps = append(eps, e)
	c.eps.Store(&eps)
	c.mu.Unlock()
}

func (c *Cntr) removeEp(e *engine.Endpoint) {
	c.mu.Lock()
	if p := c.eps.Load(); p != nil {
		var eps []*engine.Endpoint
		for _, x := range *p {
			if x != e {
				eps = append(eps, x)
			}
		}
		c.eps.Store(&eps)
	}
	c.mu.Unlock()
}

// progress drives the bound endpoints once and reports how many there are.
func (c *Cntr) progress() []*engine.Endpoint {
	p := c.eps.Load()
	if p == nil || len(*p) == 0 {
		return nil
	}
	ser := c.dom.serial()
	ser.Lock()
	for _, e := range *p {
		e.Progress()
	}
	ser.Unlock()
	return *p
}

// wakeEps makes a Wait asleep on an endpoint's transport return.
func (c *Cntr) wakeEps() {
	if p := c.eps.Load(); p != nil {
		for _, e := range *p {
			e.Waiter().Wake()
		}
	}
}

// Read drives progress on the bound endpoints and returns the success
// count (fi_cntr_read).
func (c *Cntr) Read() uint64 {
	c.progress()
	return c.c.Read()
}

// ReadErr returns the error count (fi_cntr_readerr).
func (c *Cntr) ReadErr() uint64 {
	c.progress()
	return c.c.ReadErr()
}

// Add adds v to the success count (fi_cntr_add).
func (c *Cntr) Add(v uint64) error {
	if err := c.usable("Cntr.Add"); err != nil {
		return err
	}
	c.c.Add(v)
	c.wakeEps()
	return nil
}

// AddErr adds v to the error count (fi_cntr_adderr).
func (c *Cntr) AddErr(v uint64) error {
	if err := c.usable("Cntr.AddErr"); err != nil {
		return err
	}
	c.c.AddErr(v)
	c.wakeEps()
	return nil
}

// Set sets the success count (fi_cntr_set).
func (c *Cntr) Set(v uint64) error {
	if err := c.usable("Cntr.Set"); err != nil {
		return err
	}
	c.c.Set(v)
	c.wakeEps()
	return nil
}

// SetErr sets the error count (fi_cntr_seterr).
func (c *Cntr) SetErr(v uint64) error {
	if err := c.usable("Cntr.SetErr"); err != nil {
		return err
	}
	c.c.SetErr(v)
	c.wakeEps()
	return nil
}

func (c *Cntr) usable(op string) error {
	if c == nil || c.c == nil {
		return opErr(op, ErrInval, "not a counter from OpenCntr")
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return opErr(op, ErrOpBadState, "counter closed")
	}
	return nil
}

// Wait-loop tuning: a short spin driving progress (a completion from a
// peer on the other core arrives within a microsecond or two), then
// sleeping: on the counter's futex when no endpoint needs progress (peers
// and Add wake it), else on the bound endpoint's transport, at most
// cntrMaxSleep at a time so counts made by peers are seen too.
const (
	cntrSpins    = 256
	cntrMaxSleep = time.Millisecond
)

// Wait blocks until the success count reaches threshold (nil), the error
// count changes (ErrAvail), or timeout passes (ErrTimedOut; negative
// waits without limit) (fi_cntr_wait). It drives progress on bound
// endpoints while it waits, spins only briefly, then sleeps on a futex or
// the endpoint's doorbell. A counter opened with WaitNone gives ErrNoSys.
func (c *Cntr) Wait(threshold uint64, timeout time.Duration) error {
	const op = "Cntr.Wait"
	if err := c.usable(op); err != nil {
		return err
	}
	if !c.wait {
		return opErr(op, ErrNoSys, "counter opened with WaitNone")
	}
	var deadline time.Time
	if timeout >= 0 {
		deadline = time.Now().Add(timeout)
	}
	errs0 := c.c.ReadErr()
	for i := 0; ; i++ {
		seq := c.c.Seq()
		eps := c.progress()
		if c.c.Read() >= threshold {
			return nil
		}
		if c.c.ReadErr() != errs0 {
			return opErr(op, ErrAvail, "an operation completed in error (error count %d)", c.c.ReadErr())
		}
		left := time.Duration(-1)
		if timeout >= 0 {
			left = time.Until(deadline)
			if left <= 0 {
				return opErr(op, ErrTimedOut, "count %d below %d after %v", c.c.Read(), threshold, timeout)
			}
		}
		switch {
		case len(eps) == 0:
			c.c.Sleep(seq, left)
		case i < cntrSpins:
			if i&15 == 15 {
				runtime.Gosched()
			}
		default:
			d := cntrMaxSleep
			if left >= 0 {
				d = min(d, left)
			}
			if len(eps) == 1 {
				eps[0].Waiter().Wait(d)
			} else {
				c.c.Sleep(seq, min(d, 50*time.Microsecond))
			}
		}
	}
}

// Close releases the counter (fi_close). It fails with ErrBusy while
// endpoints or regions are bound to it.
func (c *Cntr) Close() error {
	const op = "Cntr.Close"
	if c == nil || c.c == nil {
		return opErr(op, ErrInval, "not a counter from OpenCntr")
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return opErr(op, ErrOpBadState, "already closed")
	}
	if c.binds > 0 {
		n := c.binds
		c.mu.Unlock()
		return opErr(op, ErrBusy, "%d endpoint or region binding(s) still use the counter", n)
	}
	c.closed = true
	c.mu.Unlock()
	if t, err := c.dom.table(op); err == nil {
		t.FreeCounter(c.c)
	}
	c.dom.dropChild(childCntr)
	return nil
}
