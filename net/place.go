package net

import (
	"bytes"
	"encoding/hex"
	"hash/fnv"
	"math"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/gofi-dev/fi/internal/getcpu"
	"golang.org/x/sys/unix"
)

// Where same-host peers poll: moving off a peer's CPU.
//
// Two processes talking over loopback that a wake-up put on one CPU stay
// there: each busy-polls and hands the CPU to the other with sched_yield
// (Poll, spin.go), so both always look cache-hot to the load balancer and
// neither is moved. Every message then costs both sides' system calls in
// series plus two context switches: perftest pingpong -compare showed
// 1700-3200 involuntary context switches per 1000 iterations in the 64 KiB
// rounds that lost to Go's net, and an 8-byte RMA with an idle target took
// ~20 us co-located against ~13 on two CPUs. shm solves this with its
// regions (each owner writes its polling CPU there; engine, move_linux.go);
// tcp peers on one host share no memory, so the CPU rides on the frames.
//
// When both HELLOs carry helloPlace and the same host id (Config.Host,
// by default the kernel's boot id, so two network namespaces or
// containers of one kernel, which share its CPUs, count as one host, and
// two hosts never do), every later frame on that connection carries the
// writer's polling CPU + 1 in the header's bytes 5-6 (0: not known yet).
// The thread that reads the sockets (Poll while it owns the loop, else
// the loop's spin) looks where it runs (getcpu) every placeEvery Polls or
// passes, and at each OnTraffic, and keeps it in Transport.place; a write
// stamps the last value (no system call per frame). The receiver keeps
// each same-host peer's last stamp (peer.place) and marks it seen when it
// looks, so only stamps that came since count.
//
// At the same looks the polling thread moves: when a fresh stamp says a
// same-host peer polls on this very CPU, and that peer stays (of the two,
// the one with the larger pid, then instance id: they do not both jump),
// the thread moves to the next CPU of its mask and straight back to the
// mask (moveAway), at most once per moveGap, and only while the host is
// quiet (hostQuiet: no more runnable threads than CPUs). On a busier host
// a pair that yields does better together: each would share its CPU with
// other programs and hand them its time slice at every yield (measured in
// hostQuiet's comment), unless the peer runs in another scheduling group,
// where our yields never reach it (otherGroup): then it moves whatever
// the load. GOFI_CQ_MOVE=off (engine.MoveEnv) turns the move
// off, with the engine's; the engine's own move asks PeerShares
// (transport.CPUSharer).

// Large traffic: joining the peer's CPU.
//
// A large payload is mostly its two copies (into the sender's socket
// buffer, out to the receiver), and the receiver's copy reads what the
// sender's CPU just wrote. On two CPUs each 64 KiB message then crosses
// between them line by line, and the sender's next writev refills pages
// the receiver's CPU last read: pinned, a 64 KiB ping-pong took 19-24 us
// per transfer on one CPU against 59-101 on two (near, load 15), and
// its writev 10 us against 40 in the far placement. Go's net gets the
// one-CPU figure unasked: its reader sleeps, and the sender's sync
// wake-up puts it on the sender's CPU. So while messages or RMA of
// colocateMin bytes or more went either way within bigQuiet (bigAt),
// the polling thread never moves off a peer's CPU, and the side that
// would move (as above: the one outranked, or a Poll beside an idle
// target's loop) moves onto the CPU a fresh stamp says the peer polls
// on (moveTo), at most once per moveGap, whatever the load: on a busy
// host a pair that yields does better together anyway (hostQuiet). Only
// a transport with one same-host peer joins (joinable), and not while
// its peers all run in other scheduling groups (groupsApart).
const colocateMin = 32 << 10

// colocateMax: messages of this many bytes or more count as large
// traffic only while the pair's two CPUs are far apart (cpusFar,
// distance.go); RMA counts at every size from colocateMin. At 1 MiB a
// pair on one CPU lost to a pair apart on a quiet host in the near
// placement: alternated, load 1.2-1.5, near (55-69 ns), 1 MiB x 500
// ping-pong 234 against 279 us per transfer (medians of 16 rounds,
// faster in 14; Go net 240-250), while in the far placement the pair on
// one CPU won: 1 MiB x 300, alternated, far (323-345 ns), load 17-19,
// 385 against 707 us (medians of 5 rounds, faster in 4; Go net 226-922),
// 256 KiB x 1000 99 against 138 (4 of 5). 64 KiB gained on one CPU in
// every set measured, near and far (far, the same run: 26.0 against
// 99.8, 5 of 5).
const colocateMax = 256 << 10

// bigQuiet is a variable for the tests alone, as appIdle: a test run
// under -race on a loaded host leaves more than 20 ms between two of a
// ping-pong's messages now and then, and a test that means large traffic
// throughout widens it (TestPlace_LargeTrafficJoinsThePeersCPU).
var bigQuiet = 20 * time.Millisecond

// noteBig records that a large message of n bytes went out or came in
// (Send, pushStart) or a large RMA started (RMA, n 0). An RMA initiator
// then joins the CPU of the idle target's loop instead of moving off it:
// 1 MiB write bandwidth in the far placement (perftest rma -w 16,
// alternated, load 13.8-15.3) 1449 -> 2727 MB/s (medians, nice -20,
// higher in 6 of 6), 11 of 13 rounds higher in all (Go net bw 1924-4295);
// near 2969 -> 2671 (nice -20, 5 rounds, Go net ~3590).
func (t *Transport) noteBig(n uint64) {
	now := int64(time.Since(placeEpoch))
	if n >= colocateMax {
		t.hugeAt.Store(now)
		return
	}
	t.bigAt.Store(now)
}

// bigTraffic reports whether large traffic flowed within bigQuiet of now
// (since placeEpoch) for this side polling on CPU c: messages or RMA
// counted by bigAt, or messages of colocateMax bytes or more while c and
// the CPU the pair would share (otherCPU) are far apart (cpusFar). probe:
// the caller is the polling thread, which probes the two CPUs when their
// last probe is stale (probeCPUs; at most once per distEvery).
func (t *Transport) bigTraffic(now time.Duration, c int, probe bool) bool {
	if at := t.bigAt.Load(); at != 0 && now-time.Duration(at) < bigQuiet {
		return true
	}
	if at := t.hugeAt.Load(); at == 0 || now-time.Duration(at) >= bigQuiet {
		return false
	}
	o := t.otherCPU(c)
	far, _, stale := cpusFar(c, o)
	if stale && probe {
		far, _ = probeCPUs(c, o)
	}
	return far
}

// otherCPU is the CPU that decides whether the pair joins for messages of
// colocateMax bytes or more, for this side on CPU c: the one same-host
// peer's, from its last stamp, when it names another CPU; else (the two
// share c, or the stamp is not known) the other CPU of the last probe of
// c, or the next CPU of this thread's mask (where moveAway would go); -1
// when there is none.
func (t *Transport) otherCPU(c int) int {
	if l := t.local.Load(); l != nil && len(*l) == 1 {
		if p := int((*l)[0].place.Load()&placeCPU) - 1; p >= 0 && p != c {
			return p
		}
	}
	v := distance.Load()
	if a, b := int(v&0x7fff), int(v>>15&0x7fff); b != 0 && (a == c || b == c) {
		return a + b - c
	}
	var m unix.CPUSet
	if unix.SchedGetaffinity(0, &m) != nil {
		return -1
	}
	n := len(m) * 64
	for i := 1; i < n; i++ {
		if o := (c + i) % n; m.IsSet(o) {
			return o
		}
	}
	return -1
}

// joinable returns the CPU this side should move onto while large
// traffic flows (see above), or -1: a same-host peer's fresh stamp names
// another CPU and that peer stays (it outranks this side, or it is an
// idle target's loop and this side polls from its application). The
// stamps looked at are marked seen.
//
// Only a transport with one same-host peer joins (the pair measured):
// with two peers that stay, on two other CPUs, each look found the fresh
// stamp of the peer it had not joined and moved onto that one, every
// moveGap for as long as the traffic lasted
// (TestPlace_LargeTrafficMoverDoesNotHopBetweenTwoPeers: 28 moves in
// 300 ms), and ranks of a collective would each follow a rank that
// outranks them onto its CPU until all shared one (reasoned, not run).
// Nor does it join a peer that has more than one (placeMany).
func (t *Transport) joinable(cpu int, poll bool) int {
	l := t.local.Load()
	if l == nil {
		return -1
	}
	to := -1
	for _, p := range *l {
		v := p.place.Load()
		c := int(v&placeCPU) - 1
		if v&placeSeen != 0 || c < 0 || c == cpu {
			continue
		}
		p.place.CompareAndSwap(v, v|placeSeen)
		if v&placeMany == 0 && ((poll && v&placeLoop != 0) || p.outranks.Load()) {
			to = c
		}
	}
	if len(*l) != 1 {
		return -1
	}
	return to
}

// helloPlace: the HELLO's sender stamps frames with its CPU and reads
// stamps (see above); flag bit of the HELLO's byte 24.
const helloPlace = 1 << 1

// An idle target's loop beside its initiator.
//
// The loop's spin (spin.go) serves one-sided requests while the target's
// application makes no gofi call; the initiator's application polls for
// the answers. When a wake-up put the two on one CPU (the loop sleeping
// in epoll_wait is woken by a sync wake-up, which the scheduler places
// on the waker's CPU when the other one is busy), every request costs
// both sides' system calls in series and two switches, and on a host
// that is not quiet nobody moved: 8-byte RMA write and fetch-add, idle
// target, unbound, 16.0-16.7 us in either placement against 9.5-10.0
// near and 13.6-13.9 far apart (libfabric's tcp;ofi_rxm 12.3 / 9.5 near,
// 16.7 / 14.0 far), measured at load 9-16. Moving apart under load
// loses where both sides poll from their applications (8-byte ping-pong
// at load 8-10: mean 11.4 us per transfer together against 28 apart):
// each then shares its CPU with other programs while waiting for the
// other. An idle target's loop spins only for its window after traffic,
// so the initiator's Poll moves off a CPU where a stamp says such a loop
// polls, whatever the pids and the host's load; the loop never moves off
// such an initiator (it would move too: both would swap CPUs). The
// loop's stamps say so (placeLoop) once its application has not polled
// for appIdle (a loop also reads while its application polls, before
// Poll borrows it), and only to peers whose HELLO has helloPlaceLoop
// (older peers read a stamp as a CPU number). Alternated with the rule
// before it (6 rounds, far, load 8-21, median us): fetch-add 16.14 ->
// 13.59 (libfabric 16.63), RMA write 16.19 -> 13.45 (14.15), read
// 16.12 -> 14.21 (13.91), lower in 6 of 6 rounds each.
const helloPlaceLoop = 1 << 2

// A peer that serves many: the writer has more than one same-host peer.
//
// Only a transport with one same-host peer joins (joinable), but its
// peer may have many: single-peer clients of one server that outranks
// them each joined the server's CPU, all of them onto one CPU with the
// server's polling thread. So a stamp carries placeMany while its writer
// lists more than one same-host peer, and nobody joins such a peer's CPU;
// only to peers whose HELLO has helloPlaceMany (older peers read the bit
// as part of the CPU number).
const helloPlaceMany = 1 << 3

// Stamp layout in the frame header: bytes 5-6 the CPU + 1 (little-endian;
// 0: not known, 14 bits) with placeMany and placeLoop in the top two bits,
// byte 7 zero. As a uint32: those 16 bits, and placeSeen, which only the
// receiver sets. (Older peers read 15 bits of CPU; a CPU of 16383 or
// more is never stamped.)
const (
	placeSeen = 1 << 31 // the stamp was looked at since it came
	placeLoop = 1 << 15 // the writer's polling thread is its loop's spin
	placeMany = 1 << 14 // the writer has more than one same-host peer
	placeCPU  = placeMany - 1
)

const (
	placeEvery = 16                    // Polls (or spin passes) between looks
	moveGap    = 10 * time.Millisecond // at most one move per
)

// appIdle: no Poll for this long, and the loop's stamps carry placeLoop
// (a variable for the tests, see bigQuiet).
var appIdle = 10 * time.Millisecond

// moveEnv is engine.MoveEnv: "off" turns every move off.
const moveEnv = "GOFI_CQ_MOVE"

var moveOff = sync.OnceValue(func() bool { return os.Getenv(moveEnv) == "off" })

// hostID identifies the running kernel (its boot id), 0 when unknown.
var hostID = sync.OnceValue(func() uint64 {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return 0
	}
	return hostIDOf(b)
})

// hostIDOf hashes a boot id ("xxxxxxxx-xxxx-...") to a nonzero id, or 0
// when it is not one.
func hostIDOf(b []byte) uint64 {
	b = bytes.TrimSpace(b)
	raw := make([]byte, 0, 16)
	for _, part := range bytes.Split(b, []byte("-")) {
		d := make([]byte, hex.DecodedLen(len(part)))
		if _, err := hex.Decode(d, part); err != nil {
			return 0
		}
		raw = append(raw, d...)
	}
	if len(raw) != 16 {
		return 0
	}
	h := fnv.New64a()
	h.Write(raw)
	return h.Sum64() | 1
}

// getCPU returns the CPU the calling thread runs on, or -1.
// (internal/getcpu: RDPID or RDTSCP where the CPU has them, else getcpu(2)).
func getCPU() int { return getcpu.Current() }

// placeCPUs is where tests say a transport's polling thread runs (nil:
// getCPU).
var placeCPUs func(*Transport) int

// header builds f's header into b, stamped when the connection's two
// sides exchange places (tc.placed).
func (tc *tconn) header(b []byte, f *frame) {
	putHeader(b, f)
	if tc.placed.Load() {
		v := tc.t.place.Load()
		if !tc.placeLoop.Load() {
			v &^= placeLoop
		}
		if !tc.placeMany.Load() {
			v &^= placeMany
		}
		b[5], b[6] = byte(v), byte(v>>8)
	}
}

// notePlace stores where this thread polls and returns the CPU, or -1;
// nothing when no same-host peer reads it. loop: the thread is the loop's
// spin; its stamp carries placeLoop only when the application has not
// polled for appIdle (a loop that reads while its application polls,
// before Poll borrows it or while the application's thread waits for a
// CPU, is no idle target's).
func (t *Transport) notePlace(loop bool) int {
	l := t.local.Load()
	if l == nil {
		return -1
	}
	if loop {
		now := time.Since(placeEpoch)
		if t.appPolled.Load() {
			t.appPolled.Store(false)
			t.spin.appPoll = now
		}
		loop = now-t.spin.appPoll >= appIdle
	}
	c := -1
	if placeCPUs != nil {
		c = placeCPUs(t)
	} else {
		c = getCPU()
	}
	if c < 0 || c >= placeCPU {
		return -1
	}
	v := uint32(c + 1)
	if loop {
		v |= placeLoop
	}
	if len(*l) > 1 {
		v |= placeMany
	}
	if t.place.Load() != v {
		t.place.Store(v)
	}
	return c
}

// placeOf is what a HELLO says about places: the connection exchanges
// them when both sides ask for it and run on one kernel.
func placeOf(host uint64, theirs []byte) bool {
	return host != 0 && host != NoHost && theirs[24]&helloPlace != 0 && getU64(theirs[56:]) == host
}

func getU64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// addLocal lists p among the peers whose places this side reads (once;
// p.mu held).
func (t *Transport) addLocal(p *peer) {
	if p.local {
		return
	}
	p.local = true
	prober.run() // probeCPUs's responder, before any message (distance.go)
	t.localMu.Lock()
	old := t.local.Load()
	var l []*peer
	if old != nil {
		l = append(l, *old...)
	}
	l = append(l, p)
	t.local.Store(&l)
	t.noteMany(len(l) > 1)
	t.localMu.Unlock()
}

// noteMany sets or clears placeMany in this side's stamp at once, when
// the list of same-host peers changes (localMu held): notePlace, which
// sets it too, comes only at the next look, and frames meanwhile said
// otherwise (a client joined a server that had just listed a second one).
func (t *Transport) noteMany(many bool) {
	for {
		v := t.place.Load()
		w := v &^ placeMany
		if many {
			w |= placeMany
		}
		if v == w || t.place.CompareAndSwap(v, w) {
			return
		}
	}
}

// dropLocal takes p off the peers whose places this side reads (p.mu
// held), when its connections are torn down: a later same-host peer then
// finds the list as it would have without p. A list that only grew kept
// every client a server ever served, so a server that served two clients
// one after the other never joined (joinable) or judged its peers apart
// (peersApart) again. A handshake with p's next incarnation lists it
// again (addLocal); its stamp starts unknown.
func (t *Transport) dropLocal(p *peer) {
	if !p.local {
		return
	}
	p.local = false
	p.place.Store(0)
	t.localMu.Lock()
	var l *[]*peer
	if old := t.local.Load(); old != nil && len(*old) > 1 {
		rest := make([]*peer, 0, len(*old)-1)
		for _, q := range *old {
			if q != p {
				rest = append(rest, q)
			}
		}
		l = &rest
	}
	t.local.Store(l) // nil with none left: no same-host peer (notePlace)
	t.noteMany(l != nil && len(*l) > 1)
	t.localMu.Unlock()
}

// outranks reports whether a peer with pid and instance id inst stays
// rather than this side when both poll from their applications.
func (t *Transport) outranks(pid uint32, inst uint64) bool {
	if pid != t.pid {
		return pid > t.pid
	}
	return inst > t.instance
}

// shared reports whether a same-host peer polls on cpu, by a stamp that
// came since the last look (marked seen), and this side should move off
// it; anyLoad: whatever the host's load. poll: this side looks from its
// application's Poll; marked: from its loop's spin, whose stamps carry
// placeLoop. A Poll moves off a marked stamp (anyLoad); a marked loop
// stays beside a peer's Poll, which moves off it (that stamp is left
// fresh for this side's own Poll); otherwise the side that does not
// outrank the other moves (see above), whatever the load when every such
// peer runs in another scheduling group (otherGroup).
func (t *Transport) shared(cpu int, poll, marked bool) (move, anyLoad bool) {
	l := t.local.Load()
	if l == nil {
		return false, false
	}
	together := false // a peer to move off shares our scheduling group
	for _, p := range *l {
		v := p.place.Load()
		if v&placeSeen != 0 || int(v&placeCPU) != cpu+1 {
			continue
		}
		switch {
		case marked && v&placeLoop == 0 && p.loopStamps.Load():
			continue
		case poll && v&placeLoop != 0:
			p.place.CompareAndSwap(v, v|placeSeen)
			return true, true
		}
		p.place.CompareAndSwap(v, v|placeSeen)
		if p.outranks.Load() {
			move = true
			if !p.otherGroup.Load() {
				together = true
			}
		}
	}
	return move, move && !together
}

// peersApart reports whether every same-host peer's last stamp names a
// CPU other than the one this side polls on (at its last look); false
// with no same-host peer, or one whose CPU is not known yet.
//
// Poll then does not yield (neither first after a whole write nor after
// an empty pass): those yields let a peer that shares this CPU answer,
// and with none there they only hand the CPU to other programs, which on
// a busy host keep it for their slice while the peer's answer waits. Two
// ranks of a tcp allreduce across two namespace hosts, one CPU each, at
// load 6-8 (6 rounds alternated with MPICH): 8-byte p50 17.5 us with the
// yields, 13.1 without, MPICH 13.9. A stamp that went stale (the peer
// came onto this CPU since) is corrected by the peer's next frame; until
// then the engine's CQ wait still yields after its idle spell.
func (t *Transport) peersApart() bool {
	l := t.local.Load()
	mine := t.place.Load() & placeCPU
	if l == nil || mine == 0 {
		return false
	}
	for _, p := range *l {
		if v := p.place.Load() & placeCPU; v == 0 || v == mine {
			return false
		}
	}
	return true
}

// PeerShares reports whether a same-host peer that stays polls on cpu
// (transport.CPUSharer), by a stamp that came since the last look, and
// the host is quiet or the peer runs in another scheduling group (see
// above).
func (t *Transport) PeerShares(cpu int) bool {
	if cpu < 0 || cpu >= placeCPU || moveOff() || (t.bigTraffic(time.Since(placeEpoch), cpu, false) && !t.groupsApart()) {
		return false
	}
	move, anyLoad := t.shared(cpu, true, false)
	return move && (anyLoad || hostQuiet())
}

// lookPlace is the polling thread's look at where it and its peers poll
// (every placeEvery Polls while Poll reads the sockets itself, or passes
// of the loop's spin): it moves off a CPU that a peer which stays polls
// on (see above), at most once per moveGap (last: the thread's last move).
func (t *Transport) lookPlace(last *time.Duration, loop bool) {
	c := t.notePlace(loop)
	if c < 0 || moveOff() {
		return
	}
	now := time.Since(placeEpoch)
	if *last != 0 && now-*last < moveGap {
		return
	}
	if t.bigTraffic(now, c, !loop) && !t.groupsApart() {
		if loop {
			return // a loop stays: a Poll beside it might join it as it moved
		}
		if to := t.joinable(c, true); to >= 0 {
			// Tried at most once per moveGap, moved or not: a join the
			// kernel refuses (the peer's CPU outside this thread's mask,
			// taskset or a cpuset) was otherwise tried at every look
			// that found a fresh stamp (TestPlace_RefusedJoinWaitsMoveGap:
			// 478 tries in 314 ms).
			*last = now
			if placeJoin(c, to) {
				t.joins.Add(1)
				t.notePlace(loop)
			}
		}
		return
	}
	move, anyLoad := t.shared(c, !loop, loop && t.place.Load()&placeLoop != 0)
	if !move {
		return
	}
	*last = now
	if !anyLoad && !hostQuiet() {
		t.crowded.Add(1)
		return
	}
	if placeMove(c) {
		t.moves.Add(1)
		t.notePlace(loop)
	}
}

// hostQuiet reports whether no more threads are runnable on the host than
// it has CPUs (/proc/loadavg's fourth field; placeQuiet in tests). Apart,
// each of the pair then has a CPU to itself. On a busier host each would
// share its CPU with other programs, and a poller that yields hands such
// a program its time slice, where co-located ones hand the CPU to each
// other: pinned apart at load 7 an 8-byte ping-pong took 125-160 us per
// transfer against 22-40 pinned together (64 KiB 395-1131 against 64-117).
func hostQuiet() bool {
	if placeQuiet != nil {
		return placeQuiet()
	}
	fd := loadavgFD()
	if fd < 0 {
		return false
	}
	var b [128]byte
	n, err := unix.Pread(fd, b[:], 0)
	if err != nil || n <= 0 {
		return false
	}
	r, ok := runnableOf(b[:n])
	return ok && r <= runtime.NumCPU()
}

// placeQuiet stands in for hostQuiet in tests (nil: /proc/loadavg).
var placeQuiet func() bool

// otherGroup reports whether the same-host peer process pid (from its
// HELLO) runs in another scheduling group than this process: the kernel
// groups tasks by session (autogroups, sched_autogroup_enabled) and the
// two are in different sessions. hostQuiet's case for staying together
// on a busy host is that the two yield the CPU to each other; sched_yield
// only reorders tasks within a group, so a pair of two groups on one CPU
// hands it over only when the scheduler switches groups, a time slice
// later. Ranks that mpiexec.hydra starts each lead a session of their
// own: across two namespace hosts (8-byte and 1 KiB allreduce, tcp, 8
// rounds at load 19-36) the pair that a wake-up put on one CPU took
// 22-139 us p50 instead of 8-11 in 4 of 8 runs while it stayed together
// on the busy host, and 0 of 8 when it moved apart whatever the load.
// Not known (autogroups off, no such pid) reads as the same group: the
// busy-host rule stays. A peer in another pid namespace sent a pid that
// names another process here, or none: the answer is then a guess, which
// decides only where the pair polls.
func otherGroup(pid uint32) bool {
	if pid == 0 || pid > math.MaxInt32 || !autogroups() {
		return false
	}
	mine, err := unix.Getsid(0)
	if err != nil {
		return false
	}
	theirs, err := unix.Getsid(int(pid))
	return err == nil && theirs != mine
}

// placeOtherGroup is otherGroup (tests replace it).
var placeOtherGroup = otherGroup

// groupsApart reports whether every same-host peer runs in another
// scheduling group (otherGroup); false with none. Large traffic then
// never joins a pair on one CPU, where the two would hand it over only at
// the scheduler's group switches: the small-traffic rule (move apart)
// holds instead. Two namespace hosts under mpiexec.hydra (allreduce over
// tcp, a build without this alternated with one with it, 8 rounds at
// load 18-20, far, 100 calls per size): p50 64 KiB 271 -> 58 us (lower
// in 8 of 8), 1 MiB 2908 -> 1049 (6 of 8), 4 MiB 15.1 -> 11.8 ms (6 of
// 8); averages 1030 -> 315 us, 4409 -> 4206, 19.1 -> 15.8 ms.
func (t *Transport) groupsApart() bool {
	l := t.local.Load()
	if l == nil || len(*l) == 0 {
		return false
	}
	for _, p := range *l {
		if !p.otherGroup.Load() {
			return false
		}
	}
	return true
}

// autogroups reports whether the kernel schedules sessions as groups.
var autogroups = sync.OnceValue(func() bool {
	b, err := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled")
	return err == nil && len(b) > 0 && b[0] == '1'
})

var loadavgFD = sync.OnceValue(func() int {
	fd, err := unix.Open("/proc/loadavg", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
})

// runnableOf parses the runnable count of a /proc/loadavg line
// ("0.49 2.53 3.30 2/91 15404": 2).
func runnableOf(b []byte) (int, bool) {
	f := 0
	i := 0
	for ; i < len(b) && f < 3; i++ {
		if b[i] == ' ' {
			f++
		}
	}
	n, digits := 0, 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9' && digits < 9; i++ {
		n = n*10 + int(b[i]-'0')
		digits++
	}
	if digits == 0 || i >= len(b) || b[i] != '/' {
		return 0, false
	}
	return n, true
}

var placeEpoch = time.Now()

// placeMove is moveAway, placeJoin moveTo (tests count the moves).
var (
	placeMove = moveAway
	placeJoin = moveTo
)

// moveTo moves the calling thread from cpu onto CPU to and restores its
// mask at once, as moveAway does. It reports whether it moved: not when
// the thread no longer runs on cpu or to is not in its mask.
func moveTo(cpu, to int) bool {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var m unix.CPUSet
	if to == cpu || getCPU() != cpu || unix.SchedGetaffinity(0, &m) != nil || !m.IsSet(to) {
		return false
	}
	return hop(to, &m)
}

// moveAway moves the calling thread from cpu to the next CPU of its mask
// and restores the mask at once (sched_setaffinity to that CPU alone,
// which migrates the thread, then back): nothing stays bound. It reports
// whether it moved: not when the thread no longer runs on cpu or its
// mask has no other CPU. (engine/move_linux.go does the same for shm.)
func moveAway(cpu int) bool {
	runtime.LockOSThread() // one thread throughout: the mask read is the one restored
	defer runtime.UnlockOSThread()
	var m unix.CPUSet
	if getCPU() != cpu || unix.SchedGetaffinity(0, &m) != nil {
		return false
	}
	to := -1
	n := len(m) * 64
	for i := 1; i < n; i++ {
		if c := (cpu + i) % n; m.IsSet(c) {
			to = c
			break
		}
	}
	if to < 0 || to == cpu {
		return false
	}
	return hop(to, &m)
}

// hop migrates the calling (locked) thread to CPU to by binding it there
// alone, then restores its mask m at once. It reports whether the bind
// took.
func hop(to int, m *unix.CPUSet) bool {
	var one unix.CPUSet
	one.Set(to)
	if unix.SchedSetaffinity(0, &one) != nil {
		return false
	}
	for unix.SchedSetaffinity(0, m) != nil {
		// Only if the mask's CPUs went offline meanwhile: widen to every
		// CPU rather than leave the thread bound.
		for i := range m {
			m[i] |= ^m[i]
		}
	}
	return true
}
