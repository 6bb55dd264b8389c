package fi

import (
	"errors"
	"math"
	"sync"

	"github.com/gofi-dev/fi/rma"
)

// MRDesc is a memory region's local descriptor (fi_mr_desc), passed with
// the local buffers of RMA and atomic calls. gofi's providers need no
// local registration (no FI_MR_LOCAL), so descriptors are always nil and
// any value passed is ignored.
type MRDesc *mrDesc

type mrDesc struct{}

// MRAttr describes a registration for RegMRAttr (struct fi_mr_attr).
type MRAttr struct {
	// IOV holds the memory; at most DomainAttr.MRIOVLimit buffers (1).
	IOV [][]byte
	// Access rights: Send, Recv, Read, Write (local use, always allowed)
	// and RemoteRead, RemoteWrite (what peers may do).
	Access Flags
	// Offset is the remote address of the region's first byte: peers
	// address byte i of the region as Offset+i.
	Offset uint64
	// RequestedKey is the key peers use, unless the domain's MRMode has
	// MRProvKey (then the provider chooses and Key reports it).
	RequestedKey uint64
	// Context is returned by MR.Context.
	Context any
}

// MR is a registered memory region (fi_mr(3)): memory peers may read and
// write with RMA and atomics, named by Key. Addressing is offset based
// (no MRVirtAddr): a peer addresses byte i of the region as the
// registration's offset plus i.
//
// A region registered with RegMR is the caller's memory, kept alive and
// in place until Close; one from AllocMR is shared memory that local
// peers map directly. Close refuses the key to every later access at
// once, and returns only when no access is in progress.
//
// Safe for concurrent use. Bytes is valid until Close.
type MR struct {
	dom    *Domain
	mem    []byte
	ctx    any
	key    uint64
	slot   int
	access Flags
	free   func() error // releases AllocMR memory after deregistration

	mu     sync.Mutex
	cntrW  *Cntr
	cntrR  *Cntr
	closed bool
}

// mrAccess are the access bits RegMR accepts.
const mrAccess = Send | Recv | Read | Write | RemoteRead | RemoteWrite

// keyTabler is implemented by provider domains: the memory a domain's key
// table lives in (shared memory for shm, process memory for tcp) and the
// memory AllocMR hands out.
type keyTabler interface {
	// makeKeyTable creates the domain's table and returns a function
	// releasing its memory.
	makeKeyTable(slots, counters int) (*rma.Table, func() error, error)
	// allocMem makes size bytes for AllocMR in slot/gen of table t and
	// returns a function releasing them.
	allocMem(t *rma.Table, slot int, gen uint32, size int) ([]byte, func() error, error)
	// holderAlive reports whether a process holding a region's cell is
	// alive (for MR.Close).
	holderAlive(pid int) bool
}

// memHinter is implemented by provider domains that tune registered Go
// memory for their peers' accesses (shm: huge pages).
type memHinter interface{ hintMem(buf []byte) }

// mrKeys is a domain's key table, made on first use.
type mrKeys struct {
	mu      sync.Mutex
	t       *rma.Table
	release func() error
}

// table returns the domain's key table, creating it on first use.
func (d *Domain) table(op string) (*rma.Table, error) {
	k := &d.keys
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.t != nil {
		return k.t, nil
	}
	kt, ok := d.pd.(keyTabler)
	if !ok {
		return nil, opErr(op, ErrNoSys, "provider %s has no memory registration", d.info.FabricAttr.ProvName)
	}
	t, rel, err := kt.makeKeyTable(mrSlots, cntrSlots)
	if err != nil {
		return nil, opErr(op, ErrNoMem, "key table: %v", err)
	}
	k.t, k.release = t, rel
	return t, nil
}

// get returns the table if it exists.
func (k *mrKeys) get() *rma.Table {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.t
}

func (k *mrKeys) close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.t == nil {
		return nil
	}
	k.t = nil
	if k.release != nil {
		return k.release()
	}
	return nil
}

// Key-table sizes: DomainAttr.MRCnt and CntrCnt report them.
const (
	mrSlots   = rma.DefaultSlots
	cntrSlots = rma.DefaultCounters
)

// RegMR registers buf for access by peers (fi_mr_reg). access takes
// RemoteRead and RemoteWrite for what peers may do (and Send, Recv, Read,
// Write, which local use never needs); offset is the remote address of
// buf[0]; requestedKey is the key peers use (ignored when the domain's
// MRMode has MRProvKey: the provider chooses; see Key). flags must be 0.
//
// Errors: ErrNoKey when requestedKey is already registered in the domain,
// ErrInval for bad access bits or an offset whose range would wrap,
// ErrBadFlags, ErrNoMem when the domain's table is full (DomainAttr.MRCnt
// regions), ErrOpBadState on a closed domain. buf stays the caller's but
// must not be freed or moved before Close; gofi keeps it reachable.
func (d *Domain) RegMR(buf []byte, access Flags, offset, requestedKey uint64, flags Flags) (*MR, error) {
	return d.regMR("Domain.RegMR", buf, access, offset, requestedKey, flags, 0, nil)
}

// RegMRAttr registers memory described by attr (fi_mr_regattr). attr.IOV
// holds one buffer (MRIOVLimit is 1).
func (d *Domain) RegMRAttr(attr *MRAttr, flags Flags) (*MR, error) {
	const op = "Domain.RegMRAttr"
	if attr == nil {
		return nil, opErr(op, ErrInval, "nil attr")
	}
	if len(attr.IOV) != 1 {
		return nil, opErr(op, ErrInval, "%d buffers (MRIOVLimit is %d)", len(attr.IOV), mrIOVLimit)
	}
	return d.regMR(op, attr.IOV[0], attr.Access, attr.Offset, attr.RequestedKey, flags, 0, attr.Context)
}

// mrIOVLimit is DomainAttr.MRIOVLimit: one buffer per region.
const mrIOVLimit = 1

// AllocMR allocates size bytes of zeroed memory and registers it with the
// given access, like MPI_Win_allocate_shared: over shm the memory is a
// shared segment that local peers map, so their writes and reads are
// plain memory copies and their atomics the processor's own, with no
// system call and no work by this process. Over tcp it is process
// memory. Its remote address starts at 0 and its key is always chosen by
// the provider (Key), whatever the domain's MRMode. Bytes returns the
// memory until Close, which frees it.
func (d *Domain) AllocMR(size int, access Flags) (*MR, error) {
	const op = "Domain.AllocMR"
	if size <= 0 || size > maxAllocMR {
		return nil, opErr(op, ErrInval, "size %d not in 1..%d", size, maxAllocMR)
	}
	return d.regMR(op, nil, access, 0, 0, 0, size, nil)
}

// maxAllocMR bounds AllocMR (the shm segment limit).
const maxAllocMR = 1 << 30

func (d *Domain) regMR(op string, buf []byte, access Flags, offset, requestedKey uint64, flags Flags, allocSize int, ctx any) (*MR, error) {
	switch {
	case !d.open():
		return nil, notOpenDomain(op)
	case access&^mrAccess != 0:
		return nil, opErr(op, ErrInval, "access bits %s not valid for a region", access&^mrAccess)
	case flags != 0:
		return nil, opErr(op, ErrBadFlags, "flags %s not supported", flags)
	case offset > math.MaxUint64-uint64(max(len(buf), allocSize)):
		return nil, opErr(op, ErrInval, "offset %#x plus length %d wraps", offset, max(len(buf), allocSize))
	}
	if err := d.addChild(childMR); err != nil {
		return nil, err
	}
	t, err := d.table(op)
	if err != nil {
		d.dropChild(childMR)
		return nil, err
	}
	mr := &MR{dom: d, mem: buf, ctx: ctx, access: access}
	var mk func(int, uint32) ([]byte, error)
	if allocSize > 0 {
		kt := d.pd.(keyTabler)
		mk = func(slot int, gen uint32) ([]byte, error) {
			m, free, err := kt.allocMem(t, slot, gen, allocSize)
			if err != nil {
				return nil, err
			}
			mr.mem, mr.free = m, free
			return m, nil
		}
	}
	provKey := d.info.DomainAttr.MRMode&MRProvKey != 0 || allocSize > 0
	slot, key, err := t.Register(rma.Region{Mem: buf, Key: requestedKey, Base: offset, Access: uint64(access), Allocated: allocSize > 0}, provKey, mk)
	if err != nil {
		d.dropChild(childMR)
		switch {
		case errors.Is(err, rma.ErrKeyInUse):
			return nil, opErr(op, ErrNoKey, "key %#x is already registered in domain %q", requestedKey, d.info.DomainAttr.Name)
		case errors.Is(err, rma.ErrFull):
			return nil, opErr(op, ErrNoMem, "domain %q has %d regions open (MRCnt)", d.info.DomainAttr.Name, mrSlots)
		}
		return nil, opErr(op, ErrNoMem, "allocating %d bytes: %v", allocSize, err)
	}
	mr.slot, mr.key = slot, key
	if h, ok := d.pd.(memHinter); ok && allocSize == 0 {
		h.hintMem(buf)
	}
	return mr, nil
}

// Key returns the key peers name the region with (fi_mr_key).
func (mr *MR) Key() uint64 { return mr.key }

// Desc returns the local descriptor (fi_mr_desc): nil, as gofi needs no
// local registration.
func (mr *MR) Desc() MRDesc { return nil }

// Bytes returns the region's memory: the registered buffer, or the
// memory AllocMR made. Valid until Close. Call it between this process's
// own accesses to the bytes and peers' accesses (after a completion or a
// counter says a peer's write finished; before telling a peer it may read
// what this process wrote): it orders this goroutine with the goroutines
// of this process that execute peers' accesses (the tcp event loop, the
// shm executor), as the memory model and the race detector need.
func (mr *MR) Bytes() []byte {
	if t := mr.dom.keys.get(); t != nil && mr.mem != nil {
		t.Sync(mr.slot)
	}
	return mr.mem
}

// Context returns the context given to RegMRAttr.
func (mr *MR) Context() any { return mr.ctx }

// Access returns the region's access rights.
func (mr *MR) Access() Flags { return mr.access }

// BindCntr makes c count the remote accesses to the region (fi_mr_bind,
// FI_RMA_EVENT): with RemoteWrite every RMA write and atomic that changes
// it, with RemoteRead every RMA read and fetching atomic, as the operation
// completes at the target. The domain needs the RMAEvent capability. A
// later BindCntr for the same flag replaces the counter.
func (mr *MR) BindCntr(c *Cntr, flags Flags) error {
	const op = "MR.BindCntr"
	switch {
	case c == nil:
		return opErr(op, ErrInval, "nil counter")
	case c.dom != mr.dom:
		return opErr(op, ErrInval, "counter belongs to another domain")
	case flags&^(RemoteWrite|RemoteRead) != 0 || flags == 0:
		return opErr(op, ErrBadFlags, "flags %s (RemoteWrite and/or RemoteRead)", flags)
	case mr.dom.info.Caps != 0 && mr.dom.info.Caps&RMAEvent == 0:
		return opErr(op, ErrOpNotSupp, "domain lacks the RMAEvent capability")
	}
	mr.mu.Lock()
	defer mr.mu.Unlock()
	if mr.closed {
		return opErr(op, ErrOpBadState, "region closed")
	}
	if err := c.bind(); err != nil {
		return err
	}
	if flags&RemoteWrite != 0 {
		if mr.cntrW != nil {
			mr.cntrW.unbind()
		}
		mr.cntrW = c
	}
	if flags&RemoteRead != 0 {
		if flags&RemoteWrite != 0 {
			_ = c.bind() // one reference per flag
		}
		if mr.cntrR != nil {
			mr.cntrR.unbind()
		}
		mr.cntrR = c
	}
	t, _ := mr.dom.table(op)
	t.BindCounters(mr.slot, mr.cntrW.counter(), mr.cntrR.counter())
	return nil
}

// Close deregisters the region (fi_close): from now on every access with
// its key fails with ErrAccess at the initiator; Close returns once no
// access is in progress (a peer that died in the middle of one does not
// hold it up). AllocMR memory is freed. Closing twice gives
// ErrOpBadState.
func (mr *MR) Close() error {
	const op = "MR.Close"
	if mr == nil || mr.dom == nil {
		return opErr(op, ErrInval, "not a region from RegMR")
	}
	mr.mu.Lock()
	if mr.closed {
		mr.mu.Unlock()
		return opErr(op, ErrOpBadState, "already closed")
	}
	mr.closed = true
	mr.mu.Unlock()
	d := mr.dom
	t, err := d.table(op)
	if err != nil {
		return err
	}
	t.Deregister(mr.slot, d.pd.(keyTabler).holderAlive)
	mr.cntrW.unbind()
	mr.cntrR.unbind()
	var ferr error
	if mr.free != nil {
		ferr = mr.free()
	}
	mr.mem = nil
	d.dropChild(childMR)
	if ferr != nil {
		return opErr(op, ErrIO, "freeing memory: %v", ferr)
	}
	return nil
}
