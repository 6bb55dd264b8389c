package rma

import (
	"sync/atomic"
	"time"
)

// CounterSize is the bytes one counter occupies in a table: a cache line.
//
//	+0  value   u64
//	+8  errors  u64
//	+16 seq     u32  bumped by every change; waiters sleep on it (futex)
//	+20 waiters u32  goroutines asleep or about to sleep on seq
const CounterSize = 64

// Counter is a completion counter (fi_cntr(3)) living in a table's memory,
// so that peers which execute one-sided operations (a shm initiator
// copying into registered memory, the target's event loop) can count
// remote writes and reads without the target's application. Every method
// is safe for concurrent use by any number of goroutines and processes.
// A Counter refers to the table's memory and is valid while it is open.
type Counter struct {
	val, errs    *atomic.Uint64
	seq, waiters *atomic.Uint32
	idx          int
}

func counterAt(mem []byte, off, idx int) *Counter {
	return &Counter{val: word64(mem, off), errs: word64(mem, off+8), seq: word32(mem, off+16), waiters: word32(mem, off+20), idx: idx}
}

// Index is the counter's index in its table, what a region slot or an
// endpoint portal publishes for peers.
func (c *Counter) Index() int { return c.idx }

// Read returns the success count.
func (c *Counter) Read() uint64 { return c.val.Load() }

// ReadErr returns the error count.
func (c *Counter) ReadErr() uint64 { return c.errs.Load() }

// Add adds n to the success count and wakes waiters.
func (c *Counter) Add(n uint64) {
	c.val.Add(n)
	c.changed()
}

// AddErr adds n to the error count and wakes waiters.
func (c *Counter) AddErr(n uint64) {
	c.errs.Add(n)
	c.changed()
}

// Set sets the success count.
func (c *Counter) Set(v uint64) {
	c.val.Swap(v)
	c.changed()
}

// SetErr sets the error count.
func (c *Counter) SetErr(v uint64) {
	c.errs.Swap(v)
	c.changed()
}

// changed publishes a change: the sequence bump is a read-modify-write, so
// the waiter count is read after the value is visible (see Sleep).
func (c *Counter) changed() {
	c.seq.Add(1)
	if c.waiters.Load() != 0 {
		futexWake(c.seq)
	}
}

// Seq returns the change sequence; pass it to Sleep after checking the
// values, so that a change in between is not slept through.
func (c *Counter) Seq() uint32 { return c.seq.Load() }

// Sleep blocks until the counter changes after seq was read, Wake is
// called, or timeout passes (negative: no limit). Spurious returns are
// allowed; it never spins.
//
// Protocol: the sleeper counts itself in, then rereads seq; a changer bumps
// seq (a read-modify-write) before it reads the waiter count. Either the
// changer sees the sleeper and wakes it, or the sleeper sees the new seq.
func (c *Counter) Sleep(seq uint32, timeout time.Duration) {
	c.waiters.Add(1)
	if c.seq.Load() == seq {
		futexWait(c.seq, seq, timeout)
	}
	c.waiters.Add(^uint32(0))
}

// Wake makes current sleepers return (for a waiter that also waits on
// something else, such as an endpoint's progress).
func (c *Counter) Wake() { c.changed() }

// reset zeroes a counter for a new owner (the table owner only).
func (c *Counter) reset() {
	c.val.Store(0)
	c.errs.Store(0)
}
