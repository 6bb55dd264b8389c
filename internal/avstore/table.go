package avstore

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"net/netip"
	"sync/atomic"

	"github.com/gofi-dev/fi/internal/sockaddr"
)

// Storage of a private (unnamed) AV.
//
// Fixed-size formats (sockaddr_in: 16 bytes, sockaddr_in6 and FormatAny:
// 28 bytes) keep entries in pages of avPageSize slots, allocated when a
// slot in them is first used: index i lives at pages[i>>avPageShift] at
// offset (i & (avPageSize-1)) * stride. FI_ADDR_STR entries are variable
// length and kept one slice each. Bitmaps say which indices are in use and
// which belong to a compact symmetric range (InsertSym on an AV opened with
// fi.Symmetric): those have no per-entry bytes at all; their address is
// computed from the range record.
//
// The reverse index (address -> index, for FI_SOURCE) is an open-addressed
// hash table of uint32 slots holding index+1 (0 empty, avTomb removed),
// keyed by maphash of the stored bytes and compared against storage, so it
// costs 4 bytes per slot and no allocation per entry.
//
// Memory per IPv4 entry: 16 bytes of page + 4 / load (load 3/8..3/4, so
// 5.3 to 10.7 bytes) of reverse index + 2 bits, about 22-27 bytes; a compact
// range costs 2 bits per entry plus one range record.
//
// Table is not safe for concurrent use; AV serialises access.

const (
	avPageShift = 12
	avPageSize  = 1 << avPageShift
	// IndexLimit bounds indices: below 2^32 (see maxAVIndex) and so that
	// index+1 fits a reverse-index slot without meeting avTomb.
	IndexLimit = 1<<32 - 2
	avTomb     = ^uint32(0)
	// MaxAddrLen is the largest fixed-size address (sockaddr_in6).
	MaxAddrLen = sockaddr.SizeIn6
)

// avRange is a compact symmetric range: nodes consecutive IP addresses
// from base, each with svcs consecutive ports from port, at indices
// start.. start+nodes*svcs-1, all ports of a node before the next node.
type avRange struct {
	start, n uint64
	svcs     uint64
	hi, lo   uint64 // base IP as a 128-bit number (IPv4 in lo)
	is4      bool
	port     uint16
	scope    uint32 // IPv6 scope id
}

// avPage holds avPageSize consecutive indices.
type avPage struct {
	valid  [avPageSize / 64]atomic.Uint64 // index in use
	ranged [avPageSize / 64]atomic.Uint64 // index belongs to a compact range
	// data holds fixed-size entries (stride bytes each); allocated before
	// the first stored entry of the page is published, never replaced.
	data []byte
	// vars holds FI_ADDR_STR entries (nil for fixed-size formats).
	vars []atomic.Pointer[[]byte]
}

// Table is the private AV storage. Writers (insert, remove,
// insertRange, the reverse index) run under the AV's write lock. get is
// lock-free: the page directory and range list are published by atomic
// pointer swaps (copy on growth), an entry's bytes are written before its
// valid bit is set with an atomic OR and read after loading that bit, so
// concurrent readers see either no entry or a complete one. A slot's bytes
// are rewritten only when its index is reused after Remove; reading a
// removed index concurrently is undefined, as fi_av(3) says.
type Table struct {
	format Format
	stride int                       // bytes per slot, 0 for variable-length (AddrStr)
	dir    atomic.Pointer[[]*avPage] // page directory
	ranges atomic.Pointer[[]avRange] // sorted by start
	high   atomic.Uint64             // one past the highest index ever used

	// writer-only state
	lowFree uint64 // no unused index below this
	nlive   int

	seed  maphash.Seed
	slots []uint32 // reverse index, power-of-two length
	used  int      // live slots
	tombs int
	// key, when set, maps addresses to what the reverse index compares
	// (shm+tcp: the part naming the peer on its route).
	key func([]byte) []byte
}

// SetKey makes Find compare key(stored address) with its argument, which
// the caller keys itself (a direct call to the key function keeps a probe
// on the caller's stack: one passed through a func value would escape to
// the heap on every lookup). Call it before the first Insert.
func (t *Table) SetKey(key func([]byte) []byte) { t.key = key }

// k is the reverse index's view of address b.
func (t *Table) k(b []byte) []byte {
	if t.key != nil {
		return t.key(b)
	}
	return b
}

// NewTable returns an empty table for addresses of format, sized for
// about hint entries.
func NewTable(format Format, hint int) *Table {
	t := &Table{format: format, seed: maphash.MakeSeed()}
	switch format {
	case FormatIn:
		t.stride = sockaddr.SizeIn
	case FormatIn6, FormatAny:
		t.stride = sockaddr.SizeIn6
	}
	n := 16
	for n < hint*2 && n < 1<<30 {
		n *= 2
	}
	t.slots = make([]uint32, n)
	t.dir.Store(new([]*avPage))
	t.ranges.Store(new([]avRange))
	return t
}

// HW returns one past the highest index ever used.
func (t *Table) HW() uint64 { return t.high.Load() }

// Live returns the number of indices in use (writers only).
func (t *Table) Live() int { return t.nlive }

// Footprint returns the number of compact ranges and of pages holding
// entry bytes.
func (t *Table) Footprint() (ranges, dataPages int) {
	for _, pg := range *t.dir.Load() {
		if pg != nil && pg.data != nil {
			dataPages++
		}
	}
	return len(*t.ranges.Load()), dataPages
}

// page returns the page of index i, nil when none exists yet.
func (t *Table) page(i uint64) *avPage {
	d := *t.dir.Load()
	if p := i >> avPageShift; p < uint64(len(d)) {
		return d[p]
	}
	return nil
}

// ensurePage returns the page of index i, creating it (writers only).
func (t *Table) ensurePage(i uint64) *avPage {
	d := *t.dir.Load()
	p := i >> avPageShift
	if p >= uint64(len(d)) {
		nd := make([]*avPage, p+1, max(p+1, 2*uint64(len(d))))
		copy(nd, d)
		t.dir.Store(&nd)
		d = nd
	}
	if d[p] == nil {
		pg := &avPage{}
		if t.stride == 0 {
			pg.vars = make([]atomic.Pointer[[]byte], avPageSize)
		}
		d[p] = pg // published to readers by the valid bits set later
	}
	return d[p]
}

// Valid reports whether index i holds an address.
func (t *Table) Valid(i uint64) bool {
	pg := t.page(i)
	return pg != nil && pg.valid[(i&(avPageSize-1))/64].Load()&(1<<(i%64)) != 0
}

func (t *Table) isRanged(i uint64) bool {
	pg := t.page(i)
	return pg != nil && pg.ranged[(i&(avPageSize-1))/64].Load()&(1<<(i%64)) != 0
}

// lowestFree returns the lowest unused index.
func (t *Table) lowestFree() uint64 {
	d := *t.dir.Load()
	for w := t.lowFree / 64; ; w++ {
		p := w / (avPageSize / 64)
		if p >= uint64(len(d)) || d[p] == nil {
			i := max(w*64, t.lowFree)
			t.lowFree = i
			return i
		}
		x := d[p].valid[w%(avPageSize/64)].Load()
		if w == t.lowFree/64 {
			x |= 1<<(t.lowFree%64) - 1 // bits below lowFree are known used
		}
		if x != ^uint64(0) {
			i := w*64 + uint64(bits.TrailingZeros64(^x))
			t.lowFree = i
			return i
		}
	}
}

// Insert stores the canonical address b at the lowest unused index.
func (t *Table) Insert(b []byte) (uint64, error) {
	i := t.lowestFree()
	if i >= IndexLimit {
		return 0, ErrFull
	}
	pg := t.ensurePage(i)
	o := i & (avPageSize - 1)
	if t.stride > 0 {
		if pg.data == nil {
			pg.data = make([]byte, avPageSize*t.stride)
		}
		off := int(o) * t.stride
		slot := pg.data[off : off+t.stride]
		clear(slot)
		copy(slot, b)
	} else {
		c := bytes.Clone(b)
		pg.vars[o].Store(&c)
	}
	pg.ranged[o/64].And(^(1 << (o % 64)))
	pg.valid[o/64].Or(1 << (o % 64)) // publish
	if i >= t.high.Load() {
		t.high.Store(i + 1)
	}
	t.lowFree = i + 1
	t.nlive++
	t.revAdd(i)
	return i, nil
}

// Remove frees index i (valid(i) holds).
func (t *Table) Remove(i uint64) {
	if !t.isRanged(i) {
		t.revRemove(i)
	}
	pg := t.page(i)
	o := i & (avPageSize - 1)
	pg.valid[o/64].And(^(1 << (o % 64)))
	t.nlive--
	t.lowFree = min(t.lowFree, i)
}

// Get returns the address at i: a slice of storage, or for an entry of a
// compact range its encoding in scratch (len >= MaxAddrLen). Safe to
// call concurrently with writers (see Table).
func (t *Table) Get(i uint64, scratch []byte) ([]byte, bool) {
	pg := t.page(i)
	if pg == nil {
		return nil, false
	}
	o := i & (avPageSize - 1)
	bit := uint64(1) << (o % 64)
	if pg.valid[o/64].Load()&bit == 0 {
		return nil, false
	}
	if pg.ranged[o/64].Load()&bit != 0 {
		return t.rangeGet(i, scratch)
	}
	if t.stride == 0 {
		p := pg.vars[o].Load()
		if p == nil {
			return nil, false
		}
		return *p, true
	}
	off := int(o) * t.stride
	slot := pg.data[off : off+t.stride : off+t.stride]
	if t.format == FormatAny && binary.LittleEndian.Uint16(slot) == sockaddr.AfInet {
		return slot[:sockaddr.SizeIn:sockaddr.SizeIn], true
	}
	return slot, true
}

// stored returns the bytes kept for a non-range entry i.
func (t *Table) stored(i uint64) []byte {
	b, _ := t.Get(i, nil)
	return b
}

// hash hashes the key of a stored entry b; hashKey a key.
func (t *Table) hash(b []byte) uint64    { return t.hashKey(t.k(b)) }
func (t *Table) hashKey(k []byte) uint64 { return maphash.Bytes(t.seed, k) }

func (t *Table) revAdd(i uint64) {
	if (t.used+t.tombs+1)*4 > len(t.slots)*3 {
		t.rehash()
	}
	mask := uint64(len(t.slots) - 1)
	for h := t.hash(t.stored(i)) & mask; ; h = (h + 1) & mask {
		if s := t.slots[h]; s == 0 || s == avTomb {
			if s == avTomb {
				t.tombs--
			}
			t.slots[h] = uint32(i + 1)
			t.used++
			return
		}
	}
}

func (t *Table) revRemove(i uint64) {
	mask := uint64(len(t.slots) - 1)
	for h := t.hash(t.stored(i)) & mask; t.slots[h] != 0; h = (h + 1) & mask {
		if uint64(t.slots[h]) == i+1 {
			t.slots[h] = avTomb
			t.used--
			t.tombs++
			return
		}
	}
}

// rehash rebuilds the reverse index at a load of at most 3/8.
func (t *Table) rehash() {
	n := 16
	for n*3 < (t.used+1)*8 {
		n *= 2
	}
	old := t.slots
	t.slots = make([]uint32, n)
	t.used, t.tombs = 0, 0
	mask := uint64(n - 1)
	for _, s := range old {
		if s == 0 || s == avTomb {
			continue
		}
		for h := t.hash(t.stored(uint64(s-1))) & mask; ; h = (h + 1) & mask {
			if t.slots[h] == 0 {
				t.slots[h] = s
				t.used++
				break
			}
		}
	}
}

// Find returns the lowest-probe index holding addr, or the index of addr
// in a compact range.
func (t *Table) Find(addr []byte) (uint64, bool) {
	if len(t.slots) > 0 {
		mask := uint64(len(t.slots) - 1)
		for h := t.hashKey(addr) & mask; t.slots[h] != 0; h = (h + 1) & mask {
			s := t.slots[h]
			if s != avTomb && bytes.Equal(t.k(t.stored(uint64(s-1))), addr) {
				return uint64(s - 1), true
			}
		}
	}
	if len(*t.ranges.Load()) > 0 {
		return t.rangeFind(addr)
	}
	return 0, false
}

// InsertRange stores nodes x svcs addresses as one compact range, when
// the unused indices are exactly those from hw on (no holes below); ok is
// false otherwise and the caller inserts them one by one.
func (t *Table) InsertRange(base netip.AddrPort, nodes, svcs uint64) (uint64, bool) {
	hw := t.high.Load()
	if t.stride == 0 || t.lowestFree() != hw {
		return 0, false
	}
	n := nodes * svcs
	if n == 0 || n/svcs != nodes || hw+n > IndexLimit {
		return 0, false
	}
	ip := base.Addr()
	if t.format == FormatIn && !ip.Is4() || t.format == FormatIn6 && ip.Is4() {
		return 0, false
	}
	r := avRange{start: hw, n: n, svcs: svcs, is4: ip.Is4(), port: base.Port()}
	r.hi, r.lo = sockaddr.Words(ip)
	scope, err := sockaddr.Scope(ip)
	if err != nil {
		return 0, false
	}
	r.scope = scope
	old := *t.ranges.Load()
	nr := append(old[:len(old):len(old)], r)
	t.ranges.Store(&nr) // the record first, then the bits that point to it
	for i := r.start; i < r.start+n; {
		pg := t.ensurePage(i)
		o := i & (avPageSize - 1)
		k := min(64-o%64, r.start+n-i) // bits of this word in the range
		mask := (^uint64(0) >> (64 - k)) << (o % 64)
		pg.ranged[o/64].Or(mask)
		pg.valid[o/64].Or(mask)
		i += k
	}
	t.high.Store(hw + n)
	t.lowFree = hw + n
	t.nlive += int(n)
	return r.start, true
}

func (t *Table) rangeGet(i uint64, scratch []byte) ([]byte, bool) {
	rs := *t.ranges.Load()
	a, z := 0, len(rs) // first range ending past i
	for a < z {
		m := int(uint(a+z) >> 1)
		if rs[m].start+rs[m].n > i {
			z = m
		} else {
			a = m + 1
		}
	}
	if a == len(rs) || rs[a].start > i {
		return nil, false
	}
	return rs[a].encode(i, scratch)
}

// encode writes the sockaddr of index i (within r) into scratch.
func (r *avRange) encode(i uint64, scratch []byte) ([]byte, bool) {
	if i < r.start || i-r.start >= r.n || r.svcs == 0 || len(scratch) < MaxAddrLen {
		return nil, false
	}
	off := i - r.start
	node, svc := off/r.svcs, off%r.svcs
	lo, c := bits.Add64(r.lo, node, 0)
	hi := r.hi + c
	port := uint16(uint64(r.port) + svc)
	if r.is4 {
		b := scratch[:sockaddr.SizeIn]
		clear(b)
		binary.LittleEndian.PutUint16(b, sockaddr.AfInet)
		binary.BigEndian.PutUint16(b[2:], port)
		binary.BigEndian.PutUint32(b[4:], uint32(lo))
		return b, true
	}
	b := scratch[:sockaddr.SizeIn6]
	clear(b)
	binary.LittleEndian.PutUint16(b, sockaddr.AfInet6)
	binary.BigEndian.PutUint16(b[2:], port)
	binary.BigEndian.PutUint64(b[8:], hi)
	binary.BigEndian.PutUint64(b[16:], lo)
	binary.LittleEndian.PutUint32(b[24:], r.scope)
	return b, true
}

// index returns the index the canonical sockaddr addr has in r, if any.
func (r *avRange) index(addr []byte) (uint64, bool) {
	ap, err := sockaddr.Decode(addr)
	if err != nil || r.svcs == 0 || ap.Addr().Is4() != r.is4 {
		return 0, false
	}
	hi, lo := sockaddr.Words(ap.Addr())
	dlo, b := bits.Sub64(lo, r.lo, 0)
	dhi := hi - r.hi - b
	if dhi != 0 || dlo >= r.n/r.svcs {
		return 0, false
	}
	if ap.Port() < r.port || uint64(ap.Port()-r.port) >= r.svcs {
		return 0, false
	}
	i := r.start + dlo*r.svcs + uint64(ap.Port()-r.port)
	if !r.is4 { // the scope id must match too
		var tmp [MaxAddrLen]byte
		if e, ok := r.encode(i, tmp[:]); !ok || !bytes.Equal(e, addr) {
			return 0, false
		}
	}
	return i, true
}

func (t *Table) rangeFind(addr []byte) (uint64, bool) {
	rs := *t.ranges.Load()
	for k := range rs {
		if i, ok := rs[k].index(addr); ok && t.Valid(i) && t.isRanged(i) {
			return i, true
		}
	}
	return 0, false
}
