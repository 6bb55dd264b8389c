package shm

import (
	"encoding/binary"
	"fmt"
	"os"
)

// Region wire format, version 8 (the version also covers the format of the
// records in the rings, see transport.go). All integers are in the host's
// byte order (a region never leaves the host). Offsets are from the start of
// the region; there are no pointers. The layout is a pure function of
// (ConnSlots, PeerSlots): ComputeLayout. A reader recomputes it from the two
// counts found in the header and refuses the region unless every field
// matches, so no offset read from shared memory is used unchecked.
//
//	header    0    256 B  see the h* offsets below; magic written last
//	doorbell  256  128 B  seq u32 @+0 (senders bump), waiters u32 @+4
//	                      (receivers count themselves in), polling u32 @+8
//	                      (the owner: 1 while it polls its inbound rings
//	                      directly, so senders need not set their bitmap
//	                      bits; 0, the initial value, asks for the bits),
//	                      cpu u32 @+12 (the owner's polling CPU + 1, written
//	                      now and then; 0: not known, as from an owner that
//	                      never writes it); own 2 lines
//	connSeq   384  128 B  u32 @+0, bumped by a sender after posting a
//	                      connection request; own 2 lines
//	nudge     512  128 B  u32 @+0, bumped by a peer that wants the owner
//	                      to run its progress (it made room in a ring the
//	                      owner waits to write to); own 2 lines (v2)
//	bitmap    640  BitmapLen B, a multiple of 128: bit i = inbound peer i
//	                      has data (format owned by package ring)
//	conn      ...  ConnSlots x 192 B connection-request slots
//	peers     ...  PeerSlots x 192 B inbound peer slots
//	(padding to a page multiple)
const (
	// Magic identifies a gofi shm region: "GOFS" in memory on little endian.
	Magic uint32 = 0x53464f47
	// Version of this layout (8: a connection request may offer a return
	// ring, see ConnRequest.ReturnSize; 7: a slot record's payload starts on the
	// line after its header, see slotHdrLen; 6: a slot record carries how far its
	// sender has read the ring the other way, see slotHdr, and ring
	// segments their creator's id; 5: an eager record may carry its payload's
	// length and fill a ring slot, see reserveEager; 4: split single copy
	// records, see split.go; 3: eager records with a short header, see transport.go;
	// 2: the nudge word; ring segments carry a trailer, see RingSegSize).
	Version uint32 = 8
	// HeaderSize is the size of the header at offset 0.
	HeaderSize = 256
	// LineSize is the cache-line size the layout assumes; recorded in the
	// header and checked by readers.
	LineSize = 64
	// ConnSlotSize and PeerSlotSize are the fixed slot sizes (3 lines).
	ConnSlotSize = 192
	PeerSlotSize = 192

	// DefaultConnSlots and DefaultMaxPeers size a region when Config leaves
	// them zero: 64 KiB in all. 64 slots let a 64-rank job connect
	// all-to-all at once without senders waiting for slots.
	DefaultConnSlots = 64
	DefaultMaxPeers  = 256
	// MaxConnSlots and MaxPeersLimit bound the counts a region may declare.
	MaxConnSlots  = 1024
	MaxPeersLimit = 65536

	doorbellArea = 2 * LineSize // 128: the doorbell words alone on their lines
	nameField    = 64           // bytes reserved per name (MaxNameLen + 1)
)

// Header field offsets.
const (
	hMagic        = 0   // u32, atomic, stored last
	hVersion      = 4   // u32
	hHeaderSize   = 8   // u32
	hLineSize     = 12  // u32
	hPageSize     = 16  // u32
	hOwnerPID     = 20  // u32
	hTotalSize    = 24  // u64
	hDoorbellOff  = 32  // u64
	hConnSeqOff   = 40  // u64
	hBitmapOff    = 48  // u64
	hBitmapLen    = 56  // u64
	hConnOff      = 64  // u64
	hConnSlots    = 72  // u32
	hConnSlotSize = 76  // u32
	hPeerOff      = 80  // u64
	hPeerSlots    = 88  // u32
	hPeerSlotSize = 92  // u32
	hNameLen      = 96  // u32
	hReserved0    = 100 // u32, zero
	hName         = 104 // [64]byte, owner's region name, zero padded
	hNudgeOff     = 168 // u64 (v2)
	hEnd          = hNudgeOff + 8
	// bytes hEnd..HeaderSize are reserved and zero.
)

// Layout describes where everything lives in a region. It is the decoded,
// validated header; a plain value, safe to copy and share.
type Layout struct {
	TotalSize   int    // region size in bytes, a page multiple
	OwnerPID    int    // pid of the creating process
	Name        string // the region's segment name
	DoorbellOff int    // doorbell seq word; waiters word at DoorbellOff+4
	ConnSeqOff  int    // connection-request sequence word
	NudgeOff    int    // nudge word
	BitmapOff   int    // non-empty bitmap bytes
	BitmapLen   int    // a multiple of 128, covers PeerSlots bits
	ConnOff     int    // first connection-request slot
	ConnSlots   int    // number of connection-request slots
	PeerOff     int    // first inbound peer slot
	PeerSlots   int    // number of inbound peer slots (max peers)
}

// ComputeLayout returns the layout of a region with the given counts (the
// owner fields left empty).
func ComputeLayout(connSlots, peerSlots int) (Layout, error) {
	if connSlots < 1 || connSlots > MaxConnSlots {
		return Layout{}, fmt.Errorf("%w: %d connection slots not in 1..%d", ErrSize, connSlots, MaxConnSlots)
	}
	if peerSlots < 1 || peerSlots > MaxPeersLimit {
		return Layout{}, fmt.Errorf("%w: %d peer slots not in 1..%d", ErrSize, peerSlots, MaxPeersLimit)
	}
	var l Layout
	off := HeaderSize
	l.DoorbellOff = off
	off += doorbellArea
	l.ConnSeqOff = off
	off += doorbellArea
	l.NudgeOff = off
	off += doorbellArea
	l.BitmapOff = off
	l.BitmapLen = roundUp((peerSlots+63)/64*8, 2*LineSize)
	off += l.BitmapLen
	l.ConnOff, l.ConnSlots = off, connSlots
	off += connSlots * ConnSlotSize
	l.PeerOff, l.PeerSlots = off, peerSlots
	off += peerSlots * PeerSlotSize
	l.TotalSize = roundUp(off, os.Getpagesize())
	return l, nil
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

var ne = binary.NativeEndian

// encode writes every header field except the magic into b.
func (l *Layout) encode(b []byte) {
	h := b[:HeaderSize]
	clear(h)
	ne.PutUint32(h[hVersion:], Version)
	ne.PutUint32(h[hHeaderSize:], HeaderSize)
	ne.PutUint32(h[hLineSize:], LineSize)
	ne.PutUint32(h[hPageSize:], uint32(os.Getpagesize()))
	ne.PutUint32(h[hOwnerPID:], uint32(l.OwnerPID))
	ne.PutUint64(h[hTotalSize:], uint64(l.TotalSize))
	ne.PutUint64(h[hDoorbellOff:], uint64(l.DoorbellOff))
	ne.PutUint64(h[hConnSeqOff:], uint64(l.ConnSeqOff))
	ne.PutUint64(h[hBitmapOff:], uint64(l.BitmapOff))
	ne.PutUint64(h[hBitmapLen:], uint64(l.BitmapLen))
	ne.PutUint64(h[hConnOff:], uint64(l.ConnOff))
	ne.PutUint32(h[hConnSlots:], uint32(l.ConnSlots))
	ne.PutUint32(h[hConnSlotSize:], ConnSlotSize)
	ne.PutUint64(h[hPeerOff:], uint64(l.PeerOff))
	ne.PutUint32(h[hPeerSlots:], uint32(l.PeerSlots))
	ne.PutUint32(h[hPeerSlotSize:], PeerSlotSize)
	ne.PutUint32(h[hNameLen:], uint32(len(l.Name)))
	copy(h[hName:hName+nameField], l.Name)
	ne.PutUint64(h[hNudgeOff:], uint64(l.NudgeOff))
}

// ParseHeader decodes and validates the header of region bytes b (the whole
// mapping). It returns ErrNotReady while the magic is still zero and an
// error wrapping ErrCorrupt for anything foreign or inconsistent; it never
// panics, whatever b holds. The header is copied before it is checked, so a
// peer changing it meanwhile cannot slip a value past the checks.
func ParseHeader(b []byte) (Layout, error) {
	if len(b) < HeaderSize {
		return Layout{}, fmt.Errorf("%w: %d bytes, smaller than the %d-byte header", ErrCorrupt, len(b), HeaderSize)
	}
	var magic uint32
	if aligned(b, 0, 4) {
		magic = word32(b, hMagic).Load() // pairs with the creator's Store
	} else {
		magic = ne.Uint32(b[hMagic:])
	}
	if magic == 0 {
		return Layout{}, ErrNotReady
	}
	if magic != Magic {
		return Layout{}, fmt.Errorf("%w: magic %#x, want %#x", ErrCorrupt, magic, Magic)
	}
	var h [HeaderSize]byte
	copy(h[:], b)
	u32 := func(off int) uint32 { return ne.Uint32(h[off:]) }
	u64 := func(off int) uint64 { return ne.Uint64(h[off:]) }
	bad := func(what string, got, want uint64) (Layout, error) {
		return Layout{}, fmt.Errorf("%w: %s is %d, want %d", ErrCorrupt, what, got, want)
	}
	if v := u32(hVersion); v != Version {
		return bad("version", uint64(v), uint64(Version))
	}
	if v := u32(hHeaderSize); v != HeaderSize {
		return bad("header size", uint64(v), HeaderSize)
	}
	if v := u32(hLineSize); v != LineSize {
		return bad("line size", uint64(v), LineSize)
	}
	if v, p := u32(hPageSize), os.Getpagesize(); v != uint32(p) {
		return bad("page size", uint64(v), uint64(p))
	}
	if v := u32(hConnSlotSize); v != ConnSlotSize {
		return bad("connection slot size", uint64(v), ConnSlotSize)
	}
	if v := u32(hPeerSlotSize); v != PeerSlotSize {
		return bad("peer slot size", uint64(v), PeerSlotSize)
	}
	pid := u32(hOwnerPID)
	if pid == 0 || pid > 1<<31-1 {
		return Layout{}, fmt.Errorf("%w: owner pid %d", ErrCorrupt, pid)
	}
	l, err := ComputeLayout(int(u32(hConnSlots)), int(u32(hPeerSlots)))
	if err != nil {
		return Layout{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	for _, f := range [...]struct {
		what      string
		off, want int
	}{
		{"total size", hTotalSize, l.TotalSize},
		{"doorbell offset", hDoorbellOff, l.DoorbellOff},
		{"connection sequence offset", hConnSeqOff, l.ConnSeqOff},
		{"nudge offset", hNudgeOff, l.NudgeOff},
		{"bitmap offset", hBitmapOff, l.BitmapOff},
		{"bitmap length", hBitmapLen, l.BitmapLen},
		{"connection slots offset", hConnOff, l.ConnOff},
		{"peer slots offset", hPeerOff, l.PeerOff},
	} {
		if v := u64(f.off); v != uint64(f.want) {
			return bad(f.what, v, uint64(f.want))
		}
	}
	if l.TotalSize != len(b) {
		return bad("total size against the mapping", uint64(l.TotalSize), uint64(len(b)))
	}
	if u32(hReserved0) != 0 {
		return Layout{}, fmt.Errorf("%w: reserved header word set", ErrCorrupt)
	}
	for _, c := range h[hEnd:] {
		if c != 0 {
			return Layout{}, fmt.Errorf("%w: reserved header bytes set", ErrCorrupt)
		}
	}
	n := u32(hNameLen)
	if n == 0 || n > MaxNameLen {
		return Layout{}, fmt.Errorf("%w: name length %d", ErrCorrupt, n)
	}
	for _, c := range h[hName+int(n) : hName+nameField] {
		if c != 0 {
			return Layout{}, fmt.Errorf("%w: bytes after the name set", ErrCorrupt)
		}
	}
	l.Name = string(h[hName : hName+int(n)])
	if err := ValidName(l.Name); err != nil {
		return Layout{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	l.OwnerPID = int(pid)
	return l, nil
}
