//go:build !race

package fi

import (
	"testing"
)

// TestShmRoundTripZeroAllocs: a send, its receive and the CQ reads of both
// sides allocate nothing in steady state, for small tagged and untagged
// messages over shm (issue 6: 0 allocs on the send/recv/CQ path).
func TestShmRoundTripZeroAllocs(t *testing.T) {
	shmTestDir(t)
	a := openNode(t, "shm", nodeCfg{})
	b := openNode(t, "shm", nodeCfg{})
	nameB, _ := b.ep.Name()
	to, err := a.av.Insert([][]byte{nameB}, 0)
	if err != nil {
		t.Fatal(err)
	}
	nameA, _ := a.ep.Name()
	if _, err := b.av.Insert([][]byte{nameA}, 0); err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 64)
	buf := make([]byte, 64)
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
	// Contexts are stored as interfaces: a pointer or small integer
	// constant boxes without allocating.
	txCtx, rxCtx := &struct{ int }{1}, &struct{ int }{2}
	for _, tc := range []struct {
		name string
		send func() error
		recv func() error
	}{
		{"untagged",
			func() error { return a.ep.Send(msg, to[0], txCtx) },
			func() error { return b.ep.Recv(buf, AddrUnspec, rxCtx) }},
		{"tagged",
			func() error { return a.ep.TSend(msg, to[0], 7, txCtx) },
			func() error { return b.ep.TRecv(buf, AddrUnspec, 7, 0, rxCtx) }},
		{"inject",
			func() error { return a.ep.TInject(msg[:8], to[0], 7) },
			func() error { return b.ep.TRecv(buf, AddrUnspec, 7, 0, rxCtx) }},
		{"senddata",
			func() error { return a.ep.SendData(msg, 99, to[0], txCtx) },
			func() error { return b.ep.Recv(buf, AddrUnspec, rxCtx) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inject := tc.name == "inject"
			round := func() {
				if err := tc.recv(); err != nil {
					t.Fatal(err)
				}
				if err := tc.send(); err != nil {
					t.Fatal(err)
				}
				if !inject {
					read(a.txcq)
				}
				read(b.rxcq)
			}
			for range 100 { // warm up: connections, free lists, caches
				round()
			}
			if n := testing.AllocsPerRun(1000, round); n != 0 {
				t.Fatalf("%.2f allocations per Send+Recv+CQ.Read round trip", n)
			}
		})
	}
}
