package shm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestCreateRegion_PeerAttachesAndSeesTheSameLayout(t *testing.T) {
	testDir(t)
	r, err := CreateRegion(Config{ConnSlots: 4, MaxPeers: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !strings.HasPrefix(r.Addr(), AddrScheme) || r.Addr()[len(AddrScheme):] != r.Name() {
		t.Errorf("Addr() = %q for name %q", r.Addr(), r.Name())
	}
	p, err := OpenRegion(r.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Owner() || !r.Owner() {
		t.Error("ownership flags wrong")
	}
	if p.Layout() != r.Layout() || p.Layout().OwnerPID != os.Getpid() || p.Layout().PeerSlots != 100 {
		t.Errorf("peer layout %+v, owner %+v", p.Layout(), r.Layout())
	}
	if ok, err := p.Alive(); !ok || err != nil {
		t.Errorf("Alive = %v, %v", ok, err)
	}
	r.Bitmap()[0] = 0x81
	if p.Bitmap()[0] != 0x81 || len(p.Bitmap()) != r.Layout().BitmapLen {
		t.Error("bitmap not shared")
	}
}

// The memory budget of the issue: at defaults a region plus a handful of
// rings stays under libfabric's ~12.8 MiB when rings are <= 2 MiB.
func TestCreateRegion_DefaultSizeLeavesRoomForRings(t *testing.T) {
	testDir(t)
	r, err := CreateRegion(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.Segment().Size(); got+6*(2<<20) > 12800<<10 {
		t.Errorf("region of %d bytes plus six 2 MiB rings exceeds 12.8 MiB", got)
	}
}

func TestOpenRegion_RefusesUnpublishedForeignAndMisnamedRegions(t *testing.T) {
	testDir(t)
	l, _ := ComputeLayout(DefaultConnSlots, DefaultMaxPeers)
	mk := func(fill func(name string, b []byte)) string {
		n := NewName()
		s, err := createSegment(n, l.TotalSize, func(b []byte) { fill(n, b) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return n
	}
	header := func(name string, b []byte) {
		ll := l
		ll.Name, ll.OwnerPID = name, os.Getpid()
		ll.encode(b)
	}
	for _, tc := range []struct {
		what string
		name string
		want error
	}{
		{"unpublished", mk(header), ErrNotReady},
		{"foreign", mk(func(_ string, b []byte) { copy(b, "\x7fELF and then some garbage") }), ErrCorrupt},
		{"naming another region", mk(func(_ string, b []byte) {
			header(NewName(), b)
			word32(b, hMagic).Store(Magic)
		}), ErrCorrupt},
		{"missing", NewName(), os.ErrNotExist},
	} {
		if r, err := OpenRegion(tc.name); !errors.Is(err, tc.want) {
			if err == nil {
				r.Close()
			}
			t.Errorf("%s region: %v, want %v", tc.what, err, tc.want)
		}
	}
}

func TestCreateRegion_ReapsDeadOwnersFiles(t *testing.T) {
	dir := testDir(t)
	// Unlocked, and named after a process that has exited.
	stale := filepath.Join(dir, Prefix()+strconv.Itoa(deadPID(t))+"-1-0badcafe")
	if err := os.WriteFile(stale, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := CreateRegion(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale file survived CreateRegion: %v", err)
	}
}

func newTestRegion(t *testing.T, conn int) *Region {
	t.Helper()
	testDir(t)
	r, err := CreateRegion(Config{ConnSlots: conn, MaxPeers: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestConnQueue_PostReadAcceptReplyRelease(t *testing.T) {
	r := newTestRegion(t, 2)
	q := r.ConnQueue()
	seq0 := q.Seq()
	req := ConnRequest{SenderPID: os.Getpid(), SenderName: NewName(), RingName: NewName(), RingSize: 1 << 20, Cookie: 77,
		ReturnSize: 20 << 10, SpareSize: 132 << 10, ReturnSpareSize: maxSpare}
	slot, err := q.Post(req)
	if err != nil {
		t.Fatal(err)
	}
	if q.Seq() == seq0 {
		t.Error("Post did not bump the connection sequence")
	}
	if _, done, err := q.Reply(slot); done || err != nil {
		t.Fatalf("reply before answer: done %v err %v", done, err)
	}
	i := q.Next(0)
	if i != slot || q.Next(i+1) != -1 {
		t.Fatalf("Next = %d, %d; posted in %d", i, q.Next(i+1), slot)
	}
	got, err := q.Read(i)
	if err != nil {
		t.Fatal(err)
	}
	req.Slot, req.word, req.PidNS = slot, got.word, PidNS() // Post sets the pid namespace
	if got != req {
		t.Fatalf("Read = %+v, want %+v", got, req)
	}
	if err := q.Accept(got, 5, 9); err != nil {
		t.Fatal(err)
	}
	rep, done, err := q.Reply(slot)
	if err != nil || !done || rep != (ConnReply{Accepted: true, PeerIndex: 5, Gen: 9}) {
		t.Fatalf("Reply = %+v, %v, %v", rep, done, err)
	}
	if q.Next(0) != -1 {
		t.Error("answered request still listed as posted")
	}
	if err := q.Release(slot); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.Reply(slot); !errors.Is(err, ErrClosed) {
		t.Errorf("Reply after Release: %v", err)
	}
}

func TestConnQueue_FullQueueIsErrQueueFullAndLosesNothing(t *testing.T) {
	r := newTestRegion(t, 2)
	q := r.ConnQueue()
	req := ConnRequest{SenderPID: os.Getpid(), SenderName: NewName(), RingName: NewName(), RingSize: 4096}
	a, err1 := q.Post(req)
	b, err2 := q.Post(req)
	if err1 != nil || err2 != nil || a == b {
		t.Fatalf("posts: %d %v, %d %v", a, err1, b, err2)
	}
	if _, err := q.Post(req); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third post: %v, want ErrQueueFull", err)
	}
	for _, s := range []int{a, b} {
		if got, err := q.Read(s); err != nil || got.RingName != req.RingName {
			t.Errorf("slot %d after a refused post: %+v, %v", s, got, err)
		}
	}
	if err := q.Release(a); err != nil {
		t.Fatal(err)
	}
	if s, err := q.Post(req); err != nil || s != a {
		t.Errorf("post after release: %d, %v", s, err)
	}
}

func TestConnQueue_RejectCarriesErrno(t *testing.T) {
	r := newTestRegion(t, 1)
	q := r.ConnQueue()
	s, err := q.Post(ConnRequest{SenderPID: os.Getpid(), SenderName: NewName(), RingName: NewName(), RingSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	req, err := q.Read(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Reject(req, uint32(unix.ENOSPC)); err != nil {
		t.Fatal(err)
	}
	if rep, done, err := q.Reply(s); err != nil || !done || rep.Accepted || rep.Errno != uint32(unix.ENOSPC) {
		t.Fatalf("Reply = %+v, %v, %v", rep, done, err)
	}
}

// A sender that withdraws (or whose slot is reused, even by itself) makes
// the receiver's stale Accept fail instead of answering the wrong request.
func TestConnQueue_AcceptAfterWithdrawFails(t *testing.T) {
	r := newTestRegion(t, 1)
	q := r.ConnQueue()
	post := func() int {
		s, err := q.Post(ConnRequest{SenderPID: os.Getpid(), SenderName: NewName(), RingName: NewName(), RingSize: 4096})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := post()
	req, err := q.Read(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Release(s); err != nil {
		t.Fatal(err)
	}
	if err := q.Accept(req, 1, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Accept of a withdrawn request: %v", err)
	}
	if post() != s {
		t.Fatal("slot not reused")
	}
	if err := q.Accept(req, 1, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Accept of a request replaced by a new one (ABA): %v", err)
	}
}

func TestConnQueue_PostRefusesBadRequests(t *testing.T) {
	r := newTestRegion(t, 1)
	q := r.ConnQueue()
	good := ConnRequest{SenderPID: os.Getpid(), SenderName: NewName(), RingName: NewName(), RingSize: 4096}
	for _, mod := range []func(*ConnRequest){
		func(c *ConnRequest) { c.SenderName = "x/y" },
		func(c *ConnRequest) { c.RingName = "" },
		func(c *ConnRequest) { c.RingSize = 0 },
		func(c *ConnRequest) { c.RingSize = MaxSegmentSize + 1 },
		func(c *ConnRequest) { c.ReturnSize = -1 },
		func(c *ConnRequest) { c.ReturnSize = MaxSegmentSize + 1 },
		func(c *ConnRequest) { c.SpareSize = spareUnit + 1 },
		func(c *ConnRequest) { c.ReturnSpareSize = maxSpare + spareUnit },
		func(c *ConnRequest) {
			c.RingName, c.ReturnSize = c.RingName+strings.Repeat("x", MaxNameLen-len(c.RingName)), 4096
		},
	} {
		c := good
		mod(&c)
		if _, err := q.Post(c); err == nil {
			t.Errorf("Post(%+v) accepted", c)
		}
	}
	if q.Next(0) != -1 {
		t.Error("a refused post left a slot posted")
	}
}

func TestConnQueue_ReadRefusesCorruptSlots(t *testing.T) {
	r := newTestRegion(t, 1)
	q := r.ConnQueue()
	for _, tc := range []struct {
		what string
		mod  func(s []byte)
	}{
		{"name length beyond the field", func(s []byte) { ne.PutUint32(s[cSNameLen:], 200) }},
		{"zero ring name length", func(s []byte) { ne.PutUint32(s[cRNameLen:], 0) }},
		{"pid differing from the claimant", func(s []byte) { ne.PutUint32(s[cPID:], 1) }},
		{"ring size over the limit", func(s []byte) { ne.PutUint64(s[cRingSize:], 1<<40) }},
		{"return ring size over the limit", func(s []byte) { ne.PutUint32(s[cRetSize:], 1<<31) }},
		{"name with a slash", func(s []byte) { s[cRName+len(Prefix())] = '/' }},
	} {
		s, err := q.Post(ConnRequest{SenderPID: os.Getpid(), SenderName: NewName(), RingName: NewName(), RingSize: 4096})
		if err != nil {
			t.Fatal(err)
		}
		tc.mod(q.slot(s))
		if _, err := q.Read(s); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Read = %v, want ErrCorrupt", tc.what, err)
		}
		if err := q.Release(s); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConnQueue_SweepFreesSlotsOfDeadSenders(t *testing.T) {
	r := newTestRegion(t, 3)
	q := r.ConnQueue()
	for range 2 {
		if _, err := q.Post(ConnRequest{SenderPID: os.Getpid(), SenderName: NewName(), RingName: NewName(), RingSize: 4096}); err != nil {
			t.Fatal(err)
		}
	}
	if n := q.Sweep(ProcessAlive); n != 0 {
		t.Fatalf("swept %d slots of a live sender", n)
	}
	if n := q.Sweep(func(int) bool { return false }); n != 2 {
		t.Fatalf("swept %d slots of a dead sender, want 2", n)
	}
	if q.Next(0) != -1 {
		t.Error("swept slots still posted")
	}
	if ProcessAlive(0) || ProcessAlive(-1) || !ProcessAlive(os.Getpid()) {
		t.Error("ProcessAlive wrong for 0, -1 or self")
	}
}

func TestPeerTable_SetGetClearAndRefusesCorruptSlots(t *testing.T) {
	r := newTestRegion(t, 1)
	pt := r.Peers()
	p := PeerInfo{PID: 123, Gen: 4, SenderName: NewName(), RingName: NewName()}
	if _, ok, err := pt.Get(3); ok || err != nil {
		t.Fatalf("free slot: %v %v", ok, err)
	}
	if err := pt.Set(3, p); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := pt.Get(3); !ok || err != nil || got != p {
		t.Fatalf("Get = %+v %v %v", got, ok, err)
	}
	if err := pt.Set(pt.Len(), p); !errors.Is(err, ErrSize) {
		t.Errorf("Set out of range: %v", err)
	}
	if _, _, err := pt.Get(-1); !errors.Is(err, ErrSize) {
		t.Errorf("Get(-1): %v", err)
	}
	ne.PutUint32(pt.slot(3)[pSNameLen:], 99)
	if _, _, err := pt.Get(3); !errors.Is(err, ErrCorrupt) {
		t.Errorf("corrupt name length: %v", err)
	}
	word32(pt.slot(3), pState).Add(1) // odd: mid-write
	if _, _, err := pt.Get(3); !errors.Is(err, ErrNotReady) {
		t.Errorf("slot mid-write: %v", err)
	}
	if err := pt.Clear(3); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := pt.Get(3); ok || err != nil {
		t.Errorf("cleared slot: %v %v", ok, err)
	}
}

func init() {
	// A sender: attaches to the receiver region named on its command line,
	// creates its ring file, connects, writes one message and rings.
	childRoles["sender"] = func(in *bufio.Scanner, out io.Writer) {
		r, err := OpenRegion(readLine(in))
		must(err)
		ring, err := CreateSegment(NewName(), 64<<10)
		must(err)
		me := NewName()
		q := r.ConnQueue()
		slot, err := q.Post(ConnRequest{SenderPID: os.Getpid(), SenderName: me, RingName: ring.Name(), RingSize: ring.Size(), Cookie: 1})
		must(err)
		var rep ConnReply
		deadline := time.Now().Add(30 * time.Second)
		for {
			var done bool
			rep, done, err = q.Reply(slot)
			must(err)
			if done {
				break
			}
			if time.Now().After(deadline) {
				must(errors.New("no reply"))
			}
			time.Sleep(time.Millisecond)
		}
		must(q.Release(slot))
		if !rep.Accepted {
			must(fmt.Errorf("rejected with errno %d", rep.Errno))
		}
		// "Ring" protocol stand-in: a length word, then bytes.
		msg := "hello from " + strconv.Itoa(os.Getpid())
		copy(ring.Bytes()[8:], msg)
		word64(ring.Bytes(), 0).Store(uint64(len(msg)))
		bm := r.Bitmap()
		word64(bm, rep.PeerIndex/64*8).Or(1 << (rep.PeerIndex % 64))
		must(r.Doorbell().Ring())
		fmt.Fprintln(out, "sent", rep.PeerIndex, rep.Gen)
		readLine(in)
	}
}

// The whole connection protocol between real processes: a sender posts its
// ring file, the receiver (sleeping on its doorbell) accepts it, records the
// peer, maps the ring, and finds the message through the bitmap.
func TestRegion_ConnectionProtocolAcrossProcesses(t *testing.T) {
	r := newTestRegion(t, 4)
	c := startChild(t, "sender")
	c.send(r.Name())
	q := r.ConnQueue()
	seen := q.Seq()
	if ok, err := r.Doorbell().Wait(testTimeout(t), func() bool { return q.Seq() != seen }); !ok || err != nil {
		t.Fatalf("no connection request: %v %v", ok, err)
	}
	slot := q.Next(0)
	req, err := q.Read(slot)
	if err != nil {
		t.Fatal(err)
	}
	if req.SenderPID != c.cmd.Process.Pid {
		t.Errorf("request from pid %d, child is %d", req.SenderPID, c.cmd.Process.Pid)
	}
	ring, err := OpenSegment(req.RingName)
	if err != nil {
		t.Fatal(err)
	}
	defer ring.Close()
	if ring.Size() != req.RingSize {
		t.Errorf("ring size %d, announced %d", ring.Size(), req.RingSize)
	}
	const peer = 5
	if err := r.Peers().Set(peer, PeerInfo{PID: req.SenderPID, Gen: 1, SenderName: req.SenderName, RingName: req.RingName}); err != nil {
		t.Fatal(err)
	}
	if err := q.Accept(req, peer, 1); err != nil {
		t.Fatal(err)
	}
	bm := word64(r.Bitmap(), 0)
	if ok, err := r.Doorbell().Wait(testTimeout(t), func() bool { return bm.Load()&(1<<peer) != 0 }); !ok || err != nil {
		t.Fatalf("no bitmap bit: %v %v", ok, err)
	}
	if got := c.expect("sent"); got != "5 1" {
		t.Errorf("child got peer/gen %q", got)
	}
	n := word64(ring.Bytes(), 0).Load()
	if want := "hello from " + strconv.Itoa(req.SenderPID); n != uint64(len(want)) || string(ring.Bytes()[8:8+n]) != want {
		t.Errorf("ring holds %q", ring.Bytes()[8:8+min(n, 64)])
	}
	if ok, err := ring.Alive(); !ok || err != nil {
		t.Errorf("sender alive: %v %v", ok, err)
	}
	c.send("bye")
	c.wait()
	if ok, err := ring.Alive(); ok || err != nil {
		t.Errorf("sender exited but its ring reads alive: %v %v", ok, err)
	}
}

// Arbitrary bytes in a posted connection slot and in a peer slot: Read and
// Get return an error or well-formed values, never panic.
func FuzzSlots(f *testing.F) {
	b, l := validHeader(f, 1, 1)
	r := newRegionOver(b, l)
	good := ConnRequest{SenderPID: 42, SenderName: NewName(), RingName: NewName(), RingSize: 4096}
	seed := make([]byte, ConnSlotSize)
	ne.PutUint32(seed[cPID:], 42)
	ne.PutUint32(seed[cSNameLen:], uint32(len(good.SenderName)))
	ne.PutUint32(seed[cRNameLen:], uint32(len(good.RingName)))
	ne.PutUint64(seed[cRingSize:], 4096)
	copy(seed[cSName:], good.SenderName)
	copy(seed[cRName:], good.RingName)
	f.Add(seed)
	f.Add(make([]byte, ConnSlotSize))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		q, pt := r.ConnQueue(), r.Peers()
		s := q.slot(0)
		clear(s)
		copy(s, data)
		pid := uint64(ne.Uint32(s[cPID:]))
		q.word(0).Store(pid<<32 | 1<<8 | ConnPosted)
		if req, err := q.Read(0); err == nil {
			if ValidName(req.SenderName) != nil || ValidName(req.RingName) != nil || req.SenderPID <= 0 ||
				req.RingSize <= 0 || req.RingSize > MaxSegmentSize || req.ReturnSize < 0 || req.ReturnSize > MaxSegmentSize ||
				req.ReturnSize > 0 && ValidName(ReturnRingName(req.RingName)) != nil ||
				req.SpareSize%spareUnit != 0 || req.ReturnSpareSize > maxSpare ||
				req.SpareSize > 0 && ValidName(SpareRingName(req.RingName)) != nil {
				t.Fatalf("accepted %+v", req)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v is not ErrCorrupt", err)
		}
		p := pt.slot(0)
		clear(p)
		copy(p, data)
		word32(p, pState).Store(ne.Uint32(p) &^ 1)
		if info, ok, err := pt.Get(0); err == nil && ok && (len(info.SenderName) > MaxNameLen || len(info.RingName) > MaxNameLen) {
			t.Fatalf("accepted %+v", info)
		}
	})
}

// Many concurrent senders contending for few slots: every request is
// answered exactly once, to its own sender, and nothing is lost.
func TestConnQueue_ConcurrentSendersGetTheirOwnAnswers(t *testing.T) {
	r := newTestRegion(t, 3)
	q := r.ConnQueue()
	const senders, each = 6, 150
	stop := make(chan struct{})
	var answered atomic.Int64
	received := make(chan struct{})
	go func() { // the receiver
		defer close(received)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for i := q.Next(0); i >= 0; i = q.Next(i + 1) {
				req, err := q.Read(i)
				if err != nil {
					continue // withdrawn or changing under us
				}
				if q.Accept(req, int(req.Cookie%1000), uint32(req.Cookie/1000)) == nil {
					answered.Add(1)
				}
			}
			runtime.Gosched()
		}
	}()
	// Every goroutine has returned before the region is unmapped (the
	// test's cleanup): a sender or the receiver still touching it then
	// would fault.
	defer func() { close(stop); <-received }()
	errs := make(chan error, senders)
	for s := range senders {
		go func() {
			for k := range each {
				cookie := uint64(k*1000 + s)
				req := ConnRequest{SenderPID: os.Getpid(), SenderName: NewName(), RingName: NewName(), RingSize: 4096, Cookie: cookie}
				slot, err := q.Post(req)
				for errors.Is(err, ErrQueueFull) {
					runtime.Gosched()
					slot, err = q.Post(req)
				}
				if err != nil {
					errs <- err
					return
				}
				deadline := time.Now().Add(lostAfter)
				for {
					rep, done, err := q.Reply(slot)
					if err != nil {
						errs <- err
						return
					}
					if done {
						if !rep.Accepted || rep.PeerIndex != s || rep.Gen != uint32(k) {
							errs <- fmt.Errorf("sender %d request %d got %+v", s, k, rep)
							return
						}
						break
					}
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("sender %d request %d never answered", s, k)
						return
					}
					runtime.Gosched()
				}
				if err := q.Release(slot); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range senders {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		t.Fatal(first)
	}
	if got := answered.Load(); got != senders*each {
		t.Errorf("%d requests answered, want %d", got, senders*each)
	}
}

func init() {
	// Posts a request and then waits to be killed.
	childRoles["post-and-hang"] = func(in *bufio.Scanner, out io.Writer) {
		r, err := OpenRegion(readLine(in))
		must(err)
		ring, err := CreateSegment(NewName(), 4096)
		must(err)
		_, err = r.ConnQueue().Post(ConnRequest{SenderName: NewName(), RingName: ring.Name(), RingSize: ring.Size()})
		must(err)
		fmt.Fprintln(out, "posted", ring.Name())
		for {
			readLine(in)
		}
	}
}

// A sender killed with -9 after announcing itself: the receiver's waits end
// by timeout, the ring's owner reads dead, and Sweep frees its slot.
func TestRegion_SenderKilledMidRequestIsDetectedAndSwept(t *testing.T) {
	r := newTestRegion(t, 2)
	c := startChild(t, "post-and-hang")
	c.send(r.Name())
	ringName := c.expect("posted")
	ring, err := OpenSegment(ringName)
	if err != nil {
		t.Fatal(err)
	}
	defer ring.Close()
	if ok, err := ring.Alive(); !ok || err != nil {
		t.Fatalf("live sender reads %v, %v", ok, err)
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.waitExit()
	if ok, err := r.Doorbell().Wait(50*time.Millisecond, func() bool { return false }); ok || err != nil {
		t.Fatalf("Wait with a dead sender = %v, %v; want a plain timeout", ok, err)
	}
	if ok, err := ring.Alive(); ok || err != nil {
		t.Errorf("killed sender reads %v, %v", ok, err)
	}
	if n := r.ConnQueue().Sweep(ProcessAlive); n != 1 {
		t.Errorf("Sweep freed %d slots, want 1", n)
	}
	if r.ConnQueue().Next(0) != -1 {
		t.Error("the dead sender's request is still posted")
	}
}
