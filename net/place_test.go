package net

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/rma"
	"github.com/gofi-dev/fi/transport"
)

func TestHostIDOf(t *testing.T) {
	a := hostIDOf([]byte("0f2d7c4e-9a41-4c57-8d1e-3b6f0a9c2e11\n"))
	if a == 0 || a == NoHost {
		t.Fatalf("boot id hashed to %#x", a)
	}
	if b := hostIDOf([]byte("0f2d7c4e-9a41-4c57-8d1e-3b6f0a9c2e11")); b != a {
		t.Fatalf("same boot id, ids %#x and %#x", a, b)
	}
	if b := hostIDOf([]byte("0f2d7c4e-9a41-4c57-8d1e-3b6f0a9c2e12")); b == a {
		t.Fatal("two boot ids, one host id")
	}
	for _, bad := range []string{"", "x", "0f2d7c4e-9a41-4c57-8d1e", "0f2d7c4e-9a41-4c57-8d1e-3b6f0a9c2e1z", "0f2d7c4e-9a41-4c57-8d1e-3b6f0a9c2e1100"} {
		if id := hostIDOf([]byte(bad)); id != 0 {
			t.Errorf("%q hashed to %#x, want 0", bad, id)
		}
	}
}

func TestRunnableOf(t *testing.T) {
	for in, want := range map[string]int{"0.49 2.53 3.30 2/91 15404\n": 2, "10.00 9.00 8.00 17/300 1": 17} {
		if n, ok := runnableOf([]byte(in)); !ok || n != want {
			t.Errorf("%q: %d %v, want %d", in, n, ok, want)
		}
	}
	for _, bad := range []string{"", "0.49 2.53 3.30", "0.49 2.53 3.30 x/91 1", "0.49 2.53 3.30 2 91"} {
		if _, ok := runnableOf([]byte(bad)); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// A stamp (bytes 5-6) decodes into frame.place; byte 7 stays reserved; a
// decoder takes stamps only on a connection that exchanges places, and
// stores the last one, fresh.
func TestDecode_PlaceStamps(t *testing.T) {
	b := make([]byte, hdrSize)
	putHeader(b, &frame{op: opCredit, length: 8})
	b[5], b[6] = 0x34, 0x12
	var f frame
	if err := decodeHeader(b, &f); err != nil || f.place != 0x1234 {
		t.Fatalf("stamped header: %v, place %#x", err, f.place)
	}
	b[7] = 1
	if err := decodeHeader(b, &f); !errors.Is(err, errProto) {
		t.Fatalf("byte 7 set: %v, want a protocol error", err)
	}
	b[7] = 0
	var d decoder
	if _, err := d.run(&chunked{data: b, avail: len(b)}, &fuzzHandler{}); !errors.Is(err, errProto) {
		t.Fatalf("stamp on a connection without places: %v, want a protocol error", err)
	}
	var place atomic.Uint32
	place.Store(0x1234 | placeSeen)
	d = decoder{place: &place}
	if _, err := d.run(&chunked{data: b, avail: len(b)}, &fuzzHandler{}); err != nil {
		t.Fatal(err)
	}
	if got := place.Load(); got != 0x1234 {
		t.Fatalf("stored %#x, want 0x1234 (fresh)", got)
	}
}

// placeHooks makes every polling thread of the test's transports say it
// runs on cpu, counts moves per CPU and sets whether the host is quiet,
// until the test's transports are closed.
func placeHooks(t *testing.T, cpu int, quiet bool) *atomic.Int64 {
	t.Helper()
	if hostID() == 0 {
		t.Skip("no boot id: no host identity")
	}
	var moves atomic.Int64
	placeCPUs = func(*Transport) int { return cpu }
	placeMove = func(c int) bool {
		if c == cpu {
			moves.Add(1)
		}
		return true
	}
	placeQuiet = func() bool { return quiet }
	t.Cleanup(func() { placeCPUs, placeMove, placeJoin, placeQuiet = nil, moveAway, moveTo, nil })
	return &moves
}

// pingPong sends n 8-byte messages each way between a and b, both
// polling (their loops borrowed).
func pingPong(t *testing.T, a, b *Transport, n int) {
	t.Helper()
	pingPongSize(t, a, b, n, 8)
}

// pingPongSize is pingPong with messages of size bytes.
func pingPongSize(t *testing.T, a, b *Transport, n, size int) {
	t.Helper()
	as, bs := newSink(), newSink()
	pa, _ := a.Resolve(b.Name())
	pb, _ := b.Resolve(a.Name())
	h := &transport.Header{Kind: transport.KindMsg, Len: uint64(size)}
	deadline := time.Now().Add(20 * time.Second)
	wait := func(s *fakeSink, i int) {
		for len(s.arrivals) < i {
			if len(as.downs)+len(bs.downs) != 0 || time.Now().After(deadline) {
				t.Fatalf("message %d: peer down %v %v, or timed out", i, as.downs, bs.downs)
			}
			a.Poll(as)
			b.Poll(bs)
		}
		if ar := s.arrivals[i-1]; ar.eager == nil { // pushed: drop its payload
			rx := a
			if s == bs {
				rx = b
			}
			rx.Discard(ar.peer, ar.cookie)
		}
	}
	for i := 1; i <= n; i++ {
		if _, c := a.Send(pa, h, [][]byte{pattern(size, byte(i))}, transport.Op(i)); c != transport.OK {
			t.Fatalf("Send %d: %d", i, c)
		}
		wait(bs, i)
		if _, c := b.Send(pb, h, [][]byte{pattern(size, byte(i))}, transport.Op(i)); c != transport.OK {
			t.Fatalf("Send back %d: %d", i, c)
		}
		wait(as, i)
	}
}

// localPeer returns tr's one same-host peer, or nil.
func localPeer(tr *Transport) *peer {
	l := tr.local.Load()
	if l == nil || len(*l) != 1 {
		return nil
	}
	return (*l)[0]
}

// Two endpoints of one host learn where the other polls from the stamps
// on its frames; of the two, exactly one stays (outranks) and only the
// other moves off the CPU they share, when the host is quiet. Both poll
// all through (steadyTraffic; see TestPlace_NoMoveOnABusyHost).
func TestPlace_SameHostPeerMovesOffTheSharedCPU(t *testing.T) {
	moves := placeHooks(t, 3, true)
	steadyTraffic(t)
	a := listen(t, Config{})
	b := listen(t, Config{})
	pingPong(t, a, b, 400)
	pa, pb := localPeer(b), localPeer(a) // a as b sees it, and b as a sees it
	if pa == nil || pb == nil {
		t.Fatal("same-host peers not listed")
	}
	if pa.outranks.Load() == pb.outranks.Load() {
		t.Fatalf("both or neither stay: a outranks %v, b outranks %v", pa.outranks.Load(), pb.outranks.Load())
	}
	for _, p := range []*peer{pa, pb} {
		if got := p.place.Load() & placeCPU; got != 4 {
			t.Fatalf("peer's place %#x, want CPU 3 + 1", got)
		}
	}
	onlyTheOutrankedMoves(t, a, b, pb, moves)
}

// onlyTheOutrankedMoves ping-pongs a and b and checks that only the side
// pb (b's view of a) says is outranked moved, as often as the hook saw.
func onlyTheOutrankedMoves(t *testing.T, a, b *Transport, pb *peer, moves *atomic.Int64) {
	t.Helper()
	stays, mover := a, b // a stays where b sees it outrank
	if pb.outranks.Load() {
		stays, mover = b, a
	}
	pingPong(t, a, b, 400)
	if stays.moves.Load() != 0 || mover.moves.Load() == 0 || moves.Load() != mover.moves.Load() {
		t.Fatalf("moves: the side that stays %d, the other %d, hook %d", stays.moves.Load(), mover.moves.Load(), moves.Load())
	}
}

// On a busy host nobody moves (hostQuiet): apart, each would share its
// CPU with other programs. Both poll all through (steadyTraffic): a Poll
// beside an idle target's loop moves whatever the load
// (TestPlace_InitiatorMovesOffAnIdleTargetsLoop), and a loop's stamps
// said idle here whenever the host kept the test's goroutine from
// polling for a while (-race, load 17-19: 1 run in ~30).
func TestPlace_NoMoveOnABusyHost(t *testing.T) {
	moves := placeHooks(t, 3, false)
	steadyTraffic(t)
	a := listen(t, Config{})
	b := listen(t, Config{})
	pingPong(t, a, b, 800)
	if moves.Load() != 0 || a.moves.Load()+b.moves.Load() != 0 {
		t.Fatalf("moved %d times on a busy host", moves.Load())
	}
	if a.crowded.Load()+b.crowded.Load() == 0 {
		t.Fatal("no move was considered")
	}
}

// A peer of another host, or one that does not exchange places (from
// before them), gets no stamp (its decoder would refuse it) and is not
// listed; nobody moves.
func TestPlace_NotExchangedAcrossHostsOrWithOldPeers(t *testing.T) {
	for name, host := range map[string]uint64{"OtherHost": 0x5eed, "OldPeer": NoHost} {
		t.Run(name, func(t *testing.T) {
			moves := placeHooks(t, 3, true)
			a := listen(t, Config{})
			b := listen(t, Config{Host: host})
			pingPong(t, a, b, 100)
			if a.local.Load() != nil || b.local.Load() != nil || moves.Load() != 0 {
				t.Fatalf("places exchanged: local %v %v, moves %d", a.local.Load(), b.local.Load(), moves.Load())
			}
		})
	}
}

// moveAway puts the thread on another CPU of its mask and restores the
// mask; it refuses a CPU the thread is not on.
func TestMoveAway(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var m unix.CPUSet
	if err := unix.SchedGetaffinity(0, &m); err != nil {
		t.Fatal(err)
	}
	if m.Count() < 2 {
		t.Skip("one CPU allowed")
	}
	moved := false
	for range 20 { // the kernel may move the thread between two calls
		if c := getCPU(); moveAway(c) {
			moved = true
			break
		}
	}
	if !moved {
		t.Fatal("never moved")
	}
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &after); err != nil || after != m {
		t.Fatalf("mask after the move %v (%v), before %v", after, err, m)
	}
	if moveAway(len(m)*64 + 1) {
		t.Fatal("moved off a CPU the thread is not on")
	}
}

// While every same-host peer's stamp names another CPU, Poll yields
// neither first after a write nor after an empty pass; once a stamp names
// this CPU again it yields as before.
func TestPlace_PollYieldsOnlyWhenAPeerSharesTheCPU(t *testing.T) {
	placeHooks(t, 3, false) // both poll on "CPU 3"; the host busy: no move
	a := listen(t, Config{})
	b := listen(t, Config{})
	pingPong(t, a, b, 20)
	pb := localPeer(a) // b as a sees it
	if pb == nil || pb.place.Load()&placeCPU != 4 {
		t.Fatal("a has no stamp of b's CPU 3")
	}
	as := newSink()
	pa, _ := a.Resolve(b.Name())
	h := &transport.Header{Kind: transport.KindMsg, Len: 8}
	// polls runs a's Poll past its next look at the places, then n more
	// times, and returns the yields of those n (first and empty); again
	// when a's loop was handed back meanwhile (gnet had tasks: Poll then
	// reads no socket and never yields) until it stays borrowed.
	deadline := time.Now().Add(20 * time.Second)
	polls := func(n int, write bool) (first, empty int64) {
		for {
			if time.Now().After(deadline) {
				t.Fatal("a's loop never stayed borrowed through a measurement")
			}
			for !a.parked.Load() && time.Now().Before(deadline) {
				a.Poll(as)
			}
			for range placeEvery {
				a.Poll(as)
			}
			f, e := a.firstYields, a.emptyYields
			held := a.parked.Load()
			for i := range n {
				if write && i%2 == 0 {
					if _, c := a.Send(pa, h, [][]byte{pattern(8, byte(i))}, transport.Op(1000+i)); c != transport.OK {
						t.Fatalf("Send: %d", c)
					}
					a.afterWrite, a.ahead = 0, false // no probe: a Poll after this write yields first unless apart
				}
				held = held && a.parked.Load()
				a.Poll(as)
			}
			if held && a.parked.Load() {
				return a.firstYields - f, a.emptyYields - e
			}
		}
	}
	if f, e := polls(10, true); f == 0 || e == 0 {
		t.Fatalf("peer on this CPU: %d yields first, %d after empty passes; want some of each", f, e)
	}
	pb.place.Store(5) // b now polls on CPU 4 (b sends nothing to restamp it)
	if f, e := polls(10, true); f != 0 || e != 0 {
		t.Fatalf("peer on another CPU: %d yields first, %d after empty passes; want none", f, e)
	}
	pb.place.Store(4 | placeSeen) // back on this CPU (seen or not: it counts)
	if _, e := polls(10, false); e == 0 {
		t.Fatal("peer back on this CPU: no yield after empty passes")
	}
}

func TestPeersApart(t *testing.T) {
	var x Transport
	if x.peersApart() {
		t.Fatal("apart with no same-host peer")
	}
	p1, p2 := &peer{}, &peer{}
	l := []*peer{p1, p2}
	x.local.Store(&l)
	x.place.Store(1) // CPU 0
	p1.place.Store(2)
	p2.place.Store(3 | placeSeen)
	if !x.peersApart() {
		t.Fatal("peers on CPUs 1 and 2, this side on 0: not apart")
	}
	for _, c := range []struct {
		mine, p2 uint32
		why      string
	}{{1, 1, "a peer on this CPU"}, {1, 1 | placeSeen, "a peer on this CPU (seen)"}, {1, 0, "a peer's CPU unknown"}, {0, 3, "this side's CPU unknown"}} {
		x.place.Store(c.mine)
		p2.place.Store(c.p2)
		if x.peersApart() {
			t.Errorf("%s: apart", c.why)
		}
	}
}

// shared's rules, one stamp each (CPU 3): an application's Poll moves off
// a marked loop's stamp whatever the pids and the load; a marked loop
// stays beside a Poll that moves itself (a peer that marks its loop's
// stamps); otherwise the side that does not outrank the other moves, when
// the host is quiet. A stamp counts once and only for the CPU it names.
func TestShared(t *testing.T) {
	for _, c := range []struct {
		name                                      string
		stamp                                     uint32
		poll, marked, outranks, loopStamps, leave bool
		move, anyLoad                             bool
	}{
		{"PollBesideLoop", 4 | placeLoop, true, false, false, true, false, true, true},
		{"PollBesideLoopThatOutranks", 4 | placeLoop, true, false, true, true, false, true, true},
		{"PollBesidePollThatOutranks", 4, true, false, true, true, false, true, false},
		{"PollBesidePollThatStays", 4, true, false, false, true, false, false, false},
		{"MarkedLoopBesidePoll", 4, false, true, true, true, true, false, false},
		{"MarkedLoopBesideOldPeersPoll", 4, false, true, true, false, false, true, false},
		{"MarkedLoopBesideOldPeerThatStays", 4, false, true, false, false, false, false, false},
		{"MarkedLoopBesideLoopThatOutranks", 4 | placeLoop, false, true, true, true, false, true, false},
		{"LoopBesidePollThatOutranks", 4, false, false, true, true, false, true, false},
		{"LoopBesidePollThatStays", 4, false, false, false, true, false, false, false},
		{"LoopBesideLoopThatStays", 4 | placeLoop, false, false, false, true, false, false, false},
		{"Seen", 4 | placeLoop | placeSeen, true, false, true, true, false, false, false},
		{"OtherCPU", 5 | placeLoop, true, false, true, true, true, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &peer{}
			p.place.Store(c.stamp)
			p.outranks.Store(c.outranks)
			p.loopStamps.Store(c.loopStamps)
			tr := &Transport{}
			l := []*peer{p}
			tr.local.Store(&l)
			move, anyLoad := tr.shared(3, c.poll, c.marked)
			if move != c.move || anyLoad != c.anyLoad {
				t.Fatalf("shared: move %v anyLoad %v, want %v %v", move, anyLoad, c.move, c.anyLoad)
			}
			// A stamp of CPU 3 counts once (marked seen), but for one a
			// marked loop leaves fresh for its application's Poll.
			if seen := p.place.Load()&placeSeen != 0; seen == c.leave {
				t.Fatalf("the stamp marked seen: %v, want %v", seen, !c.leave)
			}
			if move, _ := tr.shared(3, c.poll, c.marked); move {
				t.Fatal("a seen stamp counted again")
			}
		})
	}
}

// An initiator polling for the answers of one-sided requests that an idle
// target's loop serves (the target never polls) moves off the CPU the
// loop's stamps name, on a busy host too, and the target does not move;
// with a peer from before loop stamps (either side) no stamp carries
// placeLoop and nobody moves on a busy host, as before.
func TestPlace_InitiatorMovesOffAnIdleTargetsLoop(t *testing.T) {
	for _, c := range []struct {
		name         string
		ini, tgt     Config
		marked, move bool
	}{
		{"New", Config{}, Config{}, true, true},
		{"OldTarget", Config{}, Config{noLoopStamps: true}, false, false},
		{"OldInitiator", Config{noLoopStamps: true}, Config{}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			moves := placeHooks(t, 3, false) // one CPU for both; the host busy
			a := listen(t, c.ini)
			b := listen(t, c.tgt)
			rmaTarget(t, b)
			as := newSink()
			p, _ := a.Resolve(b.Name())
			var buf [8]byte
			// Until the initiator moved (its Poll borrows its loop after
			// a run of empty polls; only then does it look), or 1000.
			// Each one's wait is bounded, not the run: with one P (go
			// test -race, GOMAXPROCS=1, load 10) the target's loop, a
			// goroutine of this process, ran only when the runtime
			// preempted the polling initiator, 20-26 ms per RMA, and a
			// 20 s bound on all 1000 failed 4 of 4 Old runs at 755-907.
			for op := transport.Op(1); op <= 1000 && (!c.move || a.moves.Load() == 0); op++ {
				req := &transport.RMAReq{Kind: transport.RMAWrite, Local: [][]byte{buf[:]}, Remote: []transport.RMAIOV{{Addr: 8, Len: 8, Key: 7}}}
				done, code := a.RMA(p, req, op)
				if code != transport.OK {
					t.Fatalf("RMA %d: code %d", op, code)
				}
				deadline := time.Now().Add(20 * time.Second)
				for !done { // a busy-polling initiator, as perftest's
					if time.Now().After(deadline) {
						t.Fatalf("RMA %d: timed out", op)
					}
					a.Poll(as)
					_, done = as.sendDone[op]
				}
			}
			pb := localPeer(a) // b as a sees it
			if pb == nil || pb.place.Load()&placeCPU != 4 {
				t.Fatal("a has no stamp of b's CPU 3")
			}
			if marked := pb.place.Load()&placeLoop != 0; marked != c.marked {
				t.Fatalf("b's stamp marked as its loop's: %v, want %v", marked, c.marked)
			}
			if b.moves.Load() != 0 {
				t.Fatalf("the idle target moved %d times", b.moves.Load())
			}
			if moved := a.moves.Load() != 0 && moves.Load() == a.moves.Load(); moved != c.move {
				t.Fatalf("initiator moves %d (hook %d), want moving %v", a.moves.Load(), moves.Load(), c.move)
			}
		})
	}
}

// While large messages flow, the side that would move off a shared CPU
// joins the CPU the other's stamps name instead, and the other stays;
// small messages between the same two CPUs move nobody (they are apart
// already). On one CPU large traffic moves nobody apart, on a quiet host
// too.
func TestPlace_LargeTrafficJoinsThePeersCPU(t *testing.T) {
	for _, c := range []struct {
		name       string
		size       int
		cpuA, cpuB int
		join       bool
	}{
		{"LargeApart", 64 << 10, 2, 3, true},
		{"SmallApart", 8, 2, 3, false},
		{"LargeTogether", 64 << 10, 3, 3, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			placeHooks(t, 3, true)
			steadyTraffic(t)
			var first atomic.Pointer[Transport]
			placeCPUs = func(tr *Transport) int {
				if tr == first.Load() {
					return c.cpuA
				}
				return c.cpuB
			}
			var joinTo atomic.Int64
			joinTo.Store(-1)
			placeJoin = func(cpu, to int) bool {
				joinTo.Store(int64(to))
				return true
			}
			a := listen(t, Config{})
			first.Store(a)
			b := listen(t, Config{})
			pingPongSize(t, a, b, 100, c.size)
			pa, pb := localPeer(b), localPeer(a)
			if pa == nil || pb == nil {
				t.Fatal("same-host peers not listed")
			}
			stays, mover, to := a, b, c.cpuA
			if pb.outranks.Load() {
				stays, mover, to = b, a, c.cpuB
			}
			if stays.joins.Load() != 0 || a.moves.Load()+b.moves.Load() != 0 {
				t.Fatalf("the side that stays joined %d times; moves apart %d, %d", stays.joins.Load(), a.moves.Load(), b.moves.Load())
			}
			if joined := mover.joins.Load() != 0; joined != c.join {
				t.Fatalf("the other side joined %d times, want joining %v", mover.joins.Load(), c.join)
			}
			if c.join && joinTo.Load() != int64(to) {
				t.Fatalf("joined CPU %d, want the staying side's %d", joinTo.Load(), to)
			}
		})
	}
}

// steadyTraffic widens bigQuiet and appIdle for the test: under -race on
// a loaded host a ping-pong leaves more than 10-20 ms between two
// messages now and then, and its large traffic then lapsed (a pair on one
// CPU moved apart) or its application counted as idle (its loop's stamps
// said so and the side that stays joined them): go test -race -count=3
// failed TestPlace_LargeTrafficJoinsThePeersCPU so in 2 runs of 2 at
// load 12 (LargeApart: the side that stays joined once; LargeTogether:
// a move apart).
func steadyTraffic(t *testing.T) {
	bq, ai := bigQuiet, appIdle
	bigQuiet, appIdle = time.Hour, time.Hour
	t.Cleanup(func() { bigQuiet, appIdle = bq, ai })
}

// joinable names the CPU of a fresh stamp of another CPU whose peer
// stays (it outranks this side, or it is an idle target's loop and this
// side polls), and marks the stamps it looked at seen.
func TestJoinable(t *testing.T) {
	for _, c := range []struct {
		name           string
		stamp          uint32
		poll, outranks bool
		want           int
	}{
		{"PollThatStays", 5, true, true, 4},
		{"PollThatMoves", 5, true, false, -1},
		{"LoopOfIdleTarget", 5 | placeLoop, true, false, 4},
		{"LoopFromALoop", 5 | placeLoop, false, false, -1},
		{"SameCPU", 4, true, true, -1},
		{"Seen", 5 | placeSeen, true, true, -1},
		{"Unknown", 0, true, true, -1},
		{"PeerWithMany", 5 | placeMany, true, true, -1},
		{"LoopWithMany", 5 | placeLoop | placeMany, true, false, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &peer{}
			p.place.Store(c.stamp)
			p.outranks.Store(c.outranks)
			tr := &Transport{}
			l := []*peer{p}
			tr.local.Store(&l)
			if got := tr.joinable(3, c.poll); got != c.want {
				t.Fatalf("joinable: %d, want %d", got, c.want)
			}
			if got := tr.joinable(3, c.poll); got != -1 {
				t.Fatalf("a stamp counted twice: %d", got)
			}
		})
	}
	t.Run("TwoPeers", func(t *testing.T) { // only a transport with one same-host peer joins
		p, q := &peer{}, &peer{}
		p.place.Store(5)
		p.outranks.Store(true)
		tr := &Transport{}
		l := []*peer{p, q}
		tr.local.Store(&l)
		if got := tr.joinable(3, true); got != -1 {
			t.Fatalf("joinable with two same-host peers: %d, want -1", got)
		}
		if p.place.Load()&placeSeen == 0 {
			t.Fatal("the stamp looked at is not marked seen")
		}
	})
}

// moveTo puts the thread on the CPU asked for and restores the mask; it
// refuses a CPU the thread is not on, and a target outside the mask.
func TestMoveTo(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var m unix.CPUSet
	if err := unix.SchedGetaffinity(0, &m); err != nil {
		t.Fatal(err)
	}
	if m.Count() < 2 {
		t.Skip("one CPU allowed")
	}
	moved := false
	// The kernel may move the thread between two calls: try until it
	// moved or a deadline.
	for deadline := time.Now().Add(10 * time.Second); !moved && time.Now().Before(deadline); {
		c := getCPU()
		to := -1
		for i := range len(m) * 64 {
			if i != c && m.IsSet(i) {
				to = i
				break
			}
		}
		moved = moveTo(c, to)
	}
	if !moved {
		t.Fatal("never moved")
	}
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &after); err != nil || after != m {
		t.Fatalf("mask after the move %v (%v), before %v", after, err, m)
	}
	if moveTo(len(m)*64+1, 0) {
		t.Fatal("moved off a CPU the thread is not on")
	}
	if c := getCPU(); moveTo(c, len(m)*64-1) && !m.IsSet(len(m)*64-1) {
		t.Fatal("moved to a CPU outside the mask")
	}
}

// An initiator writing 64 KiB at a time to an idle target (whose loop
// serves the writes; the target never polls) joins the CPU the loop's
// stamps name; with 8-byte writes it stays where it is, as the two are
// on different CPUs already. The target never moves.
func TestPlace_LargeRMAJoinsTheIdleTargetsLoop(t *testing.T) {
	for _, c := range []struct {
		name string
		size int
		join bool
	}{{"Large", 64 << 10, true}, {"Small", 8, false}} {
		t.Run(c.name, func(t *testing.T) {
			placeHooks(t, 3, false) // the host busy: joining does not ask
			var ini atomic.Pointer[Transport]
			placeCPUs = func(tr *Transport) int {
				if tr == ini.Load() {
					return 2
				}
				return 3
			}
			var joinTo atomic.Int64
			joinTo.Store(-1)
			placeJoin = func(cpu, to int) bool {
				joinTo.Store(int64(to))
				return true
			}
			a := listen(t, Config{})
			ini.Store(a)
			b := listen(t, Config{})
			size, _ := rma.Size(4, 4)
			tab, err := rma.NewTable(make([]byte, size), 4, 4, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := tab.Register(rma.Region{Mem: make([]byte, 64<<10), Key: 7, Access: rma.AccessRemoteWrite}, false, nil); err != nil {
				t.Fatal(err)
			}
			if err := b.ServeRMA(&rma.Target{Table: tab}); err != nil {
				t.Fatal(err)
			}
			as := newSink()
			p, _ := a.Resolve(b.Name())
			buf := make([]byte, c.size)
			deadline := time.Now().Add(20 * time.Second)
			// Large: until the initiator joined (its stamps name the loop
			// once the target has not polled for appIdle). Small: 300.
			for op := transport.Op(1); c.join && a.joins.Load() == 0 || !c.join && op <= 300; op++ {
				req := &transport.RMAReq{Kind: transport.RMAWrite, Local: [][]byte{buf}, Remote: []transport.RMAIOV{{Addr: 0, Len: uint64(c.size), Key: 7}}}
				done, code := a.RMA(p, req, op)
				if code != transport.OK {
					t.Fatalf("RMA %d: code %d", op, code)
				}
				for !done {
					if time.Now().After(deadline) {
						t.Fatalf("RMA %d: timed out (joins %d)", op, a.joins.Load())
					}
					a.Poll(as)
					_, done = as.sendDone[op]
				}
				if code := as.sendDone[op]; code != transport.OK {
					t.Fatalf("RMA %d completed with %d", op, code)
				}
			}
			if b.joins.Load()+b.moves.Load() != 0 || a.moves.Load() != 0 {
				t.Fatalf("target joins %d moves %d; initiator moves %d", b.joins.Load(), b.moves.Load(), a.moves.Load())
			}
			if joined := a.joins.Load() != 0; joined != c.join {
				t.Fatalf("initiator joined %d times, want joining %v", a.joins.Load(), c.join)
			}
			if c.join && joinTo.Load() != 3 {
				t.Fatalf("joined CPU %d, want the loop's 3", joinTo.Load())
			}
		})
	}
}

// A mover with large traffic to two same-host peers that both outrank it,
// on two other CPUs, does not hop between their CPUs: each fresh stamp
// of the peer it did not join named another CPU, and before joins were
// limited to a transport with one same-host peer it moved every moveGap,
// onto one and then the other, for as long as the traffic lasted.
func TestPlace_LargeTrafficMoverDoesNotHopBetweenTwoPeers(t *testing.T) {
	placeHooks(t, 0, true)
	steadyTraffic(t)
	trs := []*Transport{listen(t, Config{}), listen(t, Config{}), listen(t, Config{})}
	// the one with the smallest instance id is outranked by both others
	for i := range trs {
		for j := i + 1; j < len(trs); j++ {
			if trs[j].instance < trs[i].instance {
				trs[i], trs[j] = trs[j], trs[i]
			}
		}
	}
	low := trs[0]
	var lowCPU atomic.Int64
	lowCPU.Store(1)
	placeCPUs = func(tr *Transport) int {
		switch tr {
		case low:
			return int(lowCPU.Load())
		case trs[1]:
			return 2
		}
		return 3
	}
	var joins atomic.Int64
	placeJoin = func(cpu, to int) bool {
		if int64(cpu) == lowCPU.Load() { // the mover (the others stay on 2 and 3)
			lowCPU.Store(int64(to))
			joins.Add(1)
			t.Logf("join %d -> %d at %v", cpu, to, time.Now())
		}
		return true
	}
	sinks := []*fakeSink{newSink(), newSink(), newSink()}
	h := &transport.Header{Kind: transport.KindMsg, Len: 64 << 10}
	msg := pattern(64<<10, 1)
	deadline := time.Now().Add(30 * time.Second)
	wait := func(k, n int) {
		s := sinks[k]
		for len(s.arrivals) < n {
			if time.Now().After(deadline) {
				t.Fatalf("transport %d: %d of %d messages", k, len(s.arrivals), n)
			}
			for i, tr := range trs {
				tr.Poll(sinks[i])
			}
		}
		if ar := s.arrivals[n-1]; ar.eager == nil { // pushed: drop its payload
			trs[k].Discard(ar.peer, ar.cookie)
		}
	}
	got := [3]int{}
	send := func(from, to int) {
		p, c := trs[from].Resolve(trs[to].Name())
		if c != transport.OK {
			t.Fatalf("Resolve: %d", c)
		}
		if _, c := trs[from].Send(p, h, [][]byte{msg}, transport.Op(1)); c != transport.OK {
			t.Fatalf("Send %d -> %d: %d", from, to, c)
		}
		got[to]++
		wait(to, got[to])
	}
	// 300 ms of large ping-pongs with both: 30 moveGaps
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		for _, peer := range []int{1, 2} {
			send(0, peer)
			send(peer, 0)
		}
	}
	t.Logf("rounds %v", got)
	if l := low.local.Load(); l == nil || len(*l) != 2 {
		t.Fatal("the two same-host peers not listed")
	}
	if n := joins.Load(); n > 1 {
		t.Fatalf("%d joins in 300 ms (the mover now on CPU %d)", n, lowCPU.Load())
	}
}

// On a busy host a Poll that shares its CPU with a peer of another
// scheduling group (otherGroup) moves anyway: its yields would never run
// that peer. Exactly the side that does not outrank the other moves.
func TestPlace_PeerOfAnotherGroupMovesOnABusyHost(t *testing.T) {
	moves := placeHooks(t, 3, false)
	placeOtherGroup = func(uint32) bool { return true }
	t.Cleanup(func() { placeOtherGroup = otherGroup })
	a := listen(t, Config{})
	b := listen(t, Config{})
	pingPong(t, a, b, 400)
	pa, pb := localPeer(b), localPeer(a)
	if pa == nil || pb == nil {
		t.Fatal("same-host peers not listed")
	}
	if !pa.otherGroup.Load() || !pb.otherGroup.Load() {
		t.Fatal("the peers' scheduling groups not noted at the handshake")
	}
	onlyTheOutrankedMoves(t, a, b, pb, moves)
}

// shared says a move off a peer that outranks this side holds whatever
// the load only when that peer, and every other such peer on the CPU,
// runs in another scheduling group.
func TestShared_OtherGroup(t *testing.T) {
	for _, c := range []struct {
		name          string
		groups        []bool // each peer's otherGroup; all outrank and poll on CPU 3
		move, anyLoad bool
	}{
		{"SameGroup", []bool{false}, true, false},
		{"OtherGroup", []bool{true}, true, true},
		{"OneOfEach", []bool{true, false}, true, false},
		{"BothOther", []bool{true, true}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var l []*peer
			for _, g := range c.groups {
				p := &peer{}
				p.place.Store(4)
				p.outranks.Store(true)
				p.otherGroup.Store(g)
				l = append(l, p)
			}
			tr := &Transport{}
			tr.local.Store(&l)
			if move, anyLoad := tr.shared(3, true, false); move != c.move || anyLoad != c.anyLoad {
				t.Fatalf("shared: move %v anyLoad %v, want %v %v", move, anyLoad, c.move, c.anyLoad)
			}
		})
	}
}

// otherGroup: this process is in its own group; a child that leads a
// session of its own (as mpiexec.hydra starts ranks) is in another one
// when the kernel groups by session; a pid that does not exist is not.
func TestOtherGroup(t *testing.T) {
	if otherGroup(uint32(os.Getpid())) {
		t.Fatal("this process is in another group than itself")
	}
	if otherGroup(0) || otherGroup(math.MaxUint32) {
		t.Fatal("pid 0 or an impossible pid counted as another group")
	}
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Skipf("sleep: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if got := otherGroup(uint32(cmd.Process.Pid)); got != autogroups() {
		t.Fatalf("a child in a session of its own: otherGroup %v, autogroups %v", got, autogroups())
	}
}

// A join the kernel refuses (the peer's CPU outside this thread's mask:
// taskset, a cpuset) is tried again only after moveGap, as a move is.
// Before, each look that found a fresh stamp tried it (a getcpu and a
// sched_getaffinity call every placeEvery Polls) for as long as the large
// traffic lasted: with 8-byte messages between the 64 KiB ones, 478
// tries in 314 ms.
func TestPlace_RefusedJoinWaitsMoveGap(t *testing.T) {
	placeHooks(t, 3, true)
	steadyTraffic(t)
	var first atomic.Pointer[Transport]
	placeCPUs = func(tr *Transport) int {
		if tr == first.Load() {
			return 2
		}
		return 3
	}
	var tries atomic.Int64
	placeJoin = func(cpu, to int) bool {
		tries.Add(1)
		return false // outside the mask
	}
	a := listen(t, Config{})
	first.Store(a)
	b := listen(t, Config{})
	start := time.Now()
	for time.Since(start) < 300*time.Millisecond {
		pingPongSize(t, a, b, 2, 64<<10)
		pingPongSize(t, a, b, 200, 8) // small frames, stamped, between
	}
	elapsed := time.Since(start)
	t.Logf("%d tries in %v", tries.Load(), elapsed)
	if a.joins.Load()+b.joins.Load() != 0 {
		t.Fatal("a refused join counted")
	}
	// at most one try per moveGap of the run (a slow run tries less)
	if n, most := tries.Load(), int64(elapsed/moveGap)+1; n == 0 || n > most {
		t.Fatalf("%d tries in %v, want 1 to %d (one per moveGap)", n, elapsed, most)
	}
}

// Large traffic never joins a peer of another scheduling group: apart
// they stay apart, and on one CPU the mover moves off it on a busy host
// too (the small-traffic rule), as PeerShares then says.
func TestPlace_LargeTrafficKeepsAnotherGroupApart(t *testing.T) {
	for _, c := range []struct {
		name       string
		cpuA, cpuB int
		move       bool
	}{
		{"Apart", 2, 3, false},
		{"Together", 3, 3, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			placeHooks(t, 3, false)
			steadyTraffic(t)
			placeOtherGroup = func(uint32) bool { return true }
			t.Cleanup(func() { placeOtherGroup = otherGroup })
			var first atomic.Pointer[Transport]
			placeCPUs = func(tr *Transport) int {
				if tr == first.Load() {
					return c.cpuA
				}
				return c.cpuB
			}
			placeJoin = func(cpu, to int) bool { return true }
			a := listen(t, Config{})
			first.Store(a)
			b := listen(t, Config{})
			// Together, ping-pong until the mover moved (or 20 s went by).
			pingPongSize(t, a, b, 100, 64<<10)
			for end := time.Now().Add(20 * time.Second); c.move && a.moves.Load()+b.moves.Load() == 0 && time.Now().Before(end); {
				pingPongSize(t, a, b, 20, 64<<10)
			}
			if localPeer(a) == nil || localPeer(b) == nil {
				t.Fatal("same-host peers not listed")
			}
			if !a.bigTraffic(time.Since(placeEpoch), c.cpuA, false) || !a.groupsApart() {
				t.Fatal("no large traffic, or the peer not of another group")
			}
			if a.joins.Load()+b.joins.Load() != 0 {
				t.Fatalf("joined %d, %d times", a.joins.Load(), b.joins.Load())
			}
			if moved := a.moves.Load()+b.moves.Load() != 0; moved != c.move {
				t.Fatalf("moves apart %d, %d, want moving %v", a.moves.Load(), b.moves.Load(), c.move)
			}
		})
	}
}

// Messages from colocateMin up to colocateMax count as large traffic
// (bigAt); larger ones only while the pair's CPUs are far apart (hugeAt;
// colocateMax: at 1 MiB the pair apart was faster near); smaller ones
// never.
func TestPlace_LargeTrafficSizeWindow(t *testing.T) {
	for _, c := range []struct {
		size      int
		big, huge bool
	}{
		{8, false, false},
		{colocateMin - 1, false, false},
		{colocateMin, true, false},
		{64 << 10, true, false},
		{colocateMax - 1, true, false},
		{colocateMax, false, true},
		{1 << 20, false, true},
	} {
		t.Run(strconv.Itoa(c.size), func(t *testing.T) {
			a := listen(t, Config{})
			b := listen(t, Config{})
			pingPongSize(t, a, b, 3, c.size)
			for _, tr := range []*Transport{a, b} {
				big, huge := tr.bigAt.Load() != 0, tr.hugeAt.Load() != 0
				if big != c.big || huge != c.huge {
					t.Fatalf("%d-byte messages: noted large %v, from colocateMax %v; want %v, %v", c.size, big, huge, c.big, c.huge)
				}
			}
		})
	}
}

// Messages of colocateMax bytes or more join the peer's CPU only when the
// two CPUs are far apart (cpusFar); near, or not known, the pair stays
// apart, as with small messages.
func TestPlace_HugeTrafficJoinsOnlyFar(t *testing.T) {
	for _, c := range []struct {
		name       string
		far, known bool
		join       bool
	}{
		{"Far", true, true, true},
		{"Near", false, true, false},
		{"NotKnown", false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			placeHooks(t, 3, true)
			steadyTraffic(t)
			var asked atomic.Int64
			placeFar = func(a, b int) (bool, bool) {
				if a == 2 && b == 3 {
					asked.Add(1)
				}
				return c.far, c.known
			}
			t.Cleanup(func() { placeFar = nil })
			var first atomic.Pointer[Transport]
			placeCPUs = func(tr *Transport) int {
				if tr == first.Load() {
					return 2
				}
				return 3
			}
			placeJoin = func(cpu, to int) bool { return true }
			a := listen(t, Config{})
			first.Store(a)
			b := listen(t, Config{})
			// Where they join, ping-pong until one did (or 20 s went by):
			// 20 round trips alone did not always bring a look that joins
			// (-race -count=3 ./net, load 8-12: 'joins 0, 0' once).
			pingPongSize(t, a, b, 20, colocateMax)
			for end := time.Now().Add(20 * time.Second); c.join && a.joins.Load()+b.joins.Load() == 0 && time.Now().Before(end); {
				pingPongSize(t, a, b, 20, colocateMax)
			}
			if localPeer(a) == nil || localPeer(b) == nil {
				t.Fatal("same-host peers not listed")
			}
			if asked.Load() == 0 {
				t.Fatal("the distance of CPUs 2 and 3 never asked")
			}
			if joined := a.joins.Load()+b.joins.Load() != 0; joined != c.join {
				t.Fatalf("joins %d, %d; want joining %v", a.joins.Load(), b.joins.Load(), c.join)
			}
			if a.moves.Load()+b.moves.Load() != 0 {
				t.Fatalf("moves apart %d, %d (the two polled on CPUs 2 and 3)", a.moves.Load(), b.moves.Load())
			}
		})
	}
}

// A same-host peer whose connections close leaves the list of peers whose
// places this side reads: a server that served one client and then
// another has one same-host peer again, the one it talks to, and large
// traffic with it joins (the list only grew before: the server kept both
// and never joined again).
func TestPlace_ClosedPeerLeavesTheList(t *testing.T) {
	placeHooks(t, 3, true)
	steadyTraffic(t)
	s := listen(t, Config{})
	placeCPUs = func(tr *Transport) int {
		if tr == s {
			return 2
		}
		return 3
	}
	placeJoin = func(cpu, to int) bool { return true }
	a := listen(t, Config{})
	pingPong(t, s, a, 3)
	if localPeer(s) == nil {
		t.Fatal("the first client is not listed")
	}
	a.Close()
	ss := newSink()
	pollUntil(t, "the closed client to leave the list", func() bool { return s.local.Load() == nil && len(ss.downs) != 0 }, s, ss)
	b := listen(t, Config{})
	pingPongSize(t, s, b, 50, 64<<10)
	pb := localPeer(s)
	if l := s.local.Load(); pb == nil {
		n := 0
		if l != nil {
			n = len(*l)
		}
		t.Fatalf("the server lists %d same-host peers, want the second client alone", n)
	}
	if pb.place.Load()&placeCPU != 3+1 {
		t.Fatalf("the second client's stamp %#x, want CPU 3", pb.place.Load())
	}
	mover := s
	if !pb.outranks.Load() {
		mover = b
	}
	if mover.joins.Load() == 0 || s.joins.Load()+b.joins.Load() != mover.joins.Load() {
		t.Fatalf("joins: server %d, second client %d; want the outranked side's alone", s.joins.Load(), b.joins.Load())
	}
}

// Single-peer clients of a server that outranks them do not join its CPU
// while it has more than one same-host peer (its stamps carry placeMany);
// to a server whose HELLO did not offer placeMany (an older one) the
// stamps do not carry it, and a client then joins as before.
func TestPlace_ClientsDoNotJoinAServerOfMany(t *testing.T) {
	for _, c := range []struct {
		name string
		old  bool // the server's HELLO lacks helloPlaceMany
		join bool
	}{
		{"Many", false, false},
		{"OldServer", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			placeHooks(t, 0, true)
			steadyTraffic(t)
			trs := []*Transport{listen(t, Config{}), listen(t, Config{}), listen(t, Config{noManyStamps: c.old})}
			for trs[2].instance < trs[0].instance || trs[2].instance < trs[1].instance {
				trs[2] = listen(t, Config{noManyStamps: c.old}) // the server outranks both clients
			}
			srv := trs[2]
			placeCPUs = func(tr *Transport) int {
				for i, x := range trs {
					if tr == x {
						return 1 + i
					}
				}
				return 0
			}
			placeJoin = func(cpu, to int) bool { return true }
			pingPongSize(t, trs[0], srv, 3, 8) // both clients listed before the large traffic,
			pingPongSize(t, trs[1], srv, 3, 8)
			pingPongSize(t, trs[0], srv, 3, 8) // and the first one's last stamp since
			for range 5 {
				pingPongSize(t, trs[0], srv, 10, 64<<10)
				pingPongSize(t, trs[1], srv, 10, 64<<10)
			}
			if l := srv.local.Load(); l == nil || len(*l) != 2 {
				t.Fatal("the server does not list its two clients")
			}
			ps := localPeer(trs[0])
			if ps == nil || !ps.outranks.Load() {
				t.Fatal("the server does not outrank the first client")
			}
			if many := ps.place.Load()&placeMany != 0; many == c.old {
				t.Fatalf("the server's stamp %#x: placeMany %v", ps.place.Load(), many)
			}
			joined := trs[0].joins.Load()+trs[1].joins.Load() != 0
			if joined != c.join || srv.joins.Load() != 0 {
				t.Fatalf("joins: clients %d, %d, server %d; want clients joining %v", trs[0].joins.Load(), trs[1].joins.Load(), srv.joins.Load(), c.join)
			}
		})
	}
}
