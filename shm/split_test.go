package shm

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/gofi-dev/fi/transport"
)

// sendSplit sends msg from a to b and waits for the message and the send's
// completion; it fails on any error.
func sendSplit(t *testing.T, p *tpair, msg []byte) []byte {
	t.Helper()
	want := bytes.Clone(msg)
	n, sent := p.sb.n, p.sa.sent
	p.send(transport.KindMsg, msg)
	p.until("the message and the send's completion", func() bool { return p.sb.n == n+1 && p.sa.sent == sent+1 })
	if len(p.sa.errs)+len(p.sb.errs) > 0 {
		t.Fatal(p.sa.errs, p.sb.errs)
	}
	got := p.sb.got[len(p.sb.got)-1]
	if !bytes.Equal(got, want) {
		t.Fatalf("payload of %d bytes changed (got %d bytes)", len(want), len(got))
	}
	return got
}

// From SplitMin the receiver reads the payload's head and the sender
// writes its tail: both parts arrive, the receive completes only with the
// sender's part in, and the send completes. Smaller payloads are one read.
func TestSplitCopy_SenderWritesTheTail(t *testing.T) {
	testDir(t)
	p := newTPair(t, TransportConfig{CMAMin: 1})
	if !p.a.CMA() || p.b.splitMin == 0 {
		t.Skip("single copy or split copies off here")
	}
	// a rendezvous payload (over MaxEager) under SplitMin
	if under := p.b.splitMin * 3 / 4; under > p.a.MaxEager() {
		sendSplit(t, p, seqMsg(1, under))
	}
	if p.b.splits != 0 || p.a.splitWrites != 0 {
		t.Fatalf("a payload under SplitMin: %d splits, %d writes", p.b.splits, p.a.splitWrites)
	}
	for i, size := range []int{p.b.splitMin, 1<<20 + 12345} {
		// One goroutine polls both sides here, one after the other: the
		// receiver's wait for the sender's part can look late (the
		// back-off's test is below).
		p.b.peers[p.ba].splitSkip = 0
		sendSplit(t, p, seqMsg(2+i, size))
		if p.b.splits != i+1 || p.a.splitWrites != i+1 || p.b.splitFallbacks != 0 {
			t.Fatalf("after %d split sizes: %d splits, %d writes by the sender, %d parts read by the receiver",
				i+1, p.b.splits, p.a.splitWrites, p.b.splitFallbacks)
		}
	}
}

// A sender that does not write its part (the kernel refused, or the send
// is no longer held) answers so, and the receiver reads the part itself.
func TestSplitCopy_UnwrittenPartIsReadByTheReceiver(t *testing.T) {
	testDir(t)
	p := newTPair(t, TransportConfig{CMAMin: 1})
	if !p.a.CMA() || p.b.splitMin == 0 {
		t.Skip("single copy or split copies off here")
	}
	splitRefuse = true
	defer func() { splitRefuse = false }()
	sendSplit(t, p, seqMsg(5, 1<<20+777))
	if p.b.splits != 1 || p.a.splitWrites != 0 || p.b.splitFallbacks != 1 {
		t.Fatalf("%d splits, %d writes by the sender, %d parts read by the receiver",
			p.b.splits, p.a.splitWrites, p.b.splitFallbacks)
	}
	// A sender that did not write is not asked again for a while.
	if k := p.b.peers[p.ba].splitSkip; k != splitBackoff {
		t.Fatalf("after an unwritten part: %d fetches to skip, want %d", k, splitBackoff)
	}
}

// The sender writes only a non-empty part of its own payload.
func TestSplitCopy_SenderChecksTheRange(t *testing.T) {
	h := &held{n: 1000}
	for _, c := range []struct {
		off, n uint64
		ok     bool
	}{
		{0, 1000, true}, {999, 1, true}, {500, 500, true},
		{0, 0, false}, {1000, 1, false}, {999, 2, false}, {1001, 0, false},
		{1 << 63, 1 << 63, false}, {1, ^uint64(0), false}, {^uint64(0), 2, false},
	} {
		if got := h.hasRange(c.off, c.n); got != c.ok {
			t.Errorf("hasRange(%d, %d) of 1000 bytes = %v, want %v", c.off, c.n, got, c.ok)
		}
	}
}

func TestParseSplitMin(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{{"", splitMinDefault}, {"off", 0}, {"1m", 1 << 20}} {
		if got := parseHugeSize(c.in, splitMinDefault); got != c.want {
			t.Errorf("parseHugeSize(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func FuzzDecodeCTW(f *testing.F) {
	f.Add(make([]byte, ctwLen))
	f.Add(make([]byte, ctwLen-1))
	f.Fuzz(func(t *testing.T, b []byte) {
		cookie, off, n, addr, ok := decodeCTW(b)
		if ok != (len(b) == ctwLen) {
			t.Fatalf("%d bytes decoded: %v", len(b), ok)
		}
		if ok && (cookie != binary.LittleEndian.Uint64(b) || off != binary.LittleEndian.Uint64(b[8:]) ||
			n != binary.LittleEndian.Uint64(b[16:]) || addr != binary.LittleEndian.Uint64(b[24:])) {
			t.Fatal("fields misread")
		}
	})
}

// A split whose sender answered later after the receiver's own part than
// that part took (the sender busy elsewhere) saved nothing: the next
// large fetches from that peer are read whole by the receiver, one after
// a single late split, four times more for each late split in a row up
// to splitBackoff, then splitting resumes; a paid split starts the count
// again. A peer's first splitWarmup splits are judged by none.
func TestSplitCopy_LateSenderStopsSplitsForAWhile(t *testing.T) {
	testDir(t)
	p := newTPair(t, TransportConfig{CMAMin: 1})
	if !p.a.CMA() || p.b.splitMin == 0 {
		t.Skip("single copy or split copies off here")
	}
	p.send(transport.KindMsg, seqMsg(1, 8)) // connect a -> b
	p.until("the first message", func() bool { return p.sb.n == 1 })
	peer := p.b.peers[p.ba]
	// split sends one split payload whose split the receiver judges late
	// (its own part ended an hour before the sender's) or paid (its own
	// part took an hour): serial polls in one goroutine time nothing.
	split := func(seq int, late bool) {
		t.Helper()
		msg := seqMsg(seq, 1<<20)
		want := bytes.Clone(msg)
		splits, n, sent := p.b.splits, p.sb.n, p.sa.sent
		p.send(transport.KindMsg, msg)
		for deadline := time.Now().Add(20 * time.Second); p.b.splits == splits; p.b.Poll(p.sb) {
			if time.Now().After(deadline) {
				t.Fatal("no split started")
			}
		}
		if len(peer.fetch) != 1 {
			t.Fatalf("%d fetches pending", len(peer.fetch))
		}
		for _, f := range peer.fetch {
			if late {
				f.start = f.start.Add(-time.Hour)
			} else {
				f.own += time.Hour
			}
		}
		p.until("the split", func() bool { return p.sb.n == n+1 && p.sa.sent == sent+1 })
		if !bytes.Equal(p.sb.got[n], want) || len(p.sa.errs)+len(p.sb.errs) > 0 {
			t.Fatal("split: payload changed or errors", p.sa.errs, p.sb.errs)
		}
	}
	lateSplit := func(seq int) { t.Helper(); split(seq, true) }
	seq := 2
	// A peer's first splitWarmup splits are no verdict, late or not.
	for range splitWarmup {
		lateSplit(seq)
		seq++
		if peer.splitSkip != 0 {
			t.Fatalf("a late split among the first %d: %d fetches to skip", splitWarmup, peer.splitSkip)
		}
	}
	for i, want := range []int{1, 4, 16, 64, 64} {
		lateSplit(seq)
		seq++
		if peer.splitSkip != want {
			t.Fatalf("after %d late splits in a row: %d fetches to skip, want %d", i+1, peer.splitSkip, want)
		}
		splits, writes := p.b.splits, p.a.splitWrites
		for range want {
			sendSplit(t, p, seqMsg(seq, 256<<10))
			seq++
		}
		if peer.splitSkip != 0 {
			t.Fatalf("after %d fetches: %d still to skip", want, peer.splitSkip)
		}
		if p.b.splits != splits || p.a.splitWrites != writes {
			t.Fatalf("during the back-off: %d splits, %d writes", p.b.splits-splits, p.a.splitWrites-writes)
		}
	}
	// A paid split ends the run of late ones: the next late split leaves
	// one fetch unsplit again.
	split(seq, false)
	if peer.splitSkip != 0 || peer.splitLate != 0 {
		t.Fatalf("after a paid split: %d fetches to skip, %d late in a row", peer.splitSkip, peer.splitLate)
	}
	lateSplit(seq + 1)
	if peer.splitSkip != 1 {
		t.Fatalf("a late split after a paid one: %d fetches to skip, want 1", peer.splitSkip)
	}
}

func TestSplitPaid(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		own, waited time.Duration
		paid        bool
	}{{ms, 0, true}, {ms, ms, true}, {ms, ms + 1, false}, {0, ms, false}} {
		if got := splitPaid(c.own, c.waited); got != c.paid {
			t.Errorf("splitPaid(%v, %v) = %v, want %v", c.own, c.waited, got, c.paid)
		}
	}
}

// splitRun drives a splitCost as the transport does; cost(i, split) is
// copy i's time by the method picked. It returns how many copies were
// split and how many explored.
func splitRun(s *splitCost, n int, cost func(i int, split bool) time.Duration) (splits, explored int) {
	for i := range n {
		split, ex := s.pick()
		if split {
			splits++
		}
		if ex {
			explored++
		}
		s.note(split, ex, cost(i, split))
	}
	return splits, explored
}

// TestSplitCostPicks: from SplitMin the split goes first, then bursts of
// whole copies; whichever has been faster is used, both ways, and a
// change of placement mid-run moves the choice.
func TestSplitCostPicks(t *testing.T) {
	us := time.Microsecond
	var s splitCost
	for i := range firstBurst - 1 {
		if split, ex := s.pick(); !split || ex {
			t.Fatalf("copy %d: split %v explore %v, want a split", i+1, split, ex)
		}
		s.note(true, false, 90*us)
		if i == 0 && s.c.cma.k != 0 {
			t.Fatal("the first copy timed: it is no measure")
		}
	}
	// Near: the whole copy is faster (80 against 90 us).
	n := 100 * exploreEvery
	splits, ex := splitRun(&s, n, costs(90*us, 80*us))
	if splits > n/20 || ex == 0 || ex > n/20 {
		t.Errorf("near: %d of %d copies split, %d explored", splits, n, ex)
	}
	if s.splitFaster() {
		t.Error("near: split still looks faster")
	}
	// The placement changes (far): the split is twice as fast.
	splits, ex = splitRun(&s, n, costs(97*us, 191*us))
	if splits < n-n/10 || ex == 0 || ex > n/20 {
		t.Errorf("far: %d of %d copies split, %d explored", splits, n, ex)
	}
	if !s.splitFaster() {
		t.Error("far: split does not look faster")
	}
	// And back near.
	splits, _ = splitRun(&s, n, costs(90*us, 80*us))
	if splits > n/10 {
		t.Errorf("near again: %d of %d copies split", splits, n)
	}
	// Split faster from the start: it stays in use.
	var f splitCost
	splits, ex = splitRun(&f, n, costs(97*us, 191*us))
	if splits < n-n/20 || ex == 0 {
		t.Errorf("far from the start: %d of %d copies split, %d explored", splits, n, ex)
	}
}

// The transport times split copies (to the WDone) and whole ones and
// follows the class's costs: with the whole copy faster the next large
// payload is read whole by the receiver, with the split faster it is
// split.
func TestSplitCopy_ChoiceFollowsCosts(t *testing.T) {
	testDir(t)
	p := newTPair(t, TransportConfig{CMAMin: 1})
	if !p.a.CMA() || p.b.splitMin == 0 {
		t.Skip("single copy or split copies off here")
	}
	peer := func() *peer { return p.b.peers[p.ba] }
	p.send(transport.KindMsg, seqMsg(1, 8)) // connect a -> b
	p.until("the first message", func() bool { return p.sb.n == 1 })
	sc := &p.b.splitCost[fetchClass(1<<20)]
	for i := range 2 {
		peer().splitSkip = 0 // serial polls in one goroutine may trip the back-off
		sendSplit(t, p, seqMsg(2+i, 1<<20))
	}
	if p.b.splits != 2 || sc.c.cma.k != 1 || sc.c.seg.k != 0 {
		t.Fatalf("two copies: %d splits, %d split and %d whole samples, want 2, 1, 0", p.b.splits, sc.c.cma.k, sc.c.seg.k)
	}
	// The whole copy looks faster: the next payload is read whole, and timed.
	sc.c.seg.add(1)
	peer().splitSkip = 0
	sendSplit(t, p, seqMsg(4, 1<<20))
	if p.b.splits != 2 || sc.c.seg.k != 2 {
		t.Fatalf("whole faster: %d splits, %d whole samples, want 2, 2", p.b.splits, sc.c.seg.k)
	}
	// The split looks faster: split again.
	sc.c.seg.reset()
	sc.c.seg.add(int64(time.Hour))
	peer().splitSkip = 0
	sendSplit(t, p, seqMsg(5, 1<<20))
	if p.b.splits != 3 || sc.c.cma.k != 2 {
		t.Fatalf("split faster: %d splits, %d split samples, want 3, 2", p.b.splits, sc.c.cma.k)
	}
	// A split's time runs to the sender's WDone: one that waited an hour
	// for it costs more than a whole copy of a second.
	sc.c.cma.reset()
	sc.c.seg.reset()
	sc.c.seg.add(int64(time.Second))
	peer().splitSkip = 0
	msg := seqMsg(6, 1<<20)
	want := bytes.Clone(msg)
	p.send(transport.KindMsg, msg)
	for deadline := time.Now().Add(20 * time.Second); p.b.splits == 3; p.b.Poll(p.sb) {
		if time.Now().After(deadline) {
			t.Fatal("no split started")
		}
	}
	for _, f := range peer().fetch {
		f.start = f.start.Add(-time.Hour)
	}
	p.until("the late split", func() bool { return p.sb.n == 6 && p.sa.sent == 5 })
	if !bytes.Equal(p.sb.got[5], want) || len(p.sa.errs)+len(p.sb.errs) > 0 {
		t.Fatal("late split: payload changed or errors", p.sa.errs, p.sb.errs)
	}
	if sc.c.cma.least() < int64(time.Hour) {
		t.Fatalf("late split timed %v, want the wait in it", time.Duration(sc.c.cma.least()))
	}
	peer().splitSkip = 0
	sendSplit(t, p, seqMsg(7, 1<<20))
	if p.b.splits != 4 {
		t.Fatalf("after a split slower than the whole copy: %d splits, want 4", p.b.splits)
	}
}

// A split copy's receive buffer is backed by huge pages, as a large send
// buffer is: the sender's write pins its pages.
func TestSplitCopy_AdvisesTheReceiveBuffer(t *testing.T) {
	testDir(t)
	p := newTPair(t, TransportConfig{CMAMin: 1})
	if !p.a.CMA() || p.b.splitMin == 0 || p.b.hugeMin == 0 || runtime.GOMAXPROCS(0) == 1 {
		t.Skip("single copy, split copies or huge-page hints off here, or one P")
	}
	p.send(transport.KindMsg, seqMsg(1, 8)) // connect a -> b
	p.until("the first message", func() bool { return p.sb.n == 1 })
	n := p.b.huge.advised
	got := sendSplit(t, p, seqMsg(2, max(p.b.splitMin, p.b.hugeMin, 1<<20)))
	if p.b.splits != 1 {
		t.Fatalf("%d splits, want 1", p.b.splits)
	}
	if blk := uintptr(unsafe.Pointer(&got[0])) &^ (hugeSize - 1); !p.b.huge.has(blk) || p.b.huge.advised == n {
		t.Fatalf("the receive buffer's block was not advised (%d blocks before, %d after)", n, p.b.huge.advised)
	}
}
