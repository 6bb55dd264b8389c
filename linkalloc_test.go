//go:build !race

package fi

import "testing"

// TestLinkedRoundTripZeroAllocs: over both routes of a linked endpoint a
// tagged send, its receive (FI_SOURCE) and the CQ reads allocate nothing
// in steady state; and while A and B ping-pong over shm with A's tcp
// connection to C idle, A's Polls do not poll the tcp member (they ask it
// Quiet: atomic loads, no read system call).
func TestLinkedRoundTripZeroAllocs(t *testing.T) {
	shmTestDir(t)
	a, b, c, aB, aC, bA, cA := linkTrio(t, nodeCfg{})
	msg, buf := make([]byte, 64), make([]byte, 64)
	var es [1]CQEntry
	read := func(cq *CQ) {
		for {
			n, err := cq.Read(es[:])
			if n == 1 {
				return
			}
			if err != ErrAgain {
				t.Fatalf("CQ.Read: %v", err)
			}
		}
	}
	txCtx, rxCtx := &struct{ int }{1}, &struct{ int }{2}
	round := func(from *node, to Addr, at *node) func() {
		return func() {
			if err := at.ep.TRecv(buf, AddrUnspec, 7, 0, rxCtx); err != nil {
				t.Fatal(err)
			}
			if err := from.ep.TSend(msg, to, 7, txCtx); err != nil {
				t.Fatal(err)
			}
			read(from.txcq)
			read(at.rxcq)
		}
	}
	for _, r := range []struct {
		name     string
		from, at *node
		to       Addr
	}{{"shm", a, b, aB}, {"shm back", b, a, bA}, {"tcp", a, c, aC}, {"tcp back", c, a, cA}} {
		f := round(r.from, r.to, r.at)
		for range 100 {
			f()
		}
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %.2f allocations per round trip", r.name, n)
		}
	}
	l := linkTr(t, a.ep)
	ping, pong := round(a, aB, b), round(b, bA, a)
	for range 200 { // shm busy: the idle tcp member goes quiet
		ping()
		pong()
	}
	all0, tcp0 := l.Polls()
	for range 5000 {
		ping()
		pong()
	}
	all, tcp := l.Polls()
	// At least one Poll of A's per pong (its receive): a CQ read that
	// finds its completion queued (A's send completions) returns it
	// without one.
	if all-all0 < 5000 || tcp-tcp0 > (all-all0)/100 {
		t.Errorf("%d of %d Polls polled the idle tcp member", tcp-tcp0, all-all0)
	}
}
