package fi

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestLinkedSreadWakes_shm and _tcp: CQ.Sread on a linked endpoint sleeps
// in one wait (the shm doorbell) and must wake for work of either member:
// a message arriving from a peer process over shm or over tcp (eager and
// rendezvous, the first one also the peer's first contact), and the death
// (SIGKILL) of a peer that owes an answer, which must end the sleep with
// an error entry.
//
// Sread's sleeps are bounded by 10 ms so that a missed event costs only
// that; here the bound and Sread's timeout are an hour (CQ SetMaxSleep),
// so a wake-up the link misses holds Sread, and the test fails when
// nothing came after linkWakeTimeout, far beyond any wake-up on a loaded
// machine. Each event is caused only once Sread sleeps (the shm doorbell
// counts a sleeper: from then on a ring is not lost), so the spinning
// before the sleep cannot hide a miss.
func TestLinkedSreadWakes_shm(t *testing.T) { linkedSreadWakes(t, "shm") }

func TestLinkedSreadWakes_tcp(t *testing.T) { linkedSreadWakes(t, "tcp") }

// linkWakeTimeout is how long the test waits for Sread to return: far
// beyond any wake-up on a loaded machine, and what a missed one costs.
const linkWakeTimeout = 20 * time.Second

func init() {
	// The peer: a linked endpoint reaching the parent over route (its
	// name and the parent's carry another shared-memory identity for
	// tcp). It sends "send size tag" messages, each to completion, and
	// otherwise waits to be killed.
	peerRoles["linkwake"] = func(t *testing.T, l *link, route string) {
		n := openNode(t, linkName, nodeCfg{})
		name, err := n.ep.Name()
		if err != nil {
			t.Fatal(err)
		}
		if route == "tcp" {
			name = otherDomain(t, name)
		}
		l.send("addr", hex.EncodeToString(name))
		raw, err := hex.DecodeString(l.expect("addr")[0])
		if err != nil {
			t.Fatal(err)
		}
		ad, err := n.av.Insert([][]byte{raw}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for {
			a := l.expect("send")
			size, _ := strconv.Atoi(a[0])
			tag, _ := strconv.ParseUint(a[1], 10, 64)
			if err := linkSend(n, ad[0], tag, [][]byte{linkMsg('W', size)}, l.deadline); err != nil {
				t.Fatal(err)
			}
			l.send("sent")
		}
	}
}

func linkedSreadWakes(t *testing.T, route string) {
	shmTestDir(t)
	a := openE2EWait(t, linkName, Msg|Tagged|Source, WaitUnspec)
	a.cq.eng.SetMaxSleep(time.Hour)
	// A Sread left asleep by a failure returns, and the endpoint closes
	// (an earlier cleanup) only after its goroutine is done with it.
	var sreads sync.WaitGroup
	t.Cleanup(func() {
		a.cq.Signal()
		done := make(chan struct{})
		go func() { sreads.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("a Sread did not return 30s after Signal")
		}
	})
	lt := linkTr(t, a.ep)
	p := startPeer(t, "linkwake", route, 2*time.Minute)
	raw, err := hex.DecodeString(p.expect("addr")[0])
	if err != nil {
		t.Fatal(err)
	}
	peer, err := a.av.Insert([][]byte{raw}, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine, _ := a.ep.Name()
	if route == "tcp" {
		mine = otherDomain(t, mine)
	}
	p.send("addr", hex.EncodeToString(mine))

	// sread runs one Sread on its own goroutine and reports the one
	// entry it returns (ok false: an error entry); asleep waits until it
	// sleeps on the doorbell.
	type result struct {
		ctx any
		ok  bool
		err error
	}
	sread := func() <-chan result {
		res := make(chan result, 1)
		sreads.Add(1)
		go func() {
			defer sreads.Done()
			var e [4]CQEntry
			k, err := a.cq.Sread(e[:], time.Hour)
			switch {
			case errors.Is(err, ErrAgain):
				res <- result{err: errors.New("Sread returned nothing")}
			case errors.Is(err, ErrAvail):
				ee, rerr := a.cq.ReadErr()
				if rerr != nil {
					rerr = fmt.Errorf("ReadErr after ErrAvail: %w", rerr)
				}
				res <- result{ctx: ee.Context, err: rerr}
			case err != nil:
				res <- result{err: err}
			case k != 1:
				res <- result{err: fmt.Errorf("Sread returned %d entries, want 1", k)}
			default:
				res <- result{ctx: e[0].Context, ok: true}
			}
		}()
		return res
	}
	wait := func(res <-chan result) result {
		t.Helper()
		select {
		case r := <-res:
			return r
		case <-time.After(linkWakeTimeout):
			t.Fatalf("Sread slept through the event: nothing after %v", linkWakeTimeout)
		}
		return result{}
	}
	asleep := func() {
		t.Helper()
		deadline := time.Now().Add(linkWakeTimeout)
		for lt.Shm().Sleepers() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("Sread never slept on the shm doorbell")
			}
			time.Sleep(100 * time.Microsecond)
		}
	}

	// Arrivals: 8 B (eager; the first is the peer's first contact) and
	// 1 MiB (rendezvous: Sread sleeps again while the payload comes).
	buf := make([]byte, 1<<20)
	for i, size := range []int{8, 8, 1 << 20, 8} {
		ctx := fmt.Sprintf("rx%d", i)
		if err := a.ep.TRecv(buf, AddrUnspec, uint64(i), 0, ctx); err != nil {
			t.Fatal(err)
		}
		res := sread()
		asleep()
		p.send("send", size, i)
		if r := wait(res); r.err != nil || !r.ok || r.ctx != ctx {
			t.Fatalf("%s arrival of %d B: entry %v (success %v), %v", route, size, r.ctx, r.ok, r.err)
		}
		p.expect("sent")
	}
	if s, c := lt.Routes(); (route == "shm") != (s == 1 && c == 0) {
		t.Fatalf("routes shm=%d tcp=%d, want the peer over %s", s, c, route)
	}

	// Death: a rendezvous send waits for the peer, which never receives
	// it; the peer is killed while Sread sleeps.
	if err := a.ep.TSend(make([]byte, 4<<20), peer[0], 99, "held"); err != nil {
		t.Fatal(err)
	}
	res := sread()
	asleep()
	killPeer(t, p)
	if r := wait(res); r.err != nil || r.ok || r.ctx != "held" {
		t.Fatalf("%s peer killed during Sread: entry %v (success %v), %v; want the held send's error entry", route, r.ctx, r.ok, r.err)
	}
}
