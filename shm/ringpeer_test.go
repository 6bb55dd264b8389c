package shm

import (
	"sync/atomic"
	"testing"
	"time"
)

// A flag published before RingPeer is never missed by a Wait whose
// condition reads it, whether the waiter is asleep, about to sleep or not
// waiting yet (the Dekker pair of the transport.Ringer protocol). A lost
// wake-up would hold Wait until its one-minute timeout: the test fails
// at 30 s instead of hanging.
func TestTransport_RingPeerWakesTheWaitCondition(t *testing.T) {
	p := newTPair(t, TransportConfig{})
	var flag atomic.Uint32
	p.b.SetWaitCond(func() bool { return flag.Load() != 0 })
	defer p.b.SetWaitCond(nil)
	if !p.a.RingPeer(p.ab) {
		t.Fatal("RingPeer of a known peer = false")
	}
	if p.a.RingPeer(p.ab + 100) {
		t.Fatal("RingPeer of an unknown peer = true")
	}
	for i := 0; i < 200; i++ {
		flag.Store(0)
		done := make(chan struct{})
		go func() {
			for flag.Load() == 0 {
				p.b.Wait(time.Minute)
			}
			close(done)
		}()
		if i%2 == 0 {
			// Half the rounds ring a waiter that is surely asleep.
			for p.b.Sleepers() == 0 {
				time.Sleep(10 * time.Microsecond)
			}
		}
		flag.Store(1)
		p.a.RingPeer(p.ab)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: Wait missed the flag published before RingPeer", i)
		}
	}
}
