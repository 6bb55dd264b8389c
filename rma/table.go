package rma

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Code is a libfabric errno value (positive), as the engine and the
// transports use them; 0 is success.
type Code int32

// Codes the checks report, numbered as in rdma/fi_errno.h.
const (
	OK         Code = 0
	EIO        Code = 5
	EAccess    Code = 13  // unknown or closed key, missing access right
	EInval     Code = 22  // range outside the region, misaligned, bad count
	EMsgSize   Code = 90  // more than the limits allow
	EOpNotSupp Code = 95  // unknown or unsupported datatype or operation
	ECanceled  Code = 125 // the operation was abandoned (endpoint closed)
	EConnReset Code = 104 // the peer died
)

// Access rights, libfabric's bits (FI_READ ... FI_REMOTE_WRITE).
const (
	AccessRead        uint64 = 1 << 8
	AccessWrite       uint64 = 1 << 9
	AccessRecv        uint64 = 1 << 10
	AccessSend        uint64 = 1 << 11
	AccessRemoteRead  uint64 = 1 << 12
	AccessRemoteWrite uint64 = 1 << 13
)

// Table wire format, version 1, host byte order (a table never leaves the
// host). Offsets are from the start of the table; there are no pointers.
// OpenTable recomputes the layout from the counts in the header and
// refuses the table unless every field matches.
//
//	header    0    256 B
//	  +0  magic u32 (stored last)    +4  version u32
//	  +8  header size u32            +12 slot size u32
//	  +16 slots u32                  +20 counters u32
//	  +24 owner pid u32              +28 reserved u32, zero
//	  +32 slot offset u64            +40 counter offset u64
//	  +48 total size u64             +56 name length u32, +60 zero
//	  +64 name [64]byte (the table's segment name; empty for a heap table)
//	  +128 owner pid namespace u64 (inode of /proc/self/ns/pid, 0 unknown)
//	slots     slots x 128 B, each:
//	  line 0 (the owner writes; peers read):
//	    +0  state u64: generation<<2 | 0 free, 1 live, 2 closing
//	    +8  key u64          +16 address of byte 0 in the owner u64
//	    +24 length u64       +32 base u64 (remote address of byte 0)
//	    +40 access u64       +48 remote-write counter+1 u32
//	    +52 remote-read counter+1 u32   +56 flags u32   +60 zero
//	  line 1: 8 holder cells u64: 0 free, else the pid of a process
//	    accessing the region now (package doc)
//	counters  counters x CounterSize B
const (
	Magic      uint32 = 0x4d524f47 // "GORM" in memory on little endian
	Version    uint32 = 1
	HeaderSize        = 256
	SlotSize          = 128
	Cells             = 8 // holder cells per slot
	MaxNameLen        = 63

	// DefaultSlots and DefaultCounters size a domain's table: 144 KiB.
	DefaultSlots    = 1024
	DefaultCounters = 256
	// MaxSlots and MaxCounters bound what a table may declare.
	MaxSlots    = 1 << 16
	MaxCounters = 1 << 16
)

const (
	hMagic    = 0
	hVersion  = 4
	hHdrSize  = 8
	hSlotSize = 12
	hSlots    = 16
	hCntrs    = 20
	hPID      = 24
	hRes0     = 28
	hSlotOff  = 32
	hCntrOff  = 40
	hTotal    = 48
	hNameLen  = 56
	hRes1     = 60
	hName     = 64
	hPidNS    = 128
	hEnd      = 136

	sState  = 0
	sKey    = 8
	sAddr   = 16
	sLen    = 24
	sBase   = 32
	sAccess = 40
	sCntrW  = 48
	sCntrR  = 52
	sFlags  = 56
	sCells  = 64

	stFree    = 0
	stLive    = 1
	stClosing = 2
	stMask    = 3

	// FlagAllocated marks a region whose memory is a segment from
	// AllocMR that local peers map (named by AllocName).
	FlagAllocated uint32 = 1
)

// Errors of the owner's calls.
var (
	ErrKeyInUse = errors.New("rma: requested key already registered")
	ErrFull     = errors.New("rma: table full")
	ErrCorrupt  = errors.New("rma: corrupt or foreign table")
)

// Layout is where things live in a table of the given counts.
type Layout struct {
	Slots, Counters  int
	SlotOff, CntrOff int
	Total            int
}

// ComputeLayout returns the layout of a table with the given counts.
func ComputeLayout(slots, counters int) (Layout, error) {
	if slots < 1 || slots > MaxSlots || counters < 0 || counters > MaxCounters {
		return Layout{}, fmt.Errorf("rma: %d slots, %d counters out of range", slots, counters)
	}
	l := Layout{Slots: slots, Counters: counters, SlotOff: HeaderSize}
	l.CntrOff = l.SlotOff + slots*SlotSize
	l.Total = l.CntrOff + counters*CounterSize
	return l, nil
}

// Table is a domain's key table: the owner registers regions and
// counters in it; peers open a read-only view (OpenTable) to find keys
// and to take holder cells. Owner methods are safe for concurrent use;
// a view's Find caches keys and must be serialised by its user (the
// engine's serialisation), Acquire and Release are safe for concurrent
// use on both.
type Table struct {
	mem    []byte
	owner  bool
	l      Layout
	name   string
	pid    uint32 // the owner's pid
	pidNS  uint64
	selfID uint64 // this process's holder value

	// owner only
	mu       sync.Mutex // registration, counters
	kmu      sync.RWMutex
	byKey    map[uint64]int32
	hints    [16]atomic.Int32 // slot+1 of a key recently found, by key&15 (find)
	priv     []privSlot
	sfree    []int32
	cfree    []int32
	cntrs    []*Counter
	provSalt uint64
	hb       atomic.Uint64 // race builds only: see raceOn

	// view only
	cache    map[uint64]int32
	lastKey  uint64 // the key find last returned, in slot lastSlot-1 (0: none)
	lastSlot int32
}

type privSlot struct {
	mem []byte // the region's memory, for executors in the owner
}

type paddedMutex struct {
	sync.Mutex
	_ [56]byte
}

// Size returns the bytes a table with the given counts needs.
func Size(slots, counters int) (int, error) {
	l, err := ComputeLayout(slots, counters)
	return l.Total, err
}

// NewTable lays a new, empty table out over mem (zeroed, at least Size
// bytes, 64-byte aligned) and returns the owner's handle. name is the
// segment name peers open it by ("" for a table in process memory that
// only this process's transports use).
func NewTable(mem []byte, slots, counters int, name string) (*Table, error) {
	l, err := ComputeLayout(slots, counters)
	if err != nil {
		return nil, err
	}
	if len(mem) < l.Total || !aligned(mem, 64) {
		return nil, fmt.Errorf("rma: table memory of %d bytes (need %d, 64-byte aligned)", len(mem), l.Total)
	}
	if len(name) > MaxNameLen {
		return nil, fmt.Errorf("rma: table name %q too long", name)
	}
	mem = mem[:l.Total]
	t := &Table{mem: mem, owner: true, l: l, name: name, pid: uint32(os.Getpid()), pidNS: PidNS(),
		byKey: map[uint64]int32{}, priv: make([]privSlot, slots)}
	t.selfID = uint64(t.pid)
	var salt [8]byte
	_, _ = rand.Read(salt[:])
	t.provSalt = binary.LittleEndian.Uint64(salt[:]) &^ 0xffffffff
	h := mem[:HeaderSize]
	ne.PutUint32(h[hVersion:], Version)
	ne.PutUint32(h[hHdrSize:], HeaderSize)
	ne.PutUint32(h[hSlotSize:], SlotSize)
	ne.PutUint32(h[hSlots:], uint32(slots))
	ne.PutUint32(h[hCntrs:], uint32(counters))
	ne.PutUint32(h[hPID:], t.pid)
	ne.PutUint64(h[hSlotOff:], uint64(l.SlotOff))
	ne.PutUint64(h[hCntrOff:], uint64(l.CntrOff))
	ne.PutUint64(h[hTotal:], uint64(l.Total))
	ne.PutUint32(h[hNameLen:], uint32(len(name)))
	copy(h[hName:hName+MaxNameLen+1], name)
	ne.PutUint64(h[hPidNS:], t.pidNS)
	for i := slots - 1; i >= 0; i-- {
		t.sfree = append(t.sfree, int32(i))
	}
	t.cntrs = make([]*Counter, counters)
	for i := counters - 1; i >= 0; i-- {
		t.cfree = append(t.cfree, int32(i))
	}
	for i := range t.cntrs {
		t.cntrs[i] = counterAt(mem, l.CntrOff+i*CounterSize, i)
	}
	word32(mem, hMagic).Store(Magic)
	return t, nil
}

// OpenTable validates the table in mem (another process's, or this
// process's own) and returns a view of it. It never panics whatever mem
// holds; a foreign or inconsistent table gives an error wrapping
// ErrCorrupt.
func OpenTable(mem []byte) (*Table, error) {
	if len(mem) < HeaderSize || !aligned(mem, 64) {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(mem))
	}
	if m := word32(mem, hMagic).Load(); m != Magic {
		return nil, fmt.Errorf("%w: magic %#x", ErrCorrupt, m)
	}
	var h [HeaderSize]byte
	copy(h[:], mem)
	u32 := func(o int) uint32 { return ne.Uint32(h[o:]) }
	u64 := func(o int) uint64 { return ne.Uint64(h[o:]) }
	if u32(hVersion) != Version || u32(hHdrSize) != HeaderSize || u32(hSlotSize) != SlotSize || u32(hRes0) != 0 || u32(hRes1) != 0 {
		return nil, fmt.Errorf("%w: version or sizes", ErrCorrupt)
	}
	l, err := ComputeLayout(int(u32(hSlots)), int(u32(hCntrs)))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if u64(hSlotOff) != uint64(l.SlotOff) || u64(hCntrOff) != uint64(l.CntrOff) || u64(hTotal) != uint64(l.Total) || l.Total > len(mem) {
		return nil, fmt.Errorf("%w: layout", ErrCorrupt)
	}
	n := u32(hNameLen)
	if n > MaxNameLen {
		return nil, fmt.Errorf("%w: name length %d", ErrCorrupt, n)
	}
	for _, c := range h[hName+int(n) : hPidNS] {
		if c != 0 {
			return nil, fmt.Errorf("%w: bytes after the name", ErrCorrupt)
		}
	}
	for _, c := range h[hEnd:] {
		if c != 0 {
			return nil, fmt.Errorf("%w: reserved bytes", ErrCorrupt)
		}
	}
	pid := u32(hPID)
	if pid == 0 || pid > 1<<31-1 {
		return nil, fmt.Errorf("%w: owner pid %d", ErrCorrupt, pid)
	}
	t := &Table{mem: mem[:l.Total], l: l, name: string(h[hName : hName+int(n)]), pid: pid,
		pidNS: u64(hPidNS), cache: map[uint64]int32{}}
	t.selfID = uint64(os.Getpid())
	return t, nil
}

var ne = binary.NativeEndian

// Name is the table's segment name ("" for a heap table).
func (t *Table) Name() string { return t.name }

// OwnerPID is the pid of the process that registers regions in the table.
func (t *Table) OwnerPID() int { return int(t.pid) }

// OwnerPidNS is the owner's pid namespace (0 when unknown): a peer in
// another namespace cannot name the owner by pid.
func (t *Table) OwnerPidNS() uint64 { return t.pidNS }

// Layout returns the table's layout.
func (t *Table) Layout() Layout { return t.l }

func (t *Table) slotOff(i int) int { return t.l.SlotOff + i*SlotSize }

func (t *Table) state(i int) *atomic.Uint64 { return word64(t.mem, t.slotOff(i)+sState) }

func (t *Table) field(i, f int) *atomic.Uint64 { return word64(t.mem, t.slotOff(i)+f) }

func (t *Table) field32(i, f int) *atomic.Uint32 { return word32(t.mem, t.slotOff(i)+f) }

func (t *Table) cell(i, c int) *atomic.Uint64 { return word64(t.mem, t.slotOff(i)+sCells+8*c) }

// Region describes memory to register.
type Region struct {
	Mem       []byte // the memory (the owner's executors access it)
	Key       uint64 // requested key (ignored with provider keys)
	Base      uint64 // remote address of Mem[0] (fi_mr_reg's offset)
	Access    uint64 // Access* bits
	Allocated bool   // Mem is the AllocMR segment AllocName names
}

// Register publishes r and returns its slot and key. With provKey the
// table chooses the key; otherwise r.Key is used and a key already live
// gives ErrKeyInUse. A full table gives ErrFull. When mem is not nil it
// makes the region's memory once the slot is chosen (AllocMR names the
// memory after the slot: AllocName) and replaces r.Mem; its error fails
// the registration. Owner only.
func (t *Table) Register(r Region, provKey bool, mem func(slot int, gen uint32) ([]byte, error)) (int, uint64, error) {
	if !t.owner {
		return 0, 0, errors.New("rma: Register on a table view")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.sfree) == 0 {
		return 0, 0, ErrFull
	}
	slot := int(t.sfree[len(t.sfree)-1])
	gen := t.state(slot).Load() >> 2
	key := r.Key
	if provKey {
		key = t.provSalt | (gen&0xffff)<<16 | uint64(slot)
	}
	t.kmu.RLock()
	_, dup := t.byKey[key]
	t.kmu.RUnlock()
	if dup {
		return 0, 0, ErrKeyInUse
	}
	if mem != nil {
		m, err := mem(slot, uint32(gen))
		if err != nil {
			return 0, 0, err
		}
		r.Mem = m
	}
	t.sfree = t.sfree[:len(t.sfree)-1]
	t.priv[slot] = privSlot{mem: r.Mem}
	t.field(slot, sKey).Store(key)
	t.field(slot, sAddr).Store(Addr(r.Mem))
	t.field(slot, sLen).Store(uint64(len(r.Mem)))
	t.field(slot, sBase).Store(r.Base)
	t.field(slot, sAccess).Store(r.Access)
	t.field32(slot, sCntrW).Store(0)
	t.field32(slot, sCntrR).Store(0)
	var fl uint32
	if r.Allocated {
		fl |= FlagAllocated
	}
	t.field32(slot, sFlags).Store(fl)
	t.kmu.Lock()
	t.byKey[key] = int32(slot)
	t.kmu.Unlock()
	t.raceSync()
	t.state(slot).Swap(gen<<2 | stLive)
	return slot, key, nil
}

// Gen returns the generation of a slot (what AllocName and peers' caches
// use to tell registrations in one slot apart).
func (t *Table) Gen(slot int) uint32 { return uint32(t.state(slot).Load() >> 2) }

// BindCounters sets the counters a region's remote writes and reads count
// into (nil: none). Owner only; takes effect for accesses that start
// afterwards.
func (t *Table) BindCounters(slot int, w, r *Counter) {
	idx := func(c *Counter) uint32 {
		if c == nil {
			return 0
		}
		return uint32(c.idx + 1)
	}
	t.field32(slot, sCntrW).Store(idx(w))
	t.field32(slot, sCntrR).Store(idx(r))
}

// Deregister refuses the slot's key to every later access, waits until no
// live process holds one of the slot's cells (alive reports whether a pid
// is alive; holders that died are cleared), then frees the slot. When it
// returns, no access to the region is in progress or will start. Owner
// only.
func (t *Table) Deregister(slot int, alive func(pid int) bool) {
	st := t.state(slot)
	s := st.Load()
	if s&stMask != stLive {
		return
	}
	gen := s >> 2
	// A read-modify-write, so that the loads of the cells below come after
	// it in every execution (see fullFence).
	st.CompareAndSwap(s, gen<<2|stClosing)
	key := t.field(slot, sKey).Load()
	t.kmu.Lock()
	if t.byKey[key] == int32(slot) {
		delete(t.byKey, key)
	}
	t.kmu.Unlock()
	t.drainCells(slot, alive)
	t.raceSync()
	t.mu.Lock()
	t.priv[slot] = privSlot{}
	t.state(slot).Swap((gen+1)<<2 | stFree)
	t.sfree = append(t.sfree, int32(slot))
	t.mu.Unlock()
}

// drainCells waits until every cell of slot is free or held by a dead
// process (which it frees).
func (t *Table) drainCells(slot int, alive func(pid int) bool) {
	for spin := 0; ; spin++ {
		busy := false
		for c := 0; c < Cells; c++ {
			v := t.cell(slot, c).Load()
			if v == 0 {
				continue
			}
			if v != t.selfID && spin > 64 && alive != nil && !alive(int(v)) {
				t.cell(slot, c).CompareAndSwap(v, 0)
				continue
			}
			busy = true
		}
		if !busy {
			return
		}
		backoff(spin)
	}
}

func backoff(spin int) {
	switch {
	case spin < 64:
		runtime.Gosched()
	case spin < 1024:
		time.Sleep(20 * time.Microsecond)
	default:
		time.Sleep(time.Millisecond)
	}
}

// Sync synchronises the caller with the accesses to slot: those that
// have released their cell happen before what the caller does next, and
// what the caller did before happens before accesses that take a cell
// later. Executors in this process run on other goroutines and hear of
// operations through sockets and rings that the memory model (and the
// race detector) cannot see; this gives them the edges. One
// compare-and-swap per cell, each leaving the cell as it found it.
func (t *Table) Sync(slot int) {
	t.raceSync()
	for c := 0; c < Cells; c++ {
		w := t.cell(slot, c)
		v := w.Load()
		w.CompareAndSwap(v, v)
	}
}

// Slot is a snapshot of a live region, valid while its Hold is held.
type Slot struct {
	Index     int
	Gen       uint32
	Key       uint64
	Addr      uint64 // address of byte 0 in the owner process
	Len       uint64
	Base      uint64
	Access    uint64
	CntrW     int // remote-write counter index, -1 none
	CntrR     int // remote-read counter index, -1 none
	Allocated bool
	Mem       []byte // the memory, in the owner's own handle only
}

// Hold is one access in progress: the holder cell taken on a slot. The
// zero Hold holds nothing.
type Hold struct {
	Slot
	cell *atomic.Uint64
	hb   *atomic.Uint64 // the owner's Table.hb in race builds
}

// Release ends the access.
func (h *Hold) Release() {
	if h.cell != nil {
		if raceOn && h.hb != nil {
			h.hb.Add(1)
		}
		h.cell.Store(0)
		h.cell = nil
	}
}

// raceSync makes an edge the race detector sees between the owner's
// accesses and those of this process's executors (see raceOn). A no-op
// in normal builds.
func (t *Table) raceSync() {
	if raceOn && t.owner {
		t.hb.Add(1)
	}
}

// find returns the slot registered under key, or -1.
func (t *Table) find(key uint64) int {
	if t.owner {
		// A hint is only a guess (any slot number is safe to try): it is
		// taken when that slot is live under this key, as the map would
		// say, and Acquire checks key and state again around its cell.
		// Executors and Poll find keys concurrently, so the hints are
		// atomic words rather than a map; a hit skips the lock and the map.
		hw := &t.hints[key&15]
		if h := int(hw.Load()) - 1; h >= 0 && h < t.l.Slots &&
			t.field(h, sKey).Load() == key && t.state(h).Load()&stMask == stLive {
			return h
		}
		t.kmu.RLock()
		s, ok := t.byKey[key]
		t.kmu.RUnlock()
		if !ok {
			return -1
		}
		hw.Store(s + 1)
		return int(s)
	}
	// The key of the previous call first (an initiator hitting one
	// region, as a counter or a lock does, skips the map); like the map's
	// entries, it is only a guess checked against the slot.
	if s := int(t.lastSlot) - 1; s >= 0 && t.lastKey == key && t.field(s, sKey).Load() == key && t.state(s).Load()&stMask == stLive {
		return s
	}
	if s, ok := t.cache[key]; ok && t.field(int(s), sKey).Load() == key && t.state(int(s)).Load()&stMask == stLive {
		t.lastKey, t.lastSlot = key, s+1
		return int(s)
	}
	delete(t.cache, key)
	for i := 0; i < t.l.Slots; i++ {
		if t.state(i).Load()&stMask == stLive && t.field(i, sKey).Load() == key {
			if len(t.cache) > 4096 {
				clear(t.cache)
			}
			t.cache[key] = int32(i)
			t.lastKey, t.lastSlot = key, int32(i)+1
			return i
		}
	}
	return -1
}

// Acquire looks key up and takes a holder cell on its slot: EAccess when
// the key is unknown or closed. On success the Hold describes the region
// until Release. In a view, Acquire must be serialised with other calls of
// the view (its key cache); the owner's Acquire is safe for concurrent
// use.
func (t *Table) Acquire(key uint64) (Hold, Code) {
	var h Hold
	c := t.AcquireTo(&h, key)
	return h, c
}

// AcquireTo is Acquire filling *h (which must hold nothing) in place. On
// failure *h holds nothing.
func (t *Table) AcquireTo(h *Hold, key uint64) Code {
	for try := 0; try < 4; try++ {
		i := t.find(key)
		if i < 0 {
			break
		}
		st := t.state(i)
		s := st.Load()
		if s&stMask != stLive {
			continue
		}
		t.snapshotTo(&h.Slot, i, s)
		if h.Key != key || st.Load() != s {
			continue
		}
		c := t.takeCell(i)
		// takeCell's CompareAndSwap orders this load after it: either
		// Deregister sees the cell, or this sees the closing state.
		if st.Load() != s {
			c.Store(0)
			continue
		}
		h.cell, h.hb = c, nil
		if t.owner {
			if raceOn {
				h.hb = &t.hb
				h.hb.Add(1)
			}
			h.Mem = t.priv[i].mem
		}
		if h.CntrW >= t.l.Counters {
			h.CntrW = -1
		}
		if h.CntrR >= t.l.Counters {
			h.CntrR = -1
		}
		return OK
	}
	*h = Hold{}
	return EAccess
}

// snapshot reads slot i's fields (state s).
func (t *Table) snapshot(i int, s uint64) Slot {
	var sl Slot
	t.snapshotTo(&sl, i, s)
	return sl
}

// snapshotTo is snapshot into *sl (Mem set to nil).
func (t *Table) snapshotTo(sl *Slot, i int, s uint64) {
	o := t.slotOff(i)
	m := (*[sCells]byte)(t.mem[o : o+sCells])[:] // one bounds check for the fields below
	sl.Index, sl.Gen = i, uint32(s>>2)
	sl.Key, sl.Addr, sl.Len = word64(m, sKey).Load(), word64(m, sAddr).Load(), word64(m, sLen).Load()
	sl.Base, sl.Access = word64(m, sBase).Load(), word64(m, sAccess).Load()
	sl.CntrW, sl.CntrR = int(word32(m, sCntrW).Load())-1, int(word32(m, sCntrR).Load())-1
	sl.Allocated = word32(m, sFlags).Load()&FlagAllocated != 0
	sl.Mem = nil
}

// takeCell takes a free holder cell of slot i, waiting (without end only
// while live processes hold all of them) when none is free.
func (t *Table) takeCell(i int) *atomic.Uint64 {
	start := int(t.selfID % Cells)
	for spin := 0; ; spin++ {
		for k := 0; k < Cells; k++ {
			c := t.cell(i, (start+k)%Cells)
			if c.Load() == 0 && c.CompareAndSwap(0, t.selfID) {
				return c
			}
		}
		if spin > 64 {
			for k := 0; k < Cells; k++ {
				c := t.cell(i, k)
				if v := c.Load(); v != 0 && v != t.selfID && !ProcessAlive(int(v)) {
					c.CompareAndSwap(v, 0)
				}
			}
		}
		backoff(spin)
	}
}

// Range checks that [addr, addr+n) lies in the region (addresses as peers
// give them: the region's Base plus an offset) and returns the offset of
// addr in the region. The sum addr+n is never formed, so no overflow slips
// through.
func (s *Slot) Range(addr, n uint64) (uint64, Code) {
	if addr < s.Base {
		return 0, EInval
	}
	off := addr - s.Base
	if off > s.Len || n > s.Len-off {
		return 0, EInval
	}
	return off, OK
}

// Allows reports whether the region grants every right in want.
func (s *Slot) Allows(want uint64) bool { return s.Access&want == want }

// Counter returns counter i of the table (nil when out of range).
func (t *Table) Counter(i int) *Counter {
	if i < 0 || i >= t.l.Counters {
		return nil
	}
	if t.owner {
		return t.cntrs[i]
	}
	return counterAt(t.mem, t.l.CntrOff+i*CounterSize, i)
}

// AllocCounter takes a free counter, zeroed. Owner only.
func (t *Table) AllocCounter() (*Counter, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.owner || len(t.cfree) == 0 {
		return nil, ErrFull
	}
	i := t.cfree[len(t.cfree)-1]
	t.cfree = t.cfree[:len(t.cfree)-1]
	c := t.cntrs[i]
	c.reset()
	return c, nil
}

// FreeCounter returns a counter to the table. Owner only; nothing may
// still be bound to it.
func (t *Table) FreeCounter(c *Counter) {
	t.mu.Lock()
	t.cfree = append(t.cfree, int32(c.idx))
	t.mu.Unlock()
}

// Lock16 returns the lock that serialises 16-byte atomics on the element
// at address a of the owner's memory (the owner's executors only). The
// stripes are the process's, not the table's: memory registered in two
// domains (a shm and a tcp endpoint serving the same bytes) takes the same
// lock whichever executor runs.
func (t *Table) Lock16(a uintptr) *sync.Mutex { return &stripes16[(a>>4)%64].Mutex }

// stripes16 are Lock16's locks.
var stripes16 [64]paddedMutex

// AllocName is the segment name of the memory of an allocated region in
// slot with generation gen of the table named table.
func AllocName(table string, slot int, gen uint32) string {
	return fmt.Sprintf("%s.m%d.%d", table, slot, gen)
}
