//go:build !race

package fi

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestShmDataPath_NoAllocationPerMessage: after warm-up, a tagged message
// between two shm endpoints (post the receive, send, read both
// completions) allocates nothing, for the eager sizes and for the
// rendezvous sizes streamed in segments.
func TestShmDataPath_NoAllocationPerMessage(t *testing.T) {
	a := openShmNode(t, Msg|Tagged)
	b := openShmNode(t, Msg|Tagged)
	nameB, _ := b.ep.Name()
	to, err := a.av.Insert([][]byte{nameB}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{0, 8, 4 << 10, 64 << 10, 1 << 20} {
		t.Run(fmt.Sprintf("size=%d", size), func(t *testing.T) {
			msg, buf := make([]byte, size), make([]byte, size)
			var failed error
			round := func() {
				if failed != nil {
					return
				}
				if err := b.ep.TRecv(buf, AddrUnspec, 7, 0, nil); err != nil {
					failed = err
					return
				}
				if err := a.ep.TSend(msg, to[0], 7, nil); err != nil {
					failed = err
					return
				}
				failed = pollBoth(b.cq, a.cq)
			}
			for range 3 { // warm-up: connection, free lists, buffers
				round()
			}
			if n := testing.AllocsPerRun(50, round); n != 0 {
				t.Errorf("%v allocations per message", n)
			}
			if failed != nil {
				t.Fatal(failed)
			}
		})
	}
}

// pollBoth reads two CQs until each has delivered one completion (the
// sender must be driven too: it streams a large message's segments).
func pollBoth(x, y *CQ) error {
	var e [1]CQEntry
	deadline := time.Now().Add(30 * time.Second)
	gx, gy := 0, 0
	for i := 0; gx == 0 || gy == 0; i++ {
		if gx == 0 {
			k, err := x.Read(e[:])
			if err != nil && !errors.Is(err, ErrAgain) {
				return err
			}
			gx += k
		}
		if gy == 0 {
			k, err := y.Read(e[:])
			if err != nil && !errors.Is(err, ErrAgain) {
				return err
			}
			gy += k
		}
		if i&(1<<14-1) == 1<<14-1 && time.Now().After(deadline) {
			return errors.New("no completion within 30 s")
		}
	}
	return nil
}
