package fi

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"

	flink "github.com/gofi-dev/fi/link"
)

// Addr is a fabric address (fi_addr_t): an index into an address vector,
// possibly carrying a receive-context index (RxAddr) or a peer-group id
// (GroupAddr) in its high bits. Plain data.
type Addr uint64

// Special fabric addresses; both equal libfabric's ((uint64_t)-1).
const (
	// AddrNotAvail (FI_ADDR_NOTAVAIL) marks an address that could not be
	// inserted, and is passed to RxAddr by connected endpoints.
	AddrNotAvail Addr = ^Addr(0)
	// AddrUnspec (FI_ADDR_UNSPEC) means "any source" in receive calls.
	AddrUnspec Addr = ^Addr(0)
)

// maxAVIndex bounds AV indices: they stay below 2^32 so that the group id
// (GroupAddr, bits 32..63) and up to 32 receive-context bits (RxAddr, the
// top bits) never overlap an index.
const maxAVIndex = 1<<32 - 1

// maxRxCtxBits is the largest AVAttr.RxCtxBits accepted (see maxAVIndex).
const maxRxCtxBits = 32

// RxAddr returns the address of receive context rxIndex of the endpoint at
// a, as fi_rx_addr: rxIndex shifted into the top rxCtxBits bits of a
// ((rxIndex << (64 - rxCtxBits)) | a). rxCtxBits must match the AV's
// AVAttr.RxCtxBits; with rxCtxBits 0 the address is returned unchanged.
// Connected endpoints without an AV pass AddrNotAvail as a.
func RxAddr(a Addr, rxIndex, rxCtxBits int) Addr {
	if rxCtxBits <= 0 {
		return a
	}
	if rxCtxBits > 64 {
		rxCtxBits = 64
	}
	return Addr(uint64(rxIndex)<<(64-uint(rxCtxBits))) | a
}

// GroupAddr sets the peer-group id of a, as fi_group_addr:
// (groupID << 32) | a.
func GroupAddr(a Addr, groupID uint32) Addr {
	return Addr(uint64(groupID)<<32) | a
}

// splitGroupAddr splits a into the AV index (low 32 bits) and the peer
// group id GroupAddr put in bits 32..63.
func splitGroupAddr(a Addr) (index Addr, group uint32) {
	return a & maxAVIndex, uint32(a >> 32)
}

// splitRxAddr splits a into the AV index and the receive-context index
// RxAddr put in its top rxCtxBits bits.
func splitRxAddr(a Addr, rxCtxBits int) (index Addr, rx int) {
	if rxCtxBits <= 0 {
		return a, 0
	}
	if rxCtxBits > 64 {
		rxCtxBits = 64
	}
	sh := 64 - uint(rxCtxBits)
	return a & (1<<sh - 1), int(uint64(a) >> sh)
}

// AVAttr holds address-vector attributes (struct fi_av_attr).
// OpenAV writes the chosen Type and, for a named AV, MapAddr back. Plain
// data.
type AVAttr struct {
	// Type: AVTable, AVMap (behaves as a table, as in libfabric 2) or
	// AVUnspec (the provider picks AVTable and reports it here).
	Type AVType
	// RxCtxBits is the number of top fi_addr bits naming a receive
	// context (RxAddr), 0..32.
	RxCtxBits int
	// Count is the expected number of addresses: the initial capacity
	// (a named AV's capacity, see OpenAV).
	Count int
	// EpPerNode is the expected number of endpoints per node address; it
	// sizes the AV when Count is 0.
	EpPerNode int
	// Name, when not empty, names an AV shared between processes of the
	// same user on this host (see OpenAV).
	Name string
	// MapAddr is the base a named AV's fi_addr values are relative to;
	// processes giving the same MapAddr (or 0) share fi_addr values.
	// Ignored without Name.
	MapAddr uint64
	// Flags: Read (open an existing named AV read-only), Symmetric
	// (symmetric address ranges, stored compactly by InsertSym).
	Flags Flags
}

// AV is an address vector (fi_av(3)): a table mapping peer addresses, in
// the domain's address format, to compact Addr indices.
//
// An AV is safe for concurrent use: insertions and removals are serialised
// by a lock (and, for a named AV, a file lock shared with other
// processes). Lookup, LookupTo and the send-path lookup of a private AV
// take no lock at all (entries are published with atomic stores); a named
// AV's lookups and reverse lookups take the read lock.
type AV struct {
	dom    *Domain
	attr   AVAttr
	format AddrFormat // format of stored addresses
	prov   string     // provider name: "shm" or "tcp"
	ro     bool       // opened read-only (fi.Read)

	mu       sync.RWMutex
	tab      *avTable // private storage (nil for a named AV)
	named    *namedAV // shared storage (nil for a private AV)
	userIDs  []uint64 // per index user id (AVUserID); nil until first used
	hasUID   []uint64 // bitmap: userIDs[i] is set
	bound    map[any]int
	closed   atomic.Bool // set under mu; read lock-free by the lookup path
	onChange []func()
}

// avNotifier is implemented by endpoints that want to hear about AV
// changes: bind registers them and they are called after every Insert,
// InsertSvc, InsertSym, Remove and SetUserID that changed the AV.
type avNotifier interface {
	avChanged(av *AV)
}

// avPreparer is implemented by endpoints that make their peers' state and
// connections when addresses are inserted rather than at the first
// message (shm; issue 12): Insert calls it with the indices it stored.
type avPreparer interface {
	avInserted(av *AV, addrs []Addr)
}

// OpenAV opens an address vector on the domain (fi_av_open). attr may be
// nil (an unnamed AVTable). Stored addresses use the domain's address
// format: sockaddr_in (16 bytes), sockaddr_in6 (28 bytes), either for
// Sockaddr, or FI_ADDR_STR strings (fi_shm://name for shm,
// fi_sockaddr_in[6]://host:port for tcp).
//
// A non-empty attr.Name opens the AV shared between processes of the same
// user on this host: it is created under /dev/shm (mode 0600) unless it
// exists, and every process opening the name sees the same entries at the
// same indices. With fi.Read the AV must exist (ErrNoEnt otherwise) and is
// read-only (Insert, Remove give ErrAccess). A named AV holds at most
// max(2*attr.Count, 65536) entries (up to 2^24), fixed when it is created
// (the shared file is sparse: untouched entries cost no memory); more
// insertions get ErrNoSpc. MapAddr is written back. Read without Name is
// ErrInval.
//
// Errors: ErrInval (bad attributes), ErrBadFlags (flags other than Read and
// Symmetric), ErrOpBadState (closed domain), ErrNoEnt, ErrAccess.
func (d *Domain) OpenAV(attr *AVAttr) (*AV, error) {
	const op = "Domain.OpenAV"
	var a AVAttr
	if attr != nil {
		a = *attr
	}
	if a.Flags&^(Read|Symmetric) != 0 {
		return nil, opErr(op, ErrBadFlags, "flags %v (only FI_READ and FI_SYMMETRIC apply)", a.Flags&^(Read|Symmetric))
	}
	switch a.Type {
	case AVUnspec:
		a.Type = AVTable
	case AVTable, AVMap:
	default:
		return nil, opErr(op, ErrInval, "unknown AV type %d", int(a.Type))
	}
	if a.RxCtxBits < 0 || a.RxCtxBits > maxRxCtxBits {
		return nil, opErr(op, ErrInval, "rx_ctx_bits %d outside 0..%d", a.RxCtxBits, maxRxCtxBits)
	}
	if a.Count < 0 || a.EpPerNode < 0 {
		return nil, opErr(op, ErrInval, "negative count (%d) or ep_per_node (%d)", a.Count, a.EpPerNode)
	}
	if a.Flags&Read != 0 && a.Name == "" {
		return nil, opErr(op, ErrInval, "FI_READ needs a named AV")
	}
	if a.Name == "" {
		a.MapAddr = 0
	}
	av := &AV{dom: d, prov: d.fabric.prov.name(), ro: a.Flags&Read != 0}
	av.format = avFormat(d.info.AddrFormat, av.prov)
	if err := d.addChild(childAV); err != nil {
		return nil, err
	}
	if a.Name != "" {
		n, err := openNamedAV(a.Name, av.format, &a)
		if err != nil {
			d.dropChild(childAV)
			return nil, err
		}
		av.named = n
		if av.prov == linkName {
			n.SetKey(flink.RouteKey)
		}
	} else {
		hint := a.Count
		if hint == 0 {
			hint = a.EpPerNode
		}
		av.tab = newAVTable(av.format, hint)
		if av.prov == linkName {
			av.tab.SetKey(flink.RouteKey)
		}
	}
	av.attr = a
	if attr != nil {
		attr.Type = a.Type
		if a.Name != "" {
			attr.MapAddr = a.MapAddr
		}
	}
	return av, nil
}

// avFormat picks the AV's address format from the domain's: tcp without a
// format uses Sockaddr (IPv4 or IPv6), shm AddrStr; shm+tcp always AddrStr.
func avFormat(f AddrFormat, prov string) AddrFormat {
	switch {
	case prov == linkName:
		return AddrStr
	case f == SockaddrIn, f == SockaddrIn6, f == Sockaddr, f == AddrStr:
		return f
	}
	if prov == shmName {
		return AddrStr
	}
	return Sockaddr
}

// Attr returns a copy of the AV's attributes (Type and MapAddr as chosen).
func (av *AV) Attr() AVAttr { return av.attr }

// AddrFormat returns the format of the addresses the AV stores.
func (av *AV) AddrFormat() AddrFormat { return av.format }

// Close closes the AV (fi_close). It fails with ErrBusy while endpoints
// are bound to it and with ErrOpBadState when already closed. A named AV's
// shared file is removed when the last process using it closes it.
func (av *AV) Close() error {
	const op = "AV.Close"
	av.mu.Lock()
	if av.closed.Load() {
		av.mu.Unlock()
		return opErr(op, ErrOpBadState, "AV already closed")
	}
	if n := len(av.bound); n > 0 {
		av.mu.Unlock()
		return opErr(op, ErrBusy, "%d endpoint(s) still bound", n)
	}
	av.closed.Store(true)
	var err error
	if av.named != nil {
		err = storeErr(av.named.Close())
	}
	av.mu.Unlock()
	av.dom.dropChild(childAV)
	return err
}

// bind counts endpoint ep as bound to the AV (Close fails with ErrBusy
// until unbind). If ep implements avChanged(*AV) it is called after every
// change of the AV. Binding twice counts twice. ErrOpBadState once closed.
func (av *AV) bind(ep any) error {
	av.mu.Lock()
	defer av.mu.Unlock()
	if av.closed.Load() {
		return opErr("AV.bind", ErrOpBadState, "AV is closed")
	}
	if av.bound == nil {
		av.bound = make(map[any]int)
	}
	av.bound[ep]++
	return nil
}

// unbind undoes one bind(ep); unknown endpoints are ignored.
func (av *AV) unbind(ep any) {
	av.mu.Lock()
	defer av.mu.Unlock()
	if n := av.bound[ep]; n > 1 {
		av.bound[ep] = n - 1
	} else {
		delete(av.bound, ep)
	}
}

// addOnChange registers fn to be called (without AV locks held) after
// every change of the AV.
func (av *AV) addOnChange(fn func()) {
	av.mu.Lock()
	av.onChange = append(av.onChange, fn)
	av.mu.Unlock()
}

// notify calls the change callbacks and bound notifiers. Called without
// av.mu held.
func (av *AV) notify() {
	av.mu.RLock()
	fns := av.onChange
	eps := boundAs[avNotifier](av)
	av.mu.RUnlock()
	for _, fn := range fns {
		fn()
	}
	for _, n := range eps {
		n.avChanged(av)
	}
}

// prepare hands the indices an insert stored to the bound endpoints that
// connect ahead (avPreparer). Called without av.mu held.
func (av *AV) prepare(addrs []Addr) {
	av.mu.RLock()
	eps := boundAs[avPreparer](av)
	av.mu.RUnlock()
	for _, p := range eps {
		p.avInserted(av, addrs)
	}
}

// boundAs lists the endpoints bound to av that implement T. Caller holds
// av.mu (read is enough).
func boundAs[T any](av *AV) []T {
	var eps []T
	for ep := range av.bound {
		if t, ok := ep.(T); ok {
			eps = append(eps, t)
		}
	}
	return eps
}

// InsertError reports an insertion in which some addresses failed. The
// Addr slice returned with it holds AddrNotAvail for each failed address.
type InsertError struct {
	Count    int     // addresses given
	Inserted int     // addresses inserted
	First    error   // the first failure (an Errno wrapped with context)
	Errs     []error // with fi.SyncErr: one status per address, nil for success
}

func (e *InsertError) Error() string {
	return fmt.Sprintf("fi: AV insert: %d of %d addresses inserted: %v", e.Inserted, e.Count, e.First)
}

// Unwrap returns the first failure, so errors.Is(err, fi.ErrAddrNotAvail)
// tells why.
func (e *InsertError) Unwrap() error { return e.First }

// insertFlags are the flags the insert calls accept. NumericHost (a gofi
// extension) stops InsertSvc and InsertSym from resolving host names.
const insertFlags = More | SyncErr | AVUserID | NumericHost

// Insert inserts addrs (fi_av_insert), each in the AV's address format,
// and returns their indices in order: index values are the lowest unused
// table slots, assigned in call order across calls. FI_MORE is accepted
// (insertion is synchronous, so it changes nothing). An address that fails
// validation (or finds the AV full) gets AddrNotAvail and the call returns
// an *InsertError with the number inserted; with fi.SyncErr its Errs holds
// one status per address. AVUserID needs user ids: use InsertUserIDs.
func (av *AV) Insert(addrs [][]byte, flags Flags) ([]Addr, error) {
	if flags&AVUserID != 0 {
		return nil, opErr("AV.Insert", ErrInval, "FI_AV_USER_ID needs user ids: use InsertUserIDs")
	}
	return av.insert("AV.Insert", addrs, nil, flags)
}

// InsertUserIDs inserts addrs like Insert and associates userIDs[i] with
// addrs[i] (FI_AV_USER_ID): completions of messages from that peer report
// the user id as their source instead of the index. The returned indices
// are what data-transfer calls take. len(userIDs) must equal len(addrs).
func (av *AV) InsertUserIDs(addrs [][]byte, userIDs []Addr, flags Flags) ([]Addr, error) {
	if len(userIDs) != len(addrs) {
		return nil, opErr("AV.InsertUserIDs", ErrInval, "%d user ids for %d addresses", len(userIDs), len(addrs))
	}
	return av.insert("AV.InsertUserIDs", addrs, userIDs, flags|AVUserID)
}

// SetUserID sets the user id reported in completions for the entry at a
// (fi_av_set_user_id), for entries inserted by InsertSvc or InsertSym.
// flags must be 0.
func (av *AV) SetUserID(a Addr, userID Addr, flags Flags) error {
	const op = "AV.SetUserID"
	if flags != 0 {
		return opErr(op, ErrBadFlags, "flags must be 0")
	}
	av.mu.Lock()
	if err := av.usable(op, false); err != nil {
		av.mu.Unlock()
		return err
	}
	if !av.validLocked(uint64(a)) {
		av.mu.Unlock()
		return opErr(op, ErrNoEnt, "fi_addr %d is not in the AV", uint64(a))
	}
	av.setUIDLocked(uint64(a), uint64(userID))
	av.mu.Unlock()
	av.notify()
	return nil
}

// usable checks the AV is open (and writable when write). Caller holds mu.
func (av *AV) usable(op string, write bool) error {
	if av.closed.Load() {
		return opErr(op, ErrOpBadState, "AV is closed")
	}
	if write && av.ro {
		return opErr(op, ErrAccess, "AV %q was opened read-only (FI_READ)", av.attr.Name)
	}
	return nil
}

func (av *AV) insert(op string, addrs [][]byte, uids []Addr, flags Flags) ([]Addr, error) {
	if flags&^insertFlags != 0 {
		return nil, opErr(op, ErrBadFlags, "flags %v do not apply to AV insertion", flags&^insertFlags)
	}
	out := make([]Addr, len(addrs))
	av.mu.Lock()
	if err := av.usable(op, true); err != nil {
		av.mu.Unlock()
		return nil, err
	}
	var ie *InsertError
	fail := func(i int, err error) {
		out[i] = AddrNotAvail
		if ie == nil {
			ie = &InsertError{Count: len(addrs), First: err}
		}
		if flags&SyncErr != 0 {
			if ie.Errs == nil {
				ie.Errs = make([]error, len(addrs))
			}
			ie.Errs[i] = err
		}
	}
	if av.named != nil {
		if err := av.named.Lock(); err != nil {
			av.mu.Unlock()
			return nil, storeErr(err)
		}
	}
	var scratch [maxSockaddrLen]byte
	n := 0
	for i, raw := range addrs {
		b, err := canonAddr(av.format, av.prov, raw, scratch[:0])
		if err != nil {
			fail(i, fmt.Errorf("address %d: %w", i, err))
			continue
		}
		var idx uint64
		if av.named != nil {
			idx, err = av.named.Insert(b)
		} else {
			idx, err = av.tab.Insert(b)
		}
		if err != nil {
			fail(i, fmt.Errorf("address %d: %w", i, storeErr(err)))
			continue
		}
		out[i] = Addr(idx)
		if uids != nil {
			av.setUIDLocked(idx, uint64(uids[i]))
		} else {
			av.clearUIDLocked(idx)
		}
		n++
	}
	if av.named != nil {
		av.named.Unlock()
	}
	av.mu.Unlock()
	if n > 0 {
		av.notify()
		av.prepare(out)
	}
	if ie != nil {
		ie.Inserted = n
		return out, ie
	}
	return out, nil
}

// setUIDLocked records a user id for index i.
func (av *AV) setUIDLocked(i, uid uint64) {
	if i >= uint64(len(av.userIDs)) {
		n := max(int(i)+1, 2*len(av.userIDs), 64)
		u := make([]uint64, n)
		copy(u, av.userIDs)
		av.userIDs = u
		h := make([]uint64, (n+63)/64)
		copy(h, av.hasUID)
		av.hasUID = h
	}
	av.userIDs[i] = uid
	av.hasUID[i/64] |= 1 << (i % 64)
}

func (av *AV) clearUIDLocked(i uint64) {
	if i < uint64(len(av.userIDs)) {
		av.hasUID[i/64] &^= 1 << (i % 64)
		av.userIDs[i] = 0
	}
}

func (av *AV) validLocked(i uint64) bool {
	if av.named != nil {
		return av.named.Valid(i)
	}
	return av.tab.Valid(i)
}

// Remove removes addrs from the AV (fi_av_remove): their indices become
// unused and the next insertions reuse them, lowest first; removing and
// re-inserting an address works. flags must be 0 (ErrBadFlags). If any
// index is not in the AV, nothing is removed and the error is ErrNoEnt.
func (av *AV) Remove(addrs []Addr, flags Flags) error {
	const op = "AV.Remove"
	if flags != 0 {
		return opErr(op, ErrBadFlags, "flags are reserved and must be 0")
	}
	av.mu.Lock()
	if err := av.usable(op, true); err != nil {
		av.mu.Unlock()
		return err
	}
	if av.named != nil {
		if err := av.named.Lock(); err != nil {
			av.mu.Unlock()
			return storeErr(err)
		}
	}
	var err error
	seen := make(map[Addr]struct{}, len(addrs))
	for _, a := range addrs {
		if _, dup := seen[a]; dup || !av.validLocked(uint64(a)) {
			err = opErr(op, ErrNoEnt, "fi_addr %d is not in the AV", uint64(a))
			break
		}
		seen[a] = struct{}{}
	}
	if err == nil {
		for _, a := range addrs {
			if av.named != nil {
				av.named.Remove(uint64(a))
			} else {
				av.tab.Remove(uint64(a))
			}
			av.clearUIDLocked(uint64(a))
		}
	}
	if av.named != nil {
		av.named.Unlock()
	}
	av.mu.Unlock()
	if err == nil && len(addrs) > 0 {
		av.notify()
	}
	return err
}

// Lookup returns a copy of the address stored at a (fi_av_lookup), in the
// AV's format. Receive-context bits (RxAddr) are ignored. An index not in
// the AV gives ErrNoEnt.
func (av *AV) Lookup(a Addr) ([]byte, error) {
	const op = "AV.Lookup"
	idx, _ := splitRxAddr(a, av.attr.RxCtxBits)
	var scratch [maxSockaddrLen]byte
	av.mu.RLock()
	defer av.mu.RUnlock()
	if err := av.usable(op, false); err != nil {
		return nil, err
	}
	b, ok := av.getLocked(uint64(idx), scratch[:])
	if !ok {
		return nil, opErr(op, ErrNoEnt, "fi_addr %d is not in the AV", uint64(a))
	}
	return append([]byte(nil), b...), nil
}

// LookupTo copies the address stored at a into buf, like fi_av_lookup
// with addrlen: an address longer than buf is truncated, and n is always
// the full size of the address (so n > len(buf) means truncation). It
// does not allocate. Errors as Lookup.
func (av *AV) LookupTo(a Addr, buf []byte) (n int, err error) {
	idx, _ := splitRxAddr(a, av.attr.RxCtxBits)
	var scratch [maxSockaddrLen]byte
	var b []byte
	var ok bool
	if av.tab != nil {
		b, ok = av.lookupBytes(idx, scratch[:])
		copy(buf, b)
	} else { // copy out of the shared mapping before Close can unmap it
		av.mu.RLock()
		b, ok = av.getLocked(uint64(idx), scratch[:])
		copy(buf, b)
		av.mu.RUnlock()
	}
	if !ok {
		if av.closed.Load() {
			return 0, errAVClosed
		}
		return 0, errNotInAV
	}
	return len(b), nil
}

// Preallocated errors of the lookup path (no allocation per call).
var (
	errNotInAV  = opErr("AV.Lookup", ErrNoEnt, "fi_addr is not in the AV")
	errAVClosed = opErr("AV.Lookup", ErrOpBadState, "AV is closed")
)

func (av *AV) getLocked(i uint64, scratch []byte) ([]byte, bool) {
	if av.closed.Load() {
		return nil, false
	}
	if av.named != nil {
		return av.named.Get(i, scratch)
	}
	return av.tab.Get(i, scratch)
}

// lookupBytes returns the address stored at index a for the send path:
// O(1), allocation-free. scratch (at least maxSockaddrLen bytes) receives
// the address of an entry stored as part of a compact symmetric range;
// other entries are returned as a read-only slice of AV storage, valid
// until the entry is removed (for a named AV, the slice is of the shared
// mapping and valid until Close). Private AVs answer without any lock;
// named AVs take the read lock. a must be a plain index (strip RxAddr or
// GroupAddr bits with splitRxAddr / splitGroupAddr first).
func (av *AV) lookupBytes(a Addr, scratch []byte) ([]byte, bool) {
	if av.tab != nil { // private AV: lock-free (see avTable)
		if av.closed.Load() {
			return nil, false
		}
		return av.tab.Get(uint64(a), scratch)
	}
	// a named AV's mapping goes away at Close: hold the read lock
	av.mu.RLock()
	b, ok := av.getLocked(uint64(a), scratch)
	av.mu.RUnlock()
	return b, ok
}

// reverse finds the entry holding addr (in the AV's format, as peers'
// source addresses are decoded) for FI_SOURCE: it returns the user id
// when one was set (AVUserID), else the index. Sockaddrs are compared in
// canonical form (sin_zero ignored), FI_ADDR_STR addresses byte for byte
// as canonAddr formats them. Allocation-free for a private AV; O(1)
// expected (plus O(ranges) for compact symmetric ranges). A named AV
// rebuilds a per-process map after changes by any process.
func (av *AV) reverse(addr []byte) (uint64, bool) {
	if av.format != AddrStr {
		var scratch [maxSockaddrLen]byte
		b, err := canonAddr(av.format, av.prov, addr, scratch[:0])
		if err != nil {
			return 0, false
		}
		addr = b
	}
	if av.prov == linkName {
		addr = flink.RouteKey(addr) // the stores compare keys (SetKey)
	}
	av.mu.RLock()
	defer av.mu.RUnlock()
	if av.closed.Load() {
		return 0, false
	}
	var i uint64
	var ok bool
	if av.named != nil {
		i, ok = av.named.Find(addr)
	} else {
		i, ok = av.tab.Find(addr)
	}
	if !ok {
		return 0, false
	}
	if i < uint64(len(av.userIDs)) && av.hasUID[i/64]&(1<<(i%64)) != 0 {
		return av.userIDs[i], true
	}
	return i, true
}

// reverseAddrPort is reverse for a peer known by its IP address and port
// (the tcp transport's view): allocation-free for sockaddr formats.
func (av *AV) reverseAddrPort(ap netip.AddrPort) (uint64, bool) {
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if av.format == AddrStr {
		return av.reverse([]byte(SockaddrStr(ap)))
	}
	var b [maxSockaddrLen]byte
	ip := ap.Addr()
	if ip.Is4() {
		binary.LittleEndian.PutUint16(b[0:], afInet)
		binary.BigEndian.PutUint16(b[2:], ap.Port())
		a4 := ip.As4()
		copy(b[4:8], a4[:])
		return av.reverse(b[:sizeofSockIn])
	}
	binary.LittleEndian.PutUint16(b[0:], afInet6)
	binary.BigEndian.PutUint16(b[2:], ap.Port())
	a16 := ip.As16()
	copy(b[8:24], a16[:])
	if z := ip.Zone(); z != "" {
		n, err := strconv.ParseUint(z, 10, 32)
		if err != nil {
			sa, err := SockaddrFromAddrPort(ap)
			if err != nil {
				return 0, false
			}
			return av.reverse(sa)
		}
		binary.LittleEndian.PutUint32(b[24:], uint32(n))
	}
	return av.reverse(b[:sizeofSockI6])
}

// Straddr formats addr, in the AV's format, for people (fi_av_straddr):
// sockaddrs as fi_sockaddr_in://a.b.c.d:port or
// fi_sockaddr_in6://[addr]:port, FI_ADDR_STR addresses as themselves,
// anything unreadable in hex. The address need not be in the AV.
func (av *AV) Straddr(addr []byte) string {
	return straddr(av.format, addr)
}

// Count returns the number of addresses in the AV.
func (av *AV) Count() int {
	av.mu.RLock()
	defer av.mu.RUnlock()
	if av.closed.Load() {
		return 0
	}
	if av.named != nil {
		return av.named.Count()
	}
	return av.tab.Live()
}

// errAVFull is returned for an address that does not fit.
var errAVFull = opErr("AV.Insert", ErrNoSpc, "AV is full")
