package coll

import (
	"testing"

	"github.com/gofi-dev/fi/transport"
)

// ringerStub is a transport.Ringer that records the wait condition.
type ringerStub struct{ cond func() bool }

func (s *ringerStub) RingPeer(transport.Peer) bool { return true }
func (s *ringerStub) SetWaitCond(cond func() bool) { s.cond = cond }

func watchedGroup(e *Endpoint, n int) (*Group, *region) {
	r := &region{n: n, mem: make([]byte, regionHdr+ctrlBytes(n))}
	r.index()
	return &Group{e: e, region: r}, r
}

// The wait condition is true exactly when every local rank of a watched
// group arrived at its phase (or one aborted), and true whenever more
// groups wait than it can watch.
func TestWaitCond_FollowsTheArriveWords(t *testing.T) {
	e := &Endpoint{ringer: &ringerStub{}}
	g, r := watchedGroup(e, 3)
	if e.waitCond() {
		t.Fatal("nothing watched, condition true")
	}
	r.arrive() // phase 1
	e.shmActive = append(e.shmActive, g)
	e.rewatch()
	for ph := uint64(1); ph <= 4; ph++ {
		if ph > 1 {
			r.arrive()
		}
		for j := 1; j < r.n; j++ {
			if e.waitCond() {
				t.Fatalf("phase %d: condition true with rank %d not arrived", ph, j)
			}
			r.arriveWord(j, ph).Store(ph)
		}
		if !e.waitCond() {
			t.Fatalf("phase %d: every rank arrived, condition false", ph)
		}
	}
	r.arrive()
	r.setAbort(5)
	if !e.waitCond() {
		t.Fatal("a rank aborted, condition false")
	}
	for i := 0; i < len(e.watch); i++ {
		g2, r2 := watchedGroup(e, 2)
		r2.arrive()
		e.shmActive = append(e.shmActive, g2)
	}
	e.rewatch()
	if !e.watchAll.Load() || !e.waitCond() {
		t.Fatal("more groups wait than watched: the condition must not let Wait sleep")
	}
}

// unwatch returns only once no condition can still read the region, so
// the mapping can go: the race detector checks that the condition's reads
// of r.mem happen before the close's write.
func TestWaitCond_UnwatchDrainsConcurrentConditions(t *testing.T) {
	e := &Endpoint{ringer: &ringerStub{}}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				e.waitCond()
			}
		}
	}()
	for i := 0; i < 200; i++ {
		g, r := watchedGroup(e, 2)
		r.arrive()
		e.shmActive = append(e.shmActive[:0], g)
		e.rewatch()
		e.unwatch(r)
		r.mem = nil // what region.close does once unwatched
		e.shmActive = e.shmActive[:0]
		e.rewatch()
	}
	close(stop)
	<-done
}
