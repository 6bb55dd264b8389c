package shm

import (
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/gofi-dev/fi/transport"
)

// Split single copy for large rendezvous payloads.
//
// A single copy is one process_vm_readv by the receiver while the sender,
// whose send waits for the receiver's acknowledgement, spins with nothing
// to do. From SplitMin bytes the two share the copy: the receiver asks the
// sender (recCTW: cookie, offset, length, destination address) to write
// the payload's tail into its buffer with process_vm_writev, reads the head
// itself meanwhile, and completes the receive when the sender reports its
// part written (recWDone). Two cores then pin and copy half the pages
// each: where pinning 4 KiB pages bounds the copy (a send buffer not yet
// backed by huge pages) and where one core's cache misses to the other
// CCX bound it (the far placement), the transfer takes about half as long.
//
// Whether the split pays depends on the placement: far apart (cache-line
// round trip 424-460 ns) a 1 MiB ping-pong took 97 us a transfer split
// against 191 whole; close (73-99 ns) 86.9 against 79.5, the sender's
// half pinning the receive buffer's 4 KiB pages while one core's read of
// the huge-page-backed send buffer is already fast. And it pays only
// while both processes run at once on CPUs of their own: 1 MiB fetches of
// a ping-pong (load 0.7-2) split in 25-30 us where the sender answered
// at once, against 49-58 whole; in other runs of the same placement,
// each process on its own CPU, the sender's process_vm_writev of its half
// took 60-120 us instead of 30-40 (the receiver's WDone 30-70 us after
// its 30-35 us own part, splits 68-118 us), slower than a whole copy:
// presumably a receive buffer in 4 KiB pages rather than huge ones. It
// differed between runs and between the two directions of one ping-pong,
// and the receiver's 2 MiB blocks are now advised as a sender's are
// (sendHuge, msghuge.go) when it splits: over 8 alternated pairs of
// 1000-message runs (load 1.4) the directions that settled on whole
// copies (under 200 splits, their splits 57-142 us) went from 6 of 16 to
// 1 of 16, the median transfer from 51.9 to 45.8 us. So from SplitMin
// each size class takes whichever of split and whole single copy has been
// faster lately, as pickCMA chooses between single copy and segments
// below CMAMin (splitCost: the same fetchCost, the split its first
// method, the whole copy the one tried in bursts). A split is timed from
// its CTW to the handling of the WDone, a whole copy over its read.
//
// SplitMin is 64 KiB: there too the split wins in both placements
// (perftest pingpong -S 64k, fi_pingpong's 1000, pinned, 2026-11-25:
// far 6.16-6.26 us a transfer against 7.77-7.89 with the then adaptive
// single copy or segments, near 5.33-5.45 against 7.18-7.23), and from it
// segments are not tried (NewTransport's cmaMin).
//
// The receiver waits for the sender's part only as long as the split
// saves: when the WDone comes later after the receiver's own part than
// that part took (a sender busy elsewhere, or off its CPU), reading the
// whole payload alone would have been faster, and the next large fetches
// from that peer are not split: one after a single late split, four
// times more for each late split in a row, up to splitBackoff
// (splitLateSkip); a peer's first splitWarmup splits are no verdict.
//
// The receiver's buffer is written by the sender only between the CTW and
// the WDone, and the receive completes only after the WDone, so nothing
// touches the buffer once the user has it back (a sender that fails in
// between fails the peer, and the fetch with it). The receiver needs the
// sender to make progress for that part, as the segment path (CTS) always
// did; a sender asleep in a wait is woken by the CTW's doorbell.
//
// The sender checks the range against the held send (it writes only its
// own payload) and writes at the address the receiver gave into the
// receiver's process: what the receiver asks for, like an RMA write into
// memory it advertised. A write the kernel refuses is answered with a
// non-zero status, and the receiver then reads that part itself.
//
// Records (region layout version 4):
//
//	recCTW:   cookie u64, offset u64, length u64, address u64
//	recWDone: cookie u64, status u32 (0 written, 1 not written)

// SplitMinEnv sets SplitMin: the smallest rendezvous payload whose single
// copy the receiver shares with the sender (a size), or "off". Default 64k.
const SplitMinEnv = "GOFI_SHM_SPLIT_MIN"

const (
	splitMinDefault = 64 << 10
	// splitBackoff: large fetches from a peer left unsplit after a split
	// it did not write its part of, and at most after late splits
	splitBackoff = 64
	// splitLateFirst: fetches left unsplit after a late split that
	// followed a paid one; each late split in a row leaves
	// splitLateGrow times more, up to splitBackoff (see splitDone)
	splitLateFirst = 1
	splitLateGrow  = 4
	// splitWarmup: a peer's first splits, whose lateness is no verdict:
	// in 1 MiB ping-pongs the sender's part came 43-270 us after the
	// receiver's 23-90 us in the first one to six splits with a peer, in
	// most runs, and 0-60 us after in the later ones (perftest pingpong
	// -S 1m -I 100, 12 runs, near, load 21-37, nice -20): backing off on
	// them left most of a 100-message run to whole copies, which the
	// split's own samples then kept (the early splits' slow ones)
	splitWarmup = 8
	// splitAlign aligns the split point (a page: each side pins whole pages).
	splitAlign = 4 << 10
	ctwLen     = 32
	wdoneLen   = 12
)

var splitMin struct {
	once sync.Once
	n    int
}

// SplitMin returns the smallest payload whose copy is split, 0 when off.
func SplitMin() int {
	splitMin.once.Do(func() { splitMin.n = parseHugeSize(os.Getenv(SplitMinEnv), splitMinDefault) })
	return splitMin.n
}

// splitCost is one size class's recent cost of split and whole single
// copies: a fetchCost whose first method (cma) is the split and whose
// other (seg) is the whole copy. The split goes first: where it wins
// (about 2x at 1 MiB) the whole copy would cost its first fetches twice,
// where it loses the back-off (splitBackoff) already keeps most of them
// whole.
type splitCost struct{ c fetchCost }

// pick reports whether the class's next copy is split, and whether it is
// a try of the method not in use.
func (s *splitCost) pick() (split, explore bool) { return s.c.pickCMA() }

// note adds one copy's time (split or whole) to the class's samples. The
// class's first copy is no measure (it pays for first touches): not noted.
func (s *splitCost) note(split, explore bool, d time.Duration) {
	if s.c.n > 1 {
		s.c.note(split, explore, d)
	}
}

// splitFaster reports whether split copies have been the faster method
// (none timed yet: the split, the first method).
func (s *splitCost) splitFaster() bool { return !s.c.segFaster() }

// splitAt returns where the receiver's part of a want-byte copy ends (the
// sender writes [at, want)), or 0 when the copy is not split. sc, when
// not nil, is the size class whose samples the copy feeds (nil below
// SplitMin), and explore says whether it is a try of the method not in
// use; a whole copy while backing off from a late sender is a plain
// sample.
func (t *Transport) splitAt(p *peer, want int) (at int, sc *splitCost, explore bool) {
	if t.splitMin == 0 || want < t.splitMin || p.dead {
		return 0, nil, false
	}
	at = (want / 2) &^ (splitAlign - 1)
	if at <= 0 || at >= want {
		return 0, nil, false
	}
	sc = &t.splitCost[fetchClass(want)]
	if p.splitSkip > 0 {
		p.splitSkip--
		return 0, sc, false
	}
	split, explore := sc.pick()
	if !split {
		return 0, sc, explore
	}
	return at, sc, explore
}

// fetchSplit starts a split single copy of r into d (one contiguous
// buffer, want bytes of it): it asks the sender for d[at:want], reads
// d[:at] itself and leaves the fetch pending until the sender's WDone.
func (t *Transport) fetchSplit(p *peer, r *rts, d []byte, want, at int, explore bool, op transport.Op) (bool, int, transport.Code) {
	cookie := r.cookie
	if t.hugeMin > 0 && want >= t.hugeMin && runtime.GOMAXPROCS(0) > 1 {
		// The sender's process_vm_writev pins our pages: 4 KiB ones
		// slow its half down (see the placement note above). The post
		// of the receive did it already (PrepareRecv; then this finds
		// the blocks done); this covers a buffer fetched into
		// without a post of its own (a claim of a peeked message).
		// Not with one P: the collapse would run here, on the
		// receive, and its blocking system call cost the first
		// receive allocations.
		t.sendHuge(d[:want])
	}
	start := time.Now()
	if c := t.sendCtrl(p, ctrl{typ: recCTW, cookie: cookie, off: uint64(at), n: uint64(want - at),
		addr: uint64(uintptr(unsafe.Pointer(&d[at])))}); c != 0 {
		t.dropRTS(p, cookie)
		t.fail(p, c)
		return true, 0, c
	}
	f := t.newFetch()
	f.op, f.split, f.total, f.got, f.explore = op, true, want, at, explore
	f.dst = append(f.dst[:0], d)
	head := [1][]byte{d[:at]}
	n, err := t.readPeer(p, r, head[:])
	f.start = time.Now()
	f.n, f.err, f.own = n, err, f.start.Sub(start)
	p.fetch[cookie] = f
	if errors.Is(err, ErrPeerGone) {
		// The sender's process is gone: no WDone will come. The next
		// progress checks it and fails the peer (and this fetch).
		p.failSend, p.err = true, transport.EConnReset
		p.since = time.Now().Add(-2 * t.cfg.PeerTimeout)
		t.markBusy(p)
		return false, 0, 0
	}
	t.splits++
	if p.since.IsZero() {
		p.since = time.Now()
	}
	t.markBusy(p) // so progressBusy checks the sender's liveness while we wait
	return false, 0, 0
}

// splitDone ends a split fetch on the sender's WDone: with status 0 the
// sender wrote d[f.got:f.total]; otherwise the receiver reads it now (the
// sender no longer writes).
func (t *Transport) splitDone(p *peer, s transport.Sink, cookie uint64, status uint32) error {
	f, ok := p.fetch[cookie]
	if !ok || !f.split {
		return ErrCorrupt
	}
	delete(p.fetch, cookie)
	r, ok := t.pendingRTS(p, cookie)
	switch {
	case status == 0:
		f.n += f.total - f.got
		waited := time.Since(f.start)
		switch {
		case p.splitWarm < splitWarmup:
			p.splitWarm++ // no verdict (splitWarmup)
		case splitPaid(f.own, waited):
			p.splitLate = 0
		default:
			p.splitSkip = splitLateSkip(p.splitLate)
			p.splitLate = min(p.splitLate+1, 8)
		}
		if f.err == nil {
			t.splitCost[fetchClass(f.total)].note(true, f.explore, f.own+waited)
		}
	case f.err == nil && ok:
		// The sender did not write its part: read the whole payload
		// (readPeer starts at its beginning; the head again is a rare
		// cost, not worth offsets into r).
		t.splitFallbacks++
		p.splitSkip = splitBackoff
		d := [1][]byte{f.dst[0][:f.total]}
		f.n, f.err = t.readPeer(p, r, d[:])
	case f.err == nil:
		f.err = ErrFault
	}
	if ok && errors.Is(f.err, ErrPeerDenied) {
		// The kernel refuses us the sender's memory (another user
		// namespace, an LSM): segments for this peer from now on, this
		// payload first, as a single copy refused at once would go.
		p.noCMA = true
		total := 0
		for i := 0; i < r.niov; i++ {
			total += int(r.size[i])
		}
		t.dropRTS(p, cookie)
		if c := t.sendCtrl(p, ctrl{typ: recCTS, cookie: cookie}); c != 0 {
			if s != nil {
				s.FetchDone(f.op, 0, c)
			}
			t.putFetch(f)
			t.fail(p, c)
			return nil
		}
		f.split, f.err, f.got, f.n, f.total = false, nil, 0, 0, total
		p.fetch[cookie] = f
		t.markBusy(p)
		return nil
	}
	t.dropRTS(p, cookie)
	code := transport.Code(0)
	switch {
	case f.err == nil:
		if !t.ackFetch(p, ctrl{typ: recACK, cookie: cookie, op: f.op, got: f.n}) {
			t.putFetch(f) // completes when the ACK is written
			return nil
		}
	case errors.Is(f.err, ErrPeerGone):
		p.failSend, p.err = true, transport.EConnReset
		p.since = time.Now().Add(-2 * t.cfg.PeerTimeout)
		t.markBusy(p)
		code = transport.EConnReset
	default:
		if !t.ackFetch(p, ctrl{typ: recACK, cookie: cookie, status: 2, op: f.op, got: f.n, code: transport.EIO}) {
			t.putFetch(f)
			return nil
		}
		code = transport.EIO
	}
	if s != nil {
		s.FetchDone(f.op, f.n, code)
	}
	t.putFetch(f)
	return nil
}

// writeSplit serves a receiver's CTW: writes [off, off+n) of the held
// send cookie to addr in the receiver and answers WDone.
func (t *Transport) writeSplit(p *peer, cookie, off, n, addr uint64) {
	status := uint32(1)
	if h, ok := p.held[cookie]; ok && h.hasRange(off, n) && !splitRefuse {
		if err := writeIOV(p.pid, h.iov, int(off), int(n), uintptr(addr)); err == nil {
			status = 0
			t.splitWrites++
		}
	}
	t.sendCtrl(p, ctrl{typ: recWDone, cookie: cookie, status: status})
}

// splitLateSkip returns how many large fetches go unsplit after a late
// split (after a peer's first splitWarmup) that followed late splits in
// a row (0: a paid one before it):
// splitLateFirst, times splitLateGrow per late split more, at most
// splitBackoff. One late split says little: a sender preempted once (a
// kernel worker, the Go runtime's monitor, a huge-page collapse on its
// CPU) answers late once; and the first splits with a peer came late in
// most 1 MiB ping-pongs (perftest pingpong -S 1m -I 100: the sender's
// part 80-150 us after the receiver's 23-50 us in the first two), after
// which a fixed back-off of 64 left the rest of a 100-message run to
// whole copies (125 us round trips far instead of 52). A sender that
// stays late (off its CPU, busy elsewhere) reaches splitBackoff after
// four late splits.
func splitLateSkip(late uint8) int {
	n := splitLateFirst
	for range late {
		if n *= splitLateGrow; n >= splitBackoff {
			return splitBackoff
		}
	}
	return n
}

// splitPaid reports whether a split whose receiver part took own and
// which then waited waited for the sender's part beat reading the whole
// payload alone (about twice own).
func splitPaid(own, waited time.Duration) bool { return waited <= own }

// splitRefuse makes senders answer every CTW unwritten (tests).
var splitRefuse bool

// hasRange reports whether [off, off+n) is a non-empty part of h's payload.
func (h *held) hasRange(off, n uint64) bool {
	return n > 0 && off <= uint64(h.n) && n <= uint64(h.n)-off
}

// writeIOV writes n bytes of the concatenation of iov, from off, to addr
// in process pid.
func writeIOV(pid int, iov [][]byte, off, n int, addr uintptr) error {
	for _, v := range iov {
		if n == 0 {
			break
		}
		if off >= len(v) {
			off -= len(v)
			continue
		}
		k := min(len(v)-off, n)
		if _, err := WritePeer(pid, v[off:off+k], addr); err != nil {
			return err
		}
		addr += uintptr(k)
		n -= k
		off = 0
	}
	if n != 0 {
		return ErrFault
	}
	return nil
}

// decodeCTW reads a recCTW record.
func decodeCTW(b []byte) (cookie, off, n, addr uint64, ok bool) {
	if len(b) != ctwLen {
		return 0, 0, 0, 0, false
	}
	le := binary.LittleEndian
	return le.Uint64(b), le.Uint64(b[8:]), le.Uint64(b[16:]), le.Uint64(b[24:]), true
}
