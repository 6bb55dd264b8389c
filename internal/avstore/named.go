package avstore

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/edsrzf/mmap-go"
	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/internal/sockaddr"
)

// Named AVs shared between processes of one user on one host.
//
// A named AV is a file /dev/shm/gofi-av-<uid>-<name> (mode 0600) mapped by
// every process that opens it. The file is a wire format, read as
// untrusted input: every field is checked before use, a foreign or corrupt
// file is refused with CodeInval (CodePerm when owned by another user or
// readable by others).
//
//	offset size  field
//	0      8     magic "gofiAV\x00\x01"
//	8      4     version (1)
//	12     4     header size (320)
//	16     4     address format (Format)
//	20     4     slot size (bytes per entry, 8 + largest address)
//	24     4     capacity (entries)
//	28     4     high water: one past the highest index used (atomic)
//	32     4     lowest possibly unused index (writers' hint)
//	36     4     flags (bit 0: created with FI_SYMMETRIC)
//	40     8     map_addr
//	48     8     generation, bumped by every change (atomic)
//	56     4     entries in use (atomic)
//	60     4     reserved
//	64     256   64 pids of the processes that have it open for writing
//	320    4     compact symmetric ranges published (atomic, at most 16)
//	328    768   16 range records of 48 bytes: first index u32, count u32,
//	             services per node u32, first port u16, IPv4 u8, 1
//	             reserved, IPv6 scope u32, 4 reserved, base IP as two
//	             big-endian-valued u64 (high, low), 8 reserved
//	1152   ...   capacity slots: state u32 (atomic: 0 unused, 1 in use,
//	             2 a range entry removed), length u16, 2 reserved, then
//	             the address bytes
//
// An index inside a published range whose slot state is 0 is in use with
// the address the range computes, so a symmetric range of a million
// entries costs one record and leaves its slots untouched (the file is
// sparse). Range records are written before the range count is raised and
// never change afterwards.
//
// Writers (Insert, Remove, open and close) serialise with flock(LOCK_EX)
// on the file. Readers do not lock: a writer fills a slot before it
// publishes state = 1 with an atomic store, and readers load state first.
// The file is created complete under a temporary name and linked into
// place, so no process sees a half-written header. A process registers its
// pid; the last one to close removes the file, and a file whose registered
// processes have all died is stale and replaced at open. Indices are the
// same in every process; user ids (AVUserID) are per process.

// The file's layout: the header fields' offsets (Off*), its size, magic
// and version, the smallest capacity a created AV gets, and the size of a
// range record. Exported for tests that write hostile files.
const (
	Magic         = "gofiAV\x00\x01"
	Version       = 1
	HdrSize       = 1152
	namedMaxPids  = 64
	MinCap        = 1 << 16
	namedMaxCap   = 1 << 24
	namedStrSlot  = 256 // slot size for FI_ADDR_STR entries
	namedSlotHead = 8

	OffVersion  = 8
	OffHdrSize  = 12
	OffFormat   = 16
	OffSlotSize = 20
	OffCap      = 24
	OffHW       = 28
	OffLowFree  = 32
	OffFlags    = 36
	OffMapAddr  = 40
	OffGen      = 48
	OffLive     = 56
	OffPids     = 64
	OffNRanges  = 320
	OffRanges   = 328

	namedMaxRanges = 16
	RangeSize      = 48
)

// namedAVDir is where named AVs live.
var namedAVDir = "/dev/shm"

// NamedPath returns the file of the named AV name, checking the name.
func NamedPath(name string) (string, error) {
	if len(name) == 0 || len(name) > 200 || name[0] == '.' {
		return "", errf("Domain.OpenAV", CodeInval, "bad AV name %q (1..200 of [A-Za-z0-9._-], not starting with '.')", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "", errf("Domain.OpenAV", CodeInval, "bad AV name %q (1..200 of [A-Za-z0-9._-], not starting with '.')", name)
		}
	}
	return filepath.Join(namedAVDir, fmt.Sprintf("gofi-av-%d-%s", os.Getuid(), name)), nil
}

// namedSlotSize is the slot size for entries of format f.
func namedSlotSize(f Format) uint32 {
	switch f {
	case FormatIn:
		return namedSlotHead + sockaddr.SizeIn
	case FormatIn6, FormatAny:
		return namedSlotHead + sockaddr.SizeIn6 + 4 // 40: keeps slots 8-aligned
	}
	return namedStrSlot
}

// Named is an open named AV. Its methods other than find are called
// with the owning AV's lock held; writers bracket changes with lock and
// unlock.
type Named struct {
	path   string
	f      *os.File
	m      mmap.MMap
	ro     bool
	format Format
	key    func([]byte) []byte // the reverse map's view of an address (Table.SetKey)
	slot   uint64              // slot size
	cap    uint64
	pid    int // pid slot registered, -1 if none

	revMu  sync.Mutex
	rev    map[string]uint64
	revGen uint64
	revOK  bool

	rcache atomic.Pointer[[]avRange] // decoded range records
}

// ranges returns the published, valid range records (decoded once per
// count). A record that does not fit the AV is ignored.
func (n *Named) ranges() []avRange {
	if n.slot == namedStrSlot {
		return nil // FI_ADDR_STR AVs have no ranges
	}
	cnt := min(uint64(n.u32(OffNRanges).Load()), namedMaxRanges)
	if c := n.rcache.Load(); c != nil && uint64(cap(*c)) == cnt {
		return *c
	}
	le := binary.LittleEndian
	out := make([]avRange, 0, cnt)
	for k := uint64(0); k < cnt; k++ {
		b := n.m[OffRanges+k*RangeSize : OffRanges+(k+1)*RangeSize]
		r := avRange{
			start: uint64(le.Uint32(b[0:])), n: uint64(le.Uint32(b[4:])), svcs: uint64(le.Uint32(b[8:])),
			port: le.Uint16(b[12:]), is4: b[14] == 1, scope: le.Uint32(b[16:]),
			hi: le.Uint64(b[24:]), lo: le.Uint64(b[32:]),
		}
		if r.n == 0 || r.svcs == 0 || r.n%r.svcs != 0 || r.start+r.n > n.cap || r.svcs > 65536 ||
			uint64(r.port)+r.svcs-1 > 65535 || (r.is4 && (r.hi != 0 || r.lo+r.n/r.svcs-1 > 0xffffffff)) ||
			(r.is4 && n.format == FormatIn6) || (!r.is4 && n.format == FormatIn) {
			continue
		}
		out = append(out, r)
	}
	out = out[:len(out):cnt] // cap records the count it was decoded for
	n.rcache.Store(&out)
	return out
}

// inRange returns the range holding index i, if any.
func (n *Named) inRange(i uint64) *avRange {
	rs := n.ranges()
	for k := range rs {
		if i >= rs[k].start && i-rs[k].start < rs[k].n {
			return &rs[k]
		}
	}
	return nil
}

// used reports whether index i holds an address.
func (n *Named) used(i uint64) bool {
	switch n.u32(n.SlotOff(i)).Load() {
	case 1:
		return true
	case 0:
		return n.inRange(i) != nil
	}
	return false
}

// InsertRange publishes a compact range at the end of the AV when no
// unused index lies below it (file lock held).
func (n *Named) InsertRange(base netip.AddrPort, nodes, svcs uint64) (uint64, bool) {
	cnt := uint64(n.u32(OffNRanges).Load())
	hw := n.HW()
	num := nodes * svcs
	if cnt >= namedMaxRanges || n.slot == namedStrSlot || num == 0 || hw+num > n.cap || n.lowest() != hw {
		return 0, false
	}
	ip := base.Addr()
	if n.format == FormatIn && !ip.Is4() || n.format == FormatIn6 && ip.Is4() {
		return 0, false
	}
	scope, err := sockaddr.Scope(ip)
	if err != nil {
		return 0, false
	}
	hi, lo := sockaddr.Words(ip)
	le := binary.LittleEndian
	b := n.m[OffRanges+cnt*RangeSize : OffRanges+(cnt+1)*RangeSize]
	clear(b)
	le.PutUint32(b[0:], uint32(hw))
	le.PutUint32(b[4:], uint32(num))
	le.PutUint32(b[8:], uint32(svcs))
	le.PutUint16(b[12:], base.Port())
	if ip.Is4() {
		b[14] = 1
	}
	le.PutUint32(b[16:], scope)
	le.PutUint64(b[24:], hi)
	le.PutUint64(b[32:], lo)
	n.u32(OffNRanges).Store(uint32(cnt + 1)) // publish
	n.u32(OffHW).Store(uint32(hw + num))
	n.u32(OffLowFree).Store(uint32(hw + num))
	n.u32(OffLive).Add(uint32(num))
	n.u64(OffGen).Add(1)
	return hw, true
}

// lowest returns the lowest unused index, cap when full (lock held).
func (n *Named) lowest() uint64 {
	i := uint64(n.u32(OffLowFree).Load())
	if i > n.cap { // a corrupt hint: scan from the start
		i = 0
	}
	for i < n.cap && n.used(i) {
		i++
	}
	return i
}

func (n *Named) u32(off uint64) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&n.m[off]))
}

func (n *Named) u64(off uint64) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&n.m[off]))
}

// NamedOpts says how to open a named AV.
type NamedOpts struct {
	ReadOnly  bool   // open an existing AV for reading only (fi.Read)
	Symmetric bool   // mark a created AV as symmetric (fi.Symmetric)
	Count     int    // expected entries: a created AV holds max(2*Count, MinCap)
	MapAddr   uint64 // in: the base wanted (0: any); out: the AV's
}

// OpenNamed opens or creates the named AV name of the given format; on
// success a.MapAddr is the AV's map_addr.
func OpenNamed(name string, format Format, a *NamedOpts) (*Named, error) {
	const op = "Domain.OpenAV"
	path, err := NamedPath(name)
	if err != nil {
		return nil, err
	}
	if a.ReadOnly {
		f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, errf(op, CodeNoEnt, "named AV %q does not exist", name)
			}
			return nil, errf(op, CodeAccess, "open named AV %q: %v", name, err)
		}
		n, err := mapNamed(f, path, format, true)
		if err != nil {
			f.Close()
			return nil, err
		}
		if err := n.checkMapAddr(a); err != nil {
			n.unmap()
			return nil, err
		}
		return n, nil
	}
	for attempt := 0; attempt < 16; attempt++ {
		f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
		if errors.Is(err, os.ErrNotExist) {
			n, err := createNamed(path, format, a)
			if errors.Is(err, os.ErrExist) {
				continue // another process linked it first: open theirs
			}
			return n, err
		}
		if err != nil {
			return nil, errf(op, CodeAccess, "open named AV %q: %v", name, err)
		}
		if err := flock(f, unix.LOCK_EX); err != nil {
			f.Close()
			return nil, err
		}
		if !samePath(f, path) { // replaced while we waited for the lock
			f.Close()
			continue
		}
		n, err := mapNamed(f, path, format, false)
		if err != nil {
			f.Close()
			return nil, err
		}
		if !n.reapDeadPids() {
			// every process that used it is gone: stale, replace it
			os.Remove(path)
			n.unmap()
			continue
		}
		if err := n.checkMapAddr(a); err != nil {
			flock(n.f, unix.LOCK_UN)
			n.unmap()
			return nil, err
		}
		if err := n.register(); err != nil {
			flock(n.f, unix.LOCK_UN)
			n.unmap()
			return nil, err
		}
		flock(n.f, unix.LOCK_UN)
		return n, nil
	}
	return nil, errf(op, CodeAgain, "named AV %q kept changing while opening it", name)
}

// createNamed creates the AV under a temporary name and links it into
// place; os.ErrExist when another process won.
func createNamed(path string, format Format, a *NamedOpts) (*Named, error) {
	const op = "Domain.OpenAV"
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := fmt.Sprintf("%s.tmp-%d-%x", path, os.Getpid(), rnd)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, errf(op, CodeAccess, "create named AV: %v", err)
	}
	defer os.Remove(tmp)
	if a.Count > namedMaxCap {
		f.Close()
		return nil, errf(op, CodeInval, "count %d is more than a named AV holds (%d)", a.Count, namedMaxCap)
	}
	// The file is sparse (tmpfs allocates pages when touched), so the
	// capacity is generous: twice Count, at least MinCap.
	capacity := min(max(2*uint64(a.Count), MinCap), namedMaxCap)
	slot := uint64(namedSlotSize(format))
	if err := f.Truncate(int64(HdrSize + capacity*slot)); err != nil {
		f.Close()
		return nil, errf(op, CodeNoMem, "size named AV: %v", err)
	}
	m, err := mmap.Map(f, mmap.RDWR, 0)
	if err != nil {
		f.Close()
		return nil, errf(op, CodeNoMem, "map named AV: %v", err)
	}
	n := &Named{path: path, f: f, m: m, format: format, slot: slot, cap: capacity, pid: -1}
	copy(m, Magic)
	le := binary.LittleEndian
	le.PutUint32(m[OffVersion:], Version)
	le.PutUint32(m[OffHdrSize:], HdrSize)
	le.PutUint32(m[OffFormat:], uint32(format))
	le.PutUint32(m[OffSlotSize:], uint32(slot))
	le.PutUint32(m[OffCap:], uint32(capacity))
	if a.Symmetric {
		le.PutUint32(m[OffFlags:], 1)
	}
	mapAddr := a.MapAddr
	if mapAddr == 0 {
		mapAddr = uint64(uintptr(unsafe.Pointer(&m[0])))
	}
	le.PutUint64(m[OffMapAddr:], mapAddr)
	a.MapAddr = mapAddr
	if err := n.register(); err != nil {
		n.unmap()
		return nil, err
	}
	if err := os.Link(tmp, path); err != nil {
		n.unmap()
		if errors.Is(err, os.ErrExist) {
			return nil, os.ErrExist
		}
		return nil, errf(op, CodeAccess, "publish named AV: %v", err)
	}
	return n, nil
}

// mapNamed maps f and validates its header against the AV's format.
func mapNamed(f *os.File, path string, format Format, ro bool) (*Named, error) {
	const op = "Domain.OpenAV"
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, errf(op, CodeAccess, "stat named AV: %v", err)
	}
	if st.Uid != uint32(os.Getuid()) || st.Mode&0o077 != 0 {
		return nil, errf(op, CodePerm, "named AV %s is not private to this user (uid %d, mode %o)", path, st.Uid, st.Mode&0o777)
	}
	if st.Size < HdrSize || st.Size > HdrSize+namedMaxCap*namedStrSlot {
		return nil, errf(op, CodeInval, "named AV %s: bad size %d", path, st.Size)
	}
	prot := mmap.RDWR
	if ro {
		prot = mmap.RDONLY
	}
	m, err := mmap.Map(f, prot, 0)
	if err != nil {
		return nil, errf(op, CodeNoMem, "map named AV: %v", err)
	}
	n := &Named{path: path, f: f, m: m, ro: ro, format: format, pid: -1}
	if err := n.validate(uint64(len(m))); err != nil {
		m.Unmap()
		return nil, err
	}
	return n, nil
}

// validate checks the header of a mapping of size bytes.
func (n *Named) validate(size uint64) error {
	const op = "Domain.OpenAV"
	m := n.m
	le := binary.LittleEndian
	if string(m[:8]) != Magic {
		return errf(op, CodeInval, "%s is not a gofi named AV (bad magic)", n.path)
	}
	if v := le.Uint32(m[OffVersion:]); v != Version {
		return errf(op, CodeInval, "%s: named AV version %d, want %d", n.path, v, Version)
	}
	if h := le.Uint32(m[OffHdrSize:]); h != HdrSize {
		return errf(op, CodeInval, "%s: header size %d, want %d", n.path, h, HdrSize)
	}
	if f := Format(le.Uint32(m[OffFormat:])); f != n.format {
		return errf(op, CodeInval, "%s holds %v addresses, this domain uses %v", n.path, f, n.format)
	}
	if s := le.Uint32(m[OffSlotSize:]); s != namedSlotSize(n.format) {
		return errf(op, CodeInval, "%s: slot size %d, want %d", n.path, s, namedSlotSize(n.format))
	}
	n.slot = uint64(namedSlotSize(n.format))
	n.cap = uint64(le.Uint32(m[OffCap:]))
	if n.cap == 0 || n.cap > namedMaxCap || HdrSize+n.cap*n.slot > size {
		return errf(op, CodeInval, "%s: capacity %d does not fit %d bytes", n.path, n.cap, size)
	}
	return nil
}

func (n *Named) checkMapAddr(a *NamedOpts) error {
	ma := binary.LittleEndian.Uint64(n.m[OffMapAddr:])
	if a.MapAddr != 0 && a.MapAddr != ma {
		return errf("Domain.OpenAV", CodeInval, "map_addr %#x differs from the named AV's %#x", a.MapAddr, ma)
	}
	a.MapAddr = ma
	return nil
}

func pidAlive(pid uint32) bool {
	if pid == 0 || pid > 1<<22 {
		return false
	}
	err := unix.Kill(int(pid), 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// reapDeadPids clears pid slots of dead processes (file lock held) and
// reports whether any live process remains.
func (n *Named) reapDeadPids() bool {
	live := false
	for k := uint64(0); k < namedMaxPids; k++ {
		p := n.u32(OffPids + 4*k)
		if pid := p.Load(); pid != 0 {
			if pidAlive(pid) {
				live = true
			} else {
				p.Store(0)
			}
		}
	}
	return live
}

// register records this process in a free pid slot (file lock held or
// file not yet published).
func (n *Named) register() error {
	for k := uint64(0); k < namedMaxPids; k++ {
		p := n.u32(OffPids + 4*k)
		if pid := p.Load(); pid == 0 || !pidAlive(pid) {
			p.Store(uint32(os.Getpid()))
			n.pid = int(k)
			return nil
		}
	}
	return errf("Domain.OpenAV", CodeBusy, "named AV %s is open in %d processes already", n.path, namedMaxPids)
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EINTR) {
			return errf("AV", CodeIO, "flock %s: %v", f.Name(), err)
		}
	}
}

// samePath reports whether path still names the file f.
func samePath(f *os.File, path string) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Stat(path, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// Lock takes the file lock writers hold (Insert, InsertRange, Remove).
func (n *Named) Lock() error { return flock(n.f, unix.LOCK_EX) }

// Unlock releases the file lock.
func (n *Named) Unlock() { flock(n.f, unix.LOCK_UN) }

// SlotOff is the offset of index i's slot in the file.
func (n *Named) SlotOff(i uint64) uint64 { return HdrSize + i*n.slot }

// SlotSize is the size of a slot; Cap the AV's capacity in entries;
// PidSlot the pid slot this process registered in (-1 when none); Mem the
// shared mapping (for tests playing a hostile process).
func (n *Named) SlotSize() uint64 { return n.slot }
func (n *Named) Cap() uint64      { return n.cap }
func (n *Named) PidSlot() int     { return n.pid }
func (n *Named) Mem() []byte      { return n.m }

// HW returns the high-water mark (one past the highest index used),
// clamped to the capacity.
func (n *Named) HW() uint64 { return min(uint64(n.u32(OffHW).Load()), n.cap) }

// Valid reports whether index i holds an address.
func (n *Named) Valid(i uint64) bool {
	return i < n.HW() && n.used(i)
}

// Get returns the bytes at i: a read-only slice of the shared mapping, or
// for a range entry its encoding in scratch.
func (n *Named) Get(i uint64, scratch []byte) ([]byte, bool) {
	if i >= n.HW() {
		return nil, false
	}
	off := n.SlotOff(i)
	switch n.u32(off).Load() {
	case 1:
		l := min(uint64(binary.LittleEndian.Uint16(n.m[off+4:])), n.slot-namedSlotHead)
		return n.m[off+namedSlotHead : off+namedSlotHead+l : off+namedSlotHead+l], true
	case 0:
		if r := n.inRange(i); r != nil {
			return r.encode(i, scratch)
		}
	}
	return nil, false
}

// Insert stores b at the lowest unused index (file lock held).
func (n *Named) Insert(b []byte) (uint64, error) {
	if uint64(len(b)) > n.slot-namedSlotHead {
		return 0, errf("AV.Insert", CodeInval, "%d-byte address does not fit a named AV slot (%d)", len(b), n.slot-namedSlotHead)
	}
	i := n.lowest()
	if i >= n.cap {
		return 0, ErrFull
	}
	off := n.SlotOff(i)
	s := n.m[off+namedSlotHead : off+n.slot]
	clear(s)
	copy(s, b)
	binary.LittleEndian.PutUint16(n.m[off+4:], uint16(len(b)))
	n.u32(off).Store(1)
	if i >= n.HW() {
		n.u32(OffHW).Store(uint32(i + 1))
	}
	n.u32(OffLowFree).Store(uint32(i + 1))
	n.u32(OffLive).Add(1)
	n.u64(OffGen).Add(1)
	return i, nil
}

// Remove frees index i (valid, file lock held).
func (n *Named) Remove(i uint64) {
	st := uint32(0)
	if n.inRange(i) != nil {
		st = 2 // keep the range from reviving it
	}
	n.u32(n.SlotOff(i)).Store(st)
	if lf := uint64(n.u32(OffLowFree).Load()); i < lf {
		n.u32(OffLowFree).Store(uint32(i))
	}
	n.u32(OffLive).Add(^uint32(0))
	n.u64(OffGen).Add(1)
}

// Count returns the number of entries in use.
func (n *Named) Count() int { return int(min(uint64(n.u32(OffLive).Load()), n.cap)) }

// SetKey makes Find compare key(stored address) with its argument, which
// the caller keys itself (see Table.SetKey). Call it right after OpenNamed.
func (n *Named) SetKey(key func([]byte) []byte) {
	n.revMu.Lock()
	n.key, n.revOK = key, false
	n.revMu.Unlock()
}

// Find looks addr up: stored entries in a per-process map rebuilt
// whenever the shared generation changed, range entries by arithmetic.
func (n *Named) Find(addr []byte) (uint64, bool) {
	n.revMu.Lock()
	defer n.revMu.Unlock()
	if g := n.u64(OffGen).Load(); !n.revOK || g != n.revGen {
		n.rev = make(map[string]uint64)
		hw := n.HW()
		for i := uint64(0); i < hw; i++ {
			off := n.SlotOff(i)
			if n.u32(off).Load() != 1 {
				continue
			}
			if b, ok := n.Get(i, nil); ok {
				if n.key != nil {
					b = n.key(b)
				}
				if _, dup := n.rev[string(b)]; !dup {
					n.rev[string(b)] = i
				}
			}
		}
		n.revGen, n.revOK = g, true
	}
	if i, ok := n.rev[string(addr)]; ok { // addr is keyed by the caller (SetKey)
		return i, true
	}
	for _, r := range n.ranges() {
		if i, ok := r.index(addr); ok && i < n.HW() && n.u32(n.SlotOff(i)).Load() == 0 {
			return i, true
		}
	}
	return 0, false
}

// Close unregisters this process and removes the file if it was the last.
func (n *Named) Close() error {
	if !n.ro {
		if err := n.Lock(); err == nil {
			if n.pid >= 0 {
				n.u32(OffPids + 4*uint64(n.pid)).Store(0)
			}
			if !n.reapDeadPids() && samePath(n.f, n.path) {
				os.Remove(n.path)
			}
			n.Unlock()
		}
	}
	return n.unmap()
}

// unmap unmaps the file and closes it.
func (n *Named) unmap() error {
	err := n.m.Unmap()
	n.f.Close()
	if err != nil {
		return errf("AV.Close", CodeIO, "unmap named AV: %v", err)
	}
	return nil
}
