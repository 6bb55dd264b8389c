package shm

import (
	"fmt"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/gofi-dev/fi/rma"
)

// RMA channels: the shared-memory path of one-sided operations that the
// initiator cannot do itself (the kernel refuses single copy between the
// two processes, and every atomic on memory it cannot map). The initiator
// creates one channel segment per target endpoint, names it in a free
// entry of the target's service segment (rmasvc.go) and posts requests in
// its slots; the target's executor goroutine adopts the channel, executes
// the requests in posting order against the target's key table (package
// rma's checks and executors) and answers in the same slot. The target's
// application takes no part.
//
// Channel layout, version 1, host byte order:
//
//	0   magic u32 (stored last)   4   version u32
//	8   initiator pid u32         12  slots u32 (ChanSlots)
//	16  data bytes per slot u32   20  zero u32
//	24  initiator region name length u32, 28 zero
//	32  initiator region name [64]byte: the executor nudges that region
//	    after answering
//	96  zero up to 128
//	128 slots x chanSlotSize, each:
//	      +0  state u32: 0 free (the initiator's), 1 posted (the
//	          executor's), 2 answered (the initiator's again)
//	      +4  status u32: the answer, 0 or a libfabric errno
//	      +8  seq u64: posting order, from 1; the executor runs slot seq
//	          n+1 after n
//	      +16 answer payload u64: bytes of read data or atomic results
//	      +24 flags u32: chanCount = this request completes an operation;
//	          count it as the request at +320 describes (all its ranges)
//	      +28 zero
//	      +64  request header (package rma's wire form), 256 B
//	      +320 counting header (package rma's wire form), 256 B
//	      +576 data: write data, atomic operands, read data, results
const (
	chanMagic   uint32 = 0x48434647 // "GFCH"
	chanVersion uint32 = 1
	// ChanSlots is how many requests one channel has in flight.
	ChanSlots = 8
	// ChanData is the most bytes one channel request carries; larger
	// writes and reads are split.
	ChanData = 32 << 10

	chanHdr      = 128
	slotState    = 0
	slotStatus   = 4
	slotSeq      = 8
	slotPayload  = 16
	slotFlags    = 24
	slotReq      = 64
	slotCount    = 320
	slotData     = 576
	chanSlotSize = slotData + ChanData

	chanCount uint32 = 1

	chFree     = 0
	chPosted   = 1
	chAnswered = 2
)

func chanSize() int { return chanHdr + ChanSlots*chanSlotSize }

// createChan creates a channel segment for this process, naming region
// (this endpoint's) for answers.
func createChan(region string) (*Segment, error) {
	pid := os.Getpid()
	return createSegment(NewName(), chanSize(), func(b []byte) {
		ne.PutUint32(b[4:], chanVersion)
		ne.PutUint32(b[8:], uint32(pid))
		ne.PutUint32(b[12:], ChanSlots)
		ne.PutUint32(b[16:], ChanData)
		ne.PutUint32(b[24:], uint32(len(region)))
		copy(b[32:32+MaxNameLen], region)
		word32(b, 0).Store(chanMagic)
	})
}

// parseChan validates a peer's channel header and returns the region it
// names and its owner's pid.
func parseChan(b []byte) (region string, pid int, err error) {
	if len(b) < chanSize() {
		return "", 0, fmt.Errorf("%w: channel of %d bytes", ErrCorrupt, len(b))
	}
	if m := word32(b, 0).Load(); m != chanMagic {
		return "", 0, fmt.Errorf("%w: channel magic %#x", ErrCorrupt, m)
	}
	var h [chanHdr]byte
	copy(h[:], b)
	n := ne.Uint32(h[24:])
	p := ne.Uint32(h[8:])
	if ne.Uint32(h[4:]) != chanVersion || ne.Uint32(h[12:]) != ChanSlots || ne.Uint32(h[16:]) != ChanData ||
		ne.Uint32(h[20:]) != 0 || ne.Uint32(h[28:]) != 0 || n == 0 || n > MaxNameLen || p == 0 || p > 1<<31-1 {
		return "", 0, fmt.Errorf("%w: channel header", ErrCorrupt)
	}
	for _, c := range h[32+n:] {
		if c != 0 {
			return "", 0, fmt.Errorf("%w: channel reserved bytes", ErrCorrupt)
		}
	}
	region = string(h[32 : 32+n])
	if err := ValidName(region); err != nil {
		return "", 0, err
	}
	return region, int(p), nil
}

func slotOff(i int) int { return chanHdr + i*chanSlotSize }

func slotWord(b []byte, i, f int) *atomic.Uint32 { return word32(b, slotOff(i)+f) }

// ---------------------------------------------------------------------------
// executor (the target side)

// executor serves the channels of one endpoint's service on a goroutine of
// its own.
type executor struct {
	svc   *svc
	x     *rma.Target
	chans [SvcEntries]*execChan
	n     int // adopted channels
	stop  atomic.Bool
	done  chan struct{}
	res   [rma.MaxAtomic]byte
	hdr   [256]byte
	req   rma.Request
	cnt   rma.Request
	last  time.Time
	cond  func() bool // e.work, made once
}

type execChan struct {
	seg  *Segment
	mem  []byte
	next uint64 // seq of the next request to run
	peer *Region
	pid  int
}

// execIdle is how the executor waits for work: poll a few times, yield to
// the process's goroutines, then sleep on the service doorbell (bounded,
// for housekeeping).
var execIdle = Idle{Spins: 64, Yields: 8}

const execHousekeep = 500 * time.Millisecond

func startExecutor(s *svc, x *rma.Target) *executor {
	e := &executor{svc: s, x: x, done: make(chan struct{}), last: time.Now()}
	e.cond = e.work
	go e.run()
	return e
}

func (e *executor) close() {
	e.stop.Store(true)
	e.svc.bell.seq.Add(1)
	_ = e.svc.bell.Ring()
	<-e.done
	for i, c := range e.chans {
		if c != nil {
			e.drop(i)
		}
	}
}

func (e *executor) run() {
	defer close(e.done)
	for !e.stop.Load() {
		if e.pass() {
			continue
		}
		_, _ = execIdle.Wait(e.svc.bell, execHousekeep, e.cond)
		if time.Since(e.last) >= execHousekeep {
			e.housekeep()
		}
	}
}

// work is the doorbell condition: stop, an entry to adopt or drop, or the
// next request of an adopted channel.
func (e *executor) work() bool {
	if e.stop.Load() {
		return true
	}
	for i := 0; i < SvcEntries; i++ {
		v := e.svc.ent(i).Load()
		switch v & 0xff {
		case entReady, entGiveUp:
			return true
		}
		if c := e.chans[i]; c != nil && e.posted(c) >= 0 {
			return true
		}
	}
	return false
}

// posted returns the slot holding c's next request, or -1.
func (e *executor) posted(c *execChan) int {
	for s := 0; s < ChanSlots; s++ {
		if slotWord(c.mem, s, slotState).Load() == chPosted && word64(c.mem, slotOff(s)+slotSeq).Load() == c.next {
			return s
		}
	}
	return -1
}

// pass adopts and drops channels and runs every request that is next in
// its channel; it reports whether it did anything.
func (e *executor) pass() bool {
	did := false
	for i := 0; i < SvcEntries; i++ {
		w := e.svc.ent(i)
		v := w.Load()
		switch v & 0xff {
		case entReady:
			e.adopt(i, v)
			did = true
		case entGiveUp:
			if e.chans[i] != nil {
				e.drop(i)
			}
			w.CompareAndSwap(v, entFree)
			did = true
		}
		c := e.chans[i]
		if c == nil {
			continue
		}
		for k := 0; k < 4*ChanSlots; k++ {
			s := e.posted(c)
			if s < 0 {
				break
			}
			if err := e.serve(c, s); err != nil {
				// The initiator shrank its channel: drop it.
				e.drop(i)
				w.CompareAndSwap(v, entFree)
				break
			}
			did = true
		}
	}
	return did
}

func (e *executor) adopt(i int, v uint64) {
	w := e.svc.ent(i)
	name, err := e.svc.entName(i)
	var seg *Segment
	var peer *Region
	if err == nil {
		seg, err = OpenSegment(name)
	}
	var pid int
	var region string
	if err == nil {
		region, pid, err = parseChan(seg.Bytes())
		if err == nil && uint64(pid) != v>>32 {
			err = fmt.Errorf("%w: channel of pid %d in an entry of pid %d", ErrCorrupt, pid, v>>32)
		}
	}
	if err == nil {
		peer, err = OpenRegion(region)
	}
	if err != nil {
		if seg != nil {
			_ = seg.Close()
		}
		w.CompareAndSwap(v, entFree) // the initiator sees its entry gone
		return
	}
	if !w.CompareAndSwap(v, v&^0xff|entAdopt) {
		_ = seg.Close()
		_ = peer.Close()
		return
	}
	e.chans[i] = &execChan{seg: seg, mem: seg.Bytes(), next: 1, peer: peer, pid: pid}
	e.n++
}

func (e *executor) drop(i int) {
	c := e.chans[i]
	e.chans[i] = nil
	e.n--
	_ = c.seg.Close()
	_ = c.peer.Close()
}

// housekeep frees the entries and channels of initiators that died.
func (e *executor) housekeep() {
	e.last = time.Now()
	e.svc.freeDeadFast()
	for i := 0; i < SvcEntries; i++ {
		w := e.svc.ent(i)
		v := w.Load()
		if v == entFree {
			continue
		}
		if c := e.chans[i]; c != nil {
			if alive, err := c.seg.Alive(); err == nil && !alive {
				e.drop(i)
				w.CompareAndSwap(v, entFree)
			}
			continue
		}
		if v&0xff == entClaim && !ProcessAlive(int(v>>32)) {
			w.CompareAndSwap(v, entFree)
		}
	}
}

// serve runs the request in slot s of c and answers it. The slot is the
// initiator's memory: the header is copied out before it is decoded, and
// a fault (the initiator shrank the file) is an error.
func (e *executor) serve(c *execChan, s int) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = faultError(r)
		}
	}()
	o := slotOff(s)
	slot := c.mem[o : o+chanSlotSize]
	data := slot[slotData:]
	code, payload := e.execute(slot, data)
	ne.PutUint32(slot[slotStatus:], uint32(code))
	ne.PutUint64(slot[slotPayload:], payload)
	c.next++
	slotWord(c.mem, s, slotState).Swap(chAnswered)
	_ = c.peer.Nudge()
	return nil
}

func (e *executor) execute(slot, data []byte) (rma.Code, uint64) {
	copy(e.hdr[:], slot[slotReq:slotReq+256])
	r := &e.req
	if _, err := rma.DecodeRequest(e.hdr[:], r); err != nil {
		return rma.EInval, 0
	}
	count := ne.Uint32(slot[slotFlags:])&chanCount != 0
	if count {
		copy(e.hdr[:], slot[slotCount:slotCount+256])
		if _, err := rma.DecodeRequest(e.hdr[:], &e.cnt); err != nil {
			return rma.EInval, 0
		}
	}
	c, ans := e.x.Run(r, data[:min(len(data), ChanData)], e.res[:], false)
	if c != rma.OK {
		return c, 0
	}
	if count {
		e.x.Done(&e.cnt)
	}
	return rma.OK, ans
}
