package shm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// checkSink checks each message as it arrives: in order, the length
// and the contents seqMsg gives. A payload the sender could not put in
// the ring (a bounce send, while its ring is being replaced) is fetched
// and checked when the fetch completes.
type checkSink struct {
	tr      *Transport
	sizes   []int
	n       int // messages arrived
	checked int // messages checked
	bufs    map[transport.Op][]byte
	seqs    map[transport.Op]int
	err     error
}

func (s *checkSink) check(seq int, b []byte) {
	want := s.sizes[seq%len(s.sizes)]
	switch {
	case len(b) != want:
		s.err = fmt.Errorf("message %d: %d bytes, want %d", seq, len(b), want)
	case binary.LittleEndian.Uint64(b) != uint64(seq):
		s.err = fmt.Errorf("message %d: sequence %d (out of order)", seq, binary.LittleEndian.Uint64(b))
	case !bytes.Equal(b, seqMsg(seq, want)):
		s.err = fmt.Errorf("message %d of %d bytes garbled", seq, want)
	}
	s.checked++
}

func (s *checkSink) Arrive(p transport.Peer, h *transport.Header, eager []byte, cookie uint64) bool {
	seq := s.n
	s.n++
	if s.err != nil {
		return true
	}
	if eager != nil {
		if int(h.Len) != len(eager) {
			s.err = fmt.Errorf("message %d: header says %d bytes, payload %d", seq, h.Len, len(eager))
		}
		s.check(seq, eager)
		return true
	}
	op := transport.Op(seq + 1)
	buf := make([]byte, h.Len)
	done, got, c := s.tr.Fetch(p, cookie, [][]byte{buf}, op)
	switch {
	case c != 0:
		s.err = fmt.Errorf("message %d: fetch: %d", seq, c)
	case done:
		s.check(seq, buf[:got])
	default:
		s.bufs[op], s.seqs[op] = buf, seq
	}
	return true
}

func (s *checkSink) SendDone(transport.Op, transport.Code) {}
func (s *checkSink) FetchDone(op transport.Op, got int, c transport.Code) {
	if c != 0 && s.err == nil {
		s.err = fmt.Errorf("fetch %d: %d", op, c)
	}
	if s.err == nil {
		s.check(s.seqs[op], s.bufs[op][:got])
	}
	delete(s.bufs, op)
	delete(s.seqs, op)
}
func (s *checkSink) PeerDown(_ transport.Peer, c transport.Code) {
	if s.err == nil {
		s.err = fmt.Errorf("peer down: %d", c)
	}
}

// Eager messages that take a whole ring slot while the receiver keeps up
// (5bbfe7f; 4 and 5 KiB with a 32 KiB L1, 720e328), mixed with packed
// ones of 8 B to 8 KiB and sent while
// the receiver runs concurrently on another goroutine (so producer and
// consumer really race on the ring, under -race too), pausing now and
// then so that bursts pack their records: every message arrives once, in
// order, with its length and contents (a payload sent while its ring was
// being replaced goes by rendezvous from a bounce copy, and is checked
// when fetched).
func TestTransport_SlotRecordsWithAConcurrentReceiver(t *testing.T) {
	testDir(t)
	defer func(v int) { l1d = v }(l1d)
	l1d = 32 << 10 // 4096 and 5000 B take slots (slotsPay), the others pack
	sizes := []int{4096, 2048, 3000, 8, 4096, 5000, 8192, 2500, 100, 4096, 5000}
	const n = 6000
	p := newTPair(t, TransportConfig{})
	rx := &checkSink{tr: p.b, sizes: sizes, bufs: map[transport.Op][]byte{}, seqs: map[transport.Op]int{}}
	deadline := time.Now().Add(30 * time.Second)
	var wg sync.WaitGroup
	var rxDone atomic.Bool
	wg.Add(1)
	go func() { // the receiver, b, on its own goroutine
		defer wg.Done()
		defer rxDone.Store(true)
		for rx.checked < n && rx.err == nil && time.Now().Before(deadline) {
			if !p.b.Poll(rx) {
				p.b.Wait(time.Millisecond)
			}
			if rx.n%500 == 499 {
				time.Sleep(time.Millisecond) // let a burst pack the ring
			}
		}
	}()
	tx := newOpSink()
	h := transport.Header{Kind: transport.KindTagged, Tag: 3}
	var failed error
	bounced := 0
	pa := p.a.peers[p.ab]
	for i := 0; i < n && failed == nil && !rxDone.Load(); {
		// The 8 KiB ones stay eager: timed copies (every farSample-th)
		// voted this peer far under -race (the race runtime's copy) and
		// on a loaded host, which sent most of them by rendezvous.
		pa.far, pa.copyVotes = false, 0
		m := seqMsg(i, sizes[i%len(sizes)])
		h.Len, h.Data = uint64(len(m)), uint64(i%2) // the data word in every other header
		done, c := p.a.Send(p.ab, &h, [][]byte{m}, transport.Op(i+1))
		switch {
		case c == transport.EAgain:
			if time.Now().After(deadline) {
				failed = fmt.Errorf("send %d: EAgain until the deadline", i)
			}
			p.a.Poll(tx)
			continue
		case c != 0:
			failed = fmt.Errorf("send %d of %d bytes: code %d", i, len(m), c)
		case !done:
			bounced++ // a bounce send: it completes on the receiver's ACK
		}
		p.a.Poll(tx)
		i++
	}
	for failed == nil && time.Now().Before(deadline) {
		p.a.Poll(tx) // the sender progresses until the receiver is done
		if rxDone.Load() {
			break
		}
	}
	wg.Wait()
	if rx.err != nil {
		t.Fatalf("received %d of %d: %v", rx.n, n, rx.err)
	}
	if failed != nil {
		t.Fatal(failed)
	}
	if rx.err != nil || rx.checked != n {
		t.Fatalf("received %d of %d (%d checked): %v", rx.n, n, rx.checked, rx.err)
	}
	t.Logf("%d of %d sends bounced", bounced, n)
}
