package shm

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Config sizes a new region. Zero fields take the defaults. A plain value.
type Config struct {
	Name      string // segment name; "" picks NewName()
	ConnSlots int    // connection-request slots; 0 means DefaultConnSlots
	MaxPeers  int    // inbound peer slots and bitmap bits; 0 means DefaultMaxPeers
}

// Region is one endpoint's shared region: a Segment laid out as described by
// Layout (see layout.go for the byte map). The owner creates it with
// CreateRegion; senders attach with OpenRegion.
//
// How the engine uses it (the recommended data path):
//   - Each sender creates its own ring file per receiver with CreateSegment
//     (NewName, mode 0600, fallocated, locked by the sender) and formats a
//     ring in it; memory then grows with active peers, not with MaxPeers.
//   - It announces the ring with ConnQueue().Post, which bumps the
//     connection sequence word and rings the receiver's doorbell.
//   - The receiver, seeing ConnQueue().Seq() change, scans with Next, reads
//     each request with Read, opens the ring file with OpenSegment, records
//     the peer in Peers().Set(i, ...) and answers Accept(req, i, gen) (or
//     Reject). A request from a sender name already known with a new pid
//     replaces the old slot (the restarted-peer rule).
//   - A sender connecting ahead (Prepare) may also make a return ring for
//     the receiver to write back to it and offer it in its request
//     (ConnRequest.ReturnSize; named ReturnRingName(ring)). A receiver not
//     yet connected to the sender maps it as its ring to the sender and
//     names it in its own request, so the sender's accept opens no file.
//     The file stays the sender's (its lock, its unlink); the receiver
//     writing into it is judged alive by its region's lock.
//   - The sender polls Reply, learns its peer index i and Releases the slot.
//     From then on, after publishing into its ring it sets bit i in
//     Bitmap() (package ring's bitmap type) and calls Doorbell().Ring().
//     A sender may publish before it is accepted: the receiver looks at a
//     newly accepted ring once without waiting for its bit.
//   - The receiver's progress visits only the rings whose bits are set and
//     sleeps with Doorbell().Wait or DefaultIdle.Wait.
//   - Large messages: the ring record carries the sender's pid, buffer
//     address and length; the receiver pulls with ReadPeer straight into
//     the posted buffer and acknowledges through the ring file (it maps it
//     read-write); on ErrPeerDenied it asks for segments instead from then
//     on. ProbeCMA says whether and from which size this pays.
//   - Liveness: the receiver tests a peer with the ring Segment's Alive; a
//     sender tests the receiver with Region.Alive. The receiver calls
//     ConnQueue().Sweep now and then so a sender killed mid-request frees
//     its slot. Code touching another process's file runs under Guard.
//
// A Region is safe for concurrent use; the mapped memory it hands out is
// valid until Close.
type Region struct {
	seg    *Segment
	mem    []byte
	layout Layout
	bell   Doorbell
	nudge  *atomic.Uint32
	poll   *atomic.Uint32 // the polling word, next to the doorbell's
	cpu    *atomic.Uint32 // the owner's polling CPU + 1 (0: not known)
	conn   ConnQueue
	peers  PeerTable
}

// CreateRegion reaps dead owners' files, then creates, lays out and
// publishes a new region owned by this process. The header's magic is
// stored last, with an atomic store, and the file only appears under its
// name after that, so no peer ever sees a half-built region.
func CreateRegion(cfg Config) (*Region, error) {
	if cfg.Name == "" {
		cfg.Name = NewName()
	}
	if cfg.ConnSlots == 0 {
		cfg.ConnSlots = DefaultConnSlots
	}
	if cfg.MaxPeers == 0 {
		cfg.MaxPeers = DefaultMaxPeers
	}
	l, err := ComputeLayout(cfg.ConnSlots, cfg.MaxPeers)
	if err != nil {
		return nil, err
	}
	l.Name, l.OwnerPID = cfg.Name, os.Getpid()
	if _, err := Reap(); err != nil {
		return nil, err
	}
	seg, err := createSegment(cfg.Name, l.TotalSize, func(b []byte) {
		l.encode(b)
		word32(b, hMagic).Store(Magic)
	})
	if err != nil {
		return nil, err
	}
	// Every page of our region mapped now: accepting a peer's first
	// connection reads the connection queue's and the peer table's pages
	// for the first time, 3 page faults (2-5 us each on the development
	// VM) that a ping-pong's client took inside its first round trip.
	populate(seg.Bytes())
	return newRegion(seg, l), nil
}

// OpenRegion attaches to the region named name (an endpoint's segment name,
// as in its fi_shm:// address) and validates its header. It fails with
// os.ErrNotExist when there is no such region, ErrNotReady while it is being
// built, ErrCorrupt when it is foreign or inconsistent, and ErrNotOwner when
// the file is not this user's private file.
func OpenRegion(name string) (*Region, error) {
	seg, err := OpenSegment(name)
	if err != nil {
		return nil, err
	}
	var l Layout
	ferr := Guard(func() { l, err = ParseHeader(seg.Bytes()) })
	if err == nil {
		err = ferr
	}
	if err == nil && l.Name != name {
		err = fmt.Errorf("%w: region %s names itself %q", ErrCorrupt, name, l.Name)
	}
	if err != nil {
		_ = seg.Close()
		return nil, fmt.Errorf("shm: open region %s: %w", name, err)
	}
	return newRegion(seg, l), nil
}

func newRegion(seg *Segment, l Layout) *Region {
	r := newRegionOver(seg.Bytes(), l)
	r.seg = seg
	return r
}

// newRegionOver builds the accessors over region bytes b laid out as l (a
// layout ParseHeader accepted for b, or ComputeLayout's for len(b)).
func newRegionOver(b []byte, l Layout) *Region {
	r := &Region{mem: b, layout: l}
	r.bell = Doorbell{seq: word32(b, l.DoorbellOff), waiters: word32(b, l.DoorbellOff+4)}
	r.nudge = word32(b, l.NudgeOff)
	r.poll = word32(b, l.DoorbellOff+8)
	r.cpu = word32(b, l.DoorbellOff+12)
	r.conn = ConnQueue{mem: b[l.ConnOff : l.ConnOff+l.ConnSlots*ConnSlotSize], n: l.ConnSlots,
		seq: word32(b, l.ConnSeqOff), bell: &r.bell}
	r.peers = PeerTable{mem: b[l.PeerOff : l.PeerOff+l.PeerSlots*PeerSlotSize], n: l.PeerSlots}
	return r
}

// Name returns the region's segment name.
func (r *Region) Name() string { return r.layout.Name }

// Addr returns the region's FI_ADDR_STR address, "fi_shm://<name>".
func (r *Region) Addr() string { return Addr(r.layout.Name) }

// Owner reports whether this process created the region.
func (r *Region) Owner() bool { return r.seg.Owner() }

// Layout returns the validated layout.
func (r *Region) Layout() Layout { return r.layout }

// Segment returns the underlying segment.
func (r *Region) Segment() *Segment { return r.seg }

// Alive reports whether the region's owner is alive (its flock is held).
func (r *Region) Alive() (bool, error) { return r.seg.Alive() }

// Doorbell returns the region's doorbell: the owner waits on it, senders
// ring it.
func (r *Region) Doorbell() *Doorbell { return &r.bell }

// Bitmap returns the non-empty bitmap bytes (BitmapLen bytes, 128-byte
// aligned; bit i covers inbound peer slot i). Package ring interprets them.
func (r *Region) Bitmap() []byte {
	return r.mem[r.layout.BitmapOff : r.layout.BitmapOff+r.layout.BitmapLen]
}

// Nudge asks the region's owner to run its progress: it bumps the nudge
// word and rings the doorbell. A receiver calls it after making room in a
// ring whose producer said (in the ring segment's trailer) that it waits
// for room. It reads and writes the owner's mapping; the error is the
// doorbell's.
func (r *Region) Nudge() error {
	r.nudge.Add(1)
	return r.bell.Ring()
}

// pollWord returns the region's polling word (see the layout): its owner
// stores 1 while it polls every inbound ring directly, 0 when it relies on
// the bitmap (many peers, or about to sleep). It shares the doorbell's
// line, which a sender reads on every send anyway.
func (r *Region) pollWord() *atomic.Uint32 { return r.poll }

// cpuWord returns the region's CPU word (see the layout): its owner
// stores the CPU it polls on, plus one, now and then (Transport.Poll); 0
// means not known (an owner that never wrote it).
func (r *Region) cpuWord() *atomic.Uint32 { return r.cpu }

// NudgeSeq returns the nudge word. The owner compares it with a value read
// before it last ran its progress to learn whether it was nudged since.
func (r *Region) NudgeSeq() uint32 { return r.nudge.Load() }

// ConnQueue returns the connection-request queue.
func (r *Region) ConnQueue() *ConnQueue { return &r.conn }

// Peers returns the inbound peer table.
func (r *Region) Peers() *PeerTable { return &r.peers }

// Close unmaps the region; the owner also removes its file.
func (r *Region) Close() error { return r.seg.Close() }

// Connection-request slot states (low 8 bits of the slot's state word).
const (
	ConnFree     = 0 // unclaimed
	ConnWriting  = 1 // claimed by a sender, being filled
	ConnPosted   = 2 // filled; waits for the receiver
	ConnAccepted = 3 // receiver answered with a peer index
	ConnRejected = 4 // receiver refused, with an errno
)

// Connection-request slot, 192 bytes:
//
//	0   state word u64, atomic: state (bits 0-7) | ticket (8-31) | claimant pid (32-63)
//	8   sender pid u32
//	12  sender name length u32
//	16  ring name length u32
//	20  reply: peer index u32     written by the receiver before
//	24  reply: generation u32     it stores ConnAccepted or
//	28  reply: errno u32          ConnRejected
//	32  cookie u64 (the sender's, echoed nowhere; for its own bookkeeping)
//	40  ring size u64
//	48  sender's pid namespace u64 (the inode of /proc/self/ns/pid; 0
//	    unknown): a receiver reads the sender's memory only within one
//	56  return ring size u32 (v8; 0: none): the sender also made a ring
//	    for the receiver to write back to it, named ReturnRingName(ring
//	    name) (see ConnRequest.ReturnSize)
//	60  spare sizes u16 + u16, in 4 KiB units (v8; 0: none): the
//	    sender's spare ring for its next growth to the receiver, named
//	    SpareRingName(ring name), and one it made for the receiver's next
//	    growth back, named ReturnSpareName(ring name) (see
//	    ConnRequest.SpareSize)
//	64  sender name [64]
//	128 ring name [64]
const (
	cWord     = 0
	cPID      = 8
	cSNameLen = 12
	cRNameLen = 16
	cPeer     = 20
	cGen      = 24
	cErrno    = 28
	cCookie   = 32
	cRingSize = 40
	cPidNS    = 48
	cRetSize  = 56
	cSpares   = 60
	cSName    = 64
	cRName    = 128
)

// ConnRequest is a sender's announcement of its ring file. A plain value.
type ConnRequest struct {
	Slot       int    // slot index (set by Post and Read)
	SenderPID  int    // the sender's pid
	SenderName string // the sender's own region name (its fi_shm address)
	RingName   string // the ring segment the sender created for this receiver
	RingSize   int    // the ring segment's size in bytes
	PidNS      uint64 // the sender's pid namespace (set by Post), 0 unknown
	Cookie     uint64 // opaque to the receiver
	// ReturnSize, when not 0, offers the receiver a ring segment of that
	// size the sender made (and owns) for the receiver to write back to
	// it, named ReturnRingName(RingName): the receiver may map it ahead
	// and announce it as its own ring in its request to the sender, so
	// that the sender's accept maps nothing (issue 12: first use).
	ReturnSize int
	// SpareSize, when not 0, names the sender's spare ring segment of that
	// size (SpareRingName(RingName)), which its next ring to the receiver
	// will be: the receiver may map it ahead, so that following the
	// growth maps nothing. ReturnSpareSize offers, as ReturnSize does, a
	// spare the sender made for the receiver's next ring back
	// (ReturnSpareName(RingName)). Both are multiples of spareUnit, at
	// most maxSpare.
	SpareSize, ReturnSpareSize int
	word                       uint64 // state word seen by Read; Accept/Reject CAS on it
}

// spareUnit and maxSpare: the unit and bound of the spare sizes a
// connection slot carries (16 bits each).
const (
	spareUnit = 4 << 10
	maxSpare  = 0xffff * spareUnit
)

// The suffixes of the spare rings a request names (SpareRingName,
// ReturnSpareName).
const (
	spareSuffix    = ".s"
	retSpareSuffix = ".t"
)

// SpareRingName and ReturnSpareName are the names of the spares a
// request announces (ConnRequest.SpareSize, ReturnSpareSize).
func SpareRingName(ring string) string   { return ring + spareSuffix }
func ReturnSpareName(ring string) string { return ring + retSpareSuffix }

// checkSpare checks a spare size for a connection slot.
func checkSpare(n int) error {
	if n < 0 || n > maxSpare || n%spareUnit != 0 {
		return fmt.Errorf("%w: spare ring size %d", ErrSize, n)
	}
	return nil
}

// returnSuffix makes a return ring's name from its request's ring name.
const returnSuffix = ".r"

// ReturnRingName is the name of the return ring a request offers
// (ConnRequest.ReturnSize): its ring's name with a suffix, so that the
// slot needs no second name field.
func ReturnRingName(ring string) string { return ring + returnSuffix }

// ConnReply is the receiver's answer to a request. A plain value.
type ConnReply struct {
	Accepted  bool
	PeerIndex int    // the sender's bit and slot index at the receiver
	Gen       uint32 // the peer slot's generation at accept time
	Errno     uint32 // why it was rejected (a syscall errno value)
}

// ConnQueue is the fixed-size connection-request queue in a region. Senders
// claim slots with CAS; the receiver scans, answers and never blocks on a
// sender. Every field read is validated. Safe for concurrent use.
type ConnQueue struct {
	mem  []byte
	n    int
	seq  *atomic.Uint32
	bell *Doorbell
}

// Len returns the number of slots.
func (q *ConnQueue) Len() int { return q.n }

func (q *ConnQueue) slot(i int) []byte { return q.mem[i*ConnSlotSize : (i+1)*ConnSlotSize] }

func (q *ConnQueue) word(i int) *atomic.Uint64 { return word64(q.slot(i), cWord) }

func stateOf(w uint64) uint32  { return uint32(w & 0xff) }
func pidOf(w uint64) int       { return int(w >> 32) }
func ticketOf(w uint64) uint64 { return (w >> 8) & 0xffffff }

func putName(b []byte, s string) {
	clear(b[:nameField])
	copy(b[:nameField], s)
}

// Post claims a free slot, writes req into it (SenderPID is always the
// caller's pid, whatever req says), publishes it, bumps the connection
// sequence and rings the doorbell. It returns the slot index, or
// ErrQueueFull when no slot is free. Like Reply and Release it runs under
// Guard: the queue lives in another process's file.
func (q *ConnQueue) Post(req ConnRequest) (slot int, err error) {
	if ferr := Guard(func() { slot, err = q.post(req) }); ferr != nil {
		return -1, ferr
	}
	return slot, err
}

func (q *ConnQueue) post(req ConnRequest) (int, error) {
	if err := ValidName(req.SenderName); err != nil {
		return -1, fmt.Errorf("shm: post sender: %w", err)
	}
	if err := ValidName(req.RingName); err != nil {
		return -1, fmt.Errorf("shm: post ring: %w", err)
	}
	if req.RingSize <= 0 || req.RingSize > MaxSegmentSize {
		return -1, fmt.Errorf("%w: post ring size %d", ErrSize, req.RingSize)
	}
	if req.ReturnSize < 0 || req.ReturnSize > MaxSegmentSize {
		return -1, fmt.Errorf("%w: post return ring size %d", ErrSize, req.ReturnSize)
	}
	if err := errors.Join(checkSpare(req.SpareSize), checkSpare(req.ReturnSpareSize)); err != nil {
		return -1, fmt.Errorf("shm: post: %w", err)
	}
	if req.ReturnSize > 0 || req.SpareSize > 0 || req.ReturnSpareSize > 0 {
		if err := ValidName(ReturnRingName(req.RingName)); err != nil { // the suffixes are as long
			return -1, fmt.Errorf("shm: post return ring: %w", err)
		}
	}
	pid := uint64(selfPID)
	req.SenderPID = int(pid)
	for i := 0; i < q.n; i++ {
		w := q.word(i)
		old := w.Load()
		if stateOf(old) != ConnFree {
			continue
		}
		claimed := pid<<32 | ((ticketOf(old)+1)&0xffffff)<<8 | ConnWriting
		if !w.CompareAndSwap(old, claimed) {
			continue
		}
		s := q.slot(i)
		ne.PutUint32(s[cPID:], uint32(req.SenderPID))
		ne.PutUint32(s[cSNameLen:], uint32(len(req.SenderName)))
		ne.PutUint32(s[cRNameLen:], uint32(len(req.RingName)))
		ne.PutUint32(s[cPeer:], 0)
		ne.PutUint32(s[cGen:], 0)
		ne.PutUint32(s[cErrno:], 0)
		ne.PutUint64(s[cCookie:], req.Cookie)
		ne.PutUint64(s[cRingSize:], uint64(req.RingSize))
		ne.PutUint64(s[cPidNS:], PidNS())
		ne.PutUint32(s[cRetSize:], uint32(req.ReturnSize))
		ne.PutUint16(s[cSpares:], uint16(req.SpareSize/spareUnit))
		ne.PutUint16(s[cSpares+2:], uint16(req.ReturnSpareSize/spareUnit))
		putName(s[cSName:], req.SenderName)
		putName(s[cRName:], req.RingName)
		w.Store(claimed&^0xff | ConnPosted)
		q.seq.Add(1)
		return i, q.bell.Ring()
	}
	return -1, ErrQueueFull
}

// Reply reports the receiver's answer to the request this process posted in
// slot i: done is false while it is still pending. It fails if the slot no
// longer holds this process's request (it was swept or released).
func (q *ConnQueue) Reply(i int) (rep ConnReply, done bool, err error) {
	if ferr := Guard(func() { rep, done, err = q.reply(i) }); ferr != nil {
		return ConnReply{}, false, ferr
	}
	return rep, done, err
}

// selfPID is this process's pid, read once: os.Getpid is a system call,
// and a sender whose connection awaits its answer checks its slot's owner
// on every poll (0.3-0.4 us a poll here, where a BPF program runs on every
// system call: an 8-byte fetch-add to an idle target took 0.77 instead of
// 0.38 us while the connection made at AV insert stayed unanswered).
var selfPID = os.Getpid()

func (q *ConnQueue) reply(i int) (rep ConnReply, done bool, err error) {
	if i < 0 || i >= q.n {
		return rep, false, fmt.Errorf("%w: slot %d of %d", ErrSize, i, q.n)
	}
	w := q.word(i).Load()
	if pidOf(w) != selfPID || stateOf(w) == ConnFree {
		return rep, false, fmt.Errorf("shm: connection slot %d no longer ours: %w", i, ErrClosed)
	}
	s := q.slot(i)
	switch stateOf(w) {
	case ConnAccepted:
		peer := ne.Uint32(s[cPeer:])
		return ConnReply{Accepted: true, PeerIndex: int(peer), Gen: ne.Uint32(s[cGen:])}, true, nil
	case ConnRejected:
		return ConnReply{Errno: ne.Uint32(s[cErrno:])}, true, nil
	}
	return rep, false, nil
}

// Release frees slot i if it holds this process's request (posted, answered
// or not). Releasing a posted, unanswered request withdraws it: the
// receiver's Accept then fails.
func (q *ConnQueue) Release(i int) (err error) {
	if ferr := Guard(func() { err = q.release(i) }); ferr != nil {
		return ferr
	}
	return err
}

func (q *ConnQueue) release(i int) error {
	if i < 0 || i >= q.n {
		return fmt.Errorf("%w: slot %d of %d", ErrSize, i, q.n)
	}
	w := q.word(i)
	old := w.Load()
	if pidOf(old) != selfPID || stateOf(old) == ConnFree {
		return fmt.Errorf("shm: connection slot %d no longer ours: %w", i, ErrClosed)
	}
	if !w.CompareAndSwap(old, old&(0xffffff<<8)) {
		return fmt.Errorf("shm: connection slot %d changed under release: %w", i, ErrClosed)
	}
	return nil
}

// HasFree reports whether some slot is free now (a hint: another sender
// may take it first, and Post then returns ErrQueueFull). It reads the
// receiver's mapping without Guard: a region file is never shrunk.
func (q *ConnQueue) HasFree() bool {
	for i := 0; i < q.n; i++ {
		if stateOf(q.word(i).Load()) == ConnFree {
			return true
		}
	}
	return false
}

// Seq returns the connection sequence word. The receiver compares it with
// the value it saw last and scans only when it moved.
func (q *ConnQueue) Seq() uint32 { return q.seq.Load() }

// Next returns the first slot index >= from holding a posted request, or -1.
func (q *ConnQueue) Next(from int) int {
	for i := max(from, 0); i < q.n; i++ {
		if stateOf(q.word(i).Load()) == ConnPosted {
			return i
		}
	}
	return -1
}

// Read copies and validates the posted request in slot i. A request whose
// fields are inconsistent is an error wrapping ErrCorrupt: Reject it.
func (q *ConnQueue) Read(i int) (ConnRequest, error) {
	if i < 0 || i >= q.n {
		return ConnRequest{}, fmt.Errorf("%w: slot %d of %d", ErrSize, i, q.n)
	}
	w := q.word(i).Load()
	if stateOf(w) != ConnPosted {
		return ConnRequest{}, fmt.Errorf("shm: connection slot %d not posted (state %d): %w", i, stateOf(w), ErrNotReady)
	}
	var s [ConnSlotSize]byte
	copy(s[:], q.slot(i))
	req := ConnRequest{Slot: i, word: w}
	pid := ne.Uint32(s[cPID:])
	sl, rl := ne.Uint32(s[cSNameLen:]), ne.Uint32(s[cRNameLen:])
	size, ret := ne.Uint64(s[cRingSize:]), uint64(ne.Uint32(s[cRetSize:]))
	if pid == 0 || pid > 1<<31-1 || int(pid) != pidOf(w) || sl == 0 || sl > MaxNameLen || rl == 0 || rl > MaxNameLen ||
		size == 0 || size > MaxSegmentSize || ret > MaxSegmentSize {
		return ConnRequest{Slot: i, word: w}, fmt.Errorf("%w: connection slot %d: pid %d names %d/%d ring size %d",
			ErrCorrupt, i, pid, sl, rl, size)
	}
	req.SenderPID, req.RingSize, req.Cookie = int(pid), int(size), ne.Uint64(s[cCookie:])
	req.PidNS, req.ReturnSize = ne.Uint64(s[cPidNS:]), int(ret)
	req.SpareSize = int(ne.Uint16(s[cSpares:])) * spareUnit
	req.ReturnSpareSize = int(ne.Uint16(s[cSpares+2:])) * spareUnit
	req.SenderName = string(s[cSName : cSName+sl])
	req.RingName = string(s[cRName : cRName+rl])
	if err := ValidName(req.SenderName); err != nil {
		return req, fmt.Errorf("%w: connection slot %d sender: %v", ErrCorrupt, i, err)
	}
	if err := ValidName(req.RingName); err != nil {
		return req, fmt.Errorf("%w: connection slot %d ring: %v", ErrCorrupt, i, err)
	}
	if (ret > 0 || req.SpareSize > 0 || req.ReturnSpareSize > 0) && len(req.RingName)+len(returnSuffix) > MaxNameLen {
		return req, fmt.Errorf("%w: connection slot %d offers a return ring to a name of %d bytes", ErrCorrupt, i, len(req.RingName))
	}
	if q.word(i).Load() != w {
		return req, fmt.Errorf("shm: connection slot %d changed while read: %w", i, ErrNotReady)
	}
	return req, nil
}

// Accept answers req (from Read) with the peer index and generation the
// receiver gave the sender. It fails with ErrClosed when the sender
// withdrew or the slot changed since Read; the receiver should then undo
// the peer slot.
func (q *ConnQueue) Accept(req ConnRequest, peerIndex int, gen uint32) error {
	return q.answer(req, uint32(peerIndex), gen, 0, ConnAccepted)
}

// Reject answers req with errno (for example ENOSPC when the peer table is
// full, EINVAL for a corrupt request).
func (q *ConnQueue) Reject(req ConnRequest, errno uint32) error {
	return q.answer(req, 0, 0, errno, ConnRejected)
}

func (q *ConnQueue) answer(req ConnRequest, peer, gen, errno uint32, state uint64) error {
	i := req.Slot
	if i < 0 || i >= q.n || stateOf(req.word) != ConnPosted {
		return fmt.Errorf("%w: answer to slot %d", ErrSize, i)
	}
	s := q.slot(i)
	w := q.word(i)
	if w.Load() != req.word {
		return fmt.Errorf("shm: connection slot %d withdrawn: %w", i, ErrClosed)
	}
	ne.PutUint32(s[cPeer:], peer)
	ne.PutUint32(s[cGen:], gen)
	ne.PutUint32(s[cErrno:], errno)
	if !w.CompareAndSwap(req.word, req.word&^0xff|state) {
		return fmt.Errorf("shm: connection slot %d withdrawn: %w", i, ErrClosed)
	}
	return nil
}

// Sweep frees the slots claimed by processes that alive reports dead (for
// example ProcessAlive, or a ring segment's Alive) and returns how many.
// Call it now and then from the receiver so a sender killed mid-request
// cannot keep a slot forever.
func (q *ConnQueue) Sweep(alive func(pid int) bool) int {
	n := 0
	for i := 0; i < q.n; i++ {
		w := q.word(i)
		old := w.Load()
		if stateOf(old) == ConnFree || alive(pidOf(old)) {
			continue
		}
		if w.CompareAndSwap(old, old&(0xffffff<<8)) {
			n++
		}
	}
	return n
}

var pidNS struct {
	once sync.Once
	ino  uint64
}

// PidNS returns an identifier of this process's pid namespace (the inode
// of /proc/self/ns/pid), or 0 when it cannot be read. Two processes with
// the same value see the same pids.
func PidNS() uint64 {
	pidNS.once.Do(func() {
		var st unix.Stat_t
		if unix.Stat("/proc/self/ns/pid", &st) == nil {
			pidNS.ino = st.Ino
		}
	})
	return pidNS.ino
}

// ProcessAlive reports whether a process with this pid exists (kill 0). A
// recycled pid, or a zombie not yet waited for, reads as alive; prefer
// Segment.Alive where a file exists.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscallKill0(pid)
	return err == nil || errors.Is(err, errPerm)
}

// Inbound peer slot, 192 bytes, written by the receiver only:
//
//	0   state u32, atomic: 0 free, else a write count that is odd while
//	    being written and even (>0) when valid (a seqlock)
//	4   pid u32
//	8   generation u32
//	12  sender name length u32
//	16  ring name length u32
//	20  reserved (44)
//	64  sender name [64]
//	128 ring name [64]
const (
	pState    = 0
	pPID      = 4
	pGen      = 8
	pSNameLen = 12
	pRNameLen = 16
	pSName    = 64
	pRName    = 128
)

// PeerInfo describes an inbound peer. A plain value.
type PeerInfo struct {
	PID        int
	Gen        uint32
	SenderName string
	RingName   string
}

// PeerTable is the region's table of inbound peer slots. Only the owner
// writes it (Set, Clear; not concurrently for one slot); anyone may Get.
// Safe for concurrent use under that rule.
type PeerTable struct {
	mem []byte
	n   int
}

// Len returns the number of slots (the region's MaxPeers).
func (t *PeerTable) Len() int { return t.n }

func (t *PeerTable) slot(i int) []byte { return t.mem[i*PeerSlotSize : (i+1)*PeerSlotSize] }

// Set records p in slot i.
func (t *PeerTable) Set(i int, p PeerInfo) error {
	if i < 0 || i >= t.n {
		return fmt.Errorf("%w: peer slot %d of %d", ErrSize, i, t.n)
	}
	if err := ValidName(p.SenderName); err != nil {
		return err
	}
	if err := ValidName(p.RingName); err != nil {
		return err
	}
	s := t.slot(i)
	st := word32(s, pState)
	v := st.Load()
	st.Store(v | 1) // odd: being written
	ne.PutUint32(s[pPID:], uint32(p.PID))
	ne.PutUint32(s[pGen:], p.Gen)
	ne.PutUint32(s[pSNameLen:], uint32(len(p.SenderName)))
	ne.PutUint32(s[pRNameLen:], uint32(len(p.RingName)))
	putName(s[pSName:], p.SenderName)
	putName(s[pRName:], p.RingName)
	st.Store((v | 1) + 1)
	return nil
}

// Clear frees slot i.
func (t *PeerTable) Clear(i int) error {
	if i < 0 || i >= t.n {
		return fmt.Errorf("%w: peer slot %d of %d", ErrSize, i, t.n)
	}
	word32(t.slot(i), pState).Store(0)
	return nil
}

// Get returns slot i; ok is false when it is free. A slot being rewritten
// or holding inconsistent fields is an error (ErrNotReady, ErrCorrupt). It
// runs under Guard, since senders read it from the receiver's file.
func (t *PeerTable) Get(i int) (p PeerInfo, ok bool, err error) {
	if ferr := Guard(func() { p, ok, err = t.get(i) }); ferr != nil {
		return PeerInfo{}, false, ferr
	}
	return p, ok, err
}

func (t *PeerTable) get(i int) (p PeerInfo, ok bool, err error) {
	if i < 0 || i >= t.n {
		return p, false, fmt.Errorf("%w: peer slot %d of %d", ErrSize, i, t.n)
	}
	st := word32(t.slot(i), pState)
	v := st.Load()
	if v == 0 {
		return p, false, nil
	}
	var s [PeerSlotSize]byte
	copy(s[:], t.slot(i))
	if v&1 != 0 || st.Load() != v {
		return p, false, fmt.Errorf("shm: peer slot %d being written: %w", i, ErrNotReady)
	}
	sl, rl := ne.Uint32(s[pSNameLen:]), ne.Uint32(s[pRNameLen:])
	if sl == 0 || sl > MaxNameLen || rl == 0 || rl > MaxNameLen {
		return p, false, fmt.Errorf("%w: peer slot %d name lengths %d/%d", ErrCorrupt, i, sl, rl)
	}
	p = PeerInfo{PID: int(ne.Uint32(s[pPID:])), Gen: ne.Uint32(s[pGen:]),
		SenderName: string(s[pSName : pSName+sl]), RingName: string(s[pRName : pRName+rl])}
	if ValidName(p.SenderName) != nil || ValidName(p.RingName) != nil {
		return PeerInfo{}, false, fmt.Errorf("%w: peer slot %d names %q, %q", ErrCorrupt, i, p.SenderName, p.RingName)
	}
	return p, true, nil
}
