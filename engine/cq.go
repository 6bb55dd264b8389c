package engine

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Entry is one completion as the engine records it. The root package turns
// it into fi.CQEntry / fi.CQErrEntry; the field meanings follow fi_cq(3).
type Entry struct {
	Context any    // the operation's context
	Flags   uint64 // completion flags (FI_SEND, FI_RECV, FI_TAGGED, ...)
	Len     int    // bytes transferred (for error entries: bytes delivered)
	Buf     []byte // received data in the user's buffer (receives only)
	Data    uint64 // remote CQ data, valid when Flags has FI_REMOTE_CQ_DATA
	Tag     uint64 // tag of a tagged receive
	Src     uint64 // source fi_addr (or AV user id); AddrUnknown if not known

	// Error completions only (Err != 0).
	Err       Code // libfabric errno of the failure
	ProvErrno int  // provider-specific errno
	OLen      int  // overflow length (bytes that did not fit) for CodeTrunc
}

// AddrUnknown is fi.AddrNotAvail, the source of a completion whose sender
// is not in the address vector.
const AddrUnknown = ^uint64(0)

// Progressor is an endpoint bound to a CQ. Progress moves whatever its
// transports delivered into its CQs and reports whether it did any work.
// Progress is called with the CQ's lock held when the CQ is thread safe.
type Progressor interface {
	Progress() bool
}

// Waiter lets Sread sleep until a transport has work. Wait returns when
// woken, when the transport may have work, or after timeout, whichever is
// first; spurious returns are allowed. Wake makes a concurrent or future
// Wait return promptly. Both are safe for concurrent use.
type Waiter interface {
	Wait(timeout time.Duration)
	Wake()
}

// Spinner is an optional interface of a Waiter whose transport knows when
// spinning does not pay: SpinBudget returns how many empty progress
// passes Sread should make before it sleeps (0: sleep at once), or a
// negative number for Sread's default. The shm transport spins little
// when its host runs more ranks than it has CPUs, where a spinning rank
// only takes the CPU from the rank it waits for. Safe for concurrent use.
type Spinner interface {
	SpinBudget() int
}

// CQ is a completion queue: a power-of-two ring of entries with error
// entries kept in order among them, as libfabric's util CQ does.
//
// Concurrency: the CQ shares its domain's Serial. When that is off
// (FI_THREAD_DOMAIN and looser) the caller serialises every call on the
// domain's objects; when on (FI_THREAD_SAFE) every method may be called
// from any goroutine. Signal and Notify are always safe.
type CQ struct {
	ser *Serial

	ring []Entry
	mask uint64
	head uint64 // next entry to read
	tail uint64 // next entry to write
	// over holds completions that arrived while the ring was full, in
	// order after the ring's. Producers keep within the ring through their
	// own queue-depth limits; over exists so that a completion is never
	// lost when they do not (say, many messages into one multi-receive
	// buffer while nobody reads the CQ).
	over []Entry

	eps []Progressor
	// skipped: the last read found completions queued and drove no
	// progress; the next one does (readProgress).
	skipped bool
	// sharers: the bound endpoints that are peerSharers, found at Bind
	// (a type assertion to an interface builds its itab at its first
	// call: runtime.getitab's lock, an allocation and a page fault or
	// two, which the first idle read of a ping-pong's first wait paid)
	sharers []peerSharer
	waiters []Waiter
	wake    atomic.Pointer[[]Waiter] // snapshot of waiters for Notify

	signaled atomic.Bool
	sleep    sleeper // used when no transport offers a Waiter

	maxSleep atomic.Int64 // SetMaxSleep's bound in nanoseconds; 0: maxSleep
	yield    atomic.Bool  // FI_WAIT_YIELD: Sread yields the CPU instead of sleeping

	// Busy-polling reads that keep finding nothing (see idleRead).
	empties  uint32        // consecutive reads that returned nothing
	idleFrom time.Duration // since idleEpoch: when the run of empty reads was seen long
	lastNap  time.Duration // since idleEpoch: the last idle nap
	yielded  bool          // this run of empty reads yielded or napped
	// yieldNs is how long the last idle yield took, written after it
	// outside the lock (atomic: a concurrent reader may hold the lock).
	yieldNs atomic.Int64
}

// A busy-polling reader (Read in a loop, as fi_pingpong polls) that has
// found nothing for idleYieldAfter gives its CPU to the OS scheduler
// (sched_yield) once every idleCheck empty reads, outside the lock. When
// the process it waits for shares its CPU (two processes on one vCPU
// after a wake-up put them together, or more processes than CPUs), that
// process runs at once instead of at the spinner's preemption, a time
// slice later: perftest pingpong -S 8 with both processes pinned to one
// CPU took 2685 us per transfer spinning, 38 us yielding. With the CPU to
// itself the call returns at once (under a microsecond), once per
// idleCheck reads after the first idleYieldAfter of a wait: a reader
// whose peer answers sooner never makes it.
//
// How long the yield took says whether the CPU is shared. A yield of
// crowdedYield or more ran another thread. Then:
//
//   - the reader naps once (a nanosleep of about the timer slack, 50 us),
//     at most once per napGap: a thread that blocks is placed again when
//     it wakes, on an idle CPU if there is one (the kernel's wake-up
//     placement looks for one beside the busy previous CPU), which a
//     yield never does. When a bound endpoint's transport says that
//     the peer polls on this very CPU (Endpoint.PeerShares), the reader
//     moves itself to another CPU of its mask instead (moveAway,
//     move_linux.go): the kernel often leaves the two together. Two
//     processes of a ping-pong that a wake-up put on one vCPU stay there
//     until the load balancer parts them, and on a busy host that may be
//     never: perftest pingpong -S 8 -I 10000
//     started on one CPU and allowed both after 0.3 s (load 6) stayed
//     together for the whole run, 145 us per round trip.
//   - a yield that took at most sharedYieldMax (the peer's turn, not
//     another program's time slice) makes the next waits yield early:
//     after sharedYieldAfter, checked every sharedCheck reads, so that
//     two processes on one CPU hand it over to each other in
//     microseconds rather than after idleYieldAfter each. A yield that
//     returns at once ends that, and so does a wait that ended without a
//     yield (the peer answered while we spun: it runs elsewhere).
const (
	idleCheck   = 256
	sharedCheck = 16 // divides idleCheck (see idleRead)
)

var (
	idleYieldAfter   = 50 * time.Microsecond
	sharedYieldAfter = 10 * time.Microsecond
	crowdedYield     = 3 * time.Microsecond
	sharedYieldMax   = 500 * time.Microsecond
	napGap           = 10 * time.Millisecond
	idleEpoch        = time.Now()
	idleYield        = timedYield // tests count the calls and say how long they took
	idleNap          = osNap
	idleCPU          = curCPU   // tests say where the reader runs
	idleMove         = moveAway // tests count the moves
)

// idleAct is what a reader does after an empty read, outside the lock.
type idleAct uint8

const (
	idleSpin idleAct = iota
	idleDoYield
	idleDoNap
	idleDoMove // move off the CPU a peer polls on (moveAway), else nap
)

// timedYield yields the CPU and returns how long that took.
func timedYield() time.Duration {
	t := time.Since(idleEpoch)
	osYield()
	return time.Since(idleEpoch) - t
}

// idleRead looks at a run of reads that found nothing, with the lock
// held, and says what the caller should do once it has unlocked.
//
// The caller has counted the read in empties and calls it only on a
// multiple of sharedCheck (which divides idleCheck): the other reads of a
// busy-polling wait, the loop that bounds how soon a message is seen,
// cost one increment and one test.
func (cq *CQ) idleRead() (idleAct, int) {
	check, after := uint32(idleCheck), idleYieldAfter
	y := time.Duration(cq.yieldNs.Load())
	if y >= crowdedYield && y <= sharedYieldMax {
		check, after = sharedCheck, sharedYieldAfter
	}
	if cq.empties%check != 0 {
		return idleSpin, 0
	}
	now := time.Since(idleEpoch)
	if cq.empties == check {
		cq.idleFrom = now
		return idleSpin, 0
	}
	if now-cq.idleFrom < after {
		return idleSpin, 0
	}
	cq.yielded = true
	if y >= crowdedYield && (cq.lastNap == 0 || now-cq.lastNap >= napGap) {
		cq.lastNap = now
		if c := idleCPU(); c >= 0 && cq.peerShares(c) {
			return idleDoMove, c
		}
		return idleDoNap, 0
	}
	return idleDoYield, 0
}

// peerShares reports whether a bound endpoint's transport says a peer
// that stays put polls on cpu (Endpoint.PeerShares), with the lock held.
func (cq *CQ) peerShares(cpu int) bool {
	for _, s := range cq.sharers {
		if s.PeerShares(cpu) {
			return true
		}
	}
	return false
}

// peerSharer is an endpoint that can say whether a peer polls on a CPU
// (Endpoint.PeerShares).
type peerSharer interface{ PeerShares(int) bool }

// endIdle ends a run of empty reads, with the lock held. A wait that
// ended without a yield says the peer runs beside us: the early yields
// stop (on a CPU shared with the peer every wait needs one).
func (cq *CQ) endIdle() {
	cq.empties = 0
	if cq.yielded {
		cq.yielded = false
	} else if cq.yieldNs.Load() != 0 {
		cq.yieldNs.Store(0)
	}
}

// idle does what idleRead said, without the lock.
func (cq *CQ) idle(a idleAct, cpu int) {
	switch a {
	case idleDoYield:
		cq.yieldNs.Store(int64(idleYield()))
	case idleDoNap:
		idleNap()
	case idleDoMove:
		if !idleMove(cpu) {
			idleNap()
		}
	}
}

// Serial is a domain's serialisation: a mutex taken by every call on the
// domain's CQs and endpoints when the domain is FI_THREAD_SAFE, and
// nothing at all otherwise. One lock per domain keeps lock ordering
// trivial: progress on one CQ may complete operations into another.
type Serial struct {
	mu sync.Mutex
	on bool
}

// NewSerial returns a Serial that locks when safe is true.
func NewSerial(safe bool) *Serial { return &Serial{on: safe} }

// Lock takes the domain lock when the domain is thread safe. (The mutex
// calls are out of line so that the test inlines everywhere.)
func (s *Serial) Lock() {
	if s.on {
		s.lock()
	}
}

// Unlock releases what Lock took.
func (s *Serial) Unlock() {
	if s.on {
		s.unlock()
	}
}

//go:noinline
func (s *Serial) lock() { s.mu.Lock() }

//go:noinline
func (s *Serial) unlock() { s.mu.Unlock() }

// NewCQ returns a CQ holding at least size entries (rounded up to a power
// of two; 0 means DefaultCQSize), serialised by ser (nil: not thread safe).
func NewCQ(size int, ser *Serial) *CQ {
	if size <= 0 {
		size = DefaultCQSize
	}
	n := 1
	for n < size {
		n <<= 1
	}
	if ser == nil {
		ser = NewSerial(false)
	}
	cq := &CQ{ser: ser, ring: make([]Entry, n), mask: uint64(n - 1)}
	faultIn(cq.ring[:min(n, faultInMax)])
	cq.sleep.init()
	return cq
}

// faultIn writes every entry of a new ring once (a zero over a zero), so
// that its pages are mapped before the first completion. A fresh large
// allocation is not: the runtime knows the OS's pages are zero and leaves
// them untouched, so the first lap of completions took a page fault at
// every 4 KiB (39 entries of 104 bytes): in fi_pingpong's 8 B run of
// 10 000 round trips, a 2-9 us hole every 39.3 round trips through the
// first 1024 (26 faults, both processes; getrusage and a per-round-trip
// dump, issue 12). 1024 stores, once per CQ.
//
// Only the first faultInMax entries (1.6 MiB): a CQ may be opened with
// up to 1<<24 entries (1.7 GiB of ring) as a bound it never reaches, and
// writing all of it made every such entry resident at once, in each of a
// node's ranks; beyond the cap a lap's pages fault in as they fill.
func faultIn(r []Entry) {
	for i := range r {
		r[i].Flags = 0
	}
}

// DefaultCQSize is the CQ size used when the attribute asks for 0.
const DefaultCQSize = 1024

// faultInMax bounds the entries NewCQ writes in advance (faultIn).
const faultInMax = 16384

// Size reports the CQ's capacity.
func (cq *CQ) Size() int { return len(cq.ring) }

// Bind attaches an endpoint (and its transport's Waiter, which may be nil)
// so that Read and Sread drive its progress.
func (cq *CQ) Bind(p Progressor, w Waiter) {
	cq.lock()
	cq.eps = append(cq.eps, p)
	if s, ok := p.(peerSharer); ok {
		cq.sharers = append(cq.sharers, s)
	}
	if w != nil {
		cq.waiters = append(cq.waiters, w)
		cq.publishWaiters()
	}
	cq.unlock()
}

func (cq *CQ) publishWaiters() {
	ws := append([]Waiter(nil), cq.waiters...)
	cq.wake.Store(&ws)
}

// Unbind detaches an endpoint bound with Bind.
func (cq *CQ) Unbind(p Progressor, w Waiter) {
	cq.lock()
	for i, e := range cq.eps {
		if e == p {
			cq.eps = append(cq.eps[:i], cq.eps[i+1:]...)
			break
		}
	}
	for i, s := range cq.sharers {
		if any(s) == any(p) {
			cq.sharers = append(cq.sharers[:i], cq.sharers[i+1:]...)
			break
		}
	}
	if w != nil {
		for i, e := range cq.waiters {
			if e == w {
				cq.waiters = append(cq.waiters[:i], cq.waiters[i+1:]...)
				cq.publishWaiters()
				break
			}
		}
	}
	cq.unlock()
}

// Bound reports how many endpoints are bound.
func (cq *CQ) Bound() int {
	cq.lock()
	n := len(cq.eps)
	cq.unlock()
	return n
}

func (cq *CQ) lock()   { cq.ser.Lock() }
func (cq *CQ) unlock() { cq.ser.Unlock() }

// Free reports how many more entries fit in the ring. The caller holds
// the domain's serialisation.
func (cq *CQ) Free() int { return len(cq.ring) - int(cq.tail-cq.head) }

// Push appends a completion; it never fails and never drops one (see
// over). The caller holds the domain's serialisation: endpoints push from
// inside Progress or from their own posting calls.
func (cq *CQ) Push(e *Entry) {
	if len(cq.over) > 0 || cq.tail-cq.head == uint64(len(cq.ring)) {
		cq.over = append(cq.over, *e)
		return
	}
	cq.ring[cq.tail&cq.mask] = *e
	cq.tail++
}

// next returns the entry a Push would write now, for the caller to fill
// in place (every field: a ring slot holds an older completion's values),
// which saves building the entry apart and copying it. The caller holds
// the domain's serialisation.
func (cq *CQ) next() *Entry {
	if len(cq.over) > 0 || cq.tail-cq.head == uint64(len(cq.ring)) {
		cq.over = append(cq.over, Entry{})
		return &cq.over[len(cq.over)-1]
	}
	e := &cq.ring[cq.tail&cq.mask]
	cq.tail++
	return e
}

// refill moves overflowed completions into the ring as it drains.
func (cq *CQ) refill() {
	i := 0
	for i < len(cq.over) && cq.tail-cq.head < uint64(len(cq.ring)) {
		cq.ring[cq.tail&cq.mask] = cq.over[i]
		cq.over[i] = Entry{}
		cq.tail++
		i++
	}
	if i == len(cq.over) {
		cq.over = cq.over[:0]
	} else if i > 0 {
		cq.over = append(cq.over[:0], cq.over[i:]...)
	}
}

// progressLocked drives every bound endpoint once.
//
// A read that finds completions queued skips its progress pass when the
// read before it drove one (readProgress): the completions that pass
// queued (the receive a ping-pong's send-completion wait took in) are
// returned at once. A progress pass that finds nothing is not free: tcp's
// Poll reads every socket (EAGAIN) and then yields its CPU, so a
// ping-pong whose send-completion wait had already taken in the answer
// paid, on each side and each round trip, an empty read and a yield
// before its receive completion came back; with both processes on one
// CPU that yield ran the peer, which found nothing either and yielded
// back (perf trace of perftest pingpong -p tcp -S 64k: read EAGAIN,
// sched_yield, two context switches between a message's readv and the
// writev of its answer).
//
// A read never skips twice in a row. Skipping whenever the queue held
// something starved the endpoints (TestCQ_ReadingOneAtATimeKeepsProgressing):
// an eager send queues its completion when it is posted, so a loop that
// sends and reaps one completion per send always found one queued and
// never took in the messages it received (nor did a CQ that another CQ's
// progress kept filling); libfabric's util CQ once progressed only when
// empty and went back to every read for that reason (1eff3d3e2, "prov/
// util: Always progress when readin from CQ", rxm over tcp).
func (cq *CQ) progressLocked() bool {
	did := false
	for _, p := range cq.eps {
		if p.Progress() {
			did = true
		}
	}
	return did
}

// Read drives progress (unless completions are queued and the read before
// it did: readProgress), then copies up to len(dst) successful completions
// into dst. It returns CodeAgain when there is none and CodeAvail when the
// next entry is an error entry (read it with ReadErr). Entries are
// returned in completion order; an error entry stops the batch before it.
func (cq *CQ) Read(dst []Entry) (int, Code) {
	i := 0
	return cq.ReadTo(len(dst), func(e *Entry) { dst[i] = *e; i++ })
}

// ReadTo is Read handing each completion to put (in order, at most max)
// instead of copying it into a slice: callers convert entries in place
// without a scratch array. put runs with the CQ's lock held and must not
// call back into the CQ; the entry it sees is valid only during the call.
func (cq *CQ) ReadTo(max int, put func(*Entry)) (int, Code) {
	cq.lock()
	cq.readProgress()
	n, c := cq.take(max, put)
	cq.unlock()
	return n, c
}

func (cq *CQ) take(max int, put func(*Entry)) (int, Code) {
	if cq.head == cq.tail {
		return 0, CodeAgain
	}
	n := 0
	for n < max && cq.head != cq.tail {
		e := &cq.ring[cq.head&cq.mask]
		if e.Err != 0 {
			break
		}
		put(e)
		e.Context, e.Buf = nil, nil // drop references for the GC; Push rewrites the rest
		cq.head++
		n++
		if len(cq.over) > 0 {
			cq.refill()
		}
	}
	if n == 0 && cq.ring[cq.head&cq.mask].Err != 0 {
		return 0, CodeAvail
	}
	return n, 0
}

// BeginRead starts a read that copies entries out itself: it takes the
// CQ's lock and drives progress (as Read: readProgress). Then Next and
// Pop hand out the successful entries at the head, and EndRead unlocks
// and says what Read would have returned. It is ReadTo for a caller in
// another package, whose per-entry work the compiler inlines instead of
// calling a function value.
func (cq *CQ) BeginRead() {
	cq.lock()
	cq.readProgress()
}

// readProgress is a read's progress pass, with the lock held: skipped
// when completions are queued and the read before drove one (see
// progressLocked).
func (cq *CQ) readProgress() {
	if cq.head != cq.tail && !cq.skipped {
		cq.skipped = true
		return
	}
	cq.skipped = false
	cq.progressLocked()
}

// Next returns the entry at the head of the queue, or nil when the queue
// is empty or its head is an error entry. Only between BeginRead and
// EndRead; the entry is valid until Pop.
func (cq *CQ) Next() *Entry {
	if cq.head == cq.tail {
		return nil
	}
	if e := &cq.ring[cq.head&cq.mask]; e.Err == 0 {
		return e
	}
	return nil
}

// Pop removes the entry Next returned. EndRead drops its references and
// moves overflowed completions in behind it.
func (cq *CQ) Pop() { cq.head++ }

// EndRead ends a read begun with BeginRead that popped n entries: it
// returns what Read would (CodeAgain for none, CodeAvail when an error
// entry stopped it before the first) and unlocks.
func (cq *CQ) EndRead(n int) (int, Code) {
	for p := cq.head - uint64(n); p < cq.head; p++ {
		e := &cq.ring[p&cq.mask]
		e.Context, e.Buf = nil, nil // for the GC; next rewrites the rest
	}
	if len(cq.over) > 0 {
		cq.refill()
	}
	var c Code
	act, cpu := idleSpin, 0
	if n == 0 {
		if cq.head == cq.tail {
			c = CodeAgain
			if cq.empties++; cq.empties%sharedCheck == 0 {
				act, cpu = cq.idleRead()
			}
		} else if cq.ring[cq.head&cq.mask].Err != 0 {
			c = CodeAvail
		}
	}
	if c != CodeAgain && cq.empties != 0 {
		cq.endIdle()
	}
	cq.unlock()
	if act != idleSpin {
		cq.idle(act, cpu)
	}
	return n, c
}

// ReadErr removes and returns the error entry at the head of the queue.
// It returns CodeAgain when the head entry is not an error entry (or the
// queue is empty).
func (cq *CQ) ReadErr() (Entry, Code) {
	cq.lock()
	defer cq.unlock()
	if cq.head == cq.tail {
		cq.progressLocked()
	}
	if cq.head == cq.tail || cq.ring[cq.head&cq.mask].Err == 0 {
		return Entry{}, CodeAgain
	}
	e := cq.ring[cq.head&cq.mask]
	cq.ring[cq.head&cq.mask] = Entry{}
	cq.head++
	cq.refill()
	return e, 0
}

// Pending reports the number of queued entries (success and error).
func (cq *CQ) Pending() int {
	cq.lock()
	n := int(cq.tail-cq.head) + len(cq.over)
	cq.unlock()
	return n
}

// Spin budget before Sread sleeps: long enough to catch a reply from a
// peer on the other core (a shared-memory round trip is 0.1-1 µs here),
// short enough not to burn a core for long.
const (
	sreadSpins  = 4096
	sreadYields = 64
	// maxSleep bounds one sleep so a dead peer or a missed transport
	// event cannot hold Sread beyond its timeout, and so that endpoints
	// whose transport has no Waiter are still polled.
	maxSleep = 10 * time.Millisecond
)

// Sread blocks until at least one completion (or error entry) is
// available, the timeout passes, or Signal is called. A negative timeout
// waits forever. It returns what Read would, and CodeAgain on timeout or
// after Signal, as libfabric does.
func (cq *CQ) Sread(dst []Entry, timeout time.Duration) (int, Code) {
	i := 0
	return cq.SreadTo(len(dst), func(e *Entry) { dst[i] = *e; i++ }, timeout)
}

// SreadTo is Sread handing completions to put, as ReadTo does.
func (cq *CQ) SreadTo(max int, put func(*Entry), timeout time.Duration) (int, Code) {
	var deadline time.Time
	if timeout >= 0 {
		deadline = time.Now().Add(timeout)
	}
	spins, yields := sreadSpins, sreadYields
	oneP := false
	skipped := 0
	for i := 0; ; i++ {
		n, c := cq.ReadTo(max, put)
		if c != CodeAgain {
			return n, c
		}
		if cq.signaled.CompareAndSwap(true, false) {
			return 0, CodeAgain
		}
		if cq.yield.Load() {
			if timeout >= 0 && time.Now().After(deadline) {
				return 0, CodeAgain
			}
			if skipped < collYieldSkips && cq.collElsewhere() {
				skipped++
				continue
			}
			skipped = 0
			osYield()
			continue
		}
		if i == 0 {
			spins, yields = cq.spinBudget()
		}
		switch {
		case i < spins:
			continue
		case i < spins+yields:
			if i == spins {
				oneP = runtime.GOMAXPROCS(0) == 1
			}
			yieldPass(oneP)
			continue
		}
		d := maxSleep
		if m := cq.maxSleep.Load(); m > 0 {
			d = time.Duration(m)
		}
		if timeout >= 0 {
			left := time.Until(deadline)
			if left <= 0 {
				return 0, CodeAgain
			}
			d = min(d, left)
		}
		cq.wait(d)
	}
}

// collYieldSkips bounds the yields Sread's yielding wait skips in a row
// while a collective waits only for ranks on other CPUs
// (collElsewhere): a CPU word gone stale (the rank came onto this CPU
// since) costs at most that many passes before a yield lets it run.
// 4 ranks on 2 CPUs (perftest coll, yield wait), binaries without and
// with the skip alternated, 16 rounds at load 4.7-5.3: 8-byte allreduce
// average 13.1 -> 9.3 us (p50 5.8 -> 4.2), barrier average 14.0 -> 13.9
// (p50 ~5.9 -> ~6.5: a rank's calls alternate fast and switched more
// strictly, notes/coll6.md).
const collYieldSkips = 64

// collElsewhere reports whether every endpoint bound to cq has a
// collective that waits only for ranks on other CPUs
// (CollSink.CollPeersElsewhere).
func (cq *CQ) collElsewhere() bool {
	cq.lock()
	defer cq.unlock()
	if len(cq.eps) == 0 {
		return false
	}
	for _, p := range cq.eps {
		ep, ok := p.(*Endpoint)
		if !ok || ep.coll == nil || !ep.coll.CollPeersElsewhere() {
			return false
		}
	}
	return true
}

// yieldPass is one pass of Sread's yield phase. With one P it yields to
// the process's other goroutines (runtime.Gosched: a transport's event
// loop may be what this wait needs, and there is no idle P for Gosched to
// start a thread on). With more, it gives the CPU to the OS (sched_yield):
// other goroutines of this P are stolen by the other Ps anyway, the peer
// process may need this CPU, and runtime.Gosched would call wakep, which,
// whenever a P is idle, wakes a parked thread (futex) that takes the
// yielding goroutine over, only to park again: a thread hand-off per
// pass (perf: 64 futex wakes per yield phase).
func yieldPass(oneP bool) {
	if oneP {
		runtime.Gosched()
		return
	}
	osYield()
}

// SetYield makes Sread wait as FI_WAIT_YIELD does: it never sleeps, and
// gives the CPU back to the OS scheduler (sched_yield) after every pass
// that found nothing. That is what pays on a host running more processes
// than it has CPUs, where the process waited for needs this CPU to get
// there, and a futex wake-up costs more than the wait it ends (it is Open
// MPI's mpi_yield_when_idle). Safe for concurrent use.
func (cq *CQ) SetYield(on bool) { cq.yield.Store(on) }

// SetMaxSleep replaces maxSleep, the bound on one sleep of Sread, for
// tests: with a bound longer than Sread's timeout a wake-up the transport
// misses holds Sread until the timeout instead of for 10 ms, so a test can
// tell a real wake-up from the periodic one without timing anything.
// d <= 0 restores the default. Safe for concurrent use.
func (cq *CQ) SetMaxSleep(d time.Duration) { cq.maxSleep.Store(int64(max(d, 0))) }

// spinBudget returns how many passes Sread spins and then yields before
// it sleeps: the smallest budget a bound Spinner asks for, else the
// defaults. It takes no lock.
func (cq *CQ) spinBudget() (spins, yields int) {
	spins, yields = sreadSpins, sreadYields
	if ws := cq.wake.Load(); ws != nil {
		for _, w := range *ws {
			if s, ok := w.(Spinner); ok {
				if b := s.SpinBudget(); b >= 0 && b < spins {
					spins, yields = b, 0
				}
			}
		}
	}
	return spins, yields
}

// wait sleeps on the single bound transport's Waiter when there is one,
// otherwise on the CQ's own sleeper (woken by Signal and Notify).
func (cq *CQ) wait(d time.Duration) {
	cq.lock()
	var w Waiter
	if len(cq.waiters) == 1 && len(cq.eps) == 1 {
		w = cq.waiters[0]
	}
	cq.unlock()
	if w != nil {
		w.Wait(d)
		return
	}
	// Several transports: poll them at a short interval instead.
	cq.sleep.wait(min(d, 50*time.Microsecond))
}

// Signal makes a blocked Sread return CodeAgain (fi_cq_signal).
func (cq *CQ) Signal() {
	cq.signaled.Store(true)
	cq.Notify()
}

// Notify wakes a sleeping Sread so that it runs progress again; in-process
// transports call it when they hand over work. It takes no lock, so it is
// safe from any goroutine, including from inside Progress.
func (cq *CQ) Notify() {
	if ws := cq.wake.Load(); ws != nil {
		for _, w := range *ws {
			w.Wake()
		}
	}
	cq.sleep.wake()
}

// sleeper is a channel-backed one-shot wake-up for in-process waiting.
type sleeper struct {
	ch chan struct{}
}

func (s *sleeper) init() { s.ch = make(chan struct{}, 1) }

func (s *sleeper) wake() {
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

func (s *sleeper) wait(d time.Duration) {
	t := time.NewTimer(d)
	select {
	case <-s.ch:
	case <-t.C:
	}
	t.Stop()
}
