package fi

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
)

// Named AVs shared between processes of one user on one host.
//
// A named AV is a file /dev/shm/gofi-av-<uid>-<name> (mode 0600) mapped by
// every process that opens it. The file is a wire format, read as
// untrusted input: every field is checked before use, a foreign or corrupt
// file is refused with ErrInval (ErrPerm when owned by another user or
// readable by others).
//
//	offset size  field
//	0      8     magic "gofiAV\x00\x01"
//	8      4     version (1)
//	12     4     header size (320)
//	16     4     address format (AddrFormat)
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

const (
	namedMagic    = "gofiAV\x00\x01"
	namedVersion  = 1
	namedHdrSize  = 1152
	namedMaxPids  = 64
	namedMinCap   = 1 << 16
	namedMaxCap   = 1 << 24
	namedStrSlot  = 256 // slot size for FI_ADDR_STR entries
	namedSlotHead = 8

	hVersion  = 8
	hHdrSize  = 12
	hFormat   = 16
	hSlotSize = 20
	hCap      = 24
	hHW       = 28
	hLowFree  = 32
	hFlags    = 36
	hMapAddr  = 40
	hGen      = 48
	hLive     = 56
	hPids     = 64
	hNRanges  = 320
	hRanges   = 328

	namedMaxRanges = 16
	namedRangeSize = 48
)

// namedAVDir is where named AVs live; tests may point it elsewhere.
var namedAVDir = "/dev/shm"

// namedAVPath returns the file of the named AV name, checking the name.
func namedAVPath(name string) (string, error) {
	if len(name) == 0 || len(name) > 200 || name[0] == '.' {
		return "", opErr("Domain.OpenAV", ErrInval, "bad AV name %q (1..200 of [A-Za-z0-9._-], not starting with '.')", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "", opErr("Domain.OpenAV", ErrInval, "bad AV name %q (1..200 of [A-Za-z0-9._-], not starting with '.')", name)
		}
	}
	return filepath.Join(namedAVDir, fmt.Sprintf("gofi-av-%d-%s", os.Getuid(), name)), nil
}

// namedSlotSize is the slot size for entries of format f.
func namedSlotSize(f AddrFormat) uint32 {
	switch f {
	case SockaddrIn:
		return namedSlotHead + sizeofSockIn
	case SockaddrIn6, Sockaddr:
		return namedSlotHead + sizeofSockI6 + 4 // 40: keeps slots 8-aligned
	}
	return namedStrSlot
}

// namedAV is an open named AV. Its methods other than find are called
// with the owning AV's lock held; writers bracket changes with lock and
// unlock.
type namedAV struct {
	path   string
	f      *os.File
	m      mmap.MMap
	ro     bool
	format AddrFormat
	slot   uint64 // slot size
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
func (n *namedAV) ranges() []avRange {
	if n.slot == namedStrSlot {
		return nil // FI_ADDR_STR AVs have no ranges
	}
	cnt := min(uint64(n.u32(hNRanges).Load()), namedMaxRanges)
	if c := n.rcache.Load(); c != nil && uint64(cap(*c)) == cnt {
		return *c
	}
	le := binary.LittleEndian
	out := make([]avRange, 0, cnt)
	for k := uint64(0); k < cnt; k++ {
		b := n.m[hRanges+k*namedRangeSize : hRanges+(k+1)*namedRangeSize]
		r := avRange{
			start: uint64(le.Uint32(b[0:])), n: uint64(le.Uint32(b[4:])), svcs: uint64(le.Uint32(b[8:])),
			port: le.Uint16(b[12:]), is4: b[14] == 1, scope: le.Uint32(b[16:]),
			hi: le.Uint64(b[24:]), lo: le.Uint64(b[32:]),
		}
		if r.n == 0 || r.svcs == 0 || r.n%r.svcs != 0 || r.start+r.n > n.cap || r.svcs > 65536 ||
			uint64(r.port)+r.svcs-1 > 65535 || (r.is4 && (r.hi != 0 || r.lo+r.n/r.svcs-1 > 0xffffffff)) ||
			(r.is4 && n.format == SockaddrIn6) || (!r.is4 && n.format == SockaddrIn) {
			continue
		}
		out = append(out, r)
	}
	out = out[:len(out):cnt] // cap records the count it was decoded for
	n.rcache.Store(&out)
	return out
}

// inRange returns the range holding index i, if any.
func (n *namedAV) inRange(i uint64) *avRange {
	rs := n.ranges()
	for k := range rs {
		if i >= rs[k].start && i-rs[k].start < rs[k].n {
			return &rs[k]
		}
	}
	return nil
}

// used reports whether index i holds an address.
func (n *namedAV) used(i uint64) bool {
	switch n.u32(n.slotOff(i)).Load() {
	case 1:
		return true
	case 0:
		return n.inRange(i) != nil
	}
	return false
}

// insertRange publishes a compact range at the end of the AV when no
// unused index lies below it (file lock held).
func (n *namedAV) insertRange(base netip.AddrPort, nodes, svcs uint64) (uint64, bool) {
	cnt := uint64(n.u32(hNRanges).Load())
	hw := n.hw()
	num := nodes * svcs
	if cnt >= namedMaxRanges || n.slot == namedStrSlot || num == 0 || hw+num > n.cap || n.lowest() != hw {
		return 0, false
	}
	ip := base.Addr()
	if n.format == SockaddrIn && !ip.Is4() || n.format == SockaddrIn6 && ip.Is4() {
		return 0, false
	}
	var scope uint32
	if ip.Zone() != "" {
		b, err := SockaddrFromAddrPort(base)
		if err != nil {
			return 0, false
		}
		scope = binary.LittleEndian.Uint32(b[24:])
	}
	hi, lo := ipWords(ip)
	le := binary.LittleEndian
	b := n.m[hRanges+cnt*namedRangeSize : hRanges+(cnt+1)*namedRangeSize]
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
	n.u32(hNRanges).Store(uint32(cnt + 1)) // publish
	n.u32(hHW).Store(uint32(hw + num))
	n.u32(hLowFree).Store(uint32(hw + num))
	n.u32(hLive).Add(uint32(num))
	n.u64(hGen).Add(1)
	return hw, true
}

// lowest returns the lowest unused index, cap when full (lock held).
func (n *namedAV) lowest() uint64 {
	i := uint64(n.u32(hLowFree).Load())
	if i > n.cap { // a corrupt hint: scan from the start
		i = 0
	}
	for i < n.cap && n.used(i) {
		i++
	}
	return i
}

func (n *namedAV) u32(off uint64) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&n.m[off]))
}

func (n *namedAV) u64(off uint64) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&n.m[off]))
}

// openNamedAV opens or creates the named AV; a.MapAddr is set to the AV's.
func openNamedAV(name string, format AddrFormat, a *AVAttr) (*namedAV, error) {
	const op = "Domain.OpenAV"
	path, err := namedAVPath(name)
	if err != nil {
		return nil, err
	}
	if a.Flags&Read != 0 {
		f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, opErr(op, ErrNoEnt, "named AV %q does not exist", name)
			}
			return nil, opErr(op, ErrAccess, "open named AV %q: %v", name, err)
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
			return nil, opErr(op, ErrAccess, "open named AV %q: %v", name, err)
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
	return nil, opErr(op, ErrAgain, "named AV %q kept changing while opening it", name)
}

// createNamed creates the AV under a temporary name and links it into
// place; os.ErrExist when another process won.
func createNamed(path string, format AddrFormat, a *AVAttr) (*namedAV, error) {
	const op = "Domain.OpenAV"
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := fmt.Sprintf("%s.tmp-%d-%x", path, os.Getpid(), rnd)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, opErr(op, ErrAccess, "create named AV: %v", err)
	}
	defer os.Remove(tmp)
	if a.Count > namedMaxCap {
		f.Close()
		return nil, opErr(op, ErrInval, "count %d is more than a named AV holds (%d)", a.Count, namedMaxCap)
	}
	// The file is sparse (tmpfs allocates pages when touched), so the
	// capacity is generous: twice Count, at least namedMinCap.
	capacity := min(max(2*uint64(a.Count), namedMinCap), namedMaxCap)
	slot := uint64(namedSlotSize(format))
	if err := f.Truncate(int64(namedHdrSize + capacity*slot)); err != nil {
		f.Close()
		return nil, opErr(op, ErrNoMem, "size named AV: %v", err)
	}
	m, err := mmap.Map(f, mmap.RDWR, 0)
	if err != nil {
		f.Close()
		return nil, opErr(op, ErrNoMem, "map named AV: %v", err)
	}
	n := &namedAV{path: path, f: f, m: m, format: format, slot: slot, cap: capacity, pid: -1}
	copy(m, namedMagic)
	le := binary.LittleEndian
	le.PutUint32(m[hVersion:], namedVersion)
	le.PutUint32(m[hHdrSize:], namedHdrSize)
	le.PutUint32(m[hFormat:], uint32(format))
	le.PutUint32(m[hSlotSize:], uint32(slot))
	le.PutUint32(m[hCap:], uint32(capacity))
	if a.Flags&Symmetric != 0 {
		le.PutUint32(m[hFlags:], 1)
	}
	mapAddr := a.MapAddr
	if mapAddr == 0 {
		mapAddr = uint64(uintptr(unsafe.Pointer(&m[0])))
	}
	le.PutUint64(m[hMapAddr:], mapAddr)
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
		return nil, opErr(op, ErrAccess, "publish named AV: %v", err)
	}
	return n, nil
}

// mapNamed maps f and validates its header against the AV's format.
func mapNamed(f *os.File, path string, format AddrFormat, ro bool) (*namedAV, error) {
	const op = "Domain.OpenAV"
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, opErr(op, ErrAccess, "stat named AV: %v", err)
	}
	if st.Uid != uint32(os.Getuid()) || st.Mode&0o077 != 0 {
		return nil, opErr(op, ErrPerm, "named AV %s is not private to this user (uid %d, mode %o)", path, st.Uid, st.Mode&0o777)
	}
	if st.Size < namedHdrSize || st.Size > namedHdrSize+namedMaxCap*namedStrSlot {
		return nil, opErr(op, ErrInval, "named AV %s: bad size %d", path, st.Size)
	}
	prot := mmap.RDWR
	if ro {
		prot = mmap.RDONLY
	}
	m, err := mmap.Map(f, prot, 0)
	if err != nil {
		return nil, opErr(op, ErrNoMem, "map named AV: %v", err)
	}
	n := &namedAV{path: path, f: f, m: m, ro: ro, format: format, pid: -1}
	if err := n.validate(uint64(len(m))); err != nil {
		m.Unmap()
		return nil, err
	}
	return n, nil
}

// validate checks the header of a mapping of size bytes.
func (n *namedAV) validate(size uint64) error {
	const op = "Domain.OpenAV"
	m := n.m
	le := binary.LittleEndian
	if string(m[:8]) != namedMagic {
		return opErr(op, ErrInval, "%s is not a gofi named AV (bad magic)", n.path)
	}
	if v := le.Uint32(m[hVersion:]); v != namedVersion {
		return opErr(op, ErrInval, "%s: named AV version %d, want %d", n.path, v, namedVersion)
	}
	if h := le.Uint32(m[hHdrSize:]); h != namedHdrSize {
		return opErr(op, ErrInval, "%s: header size %d, want %d", n.path, h, namedHdrSize)
	}
	if f := AddrFormat(le.Uint32(m[hFormat:])); f != n.format {
		return opErr(op, ErrInval, "%s holds %v addresses, this domain uses %v", n.path, f, n.format)
	}
	if s := le.Uint32(m[hSlotSize:]); s != namedSlotSize(n.format) {
		return opErr(op, ErrInval, "%s: slot size %d, want %d", n.path, s, namedSlotSize(n.format))
	}
	n.slot = uint64(namedSlotSize(n.format))
	n.cap = uint64(le.Uint32(m[hCap:]))
	if n.cap == 0 || n.cap > namedMaxCap || namedHdrSize+n.cap*n.slot > size {
		return opErr(op, ErrInval, "%s: capacity %d does not fit %d bytes", n.path, n.cap, size)
	}
	return nil
}

func (n *namedAV) checkMapAddr(a *AVAttr) error {
	ma := binary.LittleEndian.Uint64(n.m[hMapAddr:])
	if a.MapAddr != 0 && a.MapAddr != ma {
		return opErr("Domain.OpenAV", ErrInval, "map_addr %#x differs from the named AV's %#x", a.MapAddr, ma)
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
func (n *namedAV) reapDeadPids() bool {
	live := false
	for k := uint64(0); k < namedMaxPids; k++ {
		p := n.u32(hPids + 4*k)
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
func (n *namedAV) register() error {
	for k := uint64(0); k < namedMaxPids; k++ {
		p := n.u32(hPids + 4*k)
		if pid := p.Load(); pid == 0 || !pidAlive(pid) {
			p.Store(uint32(os.Getpid()))
			n.pid = int(k)
			return nil
		}
	}
	return opErr("Domain.OpenAV", ErrBusy, "named AV %s is open in %d processes already", n.path, namedMaxPids)
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EINTR) {
			return opErr("AV", ErrIO, "flock %s: %v", f.Name(), err)
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

func (n *namedAV) lock() error             { return flock(n.f, unix.LOCK_EX) }
func (n *namedAV) unlock()                 { flock(n.f, unix.LOCK_UN) }
func (n *namedAV) slotOff(i uint64) uint64 { return namedHdrSize + i*n.slot }

// hw returns the high-water mark, clamped to the capacity.
func (n *namedAV) hw() uint64 { return min(uint64(n.u32(hHW).Load()), n.cap) }

func (n *namedAV) valid(i uint64) bool {
	return i < n.hw() && n.used(i)
}

// get returns the bytes at i: a read-only slice of the shared mapping, or
// for a range entry its encoding in scratch.
func (n *namedAV) get(i uint64, scratch []byte) ([]byte, bool) {
	if i >= n.hw() {
		return nil, false
	}
	off := n.slotOff(i)
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

// insert stores b at the lowest unused index (file lock held).
func (n *namedAV) insert(b []byte) (uint64, error) {
	if uint64(len(b)) > n.slot-namedSlotHead {
		return 0, opErr("AV.Insert", ErrInval, "%d-byte address does not fit a named AV slot (%d)", len(b), n.slot-namedSlotHead)
	}
	i := n.lowest()
	if i >= n.cap {
		return 0, errAVFull
	}
	off := n.slotOff(i)
	s := n.m[off+namedSlotHead : off+n.slot]
	clear(s)
	copy(s, b)
	binary.LittleEndian.PutUint16(n.m[off+4:], uint16(len(b)))
	n.u32(off).Store(1)
	if i >= n.hw() {
		n.u32(hHW).Store(uint32(i + 1))
	}
	n.u32(hLowFree).Store(uint32(i + 1))
	n.u32(hLive).Add(1)
	n.u64(hGen).Add(1)
	return i, nil
}

// remove frees index i (valid, file lock held).
func (n *namedAV) remove(i uint64) {
	st := uint32(0)
	if n.inRange(i) != nil {
		st = 2 // keep the range from reviving it
	}
	n.u32(n.slotOff(i)).Store(st)
	if lf := uint64(n.u32(hLowFree).Load()); i < lf {
		n.u32(hLowFree).Store(uint32(i))
	}
	n.u32(hLive).Add(^uint32(0))
	n.u64(hGen).Add(1)
}

func (n *namedAV) count() int { return int(min(uint64(n.u32(hLive).Load()), n.cap)) }

// find looks addr up: stored entries in a per-process map rebuilt
// whenever the shared generation changed, range entries by arithmetic.
func (n *namedAV) find(addr []byte) (uint64, bool) {
	n.revMu.Lock()
	defer n.revMu.Unlock()
	if g := n.u64(hGen).Load(); !n.revOK || g != n.revGen {
		n.rev = make(map[string]uint64)
		hw := n.hw()
		for i := uint64(0); i < hw; i++ {
			off := n.slotOff(i)
			if n.u32(off).Load() != 1 {
				continue
			}
			if b, ok := n.get(i, nil); ok {
				if _, dup := n.rev[string(b)]; !dup {
					n.rev[string(b)] = i
				}
			}
		}
		n.revGen, n.revOK = g, true
	}
	if i, ok := n.rev[string(addr)]; ok {
		return i, true
	}
	for _, r := range n.ranges() {
		if i, ok := r.index(addr); ok && i < n.hw() && n.u32(n.slotOff(i)).Load() == 0 {
			return i, true
		}
	}
	return 0, false
}

// close unregisters this process and removes the file if it was the last.
func (n *namedAV) close() error {
	if !n.ro {
		if err := n.lock(); err == nil {
			if n.pid >= 0 {
				n.u32(hPids + 4*uint64(n.pid)).Store(0)
			}
			if !n.reapDeadPids() && samePath(n.f, n.path) {
				os.Remove(n.path)
			}
			n.unlock()
		}
	}
	return n.unmap()
}

func (n *namedAV) unmap() error {
	err := n.m.Unmap()
	n.f.Close()
	if err != nil {
		return opErr("AV.Close", ErrIO, "unmap named AV: %v", err)
	}
	return nil
}
