package fi

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestSreadDrivenPeers_tcp and _shm: two endpoints, each driven only by
// cq.Sread with a timeout on its own goroutine (as an application that
// blocks for completions does), play ping-pong with eager and rendezvous
// messages. Every send completion and every receive (data, length, tag,
// source) must arrive; an Sread error other than ErrAgain fails the test
// at once, so a CQ that cannot be waited on is not mistaken for a silent
// peer.
func TestSreadDrivenPeers_tcp(t *testing.T) { sreadDrivenPeers(t, "tcp") }

func TestSreadDrivenPeers_shm(t *testing.T) {
	shmTestDir(t)
	sreadDrivenPeers(t, "shm")
}

// sreadSizes straddle the eager limit of both providers (tcp: 16 KiB).
var sreadSizes = []int{0, 8, 4096, 16 << 10, 16<<10 + 1, 100000, 1 << 20}

const sreadRounds = 3 // per size, each way

func sreadDrivenPeers(t *testing.T, prov string) {
	a := openE2EWait(t, prov, Msg|Tagged|Source, WaitUnspec)
	b := openE2EWait(t, prov, Msg|Tagged|Source, WaitUnspec)
	toB, toA := crossInsert(t, a, b)
	deadline := time.Now().Add(2 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-10*time.Second).Before(deadline) {
		deadline = d.Add(-10 * time.Second)
	}
	errs := make(chan error, 2)
	go func() { errs <- sreadPlayer(a, toB, true, deadline) }()
	go func() { errs <- sreadPlayer(b, toA, false, deadline) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// sreadPayload is the message of one round in one direction.
func sreadPayload(size, round int, ping bool) []byte {
	m := make([]byte, size)
	seed := byte(round * 7)
	if ping {
		seed += 101
	}
	for i := range m {
		m[i] = seed + byte(i%251)
	}
	return m
}

// sreadPlayer runs one side: the pinger sends first and then waits for the
// reply; the ponger waits, then replies. Receives are posted before the
// peer can send, so every message meets a posted buffer.
func sreadPlayer(n *shmNode, peer Addr, ping bool, deadline time.Time) error {
	who := "pong"
	if ping {
		who = "ping"
	}
	buf := make([]byte, sreadSizes[len(sreadSizes)-1])
	seen := map[string]CQEntry{}
	await := func(ctxs ...string) error {
		var e [4]CQEntry
		for {
			missing := ""
			for _, c := range ctxs {
				if _, ok := seen[c]; !ok {
					missing = c
					break
				}
			}
			if missing == "" {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: timed out waiting for %q (Sread never delivered it)", who, missing)
			}
			k, err := n.cq.Sread(e[:], time.Second)
			switch {
			case errors.Is(err, ErrAvail):
				ee, rerr := n.cq.ReadErr()
				return fmt.Errorf("%s: error completion %v (%v) for %v", who, ee.Err, rerr, ee.Context)
			case err != nil && !errors.Is(err, ErrAgain):
				return fmt.Errorf("%s: Sread: %w", who, err)
			}
			for _, c := range e[:k] {
				key, _ := c.Context.(string)
				if _, dup := seen[key]; dup {
					return fmt.Errorf("%s: completion %q twice", who, key)
				}
				seen[key] = c
			}
		}
	}
	for si, size := range sreadSizes {
		for r := range sreadRounds {
			tag := uint64(si*sreadRounds + r)
			rx := fmt.Sprintf("rx%d", tag)
			tx := fmt.Sprintf("tx%d", tag)
			if err := n.ep.TRecv(buf[:size], AddrUnspec, tag, 0, rx); err != nil {
				return fmt.Errorf("%s: TRecv: %w", who, err)
			}
			if ping {
				if err := n.ep.TSend(sreadPayload(size, r, true), peer, tag, tx); err != nil {
					return fmt.Errorf("%s: TSend: %w", who, err)
				}
				if err := await(tx, rx); err != nil {
					return fmt.Errorf("size %d round %d: %w", size, r, err)
				}
			} else {
				if err := await(rx); err != nil {
					return fmt.Errorf("size %d round %d: %w", size, r, err)
				}
			}
			e := seen[rx]
			want := sreadPayload(size, r, !ping)
			if e.Len != size || e.Tag != tag || e.Src != peer || string(buf[:e.Len]) != string(want) {
				return fmt.Errorf("%s: size %d round %d: completion len %d tag %d src %d (want %d %d %d), data equal %v",
					who, size, r, e.Len, e.Tag, e.Src, size, tag, peer, string(buf[:min(e.Len, size)]) == string(want))
			}
			if !ping {
				if err := n.ep.TSend(sreadPayload(size, r, false), peer, tag, tx); err != nil {
					return fmt.Errorf("%s: TSend: %w", who, err)
				}
				if err := await(tx); err != nil {
					return fmt.Errorf("size %d round %d: %w", size, r, err)
				}
			}
			delete(seen, rx)
			delete(seen, tx)
		}
	}
	return nil
}

// TestCQ_SreadOnWaitNoneFailsWithNoSys: fi_cq(3) says a CQ opened with
// FI_WAIT_NONE may not be waited on; Sread on it fails with ErrNoSys at
// once. WaitNone is 0, as in libfabric, so a CQAttr that leaves WaitObj
// unset opens such a CQ (a nil attr picks WaitUnspec).
func TestCQ_SreadOnWaitNoneFailsWithNoSys(t *testing.T) {
	for _, prov := range []string{"shm", "tcp"} {
		t.Run(prov, func(t *testing.T) {
			if prov == "shm" {
				shmTestDir(t)
			}
			n := openE2E(t, prov, Msg|Tagged)
			var e [1]CQEntry
			if k, err := n.cq.Sread(e[:], time.Minute); k != 0 || !errors.Is(err, ErrNoSys) {
				t.Fatalf("Sread on a WaitNone CQ: %d, %v; want ErrNoSys", k, err)
			}
			cq, err := n.dom.OpenCQ(nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cq.Close()
			if k, err := cq.Sread(e[:], 0); k != 0 || !errors.Is(err, ErrAgain) {
				t.Fatalf("Sread on a default CQ: %d, %v; want ErrAgain", k, err)
			}
		})
	}
}
