package fi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestShmThreadSafeDomain: in FI_THREAD_SAFE domains (fi_domain(3)) many
// goroutines send, post receives and read the CQs of the same endpoints
// at once; every message arrives intact and in order per tag, every
// completion reaches its owner. Run under -race.
func TestShmThreadSafeDomain(t *testing.T) {
	shmTestDir(t)
	const (
		workers = 4
		perG    = 300
	)
	a := openNode(t, "shm", nodeCfg{threadSafe: true})
	b := openNode(t, "shm", nodeCfg{threadSafe: true})
	if th := a.dom.Info().DomainAttr.Threading; th != ThreadSafe {
		t.Fatalf("domain threading %v, want FI_THREAD_SAFE", th)
	}
	nameB, _ := b.ep.Name()
	nameA, _ := a.ep.Name()
	toB, err := a.av.Insert([][]byte{nameB}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.av.Insert([][]byte{nameA}, 0); err != nil {
		t.Fatal(err)
	}
	size := func(i int) int {
		if i%4 == 0 {
			return 100000 + i // rendezvous
		}
		return 16 + i
	}
	msg := func(g, i int) []byte {
		m := pattern(size(i), g*perG+i)
		binary.LittleEndian.PutUint32(m, uint32(i))
		return m
	}

	// Completions are dispatched to their owner goroutine, whoever read
	// them: ctx is the owner's index.
	rxCh := make([]chan got, workers)
	for g := range rxCh {
		rxCh[g] = make(chan got, perG)
	}
	var txDone [workers]atomic.Int64
	var txErrs atomic.Int64
	readTx := func() {
		var es [8]CQEntry
		k, err := a.txcq.Read(es[:])
		for _, e := range es[:k] {
			txDone[e.Context.(int)].Add(1)
		}
		if errors.Is(err, ErrAvail) {
			if _, err := a.txcq.ReadErr(); err == nil {
				txErrs.Add(1)
			}
		}
	}
	readRx := func() {
		var es [8]CQEntry
		k, err := b.rxcq.Read(es[:])
		for _, e := range es[:k] {
			rxCh[e.Context.(int)] <- got{CQEntry: e}
		}
		if errors.Is(err, ErrAvail) {
			if e, err := b.rxcq.ReadErr(); err == nil {
				rxCh[e.Context.(int)] <- got{CQEntry: e.CQEntry, err: &e}
			}
		}
	}

	deadline := time.Now().Add(2 * time.Minute)
	var wg sync.WaitGroup
	errc := make(chan error, 2*workers)
	for g := range workers {
		wg.Add(2)
		go func() { // sender g: tag g
			defer wg.Done()
			for i := range perG {
				m := msg(g, i)
				for {
					err := a.ep.TSend(m, toB[0], uint64(g), g)
					if err == nil {
						break
					}
					if !errors.Is(err, ErrAgain) || time.Now().After(deadline) {
						errc <- err
						return
					}
					readTx()
				}
				readTx()
			}
			for txDone[g].Load() < perG && txErrs.Load() == 0 {
				if time.Now().After(deadline) {
					errc <- errors.New("transmit completions missing")
					return
				}
				readTx()
				time.Sleep(10 * time.Microsecond)
			}
		}()
		go func() { // receiver g: one receive at a time for tag g
			defer wg.Done()
			buf := make([]byte, 200000)
			for i := range perG {
				for {
					err := b.ep.TRecv(buf, AddrUnspec, uint64(g), 0, g)
					if err == nil {
						break
					}
					if !errors.Is(err, ErrAgain) {
						errc <- err
						return
					}
					readRx()
				}
				var c got
			wait:
				for {
					select {
					case c = <-rxCh[g]:
						break wait
					default:
					}
					if time.Now().After(deadline) {
						errc <- errors.New("receive timed out")
						return
					}
					readRx()
				}
				if c.err != nil {
					errc <- c.err.Err
					return
				}
				if want := msg(g, i); c.Len != len(want) || c.Tag != uint64(g) || !bytes.Equal(buf[:c.Len], want) {
					errc <- errors.New("wrong message for tag")
					t.Errorf("tag %d message %d: len %d (want %d) seq %d", g, i, c.Len, len(want), binary.LittleEndian.Uint32(buf))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if n := txErrs.Load(); n != 0 {
		t.Fatalf("%d transmit error completions", n)
	}
}

// TestShmThreadDomainDefault: without a threading hint the shm domain is
// FI_THREAD_DOMAIN (no locks on the data path), and works from one
// goroutine.
func TestShmThreadDomainDefault(t *testing.T) {
	shmTestDir(t)
	a := openNode(t, "shm", nodeCfg{})
	if th := a.dom.Info().DomainAttr.Threading; th != ThreadDomain {
		t.Fatalf("default threading %v, want FI_THREAD_DOMAIN", th)
	}
	b := openNode(t, "shm", nodeCfg{})
	nameB, _ := b.ep.Name()
	to, err := a.av.Insert([][]byte{nameB}, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if err := b.ep.Recv(buf, AddrUnspec, "r"); err != nil {
		t.Fatal(err)
	}
	if err := a.ep.Send([]byte("domain"), to[0], "s"); err != nil {
		t.Fatal(err)
	}
	a.tx()
	if e := b.rx(); e.Context != "r" || string(buf[:6]) != "domain" {
		t.Fatalf("completion %+v", e)
	}
}
