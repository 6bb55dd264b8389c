//go:build !race

package net

import (
	"runtime"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

type countSink struct{ got, fetched int }

func (s *countSink) Arrive(transport.Peer, *transport.Header, []byte, uint64) bool {
	s.got++
	return true
}
func (s *countSink) SendDone(transport.Op, transport.Code)       {}
func (s *countSink) FetchDone(transport.Op, int, transport.Code) { s.fetched++ }
func (s *countSink) PeerDown(transport.Peer, transport.Code)     {}

// The steady-state eager path (Send on the sender, the loop's decoding,
// Poll on the receiver, credit returns) allocates nothing per message.
func TestAllocs_EagerSteadyStateIsZero(t *testing.T) {
	a := listen(t, Config{})
	b := listen(t, Config{})
	as, bs := &countSink{}, &countSink{}
	p, _ := a.Resolve(b.Name())
	h := &transport.Header{Kind: transport.KindTagged, Len: 64}
	iov := [][]byte{make([]byte, 64)}
	one := func() {
		for {
			_, c := a.Send(p, h, iov, 0)
			if c == transport.OK {
				break
			}
			a.Poll(as)
			b.Poll(bs)
		}
		want := bs.got + 1
		for bs.got < want {
			if !b.Poll(bs) {
				b.Wait(time.Millisecond)
			}
		}
	}
	for i := 0; i < 20000; i++ { // connect, fill pools, pass a credit return
		one()
	}
	if n := testing.AllocsPerRun(5000, one); n != 0 {
		t.Fatalf("%v allocations per eager message", n)
	}
}

// A probe allocates nothing (it runs in Poll when large traffic flows).
func TestProbeCPUs_NoAllocation(t *testing.T) {
	if runtime.NumCPU() < 2 || runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two CPUs and two Ps")
	}
	prober.run()
	n := testing.AllocsPerRun(20, func() {
		for end := time.Now().Add(20 * time.Second); prober.busy.Load() && time.Now().Before(end); {
			runtime.Gosched()
		}
		probeCPUs(0, 1)
		cpusFar(0, 1)
	})
	if n != 0 {
		t.Fatalf("%v allocations per probe", n)
	}
}
