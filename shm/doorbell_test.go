package shm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestDoorbell_WaitReturnsAtOnceWhenCondHolds(t *testing.T) {
	r := newTestRegion(t, 1)
	calls := 0
	ok, err := r.Doorbell().Wait(time.Hour, func() bool { calls++; return true })
	if !ok || err != nil || calls != 1 {
		t.Fatalf("Wait = %v, %v after %d calls", ok, err, calls)
	}
	if r.Doorbell().Sleepers() != 0 {
		t.Error("waiter count left raised")
	}
}

func TestDoorbell_WaitTimesOutWithoutRing(t *testing.T) {
	r := newTestRegion(t, 1)
	for _, d := range []time.Duration{-1, 0, time.Millisecond} {
		if ok, err := r.Doorbell().Wait(d, func() bool { return false }); ok || err != nil {
			t.Errorf("Wait(%v) on a silent bell = %v, %v", d, ok, err)
		}
	}
	if r.Doorbell().Sleepers() != 0 {
		t.Error("waiter count left raised after timeouts")
	}
	if ok, err := DefaultIdle.Wait(r.Doorbell(), time.Millisecond, func() bool { return false }); ok || err != nil {
		t.Errorf("Idle.Wait on a silent bell = %v, %v", ok, err)
	}
}

// Ring with nobody asleep does not touch the shared sequence word: the
// sender pays one load.
func TestDoorbell_RingWithoutSleepersLeavesSequenceAlone(t *testing.T) {
	r := newTestRegion(t, 1)
	d := r.Doorbell()
	before := d.seq.Load()
	for range 10 {
		if err := d.Ring(); err != nil {
			t.Fatal(err)
		}
	}
	if d.seq.Load() != before {
		t.Error("Ring without sleepers bumped the sequence")
	}
}

func TestNewDoorbell_RefusesMisplacedWords(t *testing.T) {
	b := make([]byte, 64)
	for _, off := range []int{-8, 4, 60, 64} {
		if _, err := NewDoorbell(b, off); !errors.Is(err, ErrSize) {
			t.Errorf("NewDoorbell at %d: %v", off, err)
		}
	}
	if _, err := NewDoorbell(b, 56); err != nil {
		t.Errorf("NewDoorbell at 56: %v", err)
	}
}

// A ping-pong between goroutines where every step waits with a long
// timeout: a lost wake-up shows as a Wait that ends false.
func TestDoorbell_NoLostWakeupsUnderStress(t *testing.T) {
	r := newTestRegion(t, 1)
	seg, err := CreateSegment(NewName(), 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	pingBell, pongBell := r.Doorbell(), mustBell(t, seg.Bytes(), 128)
	ping, pong := word32(seg.Bytes(), 0), word32(seg.Bytes(), 64)
	n := uint32(20000)
	if testing.Short() {
		n = 2000
	}
	timeout := lostAfter
	var wg sync.WaitGroup
	var lost atomic.Int32
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := uint32(1); i <= n; i++ {
			if ok, err := pingBell.Wait(timeout, func() bool { return ping.Load() >= i }); !ok || err != nil {
				lost.Add(1)
				return
			}
			pong.Store(i)
			_ = pongBell.Ring()
		}
	}()
	for i := uint32(1); i <= n; i++ {
		ping.Store(i)
		_ = pingBell.Ring()
		if ok, err := pongBell.Wait(timeout, func() bool { return pong.Load() >= i }); !ok || err != nil {
			t.Fatalf("round %d: pong never came: %v %v", i, ok, err)
		}
	}
	wg.Wait()
	if lost.Load() != 0 {
		t.Fatal("a ping was lost")
	}
}

// lostAfter is how long a wait may take before the test calls the wake-up
// lost: far beyond any scheduling delay, far below a hang.
const lostAfter = 10 * time.Second

func mustBell(t testing.TB, b []byte, off int) *Doorbell {
	d, err := NewDoorbell(b, off)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func init() {
	// The far side of the cross-process ping-pong: sleeps on the ping bell
	// in the parent's segment, answers on the parent's region doorbell.
	childRoles["bell-pong"] = func(in *bufio.Scanner, out io.Writer) {
		r, err := OpenRegion(readLine(in))
		must(err)
		seg, err := OpenSegment(readLine(in))
		must(err)
		n, err := strconv.Atoi(readLine(in))
		must(err)
		pingBell, err := NewDoorbell(seg.Bytes(), 128)
		must(err)
		ping, pong := word32(seg.Bytes(), 0), word32(seg.Bytes(), 64)
		slept := 0
		fmt.Fprintln(out, "ready")
		for i := uint32(1); i <= uint32(n); i++ {
			if ping.Load() < i {
				slept++
			}
			ok, err := pingBell.Wait(lostAfter, func() bool { return ping.Load() >= i })
			must(err)
			if !ok {
				must(fmt.Errorf("ping %d lost", i))
			}
			pong.Store(i)
			must(r.Doorbell().Ring())
		}
		fmt.Fprintln(out, "done", slept)
	}
}

// Cross-process wake-ups: each side sleeps in FUTEX_WAIT and is woken by
// the other process's Ring; no round may be lost.
func TestDoorbell_CrossProcessWakeups(t *testing.T) {
	r := newTestRegion(t, 1)
	seg, err := CreateSegment(NewName(), 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	n := 5000
	if testing.Short() {
		n = 500
	}
	c := startChild(t, "bell-pong")
	c.send(r.Name())
	c.send(seg.Name())
	c.send(strconv.Itoa(n))
	c.expect("ready")
	pingBell := mustBell(t, seg.Bytes(), 128)
	ping, pong := word32(seg.Bytes(), 0), word32(seg.Bytes(), 64)
	for i := uint32(1); i <= uint32(n); i++ {
		ping.Store(i)
		if err := pingBell.Ring(); err != nil {
			t.Fatal(err)
		}
		if ok, err := r.Doorbell().Wait(lostAfter, func() bool { return pong.Load() >= i }); !ok || err != nil {
			t.Fatalf("round %d: no pong from the child: %v %v", i, ok, err)
		}
	}
	t.Logf("the child found the ping missing and slept in %s of %d rounds", c.expect("done"), n)
	c.wait()
}
