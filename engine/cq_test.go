package engine

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestCQ_EmptyReadSaysAgain(t *testing.T) {
	cq := NewCQ(4, nil)
	var buf [4]Entry
	if n, c := cq.Read(buf[:]); n != 0 || c != CodeAgain {
		t.Fatalf("Read on empty CQ = %d, %v; want 0, CodeAgain", n, c)
	}
	if _, c := cq.ReadErr(); c != CodeAgain {
		t.Fatalf("ReadErr on empty CQ = %v; want CodeAgain", c)
	}
}

func TestCQ_SizeRoundsUpToPowerOfTwo(t *testing.T) {
	for _, tc := range []struct{ ask, want int }{{0, DefaultCQSize}, {1, 1}, {3, 4}, {1000, 1024}, {1024, 1024}} {
		if got := NewCQ(tc.ask, nil).Size(); got != tc.want {
			t.Errorf("NewCQ(%d).Size() = %d, want %d", tc.ask, got, tc.want)
		}
	}
}

// readers are the two ways to read a CQ: Read (ReadTo) and the
// BeginRead/Next/Pop/EndRead loop the root package inlines.
var readers = []struct {
	name string
	read func(cq *CQ, dst []Entry) (int, Code)
}{
	{"Read", (*CQ).Read},
	{"BeginRead", func(cq *CQ, dst []Entry) (int, Code) {
		cq.BeginRead()
		n := 0
		for n < len(dst) {
			e := cq.Next()
			if e == nil {
				break
			}
			dst[n] = *e
			cq.Pop()
			n++
		}
		return cq.EndRead(n)
	}},
}

func TestCQ_OverfullQueueKeepsEveryEntryInOrder(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) { overfullInOrder(t, r.read) })
	}
}

func overfullInOrder(t *testing.T, read func(*CQ, []Entry) (int, Code)) {
	cq := NewCQ(4, nil)
	for i := range 4 {
		cq.Push(&Entry{Context: i, Len: i})
	}
	if cq.Free() != 0 {
		t.Fatalf("Free = %d on a full queue", cq.Free())
	}
	cq.Push(&Entry{Context: 4})
	cq.Push(&Entry{Context: 5, Err: CodeTrunc})
	cq.Push(&Entry{Context: 6})
	if cq.Pending() != 7 {
		t.Fatalf("Pending = %d, want 7", cq.Pending())
	}
	var got []any
	var buf [3]Entry
	for {
		n, c := read(cq, buf[:])
		for _, e := range buf[:n] {
			got = append(got, e.Context)
		}
		if c == CodeAvail {
			e, _ := cq.ReadErr()
			got = append(got, e.Context)
			continue
		}
		if c == CodeAgain {
			break
		}
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("read %v, want 0..6 in order", got)
		}
	}
	if len(got) != 7 {
		t.Fatalf("read %d entries, want 7", len(got))
	}
	for i, e := range cq.ring {
		if e.Context != nil {
			t.Fatalf("slot %d still holds context %v after everything was read", i, e.Context)
		}
	}
}

func TestCQ_ErrorEntryKeepsItsPlaceInOrder(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) { errorInOrder(t, r.read) })
	}
}

func errorInOrder(t *testing.T, read func(*CQ, []Entry) (int, Code)) {
	cq := NewCQ(8, nil)
	cq.Push(&Entry{Context: "a"})
	cq.Push(&Entry{Context: "bad", Err: CodeTrunc, OLen: 7})
	cq.Push(&Entry{Context: "c"})
	var buf [8]Entry
	n, c := read(cq, buf[:])
	if n != 1 || c != 0 || buf[0].Context != "a" {
		t.Fatalf("first Read = %d, %v, %v; want the entry before the error", n, c, buf[0].Context)
	}
	if n, c = read(cq, buf[:]); n != 0 || c != CodeAvail {
		t.Fatalf("Read at an error entry = %d, %v; want 0, CodeAvail", n, c)
	}
	e, c := cq.ReadErr()
	if c != 0 || e.Err != CodeTrunc || e.OLen != 7 || e.Context != "bad" {
		t.Fatalf("ReadErr = %+v, %v", e, c)
	}
	if _, c = cq.ReadErr(); c != CodeAgain {
		t.Fatalf("second ReadErr = %v; want CodeAgain (head is a success entry)", c)
	}
	if n, c = read(cq, buf[:]); n != 1 || buf[0].Context != "c" {
		t.Fatalf("Read after ReadErr = %d, %v, %v", n, c, buf[0].Context)
	}
}

// prog is a Progressor that pushes one entry per queued item.
type prog struct {
	cq    *CQ
	mu    sync.Mutex
	queue []int
}

func (p *prog) add(v int) {
	p.mu.Lock()
	p.queue = append(p.queue, v)
	p.mu.Unlock()
	p.cq.Notify()
}

func (p *prog) Progress() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	did := false
	for len(p.queue) > 0 {
		p.cq.Push(&Entry{Context: p.queue[0]})
		p.queue = p.queue[1:]
		did = true
	}
	return did
}

func TestCQ_ReadDrivesProgress(t *testing.T) {
	cq := NewCQ(2, nil)
	p := &prog{cq: cq}
	cq.Bind(p, nil)
	p.queue = []int{1, 2, 3, 4, 5}
	var got []int
	var buf [1]Entry
	for len(got) < 5 {
		n, c := cq.Read(buf[:])
		if c == CodeAgain {
			t.Fatalf("progress stalled after %v", got)
		}
		if n == 1 {
			got = append(got, buf[0].Context.(int))
		}
	}
	for i, v := range got {
		if v != i+1 {
			t.Fatalf("got %v, want 1..5 in order", got)
		}
	}
}

func TestCQ_SreadTimesOut(t *testing.T) {
	cq := NewCQ(4, nil)
	var buf [1]Entry
	start := time.Now()
	if n, c := cq.Sread(buf[:], 20*time.Millisecond); n != 0 || c != CodeAgain {
		t.Fatalf("Sread on idle CQ = %d, %v; want 0, CodeAgain", n, c)
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Fatal("Sread returned before its timeout")
	}
}

func TestCQ_SreadWakesOnWork(t *testing.T) {
	cq := NewCQ(4, NewSerial(true))
	p := &prog{cq: cq}
	cq.Bind(p, nil)
	go func() {
		time.Sleep(5 * time.Millisecond)
		p.add(42)
	}()
	var buf [1]Entry
	n, c := cq.Sread(buf[:], 10*time.Second)
	if n != 1 || c != 0 || buf[0].Context != 42 {
		t.Fatalf("Sread = %d, %v, %v; want the entry pushed by the other goroutine", n, c, buf[0].Context)
	}
}

func TestCQ_SignalUnblocksSread(t *testing.T) {
	cq := NewCQ(4, NewSerial(true))
	done := make(chan Code, 1)
	go func() {
		var buf [1]Entry
		_, c := cq.Sread(buf[:], -1)
		done <- c
	}()
	time.Sleep(5 * time.Millisecond)
	cq.Signal()
	select {
	case c := <-done:
		if c != CodeAgain {
			t.Fatalf("signalled Sread returned %v, want CodeAgain", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Signal did not unblock Sread")
	}
}

// waiter counts Wait calls so the test can see Sread used the transport's.
type waiter struct {
	waits atomic.Int32
	s     sleeper
}

func (w *waiter) Wait(d time.Duration) { w.waits.Add(1); w.s.wait(d) }
func (w *waiter) Wake()                { w.s.wake() }

func TestCQ_SreadSleepsOnTransportWaiter(t *testing.T) {
	cq := NewCQ(4, NewSerial(true))
	p := &prog{cq: cq}
	w := &waiter{}
	w.s.init()
	cq.Bind(p, w)
	go func() {
		// Hand over work only once Sread went to sleep on the waiter, so
		// the test does not depend on how long spinning takes.
		for deadline := time.Now().Add(10 * time.Second); w.waits.Load() == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		p.add(7)
	}()
	var buf [1]Entry
	if n, _ := cq.Sread(buf[:], 10*time.Second); n != 1 {
		t.Fatal("Sread returned no entry")
	}
	if w.waits.Load() == 0 {
		t.Fatal("Sread never slept on the bound transport's Waiter")
	}
	cq.Unbind(p, w)
	if cq.Bound() != 0 {
		t.Fatal("Unbind left the endpoint bound")
	}
}

func TestCQ_ThreadSafeManyReaders(t *testing.T) {
	cq := NewCQ(64, NewSerial(true))
	p := &prog{cq: cq}
	cq.Bind(p, nil)
	const total = 5000
	go func() {
		for i := range total {
			p.add(i)
		}
	}()
	var got atomic.Int64
	var seen [total]atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf [8]Entry
			for got.Load() < total {
				n, _ := cq.Sread(buf[:], 100*time.Millisecond)
				for _, e := range buf[:n] {
					if seen[e.Context.(int)].Swap(true) {
						t.Errorf("entry %d read twice", e.Context)
					}
				}
				got.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	if got.Load() != total {
		t.Fatalf("read %d entries, want %d", got.Load(), total)
	}
}

// spinWaiter is a waiter whose transport asks Sread not to spin.
type spinWaiter struct {
	waiter
	budget int
}

func (w *spinWaiter) SpinBudget() int { return w.budget }

// countProg counts progress passes.
type countProg struct{ n atomic.Int32 }

func (p *countProg) Progress() bool { p.n.Add(1); return false }

// A transport's SpinBudget bounds Sread's spinning before it sleeps: with
// budget 0 the first empty pass is followed by a sleep on the waiter.
func TestCQ_SreadSpinsAsTheTransportSays(t *testing.T) {
	for _, budget := range []int{0, 5} {
		cq := NewCQ(4, NewSerial(true))
		p := &countProg{}
		w := &spinWaiter{budget: budget}
		w.s.init()
		cq.Bind(p, w)
		var buf [1]Entry
		if n, c := cq.Sread(buf[:], time.Millisecond); n != 0 || c != CodeAgain {
			t.Fatalf("Sread on an idle CQ = %d, %v", n, c)
		}
		if w.waits.Load() == 0 {
			t.Fatalf("budget %d: Sread never slept", budget)
		}
		// Passes before the first sleep: the budget plus the first one;
		// the sleeps (1 ms in all) add a pass each.
		if got := int(p.n.Load()) - int(w.waits.Load()); got > budget+1 {
			t.Errorf("budget %d: %d passes besides the sleeps, want at most %d", budget, got, budget+1)
		}
		cq.Unbind(p, w)
	}
}

func TestCQ_YieldSreadNeverSleeps(t *testing.T) {
	cq := NewCQ(4, NewSerial(true))
	cq.SetYield(true)
	p := &prog{cq: cq}
	w := &waiter{}
	w.s.init()
	cq.Bind(p, w)
	var buf [1]Entry
	if n, c := cq.Sread(buf[:], time.Millisecond); n != 0 || c != CodeAgain {
		t.Fatalf("Sread on an idle CQ = %d, %v; want 0, CodeAgain at the timeout", n, c)
	}
	go func() {
		time.Sleep(time.Millisecond)
		p.add(9)
	}()
	if n, c := cq.Sread(buf[:], 10*time.Second); n != 1 || c != 0 || buf[0].Context != 9 {
		t.Fatalf("Sread = %d, %v, %v; want the entry pushed by the other goroutine", n, c, buf[0].Context)
	}
	go func() {
		time.Sleep(time.Millisecond)
		cq.Signal()
	}()
	if _, c := cq.Sread(buf[:], -1); c != CodeAgain {
		t.Fatalf("signalled Sread returned %v, want CodeAgain", c)
	}
	if w.waits.Load() != 0 {
		t.Fatalf("Sread slept on the transport's Waiter %d times; WaitYield never sleeps", w.waits.Load())
	}
	cq.Unbind(p, w)
}

// A busy-polling read loop that keeps finding nothing yields the CPU once
// every idleCheck empty reads after idleYieldAfter (here 0: no clock in
// the test); a completion read ends the run, and reads that find
// something never yield.
func TestCQ_IdleReadsYield(t *testing.T) {
	yields := 0
	defer func(d time.Duration, f func() time.Duration) { idleYieldAfter, idleYield = d, f }(idleYieldAfter, idleYield)
	idleYieldAfter, idleYield = 0, func() time.Duration { yields++; return 0 }
	cq := NewCQ(4, nil)
	read := func() int {
		cq.BeginRead()
		n := 0
		if cq.Next() != nil {
			cq.Pop()
			n = 1
		}
		n, _ = cq.EndRead(n)
		return n
	}
	for range idleCheck {
		read()
	}
	if yields != 0 {
		t.Fatalf("%d yields after the first %d empty reads (the run's start is taken there)", yields, idleCheck)
	}
	for range idleCheck {
		read()
	}
	if yields != 1 {
		t.Fatalf("%d yields after %d empty reads, want 1", yields, 2*idleCheck)
	}
	// A completion ends the run: the next idleCheck empty reads only start
	// a new one.
	cq.Push(&Entry{Context: 1})
	if read() != 1 {
		t.Fatal("the completion was not read")
	}
	for range idleCheck {
		read()
	}
	if yields != 1 {
		t.Fatalf("%d yields: a completion did not end the idle run", yields)
	}
	// Reads that find completions never yield.
	for i := range 4 * idleCheck {
		cq.Push(&Entry{Context: i})
		if read() != 1 {
			t.Fatal("a completion was not read")
		}
	}
	if yields != 1 {
		t.Fatalf("%d yields while completions came", yields)
	}
}

// A yield that took long ran another thread on the reader's CPU: the next
// yield point naps once (at most once per napGap) so that the kernel may
// place the reader on an idle CPU when it wakes, and while yields take
// the peer's turn (crowdedYield..sharedYieldMax) the reader yields after
// sharedYieldAfter, checked every sharedCheck reads, instead of
// idleYieldAfter every idleCheck. A yield that returns at once, or one
// that took a whole time slice, ends the early yields.
func TestCQ_SharedCPUYieldsEarlyAndNaps(t *testing.T) {
	defer func(a, s, g time.Duration, y func() time.Duration, n func()) {
		idleYieldAfter, sharedYieldAfter, napGap, idleYield, idleNap = a, s, g, y, n
	}(idleYieldAfter, sharedYieldAfter, napGap, idleYield, idleNap)
	yields, naps := 0, 0
	took := time.Duration(0)
	idleYield = func() time.Duration { yields++; return took }
	idleNap = func() { naps++ }
	idleYieldAfter, sharedYieldAfter, napGap = 0, 0, time.Hour
	cq := NewCQ(4, nil)
	empty := func(n int) {
		for range n {
			cq.BeginRead()
			if _, c := cq.EndRead(0); c != CodeAgain {
				t.Fatalf("empty read: %v", c)
			}
		}
	}
	// The first yield (after 2*idleCheck reads) takes the peer's turn.
	took = 100 * time.Microsecond
	empty(2 * idleCheck)
	if yields != 1 || naps != 0 {
		t.Fatalf("after %d empty reads: %d yields, %d naps; want 1, 0", 2*idleCheck, yields, naps)
	}
	// From now on only the shared CPU makes anyone yield.
	idleYieldAfter = time.Hour
	empty(sharedCheck)
	if yields != 1 || naps != 1 {
		t.Fatalf("next %d reads after a long yield: %d yields, %d naps; want 1, 1 (a nap)", sharedCheck, yields, naps)
	}
	empty(4 * sharedCheck)
	if yields != 5 || naps != 1 {
		t.Fatalf("next %d reads: %d yields, %d naps; want 5, 1 (a yield every %d reads, no second nap within napGap)", 4*sharedCheck, yields, naps, sharedCheck)
	}
	// A yield that returns at once: the CPU is ours again.
	took = 0
	empty(sharedCheck)
	empty(4 * idleCheck)
	if yields != 6 || naps != 1 {
		t.Fatalf("after a short yield: %d yields, %d naps; want 6, 1", yields, naps)
	}
	// A yield that took a whole slice of another program's: a nap (once
	// napGap has passed), but no early yields.
	took = 10 * sharedYieldMax
	idleYieldAfter = 0
	empty(idleCheck) // the yield that took the slice
	if yields != 7 || naps != 1 {
		t.Fatalf("%d yields, %d naps; want 7, 1", yields, naps)
	}
	cq.lastNap = 0 // napGap has passed
	empty(4 * sharedCheck)
	if yields != 7 || naps != 1 {
		t.Fatalf("%d reads after a slice-long yield: %d yields, %d naps; want 7, 1 (no early yield)", 4*sharedCheck, yields, naps)
	}
	empty(idleCheck - 4*sharedCheck)
	if yields != 7 || naps != 2 {
		t.Fatalf("at the next yield point: %d yields, %d naps; want 7, 2 (a nap)", yields, naps)
	}
	empty(idleCheck)
	if yields != 8 || naps != 2 {
		t.Fatalf("at the one after: %d yields, %d naps; want 8, 2 (no second nap within napGap)", yields, naps)
	}
	// Back in shared mode (a yield that took the peer's turn), a wait that
	// yielded keeps it, and one that ended without a yield ends it.
	took = 100 * time.Microsecond
	cq.lastNap = 0
	idleYieldAfter = 0
	got := func() {
		cq.Push(&Entry{Context: 1})
		cq.BeginRead()
		if cq.Next() == nil {
			t.Fatal("no completion")
		}
		cq.Pop()
		cq.EndRead(1)
	}
	got()
	// From the run's start: the clock at idleCheck, a nap at 2*idleCheck
	// (napGap passed), a yield that takes the peer's turn at 3*idleCheck.
	empty(3 * idleCheck)
	if yields != 9 || naps != 3 {
		t.Fatalf("re-entering: %d yields, %d naps; want 9, 3", yields, naps)
	}
	idleYieldAfter = time.Hour
	got() // ends the run that yielded
	empty(2 * sharedCheck)
	if yields != 10 {
		t.Fatalf("%d yields, want 10 (a completion after a yield keeps the early yields)", yields)
	}
	got()
	empty(sharedCheck - 1)
	got() // a wait that needed no yield
	empty(4 * sharedCheck)
	if yields != 10 || naps != 3 {
		t.Fatalf("after a wait without a yield: %d yields, %d naps; want 10, 3 (no early yields)", yields, naps)
	}
}

// sharer is a bound endpoint whose transport says whether a peer polls on
// a CPU.
type sharer struct{ on int }

func (s *sharer) Progress() bool          { return false }
func (s *sharer) PeerShares(cpu int) bool { return cpu == s.on }

// Where a yield said the CPU is shared and a bound endpoint says the peer
// polls on this very CPU, the reader moves off it instead of napping;
// elsewhere it naps as before.
func TestCQ_MovesOffThePeersCPU(t *testing.T) {
	defer func(a, s, g time.Duration, y func() time.Duration, n func(), c func() int, m func(int) bool) {
		idleYieldAfter, sharedYieldAfter, napGap, idleYield, idleNap, idleCPU, idleMove = a, s, g, y, n, c, m
	}(idleYieldAfter, sharedYieldAfter, napGap, idleYield, idleNap, idleCPU, idleMove)
	naps, moves, from := 0, 0, -1
	idleYield = func() time.Duration { return 100 * time.Microsecond }
	idleNap = func() { naps++ }
	idleCPU = func() int { return 3 }
	idleMove = func(c int) bool { moves++; from = c; return true }
	idleYieldAfter, sharedYieldAfter, napGap = 0, 0, 0
	for _, c := range []struct {
		peerOn, naps, moves int
	}{{3, 0, 1}, {5, 1, 0}} {
		naps, moves, from = 0, 0, -1
		cq := NewCQ(4, nil)
		cq.Bind(&sharer{on: c.peerOn}, nil)
		for range 2*idleCheck + sharedCheck { // a long yield, then the next check
			cq.BeginRead()
			if _, code := cq.EndRead(0); code != CodeAgain {
				t.Fatalf("empty read: %v", code)
			}
		}
		if naps != c.naps || moves != c.moves || (moves > 0 && from != 3) {
			t.Fatalf("peer on CPU %d, reader on 3: %d naps, %d moves (from %d); want %d, %d (from 3)",
				c.peerOn, naps, moves, from, c.naps, c.moves)
		}
	}
}

// A read that finds completions queued skips its progress pass when the
// read before it drove one (a ping-pong's receive, taken in by its
// send-completion wait, is returned without an empty pass), but never two
// reads in a row: a queue kept non-empty (a send loop whose sends queue
// their completions when posted, reaping one per send) still progresses
// every other read.
func TestCQ_ReadSkipsProgressAtMostOnceInARow(t *testing.T) {
	for _, how := range []string{"Read", "BeginRead"} {
		t.Run(how, func(t *testing.T) {
			cq := NewCQ(4, nil)
			p := &countProg{}
			cq.Bind(p, nil)
			read := func() int {
				if how == "Read" {
					var dst [1]Entry
					n, _ := cq.Read(dst[:])
					return n
				}
				cq.BeginRead()
				n := 0
				if cq.Next() != nil {
					cq.Pop()
					n = 1
				}
				cq.EndRead(n)
				return n
			}
			step := func(i, want int, wantPasses int32) {
				t.Helper()
				before := p.n.Load()
				if n := read(); n != want {
					t.Fatalf("read %d: %d completions, want %d", i, n, want)
				}
				if passes := p.n.Load() - before; passes != wantPasses {
					t.Fatalf("read %d: %d progress passes, want %d", i, passes, wantPasses)
				}
			}
			step(0, 0, 1) // empty: progress
			cq.Push(&Entry{Context: 1})
			cq.Push(&Entry{Context: 2})
			step(1, 1, 0) // queued after a progressing read: skipped
			step(2, 1, 1) // queued, but the last read skipped
			step(3, 0, 1) // empty
			// A completion queued before every read (sends posted in
			// between): progress every other read.
			for i := 4; i < 12; i++ {
				cq.Push(&Entry{Context: i})
				step(i, 1, int32(i%2))
			}
		})
	}
}

// The ping-pongs 9983775 measured still take one progress pass per round
// trip, not two: a pushed message's send-completion wait takes in the
// answer, and the receive wait's read returns it without a pass; an eager
// send queues its completion when posted, and the read that returns it
// follows the previous receive wait's progressing read.
func TestCQ_PingPongProgressesOncePerRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name   string
		atPost bool // the send's completion is queued when it is posted
	}{{"pushed", false}, {"eager", true}} {
		t.Run(c.name, func(t *testing.T) {
			cq := NewCQ(16, nil)
			p := &prog{cq: cq}
			n := &countProg{}
			cq.Bind(p, nil)
			cq.Bind(n, nil)
			wait := func(want int) {
				t.Helper()
				for i := 0; i < 10; i++ {
					var dst [1]Entry
					if k, _ := cq.Read(dst[:]); k == 1 {
						if dst[0].Context != want {
							t.Fatalf("completion %v, want %d", dst[0].Context, want)
						}
						return
					}
				}
				t.Fatalf("completion %d never came", want)
			}
			const rounds = 10
			for r := 0; r < rounds; r++ {
				if c.atPost {
					cq.Push(&Entry{Context: 1})
				} else {
					p.queue = append(p.queue, 1)
				}
				p.queue = append(p.queue, 2) // the answer, there for the next pass
				wait(1)
				wait(2)
			}
			if passes := n.n.Load(); passes != rounds {
				t.Fatalf("%d progress passes in %d round trips, want one each", passes, rounds)
			}
		})
	}
}

// peerShares asks the endpoints bound when it is called, each once, and
// no longer one that was unbound.
func TestCQ_PeerSharesFollowsBindings(t *testing.T) {
	cq := NewCQ(4, nil)
	a, b, plain := &sharer{on: 1}, &sharer{on: 2}, &countProg{}
	cq.Bind(plain, nil)
	for _, c := range []struct {
		do   func()
		on1  bool
		on2  bool
		what string
	}{
		{func() {}, false, false, "only an endpoint without PeerShares"},
		{func() { cq.Bind(a, nil) }, true, false, "a bound"},
		{func() { cq.Bind(b, nil) }, true, true, "a and b bound"},
		{func() { cq.Unbind(a, nil) }, false, true, "a unbound"},
		{func() { cq.Unbind(plain, nil) }, false, true, "the plain one unbound"},
		{func() { cq.Unbind(b, nil) }, false, false, "b unbound"},
	} {
		c.do()
		if got1, got2 := cq.peerShares(1), cq.peerShares(2); got1 != c.on1 || got2 != c.on2 {
			t.Errorf("%s: peerShares(1), (2) = %v, %v; want %v, %v", c.what, got1, got2, c.on1, c.on2)
		}
	}
}
