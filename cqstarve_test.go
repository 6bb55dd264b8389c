package fi

import (
	"errors"
	"testing"
	"time"
)

// A sender that reaps one completion per send still sees the messages it
// receives. Each eager send queues its completion when it is posted, so
// every Read of such a loop finds one queued: a CQ that drove progress
// only when its queue was empty never took in the peer's "stop" (libfabric
// util CQ had the same starvation and went back to progressing on every
// read, 1eff3d3e2 "prov/util: Always progress when reading from CQ").
func TestCQ_ReadingOneAtATimeKeepsProgressing(t *testing.T) {
	for _, prov := range []string{"shm", "tcp", linkName} {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			a := openE2E(t, prov, Msg|Tagged)
			b := openE2E(t, prov, Msg|Tagged)
			toB, toA := crossInsert(t, a, b)
			deadline := time.Now().Add(20 * time.Second)
			var e [1]CQEntry
			// b keeps a receive posted for a's stream and drains its CQ.
			rbuf := make([]byte, 8)
			if err := b.ep.TRecv(rbuf, AddrUnspec, 1, 0, "rx"); err != nil {
				t.Fatal(err)
			}
			drainB := func() {
				for {
					n, err := b.cq.Read(e[:])
					if n == 0 {
						if !errors.Is(err, ErrAgain) {
							t.Fatal(err)
						}
						return
					}
					if e[0].Context == "rx" {
						if err := b.ep.TRecv(rbuf, AddrUnspec, 1, 0, "rx"); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			// First contact both ways, so that neither send waits for a
			// connection.
			wbuf := make([]byte, 8)
			if err := a.ep.TRecv(wbuf, AddrUnspec, 2, 0, "warm-rx"); err != nil {
				t.Fatal(err)
			}
			for sent, got := false, false; !got; {
				if !sent {
					err := b.ep.TSend(make([]byte, 8), toA, 2, "warm-tx")
					if err != nil && !errors.Is(err, ErrAgain) {
						t.Fatal(err)
					}
					sent = err == nil
				}
				if n, _ := a.cq.Read(e[:]); n == 1 && e[0].Context == "warm-rx" {
					got = true
				}
				drainB()
				if time.Now().After(deadline) {
					t.Fatal("the warm-up message did not arrive")
				}
			}

			// a waits for b's stop while it streams to b, reaping one
			// completion per send.
			stop := make([]byte, 8)
			if err := a.ep.TRecv(stop, AddrUnspec, 7, 0, "stop"); err != nil {
				t.Fatal(err)
			}
			for err := error(ErrAgain); errors.Is(err, ErrAgain); {
				if err = b.ep.TSend(make([]byte, 8), toA, 7, "stop-tx"); err != nil && !errors.Is(err, ErrAgain) {
					t.Fatal(err)
				}
				drainB()
			}
			msg := make([]byte, 8)
			sends := 0
			for {
				if err := a.ep.TSend(msg, toB, 1, "tx"); err == nil {
					sends++
				} else if !errors.Is(err, ErrAgain) {
					t.Fatal(err)
				}
				n, err := a.cq.Read(e[:])
				if n == 1 && e[0].Context == "stop" {
					return
				}
				if n == 0 && !errors.Is(err, ErrAgain) {
					t.Fatal(err)
				}
				drainB()
				if time.Now().After(deadline) {
					t.Fatalf("after %d sends, each reaping one completion, the stop message was not seen", sends)
				}
			}
		})
	}
}
