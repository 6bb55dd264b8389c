//go:build !race

package shm

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// TestFarRendezvous_DoesNotAllocate: round trips of 8 KiB between peers
// voted far (by rendezvous, one in farProbe eager and timed, the vote
// kept far) allocate nothing once the pair is warm. The runtime
// allocates now and then on its own (see TestFirstRendezvous_...): the
// test fails only when three fresh pairs in a row allocate.
func TestFarRendezvous_DoesNotAllocate(t *testing.T) {
	testDir(t)
	var n uint64
	for range 3 {
		if n = farRoundAllocs(t); n == 0 {
			return
		}
	}
	t.Errorf("far 8 KiB round trips: %d allocations, three times in a row", n)
}

func farRoundAllocs(t *testing.T) uint64 {
	p := newRoundPair(t, 16<<10)
	if !p.a.cma {
		t.Skip("no single copy here: eager-sized payloads never go by rendezvous")
	}
	far := func() {
		for _, q := range []*peer{p.a.peers[p.ab], p.b.peers[p.ba]} {
			q.far, q.copyVotes = true, 0xff
		}
	}
	p.round(8) // connects both ways
	for range 2 * farProbe {
		far()
		p.round(8 << 10)
	}
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	cookies := p.a.nextCookie
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range 2 * farProbe {
		far()
		p.round(8 << 10)
	}
	runtime.ReadMemStats(&m1)
	if got, want := int(p.a.nextCookie-cookies), 2*farProbe-2; got != want {
		t.Fatalf("%d of %d far 8 KiB sends went by rendezvous, want %d", got, 2*farProbe, want)
	}
	return m1.Mallocs - m0.Mallocs
}
