package shm

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gofi-dev/fi/internal/getcpu"
	"github.com/gofi-dev/fi/ring"
	"github.com/gofi-dev/fi/transport"
	"github.com/klauspost/cpuid/v2"
	"golang.org/x/sys/unix"
)

// The shm transport: gofi's shared-memory provider data path, implementing
// transport.Transport over the pieces of this package and package ring.
//
// Each endpoint owns a Region. A sender creates one ring segment per
// receiver (or maps the return ring the receiver made for it when the
// receiver connected first, see connect), announces it through the
// receiver's connection queue and from
// then on writes records into it, sets its bit in the receiver's bitmap and
// rings the receiver's doorbell (a system call only when the receiver
// sleeps). The receiver's Poll visits the rings whose bits are set.
//
// Ring memory follows traffic. A ring starts small (MinRingSize, 4 KiB:
// an 8 KiB file, so an idle pair costs 16 KiB of /dev/shm for both
// directions; the first prepareWide rings Prepare makes ahead start at
// spareSmallCap).
// It is replaced by a bigger one when fewer than eagerDepth records of an
// eager payload's size fit, when it is found full, or when a large payload
// streams through it, up to RingSize; and by a small one again after
// ShrinkAfter without sends. Replacing writes a recSwitch record naming the
// new ring segment into the old ring: the receiver reads the old ring up to
// it, opens the new segment and reads on there, so order is kept; the sender
// writes into the new ring at once and closes the old one when the receiver
// has read it all. A ring with no room for the switch record is not
// replaced (see replace): the receiver alone must find every record sent. A ring grows only while the shm directory stays at most a
// quarter full (growLimit): a job that fills its tmpfs keeps small rings
// rather than starve the peers still connecting. A payload of at most
// MaxEager bytes that no longer fits the ring then travels by rendezvous
// from a copy the transport keeps (a bounce buffer): the caller's buffer is
// free when Send returns (inject), but the send completes, like any
// rendezvous send, only on the receiver's ACK or with its last segment
// (see sendBounce).
//
// Protocols by size:
//   - eager (at most MaxEager bytes): the payload rides in the record
//     (above farMin, to a peer whose CPU shares no cache with ours, by
//     rendezvous instead: see farMin);
//   - rendezvous (larger): the record carries the addresses of the sender's
//     buffers. When a receive matches, the receiver copies straight out of
//     the sender's memory with process_vm_readv (single copy) and answers
//     ACK; where the kernel refuses that, it answers CTS and the sender
//     streams the payload through the ring in segments. Either way the
//     sender completes on ACK (or its last segment), so an unexpected large
//     message costs the receiver only a record.
//
// Records (ring record types; all fields little-endian, untrusted on read):
//
//	recEager: eagerHdr(16, 24 or 32) payload
//	recRTS:   msgHdr(32) cookie u64, niov u32, pad u32, niov*(addr u64, len u64)
//	recACK:   cookie u64, status u32 (0 read, 1 discarded, 2 not read: EIO)
//	recCTS:   cookie u64
//	recSeg:   cookie u64, offset u64, payload
//	recSwitch: segment size u64, name length u32, pad u32, name
//	recCTW:   cookie u64, offset u64, length u64, address u64 (split.go)
//	recWDone: cookie u64, status u32 (0 written, 1 not)
//	recDropSpare: (empty)
//
//	msgHdr:   kind u8, flags u8, pad u16, group u32, tag u64, data u64, len u64
//	eagerHdr: kind u8, flags u8, hasData u8 (0 or 1), hasLen u8 (0 or
//	          1), group u32, tag u64, then data u64 only when hasData,
//	          then only when hasLen (a slot record, see reserveEager):
//	          padding to byte 40 of the record's payload, len u32, the
//	          payload's length, ring u32 and released u64, how far the
//	          sender has read the ring the receiver writes to it (ring:
//	          its trailer's id, 0 for none; see slotHdr); the payload at
//	          byte 56 (slotHdrLen), the rest of the record unused.
//	          Without hasLen the payload length is the record's length
//	          less the header. An 8-byte message is
//	          a 32-byte record (ring header included), two to a cache line
//	          and never across two, where the full msgHdr made it 48 bytes,
//	          half of them spread over two lines.
const (
	recEager uint16 = 1
	recRTS   uint16 = 2
	recACK   uint16 = 3
	recCTS   uint16 = 4
	recSeg   uint16 = 5
	// recSwitch: the sender writes on in the ring segment named here.
	recSwitch uint16 = 6
	// recCTW and recWDone: a split single copy (split.go).
	recCTW   uint16 = 7
	recWDone uint16 = 8
	// recDropSpare: the sender will not switch to the return spare the
	// receiver made for it (connect): the receiver may close it.
	recDropSpare uint16 = 9
)

const (
	msgHdrLen = 32
	// eagerHdrMin and eagerHdrMax bound the eager header (without and
	// with the data word; a slot record's header is slotHdrLen);
	// eager sizing uses msgHdrLen, which is at least each of them.
	eagerHdrMin = 16
	eagerHdrMax = 24
	// slotWords: a slot record's length and release words (slotHdr)
	slotWords = 16
	// slotHdrLen: a slot record's header, the eager header, padding and
	// the slot words last: its payload starts on the line after the
	// record's first (slots start on a line), where the copies of a
	// 4 KiB ping-pong run faster than from the header's line's middle.
	slotHdrLen = 64 - ring.RecordHeader
	// eagerSlotMin is the smallest eager payload that may go in a slot
	// record (reserveEager).
	eagerSlotMin = 2048
	rtsFixed     = msgHdrLen + 16
	maxRTSIOV    = 8
	pollBudget   = 64 // records drained from one ring per Poll before moving on
	// directMax is the number of inbound peers up to which Poll looks at
	// their rings' next header words directly before consulting the bitmap: one load
	// per ring, a cache hit until the sender publishes, where the bitmap
	// costs the receiver a swap of a line the sender wrote (two more
	// cross-core transfers on the latency path).
	directMax = 8
)

// TransportConfig sizes a Transport. Zero fields take the defaults.
type TransportConfig struct {
	// Name is the region name (default NewName()); it must pass ValidName.
	Name string
	// RingSize is the largest capacity a ring this endpoint writes to a
	// receiver grows to under traffic (a power of two; default
	// $GOFI_SHM_RING_MAX or DefaultRingSize). A ring of capacity c takes
	// RingSegSize(c) bytes of the shm directory: c plus 4 KiB.
	RingSize int
	// MinRingSize is the capacity a ring starts with and shrinks back to
	// when idle (a power of two, at least 1 KiB and at most RingSize;
	// default $GOFI_SHM_RING_MIN or DefaultMinRingSize).
	MinRingSize int
	// ShrinkAfter is how long a grown ring may go without sends before it
	// is replaced by a small one (default $GOFI_SHM_RING_IDLE or
	// DefaultShrinkAfter).
	ShrinkAfter time.Duration
	// MaxEager is the largest payload sent inline (default DefaultMaxEager,
	// at most the ring's MaxPayload minus the record header).
	MaxEager int
	// MaxPeers bounds inbound peers (default DefaultMaxPeers).
	MaxPeers int
	// NoCMA disables single copy, forcing segments (tests, or a platform
	// that forbids process_vm_readv).
	NoCMA bool
	// CMAMin is the smallest rendezvous payload always fetched with
	// single copy; below it the transport picks, per size class, whichever
	// of single copy and segments has been faster lately (see pickCMA). 0
	// takes $GOFI_SHM_CMA_MIN, else the start-up probe's Threshold
	// (ProbeCMA), else none: every size adapts (the probe finds two copies
	// cheaper on the development machine, copy 22 vs 7.6 GB/s, which holds
	// only while the two CPUs share a cache).
	CMAMin int
	// PeerTimeout is how long a peer may leave an operation unanswered
	// before its liveness is checked (default 100 ms). A dead peer's
	// operations fail with ECONNRESET.
	PeerTimeout time.Duration
}

// Defaults of TransportConfig.
const (
	DefaultRingSize    = 512 << 10
	DefaultMinRingSize = 4 << 10
	DefaultShrinkAfter = time.Second
	DefaultMaxEager    = 16 << 10
)

const (
	// minRingFloor is the smallest MinRingSize: a ring must hold the
	// largest control record (an RTS of maxRTSIOV buffers) in half of it.
	minRingFloor = 1 << 10
	// growLimit: a ring grows only if the shm directory is at most
	// 1/growLimit full afterwards.
	growLimit = 4
	// growBackoff is how long a peer whose ring could not grow waits
	// before trying again.
	growBackoff = 50 * time.Millisecond
	// maxBounce bounds the bounce buffers (MaxEager bytes each) in flight.
	maxBounce = 64
	// eagerDepth: an eager message grows its ring (up to RingSize) until
	// that many records of its size fit. The producer rereads the
	// consumer's head, a line the consumer wrote at its last read, only
	// when its cached copy says the next record does not fit: in a ring
	// holding 3 records (a 4 KiB message's 16 KiB ring) that is 2 sends
	// in 3 even in a ping-pong, each paying a transfer of that line
	// between the CPUs before publishing. A longer ring costs more: a
	// ping-pong cycles through all of its records, each one's lines
	// cold in both CPUs' caches (BenchmarkCopyPingPongSlots: the copies
	// of a 4 KiB ping-pong through 3 slots 433-466 ns per half round
	// trip near, through 32 slots 605-620). With 8 (a 4 KiB message's
	// ring 64 KiB, 128 KiB from the spare) fi_pingpong's 4 KiB x 10k took
	// 0.74-0.75 us per transfer near and 2.60-2.62 far, with 2 (16 KiB)
	// 0.69-0.71 and 2.54-2.56 (pinned, chrt -f 1, alternated; streaming
	// bandwidth at 1, 4 and 16 KiB unchanged: a window that fills the
	// ring grows it as before).
	eagerDepth = 2
	// preRendezvous: rendezvous messages (each way) a peer's tables and
	// the transport's free lists hold before they first allocate (a map
	// made for at most 8 entries allocates at its first insert).
	preRendezvous = 16
	// preFetchIOV: receive buffers a segment fetch holds before its list
	// grows (the first segment try of a peer allocated it, seen as 2 of
	// the 4 allocations of that message, the streams list the other 2).
	preFetchIOV = 4
	// prepareOut: Prepare connects ahead only while we have fewer rings
	// out than this (4 of 20 KiB and 12 of 8 KiB: 176 KiB of the shm
	// directory; see prepareWide).
	prepareOut = 16
	// prepareWide: the first rings Prepare makes have spareSmallCap
	// (a 20 KiB file, not 8 KiB), the ring a 2-5 KiB message grows to
	// (eagerDepth records): such a message's first round trips then
	// follow no switch, in which each side opened, mapped and populated
	// the other's new ring and closed the old one (~30 system calls in
	// the first 5 round trips of fi_pingpong -S 4k, 170-700 us each;
	// issue 12). An idle ring shrinks to MinRingSize after ShrinkAfter as
	// a grown one does. Up front a rank pays 4 x 12 KiB more of the shm
	// directory: one preparing prepareOut peers holds 4 x 20 + 12 x 8 KiB
	// of rings and 20 + 132 KiB of spares, 328 KiB (was 280), so 48 ranks
	// 15.4 MiB (was 13.1) besides their 64 KiB regions; Prepare stops,
	// as before, once the directory is a quarter full (crowded): the
	// ranks after connect on first use with MinRingSize rings.
	prepareWide = 4
	// spareCap is the capacity of the ring segment Prepare makes ahead
	// for the first growth of a ring (a 132 KiB file per endpoint, closed
	// after ShrinkAfter without sends, as grown rings shrink then): the
	// growths of fi_pingpong's default sizes fit it (a 4 KiB message's
	// eagerDepth records need 64 KiB, a 64 KiB rendezvous streamed
	// through the rings 128 KiB), and making a segment on the message
	// path cost 0.4-1.1 ms and ~25 system calls on the first message of
	// such a size (issue 12).
	spareCap = 128 << 10
	// spareSmallCap is the capacity of the second ring segment made
	// ahead, for growths it covers (a 2-4 KiB message's eagerDepth
	// records): the spare would make such a ring 128 KiB, and the
	// ping-pong cycle through all of it (see eagerDepth).
	spareSmallCap = 16 << 10
)

// Transport is the shm provider's transport.Transport. Its data-path
// methods are called serialised by the engine; Wait and Wake are safe from
// any goroutine.
type Transport struct {
	cfg    TransportConfig
	region *Region
	name   string
	addr   []byte
	bits   *ring.Bitmap
	bell   *Doorbell
	// polling is our region's polling word (see askBits)
	polling *atomic.Uint32
	seen    atomic.Uint32 // connection sequence last handled (read by Wait)
	cma     bool
	cmaMin  int // smallest payload always fetched with single copy
	// recent cost of rendezvous fetches by size class and method, for
	// pickCMA
	fetchCost [fetchClasses]fetchCost
	// recent cost of split and whole single copies from splitMin, by
	// size class (split.go)
	splitCost [fetchClasses]splitCost
	hugeMin   int // MsgHugeMin at creation
	splitMin  int // SplitMin at creation, 0 without single copy
	// split copies started, parts written for a peer, parts the sender
	// did not write (the receiver read them), for tests
	splits, splitWrites, splitFallbacks int
	// released: positions our rings' consumers told us in slot records
	// that moved a ring's cached head (noteRelease), for tests
	released int
	huge     hugeSeen // send buffers' blocks backed by huge pages

	peers []*peer
	// peerCPUs: bit c set when a peer with a larger pid last polled on
	// CPU c (< 64), as its region says (notePlace; PeerShares).
	peerCPUs atomic.Uint64
	// rdvAt: when (since placeEpoch) a rendezvous payload last went
	// either way (PeerShares).
	rdvAt   atomic.Int64
	byName  map[string]transport.Peer
	inbound []*peer // by peer-table slot
	direct  []*peer // the inbound peers, polled directly when few
	cur     *peer   // peer whose ring sweep is touching (fault attribution)
	busy    []*peer // peers with outbound work pending
	inWords int     // bitmap words covering the inbound slots in use

	nextCookie  uint64
	polls       uint32    // Poll calls, for the housekeeping tick
	lastTick    time.Time // last housekeeping
	nudgeSeen   atomic.Uint32
	pokeWait    atomic.Int32                // WaitPokes: Wait also returns when nudged
	waitCond    atomic.Pointer[func() bool] // SetWaitCond: Wait also returns when true
	busyN       atomic.Int32                // len(busy), for Wait (which may run concurrently)
	bounces     int                         // bounce buffers handed out
	switches    int                         // rings replaced (grown or shrunk), for tests
	switchFails int                         // replacements declined: no room for the switch record, for tests
	spin        atomic.Int32                // SpinBudget
	spinEnv     int                         // GOFI_SHM_SPIN, or -1
	envRanks    int                         // local ranks a launcher announced, or 0
	selfPeer    bool                        // our own address is among peers
	crowdedAt   time.Time                   // when isCrowded was last checked
	isCrowded   bool                        // rings cannot grow (shm directory over its limit)
	bounceFree  [][]byte
	// free lists for the rendezvous bookkeeping (no allocation per message)
	heldFree  []*held
	rtsFree   []*rts
	fetchFree []*fetchSeg
	hdr       transport.Header // scratch for Sink.Arrive (a local would escape)
	sink      transport.Sink
	woken     atomic.Bool
	closed    bool
	injecting bool                  // inside SendInject: eager sizes are copied (see farMin)
	lastErr   atomic.Pointer[error] // cause of the last ENoSpc or EIO, for LastError
	rma       rmaState              // one-sided operations (rma.go)
	// spare is a ring segment of spareCap made ahead (Prepare) for the
	// next growth, so that it makes no file on the message path
	spare *ringSeg
	// spareSmall: the same, of spareSmallCap, for the growths it covers
	spareSmall *ringSeg
	// retStale: return rings no peer will take (dropRet), closed by tick
	retStale []staleRet
	// sendsSeen is when tick last saw sends (or the spare was made)
	sendsSeen time.Time
}

var (
	_ transport.Transport = (*Transport)(nil)
	_ transport.Discarder = (*Transport)(nil)
)

// peer is one remote endpoint, both directions.
type peer struct {
	idx  transport.Peer
	name string
	addr []byte
	dead bool
	err  transport.Code

	// outbound: our ring in a segment we own, announced to their region
	region  *Region
	rbits   *ring.Bitmap
	rpoll   *atomic.Uint32 // their region's polling word: 1 = no bit needed
	seg     *Segment
	out     *ring.Ring
	outWant *atomic.Uint32 // the trailer word of seg
	eager   int            // largest eager payload the current ring takes
	outID   uint32         // the current ring's id (ringSeg.id)
	// a ring being replaced: written up to its switch record, closed
	// once the receiver has read it all
	old       *ring.Ring
	oldSeg    *Segment
	sends     uint32    // Send calls, for idle detection
	seenSends uint32    // sends at the last housekeeping
	active    time.Time // last housekeeping that saw sends
	growAfter time.Time // no growth attempt before this
	connSlot  int       // slot of our request in their queue, -1 when answered
	bit       int       // our bit at the receiver, -1 until accepted
	inBusy    bool      // listed in Transport.busy
	ctrl      []ctrl
	streams   []stream // rendezvous sends streaming segments after CTS
	held      map[uint64]*held
	since     time.Time // oldest unanswered operation, for liveness checks
	unread    time.Time // since when tick saw our ring to p not read to the end
	failSend  bool      // outbound broken: sends fail
	// ret: the ring we made (and own) for p to write back to us, offered
	// in our connection request (ConnRequest.ReturnSize), until p's own
	// request names it (accept then maps nothing) or another ring
	ret *ringSeg
	// offer: the return ring p offered us in its request, which our
	// connect maps as our ring to p instead of making one; spareOffer:
	// the spare p named for its next ring to us, which that connect maps
	// ahead (inSpare); retSpareOffer: the spare p made for our next ring
	// to it, which that connect maps (outSpare)
	offer, spareOffer, retSpareOffer ringOffer
	// inSpare: a ring segment p's next ring to us may be, mapped ahead
	// (switchIn then maps nothing): p's spare it named (mapped at
	// inSpareAt; unmapped by tick when unused) or the return spare we
	// made (ours, closed when p says it will not use it: recDropSpare)
	inSpare   *ringSeg
	inSpareAt time.Time
	// outSpare: the spare p made for our next ring to it (replace),
	// until we use it or tell p we will not (recDropSpare)
	outSpare *ringSeg

	// inbound: their ring to us
	inSeg  *Segment
	in     *ring.Ring
	inWant *atomic.Uint32 // the trailer word of inSeg
	inID   uint32         // the sender's id of in (ringSeg.id)
	bell   *Region        // their region, opened to nudge them when we send them nothing
	inIdx  int
	noCMA  bool // single copy refused or unsafe with this peer: segments
	// far: eager copies to this peer above farMin have run slow (the two
	// CPUs share no cache): such payloads go by rendezvous. copyVotes:
	// the last 8 timed copies, bit set when slow (putEagerTimed).
	far       bool
	copyVotes uint8
	// farSends: sends of payloads above farMin up to MaxEager, which the
	// sample and the probe count (counting every send, traffic that
	// alternates a small message and such a payload had the payloads
	// never sampled near, never probed far)
	farSends uint32
	// farCTS: eager-sized payloads sent by rendezvous for far (not
	// bounces) that the receiver answered with CTS in a row (farAnswer)
	farCTS uint8
	// splitSkip: large fetches from the peer still to go unsplit after a
	// split waited on it (split.go); splitLate: its late splits in a row;
	// splitWarm: its first splits, judged by none (up to splitWarmup)
	splitSkip int
	splitLate uint8
	splitWarm uint8
	pid       int
	gen       uint32
	fetch     map[uint64]*fetchSeg // segment-mode fetches in progress
	// segDone is when the last timed segment fetch from the peer ended
	segDone time.Time
	// switchIns counts the peer's ring switches we followed
	switchIns uint32
	rts       map[uint64]*rts // announced rendezvous messages not yet fetched

	rma *rmaPeer // one-sided operations to the peer (rma.go), once used
}

// ringOffer is a ring segment a peer's connection request named for us
// to map.
type ringOffer struct {
	name string
	size int
}

// held is a rendezvous send waiting for the receiver.
type held struct {
	op     transport.Op
	iov    [][]byte
	n      int
	bounce []byte    // the transport's copy of a payload of at most MaxEager
	one    [1][]byte // iov storage for a bounce send
}

// stream is a held send being streamed in segments after CTS.
type stream struct {
	cookie uint64
	h      *held
	off    int
}

// fetchSeg is a receive being filled by segments.
type fetchSeg struct {
	op    transport.Op
	dst   [][]byte
	total int       // message length
	got   int       // bytes of the message received so far
	n     int       // bytes written into dst
	timed bool      // fetch with a choice of method: feeds fetchCost
	start time.Time // CTS sent (timed fetches)
	// explore: a try of segments while single copy looked faster
	explore bool
	// switches: the peer's ring switches when the fetch began
	switches uint32
	// split: a split single copy (split.go); got is where the sender's
	// part begins, n what the receiver read, err its read's error
	split bool
	err   error
	// own: how long the receiver's part took; start is when it ended
	own time.Duration
}

type ctrl struct {
	typ    uint16
	cookie uint64
	status uint32
	// recCTW only: the part asked for and where it goes
	off, n, addr uint64
	// owed: a recACK whose fetch completes (FetchDone(op, got, code))
	// when it is written (ackFetch)
	owed bool
	code transport.Code
	op   transport.Op
	got  int
}

// NewTransport creates this endpoint's region and returns its transport.
func NewTransport(cfg TransportConfig) (*Transport, error) {
	var err error
	if cfg.RingSize == 0 {
		if cfg.RingSize, err = envSize(RingMaxEnv, DefaultRingSize); err != nil {
			return nil, err
		}
	}
	if cfg.MinRingSize == 0 {
		if cfg.MinRingSize, err = envSize(RingMinEnv, DefaultMinRingSize); err != nil {
			return nil, err
		}
		cfg.MinRingSize = min(cfg.MinRingSize, cfg.RingSize)
	}
	if cfg.ShrinkAfter == 0 {
		if cfg.ShrinkAfter, err = envDuration(RingIdleEnv, DefaultShrinkAfter); err != nil {
			return nil, err
		}
	}
	if ring.Size(cfg.RingSize) < 0 {
		return nil, fmt.Errorf("%w: ring size %d is not a power of two", ErrSize, cfg.RingSize)
	}
	if ring.Size(cfg.MinRingSize) < 0 || cfg.MinRingSize < minRingFloor || cfg.MinRingSize > cfg.RingSize {
		return nil, fmt.Errorf("%w: minimum ring size %d is not a power of two in %d..%d", ErrSize, cfg.MinRingSize, minRingFloor, cfg.RingSize)
	}
	if cfg.ShrinkAfter < 0 {
		return nil, fmt.Errorf("%w: ShrinkAfter %v", ErrSize, cfg.ShrinkAfter)
	}
	maxp := ring.MaxPayloadFor(cfg.RingSize) - msgHdrLen
	if cfg.MaxEager == 0 {
		cfg.MaxEager = DefaultMaxEager
	}
	if cfg.MaxEager < 0 || cfg.MaxEager > maxp {
		return nil, fmt.Errorf("%w: max eager %d (ring payload limit %d)", ErrSize, cfg.MaxEager, maxp)
	}
	if cfg.PeerTimeout == 0 {
		cfg.PeerTimeout = 100 * time.Millisecond
	}
	r, err := CreateRegion(Config{Name: cfg.Name, MaxPeers: cfg.MaxPeers})
	if err != nil {
		return nil, err
	}
	bm, err := ring.NewBitmap(r.Bitmap(), r.Layout().PeerSlots)
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	t := &Transport{cfg: cfg, region: r, name: r.Name(), addr: []byte(r.Addr()), bits: bm,
		bell: r.Doorbell(), polling: r.pollWord(), byName: map[string]transport.Peer{},
		inbound: make([]*peer, r.Layout().PeerSlots), cma: !cfg.NoCMA && !cmaDisabledByEnv() && ProbeCMA().Available}
	t.seen.Store(r.ConnQueue().Seq())
	t.spinEnv = -1
	if v := os.Getenv(SpinEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			_ = r.Close()
			return nil, fmt.Errorf("%w: %s=%q is not a count of polls", ErrSize, SpinEnv, v)
		}
		t.spinEnv = n
	}
	t.envRanks = envLocalRanks()
	t.updateSpin()
	// The rendezvous bookkeeping's free lists start with a few entries
	// (and room for more), so that the first large messages allocate
	// nothing.
	t.heldFree, t.rtsFree = make([]*held, 0, 4*preRendezvous), make([]*rts, 0, 4*preRendezvous)
	t.fetchFree = make([]*fetchSeg, 0, 4*preRendezvous)
	for range preRendezvous {
		t.heldFree = append(t.heldFree, &held{})
		t.rtsFree = append(t.rtsFree, &rts{})
		t.fetchFree = append(t.fetchFree, &fetchSeg{dst: make([][]byte, 0, preFetchIOV)})
	}
	if t.cma {
		t.splitMin = SplitMin()
		if t.hugeMin = MsgHugeMin(); t.hugeMin > 0 {
			startHugeWorker()
		}
	}
	t.cmaMin = cfg.CMAMin
	if t.cmaMin <= 0 {
		if t.cmaMin, err = envSize(CMAMinEnv, 0); err != nil {
			_ = r.Close()
			return nil, err
		}
	}
	if t.cmaMin <= 0 {
		t.cmaMin = ProbeCMA().Threshold
		if t.cmaMin <= 0 {
			t.cmaMin = math.MaxInt
		}
		// A send buffer backed by huge pages makes single copy the
		// faster from MsgHugeMin in both placements (1 MiB: 42-50 us
		// near against segments' 51-56, 47-60 far against 100+), and it
		// needs only the receiver running, where segments stall for
		// milliseconds when the two processes share a CPU: no segment
		// tries at those sizes.
		if t.hugeMin > 0 {
			t.cmaMin = min(t.cmaMin, t.hugeMin)
		}
		// From SplitMin single copy is split between the two sides or
		// whole (split.go), each beating segments there in both
		// placements (fetchcost.go).
		if t.splitMin > 0 {
			t.cmaMin = min(t.cmaMin, t.splitMin)
		}
	}
	return t, nil
}

// DisableCMAEnv names the environment variable that turns single copy off
// for every transport of the process when set to 1, true or yes (the name
// libfabric's shm provider uses): rendezvous payloads then stream through
// the rings in segments.
const DisableCMAEnv = "FI_SHM_DISABLE_CMA"

func cmaDisabledByEnv() bool {
	switch strings.ToLower(os.Getenv(DisableCMAEnv)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// Name returns "fi_shm://<region name>".
func (t *Transport) Name() []byte { return t.addr }

// MaxEager reports the inline limit.
func (t *Transport) MaxEager() int { return t.cfg.MaxEager }

// CMA reports whether single copy is in use (the start-up probe found
// process_vm_readv working and nothing turned it off).
func (t *Transport) CMA() bool { return t.cma }

// SingleCopy reports whether this transport reads and writes peer p's
// memory with process_vm_readv/writev: false when single copy is off for
// the process (probe, FI_SHM_DISABLE_CMA, NoCMA), when the kernel refused
// it for p once (DenySingleCopy), or when p lives in another pid
// namespace. Payloads then go through shared memory. Called on the
// engine's goroutine, like Send.
func (t *Transport) SingleCopy(pi transport.Peer) bool {
	return t.cma && int(pi) < len(t.peers) && !t.peers[pi].noCMA
}

// DenySingleCopy records that the kernel refused single copy with peer p
// (ErrPeerDenied from ReadPeer or a writev): from now on this transport
// moves p's payloads through shared memory. Called on the engine's
// goroutine.
func (t *Transport) DenySingleCopy(pi transport.Peer) {
	if int(pi) < len(t.peers) {
		t.peers[pi].noCMA = true
	}
}

// Resolve maps an "fi_shm://name" address to a peer.
func (t *Transport) Resolve(addr []byte) (transport.Peer, transport.Code) {
	if p, ok := t.byName[string(addr)]; ok {
		return p, 0
	}
	name, err := ParseAddr(string(addr))
	if err != nil {
		return 0, transport.EInval
	}
	return t.peerFor(name).idx, 0
}

func (t *Transport) peerFor(name string) *peer {
	a := Addr(name)
	if i, ok := t.byName[a]; ok {
		return t.peers[i]
	}
	// Room for a few rendezvous messages and control records in flight
	// now, so that the first large messages allocate nothing (issue 12).
	p := &peer{idx: transport.Peer(len(t.peers)), name: name, addr: []byte(a), connSlot: -1, bit: -1, inIdx: -1,
		held: make(map[uint64]*held, preRendezvous), fetch: make(map[uint64]*fetchSeg, preRendezvous),
		rts: make(map[uint64]*rts, preRendezvous), ctrl: make([]ctrl, 0, preRendezvous),
		streams: make([]stream, 0, preRendezvous)}
	t.peers = append(t.peers, p)
	t.byName[a] = p.idx
	t.selfPeer = t.selfPeer || name == t.name
	t.updateSpin()
	return p
}

// SpinBudget tells the engine how many empty passes a blocking read
// spins before it sleeps on the doorbell (engine.Spinner): the default
// (-1) while this host has a CPU for every rank we know of, and
// OversubscribedSpin once the ranks (a launcher's count of local ranks,
// or the peers this endpoint knows plus itself) outnumber the CPUs this
// process may run on; GOFI_SHM_SPIN overrides. Safe for concurrent use.
func (t *Transport) SpinBudget() int { return int(t.spin.Load()) }

func (t *Transport) updateSpin() {
	b := -1
	ranks := max(t.envRanks, len(t.peers)+1)
	if t.selfPeer {
		ranks = max(t.envRanks, len(t.peers))
	}
	switch {
	case t.spinEnv >= 0:
		b = t.spinEnv
	case ranks > runtime.NumCPU():
		b = OversubscribedSpin
	}
	t.spin.Store(int32(b))
}

// PeerAddr returns the peer's address.
func (t *Transport) PeerAddr(p transport.Peer) []byte {
	if int(p) >= len(t.peers) {
		return nil
	}
	return t.peers[p].addr
}

// LastError returns the cause of the last failure this transport reported
// as ENoSpc or EIO (an out-of-space error names the directory and the
// bytes it needed), or nil. Safe for concurrent use.
func (t *Transport) LastError() error {
	if e := t.lastErr.Load(); e != nil {
		return *e
	}
	return nil
}

// failed records err for LastError and returns its code: ENoSpc when the
// shm directory is full, else c.
func (t *Transport) failed(err error, c transport.Code) transport.Code {
	t.lastErr.Store(&err)
	if errors.Is(err, ErrNoSpace) {
		return transport.ENoSpc
	}
	return c
}

// connect opens the receiver's region and announces a new ring of
// capacity c to it: the return ring the receiver offered us, mapped, when
// there is one (the receiver then has it mapped already), else one we
// make. With ret set it also makes a ring of capacity c for the receiver
// to write back to us and offers it in the request (Prepare: the peer
// that inserts second then maps both rings at its own insert, and our
// first poll accepts its ring without opening or mapping a file), and
// with spares too the spares of the first growths each way (our spare
// named in the request, which the receiver maps ahead, and one for the
// receiver's growth back, which it takes as it takes the return ring):
// the first messages that grow a ring then map no file either. When it
// fails nothing of the connection is left: no file, no mapping.
func (t *Transport) connect(p *peer, c int, ret, spares bool) transport.Code {
	if p.region == nil {
		r, err := OpenRegion(p.name)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return transport.EConnRefuse
			}
			return t.failed(err, transport.EIO)
		}
		bm, err := ring.NewBitmap(r.Bitmap(), r.Layout().PeerSlots)
		if err != nil {
			_ = r.Close()
			return transport.EIO
		}
		p.region, p.rbits, p.rpoll = r, bm, r.pollWord()
	}
	r := p.region
	// A region left by a killed owner still parses; a request posted into
	// it would never be answered and sends into the ring would "complete"
	// into nowhere.
	if alive, err := r.Segment().Alive(); err != nil || !alive {
		t.closeOut(p)
		return transport.EConnRefuse
	}
	// Many senders connecting at once (a job starting) can fill the
	// receiver's queue: try again later, keeping the region open, and
	// make no ring file until a slot is free.
	if !r.ConnQueue().HasFree() {
		return transport.EAgain
	}
	offers := [...]ringOffer{p.offer, p.spareOffer, p.retSpareOffer}
	p.offer, p.spareOffer, p.retSpareOffer = ringOffer{}, ringOffer{}, ringOffer{}
	var rs *ringSeg
	if o := offers[0]; o.name != "" && o.size <= RingSegSize(t.cfg.RingSize) {
		// A ring that cannot be mapped (its maker gone, or not a ring of
		// the size announced) is no error: we make our own.
		rs, _ = adoptRingSeg(o.name, o.size)
	}
	adopted := rs != nil
	if rs == nil {
		var err error
		if rs, err = createRingSeg(c); err != nil {
			return t.failed(fmt.Errorf("connect to %s: %w", p.name, err), transport.EIO)
		}
	}
	name := rs.seg.Name()
	req := ConnRequest{SenderPID: os.Getpid(), SenderName: t.name, RingName: name, RingSize: rs.seg.Size()}
	switch {
	case adopted:
		// The receiver's spares, when it named any: its next ring to us,
		// mapped now, and the one it made for our next ring to it.
		if o := offers[1]; o.name != "" && p.inSpare == nil {
			if sp, err := openRingSeg(o.name, o.size); err == nil {
				p.inSpare, p.inSpareAt = sp, time.Now()
			}
		}
		if o := offers[2]; o.name != "" && p.outSpare == nil && o.size <= RingSegSize(t.cfg.RingSize) {
			p.outSpare, _ = adoptRingSeg(o.name, o.size)
		}
	case ret && p.in == nil && p.ret == nil:
		if rr, err := createRingSegNamed(ReturnRingName(name), c); err == nil {
			p.ret, req.ReturnSize = rr, rr.seg.Size()
		}
		if !spares || p.ret == nil || spareCap > t.cfg.RingSize || t.crowded() {
			break
		}
		// The spares of the first growths, named so that the receiver
		// maps them at its own insert: our spare (the endpoint's, made
		// here rather than by makeSpare) and one for its growth back.
		if t.spare == nil {
			if sp, err := createRingSegNamed(SpareRingName(name), spareCap); err == nil {
				t.spare, t.sendsSeen, req.SpareSize = sp, time.Now(), sp.seg.Size()
			}
		}
		if p.inSpare == nil {
			if sp, err := createRingSegNamed(ReturnSpareName(name), spareCap); err == nil {
				p.inSpare, req.ReturnSpareSize = sp, sp.seg.Size()
			}
		}
	}
	slot, err := r.ConnQueue().Post(req)
	if err != nil {
		_ = rs.seg.Close()
		t.closeRet(p)
		t.closePeerSpares(p)
		if adopted {
			p.offer, p.spareOffer, p.retSpareOffer = offers[0], offers[1], offers[2] // still ours to take
		}
		if errors.Is(err, ErrQueueFull) {
			return transport.EAgain
		}
		t.closeOut(p)
		return t.failed(fmt.Errorf("connect to %s: %w", p.name, err), transport.EIO)
	}
	p.connSlot, p.bit = slot, -1
	t.setOut(p, rs)
	p.since = time.Now()
	p.active = p.since
	t.markBusy(p)
	return 0
}

// closePeerSpares closes p's spares (inSpare, outSpare).
func (t *Transport) closePeerSpares(p *peer) {
	for _, sp := range [...]**ringSeg{&p.inSpare, &p.outSpare} {
		if *sp != nil {
			_ = (*sp).seg.Close()
			*sp = nil
		}
	}
}

// closeRet closes the return ring we made for p, if any (the owner's
// Close removes the file).
func (t *Transport) closeRet(p *peer) {
	if p.ret != nil {
		_ = p.ret.seg.Close()
		p.ret = nil
	}
}

// setOut makes rs the ring p's sends go to.
func (t *Transport) setOut(p *peer, rs *ringSeg) {
	p.seg, p.out, p.outWant, p.outID = rs.seg, rs.r, rs.want, rs.id
	p.eager = min(t.cfg.MaxEager, rs.r.MaxPayload()-msgHdrLen)
}

// checkReply learns our bit index once the receiver accepted.
func (t *Transport) checkReply(p *peer) {
	if p.connSlot < 0 {
		return
	}
	rep, done, err := p.region.ConnQueue().Reply(p.connSlot)
	if err != nil {
		t.fail(p, transport.EConnRefuse)
		return
	}
	if !done {
		return
	}
	_ = p.region.ConnQueue().Release(p.connSlot)
	p.connSlot = -1
	if !rep.Accepted {
		t.fail(p, transport.EConnRefuse)
		return
	}
	p.bit = rep.PeerIndex
	t.kick(p)
}

// kick tells the receiver its ring has records: it sets our bit in the
// receiver's bitmap, unless the receiver said (its polling word) that it
// polls every inbound ring directly, and rings its doorbell. Skipping the
// bit saves two transfers of the bitmap's line between the CPUs per
// message (our atomic OR, the receiver's swap). It cannot lose a record:
// the receiver clears the word before it relies on the bitmap and then
// looks at every ring once (pollDirect); our load of the word follows our
// publish, so either we see the word cleared, or that look sees the
// record.
func (t *Transport) kick(p *peer) {
	if p.bit >= 0 {
		fence() // the publish before the load (under -race only)
		if p.rpoll.Load() == 0 {
			_ = p.rbits.Set(p.bit)
		}
	}
	_ = p.region.Doorbell().Ring()
}

func (t *Transport) markBusy(p *peer) {
	if !p.inBusy {
		p.inBusy = true
		t.busy = append(t.busy, p)
		t.busyN.Store(int32(len(t.busy)))
	}
}

// Prepare connects to p ahead of its first message (transport.Preparer):
// the engine calls it when p's address is inserted into the AV. It maps
// p's region, creates our ring to it and posts the request, and accepts
// the requests already posted to us, so that the first round trip of a
// short run (fi_pingpong's default counts, issue 12) pays none of it:
// 230-360 us in one process, 0.65-0.85 ms between two fresh ones. The
// first prepareWide rings it makes are big enough for a 4 KiB message's
// records, so that its first round trips switch no ring either. It
// does nothing once prepareOut of our rings exist or the shm directory is
// more than 1/growLimit full (a big job's ranks connect on first use, as
// before), and a failure leaves nothing made (the first Send tries again
// and reports it).
func (t *Transport) Prepare(pi transport.Peer) {
	if t.closed || int(pi) >= len(t.peers) {
		return
	}
	if q := t.region.ConnQueue(); q.Seq() != t.seen.Load() {
		t.seen.Store(q.Seq())
		t.accept()
	}
	p := t.peers[pi]
	if p.out != nil || p.dead || p.failSend || t.crowded() {
		return
	}
	out := 0
	for _, q := range t.peers {
		if q.out != nil {
			out++
		}
	}
	if out >= prepareOut {
		return
	}
	c := t.cfg.MinRingSize
	if out < prepareWide && spareSmallCap <= t.cfg.RingSize {
		c = max(c, spareSmallCap)
	}
	last := t.lastErr.Load()
	if c := t.connect(p, c, true, out == 0); c != 0 {
		t.lastErr.Store(last) // a hint failed: nothing to report
		return
	}
	t.makeSpare()
}

// makeSpare makes the spare ring segment for the next growth, unless
// there is one, rings never grow that far, or the shm directory is
// crowded (then growth would fail anyway).
func (t *Transport) makeSpare() {
	for _, sp := range [...]struct {
		s *(*ringSeg)
		c int
	}{{&t.spareSmall, spareSmallCap}, {&t.spare, spareCap}} {
		if *sp.s != nil || sp.c > t.cfg.RingSize || sp.c <= t.cfg.MinRingSize || t.crowded() {
			continue
		}
		if rs, err := createRingSeg(sp.c); err == nil {
			*sp.s, t.sendsSeen = rs, time.Now()
		}
	}
}

// takeSpare returns the smallest spare ring segment whose capacity is at
// least c and more than was (the ring it replaces), and forgets it; nil
// when none covers c.
func (t *Transport) takeSpare(c, was int) *ringSeg {
	for _, s := range [...]*(*ringSeg){&t.spareSmall, &t.spare} {
		if rs := *s; rs != nil && c > was && c <= rs.r.Cap() && rs.r.Cap() > was {
			*s = nil
			return rs
		}
	}
	return nil
}

// takeOutSpare returns p's outSpare when it covers a growth to capacity
// c (as takeSpare), and forgets it; else nil.
func (p *peer) takeOutSpare(c int) *ringSeg {
	sp, was := p.outSpare, p.out.Cap()
	if sp == nil || c <= was || c > sp.r.Cap() {
		return nil
	}
	p.outSpare = nil
	return sp
}

// ready makes sure the outbound side to p exists.
func (t *Transport) ready(p *peer) transport.Code {
	if p.dead || p.failSend {
		return p.errCode()
	}
	if p.out == nil {
		if c := t.connect(p, t.cfg.MinRingSize, false, false); c != 0 {
			return c
		}
	}
	if p.connSlot >= 0 {
		t.checkReply(p)
		if p.dead {
			return p.errCode()
		}
	}
	return 0
}

func (p *peer) errCode() transport.Code {
	if p.err != 0 {
		return p.err
	}
	return transport.EConnReset
}

func putHdr(b []byte, h *transport.Header) {
	b[0], b[1], b[2], b[3] = byte(h.Kind), h.Flags, 0, 0
	binary.LittleEndian.PutUint32(b[4:], h.Group)
	binary.LittleEndian.PutUint64(b[8:], h.Tag)
	binary.LittleEndian.PutUint64(b[16:], h.Data)
	binary.LittleEndian.PutUint64(b[24:], h.Len)
}

func getHdr(b []byte) (transport.Header, bool) {
	h := transport.Header{Kind: transport.Kind(b[0]), Flags: b[1],
		Group: binary.LittleEndian.Uint32(b[4:]), Tag: binary.LittleEndian.Uint64(b[8:]),
		Data: binary.LittleEndian.Uint64(b[16:]), Len: binary.LittleEndian.Uint64(b[24:])}
	ok := (transport.ValidKind(h.Kind) || h.Kind == transport.KindRMAData && h.Len == 0) &&
		h.Flags&^transport.FlagRemoteData == 0
	return h, ok
}

// slotHdr is what a slot record's header carries after the eager
// header's fields (a nil *slotHdr: not a slot record): id and rel, the ring
// the record's receiver writes to its sender (by that ring's id, 0 for
// none) and the position up to which the sender has released it.
//
// A two-slot ring (see reserveEager) takes a record only once the record
// before it, in the other slot, is released; in a ping-pong that is the
// message the producer sent last, and its cached head never says so: it
// read the consumer's head word, a line the consumer wrote, for every
// message (a cross-CPU transfer before the copy). The consumer's answer
// now says it instead (drainRing's noteRelease): 4 KiB x 10k far (330
// ns), pinned, with the producer told the ring was free without a read
// (a measuring build): 2.29 -> 2.18 us per transfer.
//
// The id names the ring (its creator's ringSegIDs number, read from the
// trailer when the receiver opened it) so that a position in an older
// ring, in an answer written before the receiver followed a switch, is
// never taken for one in the new ring: the producer applies only a
// position about its current ring (by id) and beyond its cached head
// (ring.NoteHead), and the consumer stored the position to the shared
// head word before writing the answer, so it is never more than a read
// of that word would have said.
type slotHdr struct {
	id  uint32
	rel uint64
}

// putEagerHdr writes h as an eager header at b (at least eagerHdrMax
// bytes, slotWords more for a slot record) and returns its length: the
// data word only when Data is not 0, the slot words only in a slot
// record.
func putEagerHdr(b []byte, h *transport.Header, slot *slotHdr) int {
	n, has, hasLen := eagerHdrMin, byte(0), byte(0)
	if h.Data != 0 {
		n, has = eagerHdrMax, 1
		binary.LittleEndian.PutUint64(b[16:], h.Data)
	}
	if slot != nil {
		binary.LittleEndian.PutUint64(b[slotHdrLen-slotWords:], h.Len&0xffffffff|uint64(slot.id)<<32)
		binary.LittleEndian.PutUint64(b[slotHdrLen-8:], slot.rel)
		n, hasLen = slotHdrLen, 1
	}
	b[0], b[1], b[2], b[3] = byte(h.Kind), h.Flags, has, hasLen
	binary.LittleEndian.PutUint32(b[4:], h.Group)
	binary.LittleEndian.PutUint64(b[8:], h.Tag)
	return n
}

// getEagerHdr decodes the eager record b (untrusted): the header, with
// Len set to the payload's length, and the header's length (the payload
// is b[n:n+Len]).
func getEagerHdr(b []byte) (transport.Header, int, bool) {
	var h transport.Header
	n, ok := decodeEagerHdr(&h, b)
	if !ok {
		return transport.Header{}, 0, false
	}
	return h, n, true
}

// decodeEagerHdr is getEagerHdr writing the header into h, field by field
// (drainRing decodes into the header it hands to the sink, saving two
// copies); h is left partly written when it returns false.
func decodeEagerHdr(h *transport.Header, b []byte) (int, bool) {
	if len(b) < eagerHdrMin || b[2] > 1 || b[3] > 1 {
		return 0, false
	}
	h.Kind, h.Flags = transport.Kind(b[0]), b[1]
	h.Group, h.Tag, h.Data = binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint64(b[8:]), 0
	n := eagerHdrMin
	if b[2] == 1 {
		if len(b) < eagerHdrMax {
			return 0, false
		}
		h.Data, n = binary.LittleEndian.Uint64(b[16:]), eagerHdrMax
	}
	h.Len = uint64(len(b) - n)
	if b[3] == 1 {
		if n = slotLen(h, b); n == 0 {
			return 0, false
		}
	}
	ok := (transport.ValidKind(h.Kind) || h.Kind == transport.KindRMAData && h.Len == 0) &&
		h.Flags&^transport.FlagRemoteData == 0
	return n, ok
}

// slotLen is decodeEagerHdr's slot record (out of its inlined common
// path): it sets h.Len from the length word and returns the header's
// length, or 0 when the record cannot be a slot record.
//
//go:noinline
func slotLen(h *transport.Header, b []byte) int {
	if len(b) < slotHdrLen {
		return 0
	}
	h.Len = uint64(binary.LittleEndian.Uint32(b[slotHdrLen-slotWords:]))
	if h.Len > uint64(len(b)-slotHdrLen) {
		return 0
	}
	return slotHdrLen
}

// Send writes an eager record, or a rendezvous announcement.
func (t *Transport) Send(pi transport.Peer, hdr *transport.Header, iov [][]byte, op transport.Op) (bool, transport.Code) {
	if t.closed || int(pi) >= len(t.peers) {
		return false, transport.EInval
	}
	p := t.peers[pi]
	if c := t.ready(p); c != 0 {
		return false, c
	}
	if len(p.ctrl) > 0 || len(p.streams) > 0 {
		t.flush(p) // keep control traffic ahead of new messages
	}
	p.sends++
	n := int(hdr.Len)
	if n > farMin && n <= t.cfg.MaxEager {
		p.farSends++
		if p.far && p.farSends%farProbe != 0 && t.cma && !p.noCMA && !t.injecting {
			return t.sendRTS(p, hdr, iov, op, nil)
		}
	}
	if n > p.eager {
		if n > t.cfg.MaxEager {
			return t.sendRTS(p, hdr, iov, op, nil)
		}
		if !t.grow(p, msgHdrLen+n) {
			return t.sendBounce(p, hdr, iov, op)
		}
	} else if eagerDepth*(msgHdrLen+n+2*ring.RecordHeader) > p.out.Cap() && p.out.Cap() < t.cfg.RingSize {
		t.grow(p, msgHdrLen+n) // fits, but too few such records do: see eagerDepth
	}
	b, err := reserveEager(p, hdr)
	if err != nil {
		if err != ring.ErrFull || !t.grow(p, 0) {
			return false, ringCode(err)
		}
		if b, err = reserveEager(p, hdr); err != nil {
			return false, ringCode(err)
		}
	}
	if n > farMin && (p.far || p.farSends%farSample == 0) {
		t.putEagerTimed(p, b, hdr, iov)
	} else {
		t.putEager(p, b, hdr, iov)
	}
	return true, 0
}

// SendInject is Send for an inject (transport.InjectSender): the caller
// reuses the buffers once it returns, so a payload of at most MaxEager
// bytes is copied now, eager (or into a bounce copy when the ring cannot
// take it), never announced for the receiver to read from the caller's
// buffers as Send does with eager sizes to a far peer (see farMin).
func (t *Transport) SendInject(pi transport.Peer, hdr *transport.Header, iov [][]byte, op transport.Op) (bool, transport.Code) {
	t.injecting = true
	done, c := t.Send(pi, hdr, iov, op)
	t.injecting = false
	return done, c
}

// Eager-sized payloads and placement. Above farMin an eager message costs
// mostly its two copies through the ring, the sender's into lines the
// receiver read last lap and the receiver's out of lines the sender just
// wrote: cheap while the two CPUs share a cache, a cross-CPU transfer a
// line when they do not, where libfabric's single copy (one
// process_vm_readv) wins. Measured (perftest pingpong against fi_pingpong
// -S, 10k, pinned, chrt -f 1, 2026-11-25, us per transfer): 8 KiB near
// (cache-line round trip 70-80 ns) eager 1.36, rendezvous (single copy)
// 3.0, fi 2.52; far (320-340 ns) eager 4.97, rendezvous 3.54, fi 3.94;
// 16 KiB near 2.58 / 3.6 / 3.57, far 8.82 / 4.06 / 4.60. So the sender
// times the copy of every farSample-th eager message above farMin
// (putEagerTimed): 8 KiB took 0.93-1.02 us near (p10-p90, 8 GB/s) and
// 1.6-4.2 far (2.3 GB/s at the median), 16 KiB 1.85-1.96 near. When most
// of the last 8 such copies ran slower than farNsPerKiB, the peer is far
// (peer.far): such payloads go by rendezvous, but for one in farProbe,
// still sent eager and timed, until most copies are fast again. Not
// without single copy (off here, or with this peer: another pid
// namespace, refused by the kernel), where the receiver would ask for
// the payload in segments: two copies as eager, and a round trip more.
const (
	farMin      = 6 << 10
	farNsPerKiB = 250 // 4 GB/s: between near's 8-12 and far's 2-3
	farSample   = 8
	farProbe    = 64
)

// farCTSMax: a far peer that answers this many eager-sized rendezvous
// messages in a row with CTS (it cannot read our memory: single copy off
// on its side, FI_SHM_DISABLE_CMA, or another user namespace) gets them
// eager again. Segments lose to the ring's copies there: 8 KiB x 10k far
// (pinned, 13:44 UTC, load 13-17), the receiver without single copy,
// 5.57 us per transfer against eager's 5.09 (fi_pingpong 3.98). More
// than the 3 tries of a receiver's segment burst (fetchcost.go), which
// are no verdict.
const farCTSMax = 4

// farAnswer notes the receiver's answer to the held send h (cts: CTS,
// else ACK): for an eager-sized payload sent by rendezvous because p is
// far, farCTSMax CTS answers in a row end the far verdict (the votes
// start again from near).
func (t *Transport) farAnswer(p *peer, h *held, cts bool) {
	if h.bounce != nil || h.n <= farMin || h.n > t.cfg.MaxEager {
		return
	}
	if !cts {
		p.farCTS = 0
		return
	}
	if p.farCTS++; p.farCTS >= farCTSMax {
		p.far, p.copyVotes, p.farCTS = false, 0, 0
	}
}

// putEagerTimed is putEager timing the copy (not the publication or the
// kick, which may wake a sleeping receiver) for the peer's placement vote.
func (t *Transport) putEagerTimed(p *peer, b []byte, hdr *transport.Header, iov [][]byte) {
	hl, n := eagerHdrMin, int(hdr.Len)
	if hdr.Data != 0 {
		hl = eagerHdrMax
	}
	var slot *slotHdr
	if len(b) != hl+n {
		hl = slotHdrLen
		s := p.slotHdr()
		slot = &s
	}
	start := time.Now()
	fillEager(b[:hl+n], hdr, iov, headLine(b), slot)
	d := time.Since(start)
	_ = p.out.CommitPublish(recEager, len(b))
	t.kick(p)
	p.voteCopy(n, d)
}

// voteCopy counts an eager copy of n bytes that took d in the peer's
// placement vote: slow above farNsPerKiB; far once 6 of the last 8 were
// slow, near again once at most 2 were (a preempted copy is one slow
// vote, not a verdict).
func (p *peer) voteCopy(n int, d time.Duration) {
	slow := uint8(0)
	if d > time.Duration(n)*farNsPerKiB/1024 {
		slow = 1
	}
	p.copyVotes = p.copyVotes<<1 | slow
	switch k := bits.OnesCount8(p.copyVotes); {
	case !p.far && k >= 6:
		p.far = true
	case p.far && k <= 2:
		p.far = false
	}
}

// SendEager is Send's common case alone (transport.EagerSender): a
// connected peer with no control traffic pending and a ring that takes
// the record as it is. Anything else returns false untouched, for Send.
func (t *Transport) SendEager(pi transport.Peer, hdr *transport.Header, iov [][]byte) (bool, transport.Code) {
	if t.closed || int(pi) >= len(t.peers) {
		return false, transport.EInval
	}
	p := t.peers[pi]
	n := int(hdr.Len)
	if n > farMin && (p.far || (p.farSends+1)%farSample == 0) {
		return false, 0 // Send times or reroutes it
	}
	if p.out == nil || p.dead || p.failSend || p.connSlot >= 0 || n > p.eager ||
		len(p.ctrl) > 0 || len(p.streams) > 0 {
		return false, 0
	}
	if eagerDepth*(msgHdrLen+n+2*ring.RecordHeader) > p.out.Cap() && p.out.Cap() < t.cfg.RingSize {
		return false, 0 // Send grows the ring first
	}
	b, err := reserveEager(p, hdr)
	if err != nil {
		return false, 0
	}
	p.sends++
	if n > farMin {
		p.farSends++ // (n <= p.eager <= MaxEager)
	}
	t.putEager(p, b, hdr, iov)
	return true, 0
}

// reserveEager reserves the ring record for an eager message of hdr.Len
// bytes. A payload of eagerSlotMin bytes or more, in a ring of two slots
// of the record's size rounded up to a power of two (the ring eager
// traffic of that size grows, see eagerDepth), takes a whole slot when
// that makes a ping-pong's payloads fit L1 (slotsPay), the slot is free
// and the record starts one: the record's header then carries the
// payload's length and the rest of the slot is left unwritten. Where
// smaller records left the tail inside a slot (a 16 KiB ring carries a
// peer's small messages first), the record takes the rest of that slot
// when it fits there, so the next one starts a slot: without it such a
// ring packed every record for good (4 KiB after 8-byte traffic: 2.61 us
// a half round trip far, 2.13 with slots; 0.70 and 0.53 near). Records
// then alternate between the two slots, so a ping-pong's payloads reuse
// the same two areas of the ring in both CPUs' caches, where records
// packed back to back wander through three. The slot is free when the
// consumer has released the record before it (the previous record in the
// other slot); the ring finds that in its cached head or in one read of
// the shared head (a cache line the consumer wrote: one more transfer
// between the CPUs per message, which only the L1 fit pays for), else the
// record is packed as any other (no waiting, and a burst of sends fills
// the ring as before).
func reserveEager(p *peer, hdr *transport.Header) ([]byte, error) {
	hl, n := eagerHdrMin, int(hdr.Len)
	if hdr.Data != 0 {
		hl = eagerHdrMax
	}
	if n >= eagerSlotMin {
		slot := 1 << bits.Len(uint(ring.RecordHeader+slotHdrLen+n-1))
		if c := p.out.Cap(); c == 2*slot && slotsPay(ring.RecordHeader+hl+n, n, c) {
			// to the next slot boundary: the whole slot when the tail
			// is on one, else the rest of the slot it is in (see above)
			if k := p.out.TailToBoundary(slot) - ring.RecordHeader; k >= slotHdrLen+n {
				if b, err := p.out.Reserve(k); err == nil {
					return b, nil
				}
			}
		}
	}
	return p.out.Reserve(hl + n)
}

// l1d is the CPU's L1 data cache per core (32 KiB where cpuid says
// nothing).
var l1d = cmp.Or(max(cpuid.CPU.Cache.L1D, 0), 32<<10)

// slotsPay reports whether two-slot records of n-byte payloads (rec
// bytes packed) in a ring of capacity c bring a ping-pong's working set,
// both directions' records and the two application buffers, into L1 when
// the packed records do not fit: only then did the slots pay for the
// head read they cost. pingpong -S (pinned, fi_pingpong's counts, far,
// 2026-11-25): 4 KiB (packed, three records a lap each way: 32.9 KiB
// with the buffers, against 32 KiB of L1; two slots 24.7 KiB) 2.55 ->
// 2.24-2.29 us, near 0.68-0.71 -> 0.59-0.61, in every round; 2 KiB
// (16.5 KiB packed) 1.31 -> 1.36, 8 KiB (two slots still 49 KiB) 4.82
// -> 4.87, 16 KiB 8.70 -> 8.85 with slots; 3 KiB packs two a lap.
func slotsPay(rec, n, c int) bool {
	k := (c - ring.RecordHeader) / rec // packed records a lap
	return k > 2 && 2*k*rec+2*n > l1d && 4*rec+2*n <= l1d
}

// putEager fills the record b reserveEager reserved with hdr and iov,
// publishes it and kicks the peer.
func (t *Transport) putEager(p *peer, b []byte, hdr *transport.Header, iov [][]byte) {
	hl, n := eagerHdrMin, int(hdr.Len)
	if hdr.Data != 0 {
		hl = eagerHdrMax
	}
	if len(b) != hl+n {
		s := p.slotHdr()
		fillEager(b[:slotHdrLen+n], hdr, iov, headLine(b), &s)
	} else {
		fillEager(b, hdr, iov, headLine(b), nil)
	}
	_ = p.out.CommitPublish(recEager, len(b))
	t.kick(p)
}

// slotHdr returns the slot words of a slot record to p: how far we have
// released the ring p writes to us.
func (p *peer) slotHdr() slotHdr {
	if p.in == nil {
		return slotHdr{}
	}
	return slotHdr{id: p.inID, rel: p.in.Released()}
}

// noteRelease applies the slot words w (ring id in the high half of the
// first word, released position in the second) of a slot record from p
// to our ring to p (see slotHdr).
func (t *Transport) noteRelease(p *peer, w []byte) {
	if id := binary.LittleEndian.Uint32(w[4:]); id != 0 && id == p.outID && p.out.NoteHead(binary.LittleEndian.Uint64(w[8:])) {
		t.released++
	}
}

// headLine returns how many bytes of the reserved payload b share the
// cache line of the ring's header word, just before b: the word the
// consumer polls.
func headLine(b []byte) int {
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	h := a - ring.RecordHeader
	return int(h&^uintptr(lineSize-1) + lineSize - a)
}

// lineSize is the CPU's cache line.
var lineSize = uintptr(ring.CacheLine())

// fillEager writes hdr and the payload in iov into the eager record b,
// whose first head bytes share the polled header word's line. A record
// that ends on that line is written in order. A longer one is written
// from that line's end on first and that line last, just before the
// publishing store: the waiting consumer reads the line over and over,
// and every write to it after one of those reads must take it back from
// the consumer's core. Written first, the line was taken back once more
// for the publish, after the whole payload: one more cross-core transfer
// on the message's path (about 0.2-0.45 us with the two vCPUs in
// different core complexes). The consumer reads the record after the
// publish either way.
func fillEager(b []byte, hdr *transport.Header, iov [][]byte, head int, slot *slotHdr) {
	hl := eagerHdrMin
	if hdr.Data != 0 {
		hl = eagerHdrMax
	}
	if slot != nil {
		hl = slotHdrLen
	}
	switch {
	case len(b) <= head:
		off := putEagerHdr(b, hdr, slot)
		for _, v := range iov {
			off += ring.Copy(b[off:], v)
		}
	case head <= hl:
		gather(b[hl:], iov, 0)
		putEagerHdr(b, hdr, slot)
	default:
		gather(b[head:], iov, head-hl)
		putEagerHdr(b, hdr, slot)
		gather(b[hl:head], iov, 0)
	}
}

// sendBounce sends a payload of at most MaxEager bytes that the ring cannot
// take inline (it is small and cannot grow): the payload is copied into a
// bounce buffer and announced by rendezvous. The caller's buffers are free
// at once (the engine's inject relies on it), but the send completes
// (SendDone) only on the receiver's ACK or with its last segment, as any
// rendezvous send: a receiver that cannot read the copy by single copy
// (no CMA, another user namespace, ptrace restrictions, or segments
// picked as faster) answers CTS and needs this side to stream it. Up to
// 2a64eb8 the send completed here, and a sender that progressed no more
// after its completion left such a message undelivered for good
// (TestTransport_BounceSendNeedsNoSenderProgressAfterCompletion).
func (t *Transport) sendBounce(p *peer, hdr *transport.Header, iov [][]byte, op transport.Op) (bool, transport.Code) {
	var b []byte
	if k := len(t.bounceFree); k > 0 {
		b = t.bounceFree[k-1]
		t.bounceFree = t.bounceFree[:k-1]
	} else {
		if t.bounces >= maxBounce {
			return false, transport.EAgain // ACKs hand buffers back
		}
		t.bounces++
		b = make([]byte, t.cfg.MaxEager)
	}
	// sendRTS copies iov into b once the announcement has its room: a
	// copy made first was made again by every retry while the ring stayed
	// full (16 KiB: 390-416 ns of thread CPU per EAgain, 148-160 without).
	done, c := t.sendRTS(p, hdr, iov, op, b[:hdr.Len])
	if c != 0 {
		t.putBounce(b)
	}
	return done, c
}

func (t *Transport) putBounce(b []byte) {
	t.bounceFree = append(t.bounceFree, b[:cap(b)])
}

// sendRTS announces a rendezvous payload: iov, or (bounce not nil) a copy
// of iov in the bounce buffer, made once the announcement has its room.
// The send is held until the receiver's ACK or its last segment.
func (t *Transport) sendRTS(p *peer, hdr *transport.Header, iov [][]byte, op transport.Op, bounce []byte) (bool, transport.Code) {
	if len(iov) > maxRTSIOV && bounce == nil {
		return false, transport.EInval
	}
	if int(hdr.Len) > t.cfg.MaxEager { // (see farMin)
		t.rdvAt.Store(int64(time.Since(placeEpoch)))
	}
	if hdr.Len >= placeNoteMin {
		t.notePlace()
	}
	h := t.newHeld()
	src := iov
	if bounce != nil {
		h.bounce, h.one[0] = bounce, bounce
		iov = h.one[:]
	}
	if t.hugeMin > 0 && bounce == nil && int(hdr.Len) >= t.hugeMin {
		for _, v := range iov {
			if len(v) >= t.hugeMin {
				t.sendHuge(v)
			}
		}
	}
	size := rtsFixed + 16*len(iov)
	b, err := p.out.Reserve(size)
	if err != nil && err == ring.ErrFull && t.grow(p, 0) {
		b, err = p.out.Reserve(size)
	}
	if err != nil {
		t.putHeld(h)
		return false, ringCode(err)
	}
	if bounce != nil {
		gather(bounce, src, 0)
	}
	t.nextCookie++
	cookie := t.nextCookie
	putHdr(b, hdr)
	binary.LittleEndian.PutUint64(b[32:], cookie)
	binary.LittleEndian.PutUint32(b[40:], uint32(len(iov)))
	binary.LittleEndian.PutUint32(b[44:], 0)
	for i, v := range iov {
		var a uintptr
		if len(v) > 0 {
			a = uintptr(unsafe.Pointer(unsafe.SliceData(v)))
		}
		binary.LittleEndian.PutUint64(b[rtsFixed+16*i:], uint64(a))
		binary.LittleEndian.PutUint64(b[rtsFixed+16*i+8:], uint64(len(v)))
	}
	_ = p.out.Commit(recRTS, size)
	p.out.Publish()
	if len(p.held) == 0 {
		p.since = time.Now()
	}
	h.op, h.n, h.iov = op, int(hdr.Len), iov
	p.held[cookie] = h
	t.markBusy(p)
	t.kick(p)
	return false, 0
}

// sendDone completes a held send through the sink, taking a bounce send's
// buffer back.
func (t *Transport) sendDone(s transport.Sink, h *held, c transport.Code) {
	if h.bounce != nil {
		t.putBounce(h.bounce)
	}
	if s != nil {
		s.SendDone(h.op, c)
	}
	t.putHeld(h)
}

// grow replaces p's ring by a bigger one: one that takes an eager record
// of need bytes, eagerDepth of them if RingSize allows, or, with need 0,
// twice the current capacity; at most RingSize. It reports whether p.out
// now takes such a record. It declines while a replacement is under way,
// after a failed attempt (for growBackoff), and when the shm directory
// would be more than 1/growLimit full.
func (t *Transport) grow(p *peer, need int) bool {
	c := 2 * p.out.Cap()
	if need > 0 {
		c = p.out.Cap()
		for c < t.cfg.RingSize && (ring.MaxPayloadFor(c) < need || c < eagerDepth*(need+2*ring.RecordHeader)) {
			c *= 2
		}
		if c == p.out.Cap() {
			return ring.MaxPayloadFor(c) >= need
		}
		if ring.MaxPayloadFor(c) < need {
			return false
		}
	}
	return t.growTo(p, c)
}

// growTo replaces p's ring by one of capacity c (see grow).
func (t *Transport) growTo(p *peer, c int) bool {
	if c > t.cfg.RingSize || c <= p.out.Cap() || p.old != nil || p.dead {
		return false
	}
	now := time.Now()
	if now.Before(p.growAfter) {
		return false
	}
	if err := t.replace(p, c, true); err != nil {
		if err != errSwitchFull { // the receiver makes room: try again then
			p.growAfter = now.Add(growBackoff)
		}
		return false
	}
	return true
}

// errSwitchFull: the ring to be replaced has no room for the switch record.
var errSwitchFull = errors.New("shm: no room for the switch record")

// replace starts writing to a new ring of capacity c for p. With check set
// it first makes sure the shm directory stays at most 1/growLimit full.
//
// The switch record goes into the old ring before anything goes into the
// new one, and when it does not fit now the ring is not replaced
// (errSwitchFull: the caller finds the ring full, as when it cannot grow,
// and waits for the receiver to make room). The receiver finds the new
// ring only through that record. Records written there while it waited
// for room in the old ring (an eager message that found the ring full, a
// stream's segments after the growth at CTS or in mid-stream) reached the
// receiver only after the sender's next progress once the receiver had
// made room: a send so completed, and a sender that then progressed no
// more (busy with other work, waiting elsewhere, exited), left the
// receiver waiting for good (92ecf81 and before;
// TestTransport_GrowthNeedsNoSenderProgressAfterCompletion; helper shm8's
// 64 KiB hang with the receiver's release of drained space deferred was
// this: the ring full one round earlier). So no record written depends on
// the sender's later progress, whenever the receiver releases space.
func (t *Transport) replace(p *peer, c int, check bool) error {
	// Room for the longest name first: nothing is made for a ring that
	// cannot be replaced yet.
	b, err := p.out.Reserve(16 + MaxNameLen)
	if err != nil {
		if err == ring.ErrFull {
			t.switchFails++
			return errSwitchFull
		}
		return err
	}
	// A growth a spare covers: no file made now (its space was taken
	// when it was made). A failure below leaves the reservation to be
	// dropped by the next one.
	rs := p.takeOutSpare(c)
	if rs == nil {
		rs = t.takeSpare(c, p.out.Cap())
	}
	if rs == nil {
		size := RingSegSize(c)
		if check {
			if err := roomToGrow(size); err != nil {
				return err
			}
		}
		if rs, err = createRingSeg(c); err != nil {
			return err
		}
	}
	name := rs.seg.Name()
	binary.LittleEndian.PutUint64(b, uint64(rs.seg.Size()))
	binary.LittleEndian.PutUint32(b[8:], uint32(len(name)))
	binary.LittleEndian.PutUint32(b[12:], 0)
	copy(b[16:], name)
	_ = p.out.Commit(recSwitch, 16+len(name))
	p.out.Publish()
	t.switches++
	p.old, p.oldSeg = p.out, p.seg
	t.setOut(p, rs)
	t.kick(p)
	t.markBusy(p) // to close the old ring once read
	return nil
}

// roomToGrow checks that size more bytes leave the shm directory at most
// 1/growLimit full.
func roomToGrow(size int) error {
	dir := Dir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("shm: statfs %s: %w", dir, err)
	}
	total := uint64(st.Blocks) * uint64(st.Bsize)
	used := (uint64(st.Blocks) - uint64(st.Bavail)) * uint64(st.Bsize)
	if (used+uint64(size))*growLimit > total {
		return fmt.Errorf("%w: %s: growing a ring by %d bytes would leave it more than 1/%d full (%d of %d bytes used)",
			ErrNoSpace, dir, size, growLimit, used, total)
	}
	return nil
}

func ringCode(err error) transport.Code {
	switch err {
	case ring.ErrFull:
		return transport.EAgain
	case ring.ErrTooLarge:
		return transport.EMsgSize
	}
	return transport.EIO
}

// rts is a decoded rendezvous announcement, kept by the receiver until the
// engine fetches or discards the message.
type rts struct {
	cookie uint64
	niov   int
	addr   [maxRTSIOV]uint64
	size   [maxRTSIOV]uint64
}

// Fetch pulls a rendezvous payload: single copy when allowed, otherwise
// CTS and segments.
func (t *Transport) Fetch(pi transport.Peer, cookie uint64, dst [][]byte, op transport.Op) (bool, int, transport.Code) {
	if int(pi) >= len(t.peers) {
		return true, 0, transport.EInval
	}
	p := t.peers[pi]
	r, ok := t.pendingRTS(p, cookie)
	if !ok {
		return true, 0, transport.EIO
	}
	if r.niov > 0 && r.size[0] >= placeNoteMin {
		t.notePlace()
	}
	if p.dead {
		t.dropRTS(p, cookie)
		return true, 0, p.errCode()
	}
	total := 0
	for i := 0; i < r.niov; i++ {
		total += int(r.size[i])
	}
	if total > t.cfg.MaxEager { // (see farMin)
		t.rdvAt.Store(int64(time.Since(placeEpoch)))
	}
	timed := t.cma && !p.noCMA && total < t.cmaMin
	fc := &t.fetchCost[fetchClass(total)]
	cma, explore := true, false
	if timed {
		cma, explore = fc.pickCMA()
	}
	if t.cma && !p.noCMA && (cma || t.smallStream(p, total)) {
		var sc *splitCost
		if !timed && len(dst) == 1 {
			want := min(total, len(dst[0]))
			var at int
			if at, sc, explore = t.splitAt(p, want); at > 0 {
				return t.fetchSplit(p, r, dst[0], want, at, explore, op)
			}
		}
		var start time.Time
		if timed || sc != nil {
			start = time.Now()
		}
		n, err := t.readPeer(p, r, dst)
		if err == nil {
			if timed && fc.n > 1 {
				// (the class's first fetch is no measure: it pays for
				// touching the buffers and mappings the first time)
				fc.note(true, explore, time.Since(start))
			}
			if sc != nil {
				sc.note(false, explore, time.Since(start))
			}
			t.dropRTS(p, cookie)
			if !t.ackFetch(p, ctrl{typ: recACK, cookie: cookie, op: op, got: n}) {
				return false, 0, 0 // completes when the ACK is written
			}
			return true, n, 0
		}
		if errors.Is(err, ErrPeerGone) {
			// The sender's process is gone: sends to it fail from now
			// on (a ring made ahead would take eager ones), and the next
			// progress checks it, delivers what it wrote and fails it.
			t.dropRTS(p, cookie)
			p.failSend, p.err = true, transport.EConnReset
			p.since = time.Now().Add(-2 * t.cfg.PeerTimeout)
			t.markBusy(p)
			return true, 0, transport.EConnReset
		}
		if !errors.Is(err, ErrPeerDenied) {
			t.dropRTS(p, cookie)
			if !t.ackFetch(p, ctrl{typ: recACK, cookie: cookie, status: 2, op: op, code: transport.EIO}) {
				return false, 0, 0
			}
			return true, 0, transport.EIO
		}
		// The kernel refuses single copy with this peer (another user
		// namespace, ptrace_scope, an LSM): segments from now on, for
		// this peer only.
		p.noCMA = true
	}
	t.dropRTS(p, cookie)
	if c := t.sendCtrl(p, ctrl{typ: recCTS, cookie: cookie}); c != 0 {
		// The sender cannot be reached (it died after announcing): nobody
		// will stream the payload, so the receive fails now rather than
		// wait forever.
		t.fail(p, c)
		return true, 0, c
	}
	f := t.newFetch()
	f.op, f.dst, f.total = op, append(f.dst[:0], dst...), total
	if f.timed = timed; timed {
		f.start, f.explore, f.switches = time.Now(), explore, p.switchIns
	}
	p.fetch[cookie] = f
	if p.since.IsZero() {
		p.since = time.Now()
	}
	t.markBusy(p) // so progressBusy checks the sender's liveness while we wait
	return false, 0, 0
}

// smallStream reports whether streaming total bytes from p would crawl
// through a small ring: p's ring to us is smaller than twice the payload
// (and than RingSize) and the shm directory is too full for the sender to
// grow it. Single copy is then the better way whatever the placement.
func (t *Transport) smallStream(p *peer, total int) bool {
	if p.in == nil || p.in.Cap() >= min(2*total, t.cfg.RingSize) {
		return false
	}
	return t.crowded()
}

// crowded reports whether a ring of RingSize would leave the shm directory
// more than 1/growLimit full (checked at most every 50 ms).
func (t *Transport) crowded() bool {
	now := time.Now()
	if now.Sub(t.crowdedAt) > 50*time.Millisecond {
		t.crowdedAt = now
		t.isCrowded = roomToGrow(RingSegSize(t.cfg.RingSize)) != nil
	}
	return t.isCrowded
}

// readPeer copies from the sender's iov into dst with process_vm_readv.
func (t *Transport) readPeer(p *peer, r *rts, dst [][]byte) (int, error) {
	n := 0
	si, soff := 0, uint64(0)
	for _, d := range dst {
		for len(d) > 0 && si < r.niov {
			left := r.size[si] - soff
			if left == 0 {
				si, soff = si+1, 0
				continue
			}
			k := min(uint64(len(d)), left)
			got, err := ReadPeer(p.pid, d[:k], uintptr(r.addr[si]+soff))
			n += got
			if err != nil {
				return n, err
			}
			d = d[k:]
			soff += k
		}
	}
	return n, nil
}

// Discard tells the sender the message was dropped unread.
func (t *Transport) Discard(pi transport.Peer, cookie uint64) {
	if int(pi) >= len(t.peers) {
		return
	}
	p := t.peers[pi]
	if _, ok := t.pendingRTS(p, cookie); ok {
		t.dropRTS(p, cookie)
		t.sendCtrl(p, ctrl{typ: recACK, cookie: cookie, status: 1})
	}
}

// DiscardOp is Discard for a drop the application is told of
// (transport.Discarder): when the ACK (status 1) has to wait for room in
// our ring to the sender, it reports false and FetchDone(op, 0, 0)
// follows once the ACK is written, as ackFetch does for a receive. A
// discard reported complete with its ACK still queued left the sender's
// send waiting on progress of ours that an application done with the
// message need not make (TestTransport_DiscardCompletesOnlyWithItsACKWritten).
func (t *Transport) DiscardOp(pi transport.Peer, cookie uint64, op transport.Op) bool {
	if int(pi) >= len(t.peers) {
		return true
	}
	p := t.peers[pi]
	if _, ok := t.pendingRTS(p, cookie); !ok {
		return true
	}
	t.dropRTS(p, cookie)
	return t.ackFetch(p, ctrl{typ: recACK, cookie: cookie, status: 1, op: op})
}

func (t *Transport) pendingRTS(p *peer, cookie uint64) (*rts, bool) {
	r, ok := p.rtsMap()[cookie]
	return r, ok
}

func (t *Transport) dropRTS(p *peer, cookie uint64) {
	m := p.rtsMap()
	if r, ok := m[cookie]; ok {
		delete(m, cookie)
		t.rtsFree = append(t.rtsFree, r)
	}
}

func (t *Transport) newRTS() *rts {
	if n := len(t.rtsFree); n > 0 {
		r := t.rtsFree[n-1]
		t.rtsFree = t.rtsFree[:n-1]
		return r
	}
	return &rts{}
}

func (t *Transport) newHeld() *held {
	if n := len(t.heldFree); n > 0 {
		h := t.heldFree[n-1]
		t.heldFree = t.heldFree[:n-1]
		return h
	}
	return &held{}
}

func (t *Transport) putHeld(h *held) {
	*h = held{}
	t.heldFree = append(t.heldFree, h)
}

func (t *Transport) newFetch() *fetchSeg {
	if n := len(t.fetchFree); n > 0 {
		f := t.fetchFree[n-1]
		t.fetchFree = t.fetchFree[:n-1]
		return f
	}
	return &fetchSeg{dst: make([][]byte, 0, preFetchIOV)}
}

func (t *Transport) putFetch(f *fetchSeg) {
	clear(f.dst)
	*f = fetchSeg{dst: f.dst[:0]}
	t.fetchFree = append(t.fetchFree, f)
}

// rtsMap lazily creates the peer's table of announced messages.
func (p *peer) rtsMap() map[uint64]*rts {
	if p.rts == nil {
		p.rts = map[uint64]*rts{}
	}
	return p.rts
}

// sendCtrl queues a control record to p and tries to write it now. It
// returns the error when p cannot be reached (the record is dropped).
func (t *Transport) sendCtrl(p *peer, c ctrl) transport.Code {
	p.ctrl = append(p.ctrl, c)
	if code := t.ready(p); code != 0 {
		if code == transport.EAgain { // their queue is full: connect later
			t.markBusy(p)
			return 0
		}
		t.dropCtrl(p) // the peer is gone: nobody to tell
		return code
	}
	t.flush(p)
	return 0
}

// ackFetch sends a fetch's ACK (c, owed unset) and reports whether the
// fetch is complete. When the ACK has to wait (for room in our ring to p,
// or for our connection) the fetch completes when it is written
// (flushOnce: FetchDone(c.op, c.got, c.code)): the application then keeps
// progressing us until it is. A receive reported complete with its ACK
// still queued left the sender's send waiting on progress of ours that an
// application done with its receives need not make
// (TestTransport_ReceiveCompletesOnlyWithItsACKWritten).
func (t *Transport) ackFetch(p *peer, c ctrl) bool {
	t.sendCtrl(p, c)
	if k := len(p.ctrl) - 1; k >= 0 && p.ctrl[k].typ == recACK && p.ctrl[k].cookie == c.cookie {
		p.ctrl[k].owed = true
		return false
	}
	return true // written, or dropped (the peer is gone)
}

// dropCtrl drops p's queued control records, completing the fetches
// whose ACKs they were (their data was read: nobody is left to tell).
func (t *Transport) dropCtrl(p *peer) {
	for _, c := range p.ctrl {
		if c.owed && t.sink != nil {
			t.sink.FetchDone(c.op, c.got, c.code)
		}
	}
	p.ctrl = p.ctrl[:0]
}

// flush writes queued control records and streams segments while the ring
// has room.
func (t *Transport) flush(p *peer) {
	if p.out == nil || p.dead {
		return
	}
	if t.flushOnce(p) {
		return
	}
	// Something waits for room: say so in the ring's trailer, then look
	// once more (the receiver reads the word after it releases space).
	p.outWant.Store(1)
	if !t.flushOnce(p) {
		// The rest waits for room: progressBusy writes it. Without this a
		// control record (the acknowledgement a sender's completion waits
		// for) stayed queued until the next record to the same peer.
		t.markBusy(p)
	}
}

// flushOnce writes what fits and reports whether nothing is left.
func (t *Transport) flushOnce(p *peer) bool {
	wrote := false
	sent := 0
	for _, c := range p.ctrl {
		size := 12
		switch c.typ {
		case recCTS:
			size = 8
		case recCTW:
			size = ctwLen
		}
		b, err := p.out.Reserve(size)
		if err != nil {
			break
		}
		binary.LittleEndian.PutUint64(b, c.cookie)
		switch c.typ {
		case recACK, recWDone:
			binary.LittleEndian.PutUint32(b[8:], c.status)
		case recCTW:
			binary.LittleEndian.PutUint64(b[8:], c.off)
			binary.LittleEndian.PutUint64(b[16:], c.n)
			binary.LittleEndian.PutUint64(b[24:], c.addr)
		}
		_ = p.out.Commit(c.typ, size)
		sent++
		wrote = true
		if c.owed && t.sink != nil { // published below, in this call
			t.sink.FetchDone(c.op, c.got, c.code)
		}
	}
	if sent > 0 { // keep the array: control records must not allocate
		p.ctrl = p.ctrl[:copy(p.ctrl, p.ctrl[sent:])]
	}
	for len(p.ctrl) == 0 && len(p.streams) > 0 {
		s := &p.streams[0]
		k := min(p.out.MaxPayload()-16, 64<<10, s.h.n-s.off)
		b, err := p.out.Reserve(16 + k)
		if err == ring.ErrFull && !wrote && t.grow(p, 0) {
			continue // a bigger ring: bigger segments
		}
		if err != nil {
			break
		}
		binary.LittleEndian.PutUint64(b, s.cookie)
		binary.LittleEndian.PutUint64(b[8:], uint64(s.off))
		gather(b[16:16+k], s.h.iov, s.off)
		_ = p.out.Commit(recSeg, 16+k)
		// Publish every segment: the receiver copies it out while the
		// next one is copied in (two cores, one pipeline).
		p.out.Publish()
		t.kick(p)
		wrote = false
		s.off += k
		if s.off == s.h.n {
			h := s.h
			p.streams = p.streams[:copy(p.streams, p.streams[1:])]
			t.sendDone(t.sink, h, 0)
		}
	}
	if wrote {
		p.out.Publish()
		t.kick(p)
	}
	return len(p.ctrl) == 0 && len(p.streams) == 0
}

// gather copies len(dst) bytes of the concatenation of iov, from off.
func gather(dst []byte, iov [][]byte, off int) {
	for _, v := range iov {
		if len(dst) == 0 {
			return
		}
		if off >= len(v) {
			off -= len(v)
			continue
		}
		n := ring.Copy(dst, v[off:])
		dst = dst[n:]
		off = 0
	}
}

// scatter copies src into the concatenation of dst from off, returning the
// bytes that fit.
func scatter(dst [][]byte, off int, src []byte) int {
	n := 0
	for _, d := range dst {
		if len(src) == 0 {
			break
		}
		if off >= len(d) {
			off -= len(d)
			continue
		}
		k := ring.Copy(d[off:], src)
		src = src[k:]
		n += k
		off = 0
	}
	return n
}

// Poll accepts new connections, drains inbound rings with work, advances
// outbound work and checks the liveness of peers that owe answers.
func (t *Transport) Poll(s transport.Sink) bool {
	if t.closed {
		return false
	}
	t.sink = s
	did := false
	if t.pokeWait.Load() > 0 {
		// Before anything is checked: a Poke after this wakes Wait.
		t.nudgeSeen.Store(t.region.NudgeSeq())
	}
	if q := t.region.ConnQueue(); q.Seq() != t.seen.Load() {
		t.seen.Store(q.Seq())
		t.accept()
		did = true
	}
	// With few inbound peers their rings are checked first; the bitmap
	// (which senders keep setting) is taken only when that found nothing,
	// so it is cleared off the latency path and never loses a ring.
	if n := len(t.direct); n > 0 && n <= directMax && t.sweep(s) {
		did = true
		if t.polling.Load() == 0 {
			t.polling.Store(1) // senders may leave their bits alone
		}
	} else {
		for w := 0; w < t.inWords; w++ {
			for v := t.bits.Take(w); v != 0; v &= v - 1 {
				i := w*64 + bits.TrailingZeros64(v)
				if p := t.inbound[i]; p != nil && t.drain(p, s) {
					did = true
				}
			}
		}
	}
	if len(t.busy) > 0 {
		did = t.progressBusy() || did
	}
	if len(t.rma.busy) > 0 {
		did = t.rmaProgress() || did
	}
	if t.rma.exec != nil {
		did = t.rmaServeFast() || did
	}
	if t.polls++; t.polls&255 == 0 {
		t.tick()
		t.notePlace()
	}
	return did
}

// accept answers posted connection requests.
func (t *Transport) accept() {
	q := t.region.ConnQueue()
	for i := q.Next(0); i >= 0; i = q.Next(i + 1) {
		req, err := q.Read(i)
		if err != nil {
			if errors.Is(err, ErrCorrupt) {
				_ = q.Reject(req, uint32(22))
			}
			continue
		}
		slot := -1
		for k, pp := range t.inbound {
			if pp == nil {
				slot = k
				break
			}
		}
		if slot < 0 {
			_ = q.Reject(req, 28) // ENOSPC: peer table full
			continue
		}
		rs := t.takeRet(req)
		if rs == nil {
			var err error
			if rs, err = openRingSeg(req.RingName, req.RingSize); err != nil {
				errno := uint32(22)
				if errors.Is(err, os.ErrNotExist) {
					errno = 2
				}
				_ = q.Reject(req, errno)
				continue
			}
		}
		seg := rs.seg
		p := t.peerFor(req.SenderName)
		if p.in != nil { // the sender reconnected (restart): replace the old ring
			t.dropInbound(p)
		}
		if req.ReturnSize > 0 && p.out == nil && p.ret == nil {
			// Mapped by our connect (Prepare's, or the first send's).
			p.offer = ringOffer{ReturnRingName(req.RingName), req.ReturnSize}
			if req.SpareSize > 0 {
				p.spareOffer = ringOffer{SpareRingName(req.RingName), req.SpareSize}
			}
			if req.ReturnSpareSize > 0 {
				p.retSpareOffer = ringOffer{ReturnSpareName(req.RingName), req.ReturnSpareSize}
			}
		}
		p.gen++
		if err := t.region.Peers().Set(slot, PeerInfo{PID: req.SenderPID, Gen: p.gen, SenderName: req.SenderName, RingName: req.RingName}); err != nil {
			_ = seg.Close()
			_ = q.Reject(req, 22)
			continue
		}
		if err := q.Accept(req, slot, p.gen); err != nil {
			_ = t.region.Peers().Clear(slot)
			_ = seg.Close()
			continue
		}
		p.inSeg, p.in, p.inWant, p.inIdx, p.pid, p.inID = seg, rs.r, rs.want, slot, req.SenderPID, rs.id
		t.dropRet(p) // its ring is another: it will not take ours
		// A pid from another pid namespace names some other process here:
		// never read "its" memory.
		p.noCMA = p.noCMA || req.PidNS == 0 || req.PidNS != PidNS()
		t.inbound[slot] = p
		t.direct = append(t.direct, p)
		t.inWords = max(t.inWords, slot/64+1)
		_ = t.bits.Set(slot) // records written before the accept
		if len(t.direct) > directMax {
			t.askBits() // Poll uses the bitmap from now on
		}
	}
}

// takeRet returns the return ring we made for req's sender (connect)
// when req names it, with the id its sender numbered it by (adoptRingSeg),
// and forgets it; nil otherwise. A request naming another ring (the
// sender made its own: it connected before it saw our offer, or could
// not map it) closes ours: the sender no longer takes it.
func (t *Transport) takeRet(req ConnRequest) *ringSeg {
	i, ok := t.byName[Addr(req.SenderName)]
	if !ok {
		return nil
	}
	p := t.peers[i]
	rs := p.ret
	if rs == nil {
		return nil
	}
	if req.RingName != rs.seg.Name() || req.RingSize != rs.seg.Size() {
		return nil // dropped once this request is accepted (dropRet)
	}
	p.ret = nil
	// The file is ours, but the sender may have written anything to it.
	var id uint32
	if gerr := Guard(func() { id = word32(rs.seg.Bytes(), trailerOff(rs.r.Cap())+4).Load() }); gerr != nil {
		_ = rs.seg.Close()
		return nil
	}
	rs.id = id
	return rs
}

// dropRet sets aside the return ring we made for p once p's connection
// goes through another ring (its accepted request named that one): tick
// closes it after ShrinkAfter, off the first round trips, which such an
// accept (both sides inserted at once) falls in.
func (t *Transport) dropRet(p *peer) {
	if p.ret == nil {
		return
	}
	t.retStale = append(t.retStale, staleRet{p.ret, time.Now()})
	p.ret = nil
	if p.inSpare != nil && p.inSpare.seg.Owner() { // the return spare went with it
		t.retStale = append(t.retStale, staleRet{p.inSpare, time.Now()})
		p.inSpare = nil
	}
}

// staleRet is a return ring no peer will take, to be closed.
type staleRet struct {
	rs *ringSeg
	at time.Time
}

// closeStale closes the return rings set aside before cut (all with a
// zero cut).
func (t *Transport) closeStale(cut time.Time) {
	keep := t.retStale[:0]
	for _, r := range t.retStale {
		if cut.IsZero() || r.at.Before(cut) {
			_ = r.rs.seg.Close()
		} else {
			keep = append(keep, r)
		}
	}
	clear(t.retStale[len(keep):])
	t.retStale = keep
}

// The polling word tells senders whether Poll looks at every inbound ring
// directly, so that they need not set their bitmap bits. Poll sets it when
// a direct sweep found work (few inbound peers, and traffic). It is
// cleared by Wait before it sleeps on the bitmap (Wait returns at once
// then, and the Poll that follows sweeps every ring) and by askBits when
// the inbound peers become too many for the sweep. Only Poll sets it, only
// while the sweep covers every inbound ring, and a clearing is always
// followed by a look at every ring, so a sender that read 1 after
// publishing (and skipped its bit) has its record seen.

// askBits clears the polling word and sets every inbound peer's bit: a
// sender that read the word before it changed skipped its bit, and the
// bitmap pass visits its ring.
func (t *Transport) askBits() {
	t.polling.Store(0)
	fence() // the store before the loads of the next pass (under -race only)
	for _, p := range t.direct {
		_ = t.bits.Set(p.inIdx)
	}
}

func (t *Transport) dropInbound(p *peer) {
	for i, q := range t.direct {
		if q == p {
			t.direct = append(t.direct[:i], t.direct[i+1:]...)
			break
		}
	}
	if p.inIdx >= 0 {
		t.inbound[p.inIdx] = nil
		_ = t.region.Peers().Clear(p.inIdx)
	}
	if p.inSeg != nil {
		_ = p.inSeg.Close()
	}
	if p.bell != nil {
		_ = p.bell.Close()
	}
	p.in, p.inSeg, p.inWant, p.bell, p.inIdx, p.inID = nil, nil, nil, nil, -1, 0
}

// drain handles up to pollBudget records of p's inbound ring, under
// panic-on-fault (Guard's pattern, inlined: no closure on this path).
func (t *Transport) drain(p *peer, s transport.Sink) (did bool) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			_ = faultError(r) // re-panics anything but a memory fault
			t.ringFault(p, nil)
			did = true
		}
	}()
	did, bad := t.drainRing(p, s)
	if bad != nil {
		t.ringFault(p, bad)
	} else if did && p.inWant.Load() != 0 {
		t.nudge(p)
	}
	return did
}

// sweep drains the inbound rings with a record ready, for Poll with at most
// directMax peers. One panic-on-fault scope covers the whole sweep.
//
// t.cur is the ring being read, and stays set only when a panic leaves
// the loop: the deferred function calls recover only then (a recover
// that finds nothing cost every empty Poll a runtime call).
func (t *Transport) sweep(s transport.Sink) (did bool) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if t.cur == nil {
			return
		}
		if r := recover(); r != nil {
			_ = faultError(r)
			t.ringFault(t.cur, nil)
			did = true
		}
		t.cur = nil
	}()
	for _, p := range t.direct {
		t.cur = p
		if !p.in.Ready() {
			continue
		}
		d, bad := t.drainRing(p, s)
		if bad != nil {
			t.ringFault(p, bad) // changes t.direct: stop here
			return true
		}
		if d && p.inWant.Load() != 0 {
			t.nudge(p)
		}
		did = did || d
	}
	t.cur = nil
	return did
}

// ringFault drops a peer whose inbound ring faulted, is corrupt (EIO), or
// whose sender died while switching rings (err wraps ErrPeerGone).
func (t *Transport) ringFault(p *peer, err error) {
	t.dropInbound(p)
	if errors.Is(err, ErrPeerGone) {
		t.fail(p, transport.EConnReset)
		return
	}
	t.fail(p, transport.EIO)
}

// Poke wakes peer p's progress without a message (transport.Poker): it
// bumps the nudge word of p's region and rings its doorbell.
func (t *Transport) Poke(tp transport.Peer) bool {
	r := t.peerBell(tp)
	if r == nil {
		return false
	}
	_ = Guard(func() { _ = r.Nudge() })
	return true
}

// peerBell returns the region whose doorbell reaches peer p: the one
// mapped for sending, else one opened for ringing only (once, kept). nil
// when p is unknown, dead or gone.
func (t *Transport) peerBell(tp transport.Peer) *Region {
	if int(tp) >= len(t.peers) {
		return nil
	}
	p := t.peers[tp]
	if p == nil || p.dead {
		return nil
	}
	if p.region != nil {
		return p.region
	}
	if p.bell == nil {
		b, err := OpenRegion(p.name)
		if err != nil {
			return nil // gone
		}
		p.bell = b
	}
	return p.bell
}

// WaitPokes counts waiters for pokes (transport.Poker): while there are
// any, Wait returns when this endpoint's region is nudged.
func (t *Transport) WaitPokes(delta int) { t.pokeWait.Add(int32(delta)) }

// RingPeer rings the doorbell of peer p's region (transport.Ringer): a
// FUTEX_WAKE when p sleeps in Wait, else one load of its waiter count.
func (t *Transport) RingPeer(tp transport.Peer) bool {
	r := t.peerBell(tp)
	if r == nil {
		return false
	}
	_ = Guard(func() { _ = r.bell.Ring() })
	return true
}

// SetWaitCond sets a condition Wait also returns on (transport.Ringer).
func (t *Transport) SetWaitCond(cond func() bool) {
	if cond == nil {
		t.waitCond.Store(nil)
		return
	}
	t.waitCond.Store(&cond)
}

// nudge wakes the sender of p's inbound ring, which said in the ring's
// trailer that it waits for room, now that we made some.
func (t *Transport) nudge(p *peer) {
	if !p.inWant.CompareAndSwap(1, 0) {
		return
	}
	r := p.region
	if r == nil {
		if p.bell == nil {
			b, err := OpenRegion(p.name)
			if err != nil {
				return // gone: nobody to wake
			}
			p.bell = b
		}
		r = p.bell
	}
	_ = Guard(func() { _ = r.Nudge() })
}

// inAlive reports whether the sender of p's inbound ring lives: the ring
// file's lock is its (a ring it made), else, when the ring is ours (a
// return ring it took, see takeRet), its region's.
func (p *peer) inAlive() (bool, error) {
	seg := p.inSeg
	if seg.Owner() {
		switch {
		case p.region != nil:
			seg = p.region.Segment()
		case p.bell != nil:
			seg = p.bell.Segment()
		default:
			return true, nil
		}
	}
	return seg.Alive()
}

// takeInSpare returns p's inSpare when it is the ring segment name of
// size bytes, and forgets it; else nil. A spare of ours (the return
// spare) carries the id its writer numbered it by when it took it
// (adoptRingSeg).
func (p *peer) takeInSpare(name string, size int) *ringSeg {
	sp := p.inSpare
	if sp == nil || sp.seg.Name() != name || sp.seg.Size() != size {
		return nil
	}
	p.inSpare = nil
	if sp.seg.Owner() {
		if gerr := Guard(func() { sp.id = word32(sp.seg.Bytes(), trailerOff(sp.r.Cap())+4).Load() }); gerr != nil {
			_ = sp.seg.Close()
			return nil
		}
	}
	return sp
}

// switchIn follows a recSwitch record b in p's inbound ring.
func (t *Transport) switchIn(p *peer, b []byte) error {
	if len(b) < 16 {
		return ErrCorrupt
	}
	size := binary.LittleEndian.Uint64(b)
	nl := int(binary.LittleEndian.Uint32(b[8:]))
	if nl < 1 || nl > MaxNameLen || 16+nl != len(b) || size > MaxSegmentSize {
		return ErrCorrupt
	}
	name := string(b[16:])
	if ValidName(name) != nil {
		return ErrCorrupt
	}
	p.switchIns++
	rs := p.takeInSpare(name, int(size))
	var err error
	if rs == nil {
		rs, err = openRingSeg(name, int(size))
	}
	if err != nil {
		if alive, aerr := p.inAlive(); aerr == nil && !alive {
			return fmt.Errorf("%w: sender died switching rings: %v", ErrPeerGone, err)
		}
		return err
	}
	_ = p.in.Consume()
	p.in.Release()
	old := p.inSeg
	p.inSeg, p.in, p.inWant, p.inID = rs.seg, rs.r, rs.want, rs.id
	_ = t.region.Peers().Set(p.inIdx, PeerInfo{PID: p.pid, Gen: p.gen, SenderName: p.name, RingName: name})
	_ = old.Close()
	_ = t.bits.Set(p.inIdx) // records may wait in the new ring
	return nil
}

func (t *Transport) drainRing(p *peer, s transport.Sink) (bool, error) {
	in := p.in
	did := false
	for k := 0; k < pollBudget; k++ {
		// The common end of a drain: everything published was consumed.
		// Empty is one load of the next header word and the release.
		// When the release comes decides only when the sender finds the
		// ring full, not what arrives: every record the sender wrote is
		// found by reading this ring on (replace never leaves one behind
		// a switch record still to be written). A later release must
		// still come before the nudge of a sender waiting for room
		// (inWant) and when the ring is found empty.
		if k > 0 && in.Empty() {
			return did, nil
		}
		typ, b, err := in.Peek()
		if err != nil {
			if err == ring.ErrEmpty { // a padding record, then nothing
				return did, nil
			}
			return did, err
		}
		switch typ {
		case recEager:
			hl, ok := decodeEagerHdr(&t.hdr, b)
			if !ok {
				return did, ErrCorrupt
			}
			if hl > eagerHdrMax { // a slot record
				t.noteRelease(p, b[hl-slotWords:hl])
			}
			if !s.Arrive(p.idx, &t.hdr, b[hl:hl+int(t.hdr.Len)], 0) {
				in.Release()
				_ = t.bits.Set(p.inIdx) // come back: the engine is full
				return did, nil
			}
		case recRTS:
			if len(b) < rtsFixed {
				return did, ErrCorrupt
			}
			h, ok := getHdr(b)
			niov := int(binary.LittleEndian.Uint32(b[40:]))
			if !ok || niov > maxRTSIOV || len(b) != rtsFixed+16*niov {
				return did, ErrCorrupt
			}
			r := t.newRTS()
			r.cookie, r.niov = binary.LittleEndian.Uint64(b[32:]), niov
			var sum uint64
			for i := range niov {
				r.addr[i] = binary.LittleEndian.Uint64(b[rtsFixed+16*i:])
				r.size[i] = binary.LittleEndian.Uint64(b[rtsFixed+16*i+8:])
				sum += r.size[i]
			}
			if sum != h.Len {
				t.rtsFree = append(t.rtsFree, r)
				return did, ErrCorrupt
			}
			p.rtsMap()[r.cookie] = r
			t.hdr = h
			if !s.Arrive(p.idx, &t.hdr, nil, r.cookie) {
				t.dropRTS(p, r.cookie)
				in.Release()
				_ = t.bits.Set(p.inIdx)
				return did, nil
			}
		case recACK:
			if len(b) != 12 {
				return did, ErrCorrupt
			}
			cookie := binary.LittleEndian.Uint64(b)
			status := binary.LittleEndian.Uint32(b[8:])
			if h, ok := p.held[cookie]; ok {
				delete(p.held, cookie)
				t.farAnswer(p, h, false)
				code := transport.Code(0)
				if status == 2 {
					code = transport.EIO
				}
				t.sendDone(s, h, code)
				if len(p.held) == 0 {
					p.since = time.Time{}
				}
			}
		case recCTS:
			if len(b) != 8 {
				return did, ErrCorrupt
			}
			cookie := binary.LittleEndian.Uint64(b)
			if h, ok := p.held[cookie]; ok {
				delete(p.held, cookie)
				t.farAnswer(p, h, true)
				p.streams = append(p.streams, stream{cookie: cookie, h: h})
				t.markBusy(p)
				// A payload is coming through our ring: a ring of about
				// twice its size (at most RingSize) pipelines it.
				if p.out != nil && p.out.Cap() < t.cfg.RingSize {
					c := p.out.Cap()
					for c < t.cfg.RingSize && c < 2*h.n {
						c *= 2
					}
					t.growTo(p, c)
				}
			}
		case recSeg:
			if len(b) < 16 {
				return did, ErrCorrupt
			}
			cookie := binary.LittleEndian.Uint64(b)
			off := binary.LittleEndian.Uint64(b[8:])
			f, ok := p.fetch[cookie]
			if !ok || f.split || off != uint64(f.got) || f.got+len(b)-16 > f.total {
				return did, ErrCorrupt
			}
			f.n += scatter(f.dst, f.got, b[16:])
			f.got += len(b) - 16
			if f.got == f.total {
				if f.timed {
					// From the CTS, or from the end of the previous
					// segment fetch from this peer when that came later:
					// with several messages in flight, waiting for the
					// sender to finish the ones ahead is queueing, not
					// this transfer's cost.
					now := time.Now()
					start := f.start
					if p.segDone.After(start) {
						start = p.segDone
					}
					fc := &t.fetchCost[fetchClass(f.total)]
					if p.switchIns == f.switches || !fc.retry() {
						fc.note(false, f.explore, now.Sub(start))
					}
					p.segDone = now
				}
				delete(p.fetch, cookie)
				s.FetchDone(f.op, f.n, 0)
				t.putFetch(f)
			}
			// Hand the segment's space back now: the sender is streaming.
			// Kick it too (our bit in its bitmap, its doorbell only if it
			// sleeps): a sender asleep in Sread with a full ring would
			// otherwise resume only at its next timeout.
			_ = in.Consume()
			in.Release()
			if p.out != nil && !p.dead {
				t.kick(p)
			}
			did = true
			continue
		case recCTW:
			cookie, off, n, addr, ok := decodeCTW(b)
			if !ok {
				return did, ErrCorrupt
			}
			t.writeSplit(p, cookie, off, n, addr)
		case recWDone:
			if len(b) != wdoneLen {
				return did, ErrCorrupt
			}
			if err := t.splitDone(p, s, binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint32(b[8:])); err != nil {
				return did, err
			}
		case recSwitch:
			// The sender writes on in another ring: open it, hand this
			// one back (the sender closes it once it sees it read) and
			// go on there at the next visit.
			return true, t.switchIn(p, b)
		case recDropSpare:
			if len(b) != 0 {
				return did, ErrCorrupt
			}
			if sp := p.inSpare; sp != nil && sp.seg.Owner() {
				_ = sp.seg.Close()
				p.inSpare = nil
			}
		default:
			return did, ErrCorrupt
		}
		_ = in.Consume()
		did = true
	}
	in.Release()
	_ = t.bits.Set(p.inIdx) // budget spent: more may be waiting
	return did, nil
}

// progressBusy advances connection set-up, control records and segment
// streams, and checks peers that owe answers for too long.
func (t *Transport) progressBusy() bool {
	did := false
	now := time.Time{}
	keep := t.busy[:0]
	// Read the nudge word before trying to write: a receiver that makes
	// room after our try bumps it, and Wait sees the change.
	t.nudgeSeen.Store(t.region.NudgeSeq())
	for _, p := range t.busy {
		if p.connSlot >= 0 {
			t.checkReply(p)
		}
		if p.out == nil && len(p.ctrl) > 0 && !p.dead {
			// Control records wait for a connection the receiver's full
			// queue refused so far.
			if c := t.ready(p); c != 0 && c != transport.EAgain {
				t.dropCtrl(p)
				t.fail(p, c)
			}
		}
		if len(p.ctrl) > 0 || len(p.streams) > 0 {
			before := len(p.ctrl) + len(p.streams)
			t.flush(p)
			did = did || len(p.ctrl)+len(p.streams) != before
		}
		if p.old != nil && p.old.Free() == p.old.Cap()-ring.RecordHeader {
			// The receiver read the old ring up to the switch record and
			// maps the new one: the old file can go.
			_ = p.oldSeg.Close()
			p.old, p.oldSeg = nil, nil
			did = true
		}
		// The liveness of a peer that owes us nothing but the answer to
		// our connection request is looked at on one pass in 64: a peer
		// connected to ahead (Prepare) that never polls leaves the request
		// unanswered for good, and a clock read on every poll of ours cost
		// an 8-byte fetch-add to such an idle target 0.38 -> 0.47 us.
		pending := p.connSlot >= 0 && len(p.ctrl) == 0 && len(p.streams) == 0 && len(p.held) == 0 && len(p.fetch) == 0
		if !p.since.IsZero() && !p.dead && (!pending || t.polls&63 == 0) {
			if now.IsZero() {
				now = time.Now()
			}
			if now.Sub(p.since) > t.cfg.PeerTimeout {
				p.since = now
				t.checkAlive(p)
			}
		}
		if !p.dead && (p.connSlot >= 0 || len(p.ctrl) > 0 || len(p.streams) > 0 || len(p.held) > 0 || len(p.fetch) > 0 || p.old != nil) {
			keep = append(keep, p)
		} else {
			p.inBusy = false
		}
	}
	clear(t.busy[len(keep):])
	t.busy = keep
	t.busyN.Store(int32(len(keep)))
	return did
}

// tick is Poll's housekeeping, every ShrinkAfter/4 at most: a grown ring
// that saw no sends for ShrinkAfter, and has been read to the end, is
// replaced by a small one.
func (t *Transport) tick() {
	now := time.Now()
	if now.Sub(t.lastTick) < t.cfg.ShrinkAfter/4 {
		return
	}
	t.lastTick = now
	busy := false
	for _, p := range t.peers {
		if sp := p.inSpare; sp != nil && !sp.seg.Owner() && now.Sub(p.inSpareAt) >= 2*t.cfg.ShrinkAfter {
			_ = sp.seg.Close() // the peer's spare, not taken yet: it may never be
			p.inSpare = nil
		}
		if p.out == nil || p.dead {
			continue
		}
		// A receiver that leaves what we wrote unread for PeerTimeout
		// has its liveness checked: a peer we connected to ahead
		// (Prepare) and that died takes eager sends without a word, and
		// one waiting for its answer would wait forever.
		if p.out.Free() != p.out.Cap()-ring.RecordHeader {
			if p.unread.IsZero() {
				p.unread = now
			} else if now.Sub(p.unread) > t.cfg.PeerTimeout {
				p.unread = now
				if t.checkAlive(p); p.dead {
					continue
				}
			}
		} else {
			p.unread = time.Time{}
		}
		if p.old != nil {
			continue
		}
		if p.sends != p.seenSends {
			p.seenSends, p.active = p.sends, now
			busy = true
			continue
		}
		// The return spare the receiver made for us goes when we send
		// nothing for ShrinkAfter, as an unused spare of ours does: we
		// tell the receiver, which owns it, and switch to it no more.
		if p.outSpare != nil && now.Sub(p.active) >= t.cfg.ShrinkAfter && p.out.TryWrite(recDropSpare, nil) == nil {
			_ = p.outSpare.seg.Close()
			p.outSpare = nil
			t.kick(p)
		}
		if p.out.Cap() > t.cfg.MinRingSize && now.Sub(p.active) >= t.cfg.ShrinkAfter &&
			len(p.ctrl) == 0 && len(p.streams) == 0 && p.out.Free() == p.out.Cap()-ring.RecordHeader {
			_ = t.replace(p, t.cfg.MinRingSize, false) // on failure it stays big
		}
	}
	if len(t.retStale) > 0 {
		t.closeStale(now.Add(-t.cfg.ShrinkAfter))
	}
	// An unused spare goes after ShrinkAfter without sends, as grown
	// rings do: an idle endpoint keeps only small rings.
	if busy {
		t.sendsSeen = now
	} else if now.Sub(t.sendsSeen) >= t.cfg.ShrinkAfter {
		t.closeSpares()
	}
}

// closeSpares closes the spare ring segments not taken.
func (t *Transport) closeSpares() {
	for _, s := range [...]*(*ringSeg){&t.spareSmall, &t.spare} {
		if *s != nil {
			_ = (*s).seg.Close()
			*s = nil
		}
	}
}

// checkAlive tests the peer's liveness (its region's owner lock, or its
// inbound ring's) and fails it when dead.
func (t *Transport) checkAlive(p *peer) {
	var alive bool
	var err error
	switch {
	case p.region != nil:
		alive, err = p.region.Segment().Alive()
	case p.inSeg != nil:
		alive, err = p.inAlive()
	default:
		return
	}
	if err == nil && !alive {
		// What the peer wrote before it went away is still in its ring
		// (we keep the mapping): deliver it first, so a sender that
		// finished streaming and exited does not lose its last messages.
		if p.in != nil && t.sink != nil {
			for t.drain(p, t.sink) && p.in != nil {
			}
		}
		t.fail(p, transport.EConnReset)
	}
}

// fail marks p dead and fails everything owed to or by it.
func (t *Transport) fail(p *peer, c transport.Code) {
	if p.dead {
		return
	}
	p.dead, p.err = true, c
	s := t.sink
	for cookie, h := range p.held {
		delete(p.held, cookie)
		t.sendDone(s, h, c)
	}
	for _, st := range p.streams {
		t.sendDone(s, st.h, c)
	}
	p.streams = nil
	for cookie, f := range p.fetch {
		delete(p.fetch, cookie)
		if s != nil {
			s.FetchDone(f.op, f.n, c)
		}
	}
	t.dropCtrl(p)
	p.ctrl = nil
	t.rmaFail(p, c)
	t.closeOut(p)
	if s != nil {
		s.PeerDown(p.idx, c)
	}
	// A later send may reconnect to a restarted receiver of the same name
	// only through a new address; this peer stays failed.
}

func (t *Transport) closeOut(p *peer) {
	if p.connSlot >= 0 && p.region != nil {
		_ = p.region.ConnQueue().Release(p.connSlot)
	}
	if p.seg != nil {
		_ = p.seg.Close()
	}
	if p.oldSeg != nil {
		_ = p.oldSeg.Close()
	}
	t.closeRet(p)
	t.closePeerSpares(p)
	p.offer, p.spareOffer, p.retSpareOffer = ringOffer{}, ringOffer{}, ringOffer{}
	if p.region != nil {
		_ = p.region.Close()
	}
	p.seg, p.region, p.out, p.outWant, p.rbits, p.rpoll, p.connSlot, p.outID = nil, nil, nil, nil, nil, nil, -1, 0
	p.old, p.oldSeg, p.eager = nil, nil, 0
}

// anyWork is the doorbell condition: inbound bits, a new connection, or a
// Wake.
func (t *Transport) anyWork() bool {
	if t.woken.Load() || t.region.ConnQueue().Seq() != t.seen.Load() {
		return true
	}
	if (t.busyN.Load() > 0 || t.pokeWait.Load() > 0) && t.region.NudgeSeq() != t.nudgeSeen.Load() {
		return true // a receiver made room for what we wait to write, or a Poke
	}
	if t.rmaWork() {
		return true // a target answered a channel request
	}
	if c := t.waitCond.Load(); c != nil && (*c)() {
		return true // the user's condition (RingPeer's callers)
	}
	for w := 0; w < t.inWords; w++ {
		if t.bits.Peek(w) != 0 {
			return true
		}
	}
	// A concurrent Poll's sweep found work and set the polling word after
	// Wait cleared it: senders skip their bits again, so do not sleep.
	return t.polling.Load() != 0
}

// Wait sleeps on the region's doorbell until work may be there, Wake is
// called or timeout passes. Peers that owe answers are re-checked by the
// next Poll, so the sleep is bounded by PeerTimeout while they exist.
func (t *Transport) Wait(timeout time.Duration) {
	if t.closed {
		time.Sleep(min(timeout, time.Millisecond))
		return
	}
	if t.busyN.Load() > 0 || t.rma.busyN.Load() > 0 {
		timeout = min(timeout, t.cfg.PeerTimeout)
	}
	if s := t.rma.svc; s != nil {
		s.active().Store(0) // initiators stop offering quick requests
	}
	if t.polling.Load() != 0 {
		// Senders have been leaving their bits alone while Poll swept
		// the rings: ask for bits again and return, so that the caller
		// polls once more (a sweep after this store sees every record
		// whose sender skipped its bit) before it sleeps on the bitmap.
		t.polling.Store(0)
		fence()
		return
	}
	_, _ = t.bell.Wait(timeout, t.anyWork)
	t.woken.Store(false)
}

// Sleepers reports how many Waits are asleep or about to sleep on the
// region's doorbell: from the moment it is non-zero a ring is not lost
// (tests that prove a wake-up send only then).
func (t *Transport) Sleepers() uint32 { return t.bell.Sleepers() }

// Wake makes a concurrent Wait return.
func (t *Transport) Wake() {
	if t.closed {
		return
	}
	t.woken.Store(true)
	t.bell.seq.Add(1)
	_ = t.bell.Ring()
}

// lingerMax bounds how long Close waits for receivers to accept rings
// that already carry completed sends.
const lingerMax = 2 * time.Second

// linger waits (bounded by lingerMax, and only for live receivers) until
// every receiver we announced a ring to has accepted it, has followed
// every ring switch, has taken every bounce-sent payload (an inject
// that bounced has only a counter to say it went) and has room for every
// ACK we owe it (owesDone). Eager sends
// complete as soon as their record is in the ring, but the receiver maps
// the ring only when it accepts the connection request (or reads the
// switch record); unlinking the ring before that would lose messages
// already reported complete. Meanwhile inbound rings are read for control
// records only (ACK, CTS, switch): messages stay where they are.
func (t *Transport) linger() {
	deadline := time.Now().Add(lingerMax)
	lastCheck := time.Now()
	cs := closingSink{t.sink}
	for {
		pending, control := false, false
		check := time.Since(lastCheck) > 10*time.Millisecond
		for _, p := range t.peers {
			if p.dead || p.out == nil {
				continue
			}
			if p.connSlot >= 0 {
				t.checkReply(p)
			}
			// A request not yet accepted is owed only if its ring holds
			// records: a ring made ahead (Prepare) and never written to
			// loses nothing.
			owed := p.connSlot >= 0 && p.out.Free() != p.out.Cap()-ring.RecordHeader || p.old != nil || p.owesBounce() || p.owesDone()
			if check && owed && !p.dead {
				t.checkAlive(p)
			}
			if owed && !p.dead {
				pending = true
				control = control || p.connSlot < 0
			}
		}
		if check {
			lastCheck = time.Now()
		}
		if !pending || time.Now().After(deadline) {
			return
		}
		if control {
			t.sink = cs
			for _, p := range t.direct {
				t.drain(p, cs)
			}
			if len(t.busy) > 0 {
				t.progressBusy()
			}
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// owesDone reports whether a record that completes an operation of p's
// (the ACK of a message read or dropped here, the end of a split write)
// waits for room in our ring to p. Dropped at Close, it failed p's
// operation with ECONNRESET once p found us gone, although its payload
// had been read or dropped as asked (TestTransport_CloseWritesQueuedACKs).
func (p *peer) owesDone() bool {
	for _, c := range p.ctrl {
		if c.typ == recACK || c.typ == recWDone {
			return true
		}
	}
	return false
}

// owesBounce reports whether a bounce-sent payload to p still waits for
// the receiver.
func (p *peer) owesBounce() bool {
	for _, h := range p.held {
		if h.bounce != nil {
			return true
		}
	}
	for _, s := range p.streams {
		if s.h.bounce != nil {
			return true
		}
	}
	return false
}

// closingSink is the sink of Close's last reads: it refuses messages (they
// stay in their rings) and passes completions on.
type closingSink struct{ s transport.Sink }

func (c closingSink) Arrive(transport.Peer, *transport.Header, []byte, uint64) bool { return false }

func (c closingSink) SendDone(op transport.Op, code transport.Code) {
	if c.s != nil {
		c.s.SendDone(op, code)
	}
}

func (c closingSink) FetchDone(op transport.Op, n int, code transport.Code) {
	if c.s != nil {
		c.s.FetchDone(op, n, code)
	}
}

func (c closingSink) PeerDown(p transport.Peer, code transport.Code) {
	if c.s != nil {
		c.s.PeerDown(p, code)
	}
}

// parked keeps the bounce buffers of payloads a closed transport still
// owed: a receiver may read them later with process_vm_readv, so their
// memory must not be reused for anything else while the process lives.
var parked struct {
	sync.Mutex
	bufs [][]byte
}

// Close fails held operations with ECANCELED and removes the region and
// every ring this endpoint created, after giving receivers that have not
// yet accepted a ring carrying completed sends a bounded time to do so.
func (t *Transport) Close() error {
	if t.closed {
		return nil
	}
	s := t.sink
	t.linger()
	t.sink = s
	for _, p := range t.peers {
		for cookie, h := range p.held {
			delete(p.held, cookie)
			if h.bounce != nil { // the receiver may still read it: park the copy
				parked.Lock()
				parked.bufs = append(parked.bufs, h.bounce)
				parked.Unlock()
				h.bounce = nil
			}
			t.sendDone(s, h, transport.ECanceled)
		}
		for _, st := range p.streams {
			t.sendDone(s, st.h, transport.ECanceled)
		}
		for cookie, f := range p.fetch {
			delete(p.fetch, cookie)
			if s != nil {
				s.FetchDone(f.op, f.n, transport.ECanceled)
			}
		}
		t.dropCtrl(p) // fetches read whose ACKs did not go out complete
		t.closeOut(p)
		if p.inSeg != nil {
			_ = p.inSeg.Close()
		}
		if p.bell != nil {
			_ = p.bell.Close()
		}
	}
	t.rmaClose()
	t.closeSpares()
	t.closeStale(time.Time{})
	t.closed = true
	return t.region.Close()
}

// placeNoteMin: from this payload size a send or receive notes its place
// too (notePlace), as polls come seldom when each one copies for tens of
// microseconds: a CPU word 256 such polls old misled the peer into moving
// onto this process's CPU (1 MiB ping-pong, load 12: 4 of 4 rounds slower).
const placeNoteMin = 256 << 10

// notePlace writes the CPU this thread polls on into our region (its CPU
// word, see the layout; stored only when it changed: senders read that
// line on every send) and notes where the peers with a larger pid poll,
// from theirs. Poll calls it every 256 polls: a read of the CPU (internal/getcpu: RDPID
// or RDTSCP, else a getcpu system call) and a load per peer.
func (t *Transport) notePlace() {
	cpu := getcpu.Current()
	if cpu < 0 {
		return
	}
	c := uint32(cpu)
	if w := t.region.cpuWord(); w.Load() != c+1 {
		w.Store(c + 1)
	}
	var m uint64
	for _, p := range t.peers {
		if p == nil || p.dead || p.region == nil || p.pid <= selfPID {
			continue
		}
		if pc := p.region.cpuWord().Load(); pc != 0 && pc <= 64 {
			m |= 1 << (pc - 1)
		}
	}
	if t.peerCPUs.Load() != m {
		t.peerCPUs.Store(m)
	}
}

// PeerShares reports whether a peer with a larger pid last polled on cpu
// (transport.CPUSharer): a busy-polling reader there that finds its CPU
// shared moves off it (engine), and of the two processes of a pair only
// the one with the smaller pid does, so that they do not both move.
//
// Only while the traffic is eager (no rendezvous payload either way for
// rdvQuiet): a small message costs two hand-offs of the shared CPU, each
// a context switch, against well under a microsecond apart, while a large
// one is mostly its copy, and on a loaded host the other CPU's programs
// then cost more than the peer does. Measured with the move on and off
// alternated (perftest pingpong, load 8-15, 4-6 rounds each): 8 B x 10k
// 0.70-6.3 us per transfer against 7.8-73 (6 of 6 faster), 4 KiB 9-42
// against 24-47 (3 of 4), 64 KiB mixed, 1 MiB x 100 150-740 against
// 96-720 (4 of 4 slower).
func (t *Transport) PeerShares(cpu int) bool {
	if cpu < 0 || cpu >= 64 || t.peerCPUs.Load()&(1<<cpu) == 0 {
		return false
	}
	return time.Since(placeEpoch)-time.Duration(t.rdvAt.Load()) >= rdvQuiet
}

// placeEpoch is rdvAt's origin; rdvQuiet how long without rendezvous
// payloads counts as eager traffic for PeerShares.
var placeEpoch = time.Now()

const rdvQuiet = 20 * time.Millisecond
