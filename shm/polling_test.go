package shm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// A receiver that polls its few inbound rings directly tells senders so
// (its polling word), and they stop setting their bitmap bits: no write
// to the bitmap's line per message. Its Wait first asks for bits again
// and returns; only then does it sleep, and a message sent while it
// sleeps wakes it.
func TestTransport_DirectPollingSkipsBitsAndWaitAsksForThem(t *testing.T) {
	p := newTPair(t, TransportConfig{})
	p.send(transport.KindMsg, []byte("first"))
	p.until("first message", func() bool { return p.sb.n == 1 })
	for p.poll() { // until a Poll finds nothing: it takes the bits set so far
	}
	if p.b.polling.Load() == 0 {
		t.Fatal("the receiver's sweep found work but its polling word is 0")
	}
	bit := p.a.peers[p.ab].bit
	p.send(transport.KindMsg, []byte("second"))
	if p.b.bits.IsSet(bit) {
		t.Fatal("the sender set its bit while the receiver polls directly")
	}
	p.until("second message", func() bool { return p.sb.n == 2 })

	// The first Wait returns at once, having cleared the word; records
	// whose senders skipped their bits are found by the next Poll.
	p.send(transport.KindMsg, []byte("third"))
	done := make(chan struct{})
	go func() { p.b.Wait(time.Minute); close(done) }()
	select {
	case <-done:
	case <-time.After(testTimeout(t)):
		t.Fatal("Wait slept with the polling word set")
	}
	if p.b.polling.Load() != 0 {
		t.Fatal("Wait left the polling word set")
	}
	p.until("third message", func() bool { return p.sb.n == 3 })
	// The sweep that found it set the word again: one more Wait clears
	// it (returning at once), and Polls that find nothing leave it clear.
	p.b.Wait(time.Minute)
	for p.poll() {
	}
	if p.b.polling.Load() != 0 {
		t.Fatal("the polling word is set after Wait and idle Polls")
	}

	// Now it sleeps on the bitmap: a send sets the bit and wakes it.
	done = make(chan struct{})
	go func() { p.b.Wait(time.Minute); close(done) }()
	for p.b.Sleepers() == 0 {
		select {
		case <-done:
			t.Fatal("Wait returned without work")
		default:
		}
		time.Sleep(100 * time.Microsecond)
	}
	p.send(transport.KindMsg, []byte("fourth"))
	if !p.b.bits.IsSet(bit) {
		t.Fatal("the sender skipped its bit while the receiver sleeps")
	}
	select {
	case <-done:
	case <-time.After(testTimeout(t)):
		t.Fatal("the sleeping receiver was not woken")
	}
	p.until("fourth message", func() bool { return p.sb.n == 4 })
	if got := string(p.sb.got[3]); got != "fourth" {
		t.Fatalf("got %q", got)
	}
}

// When a receiver polling directly accepts more peers than its sweep
// covers it goes back to the bitmap: the records its old senders wrote
// without setting their bits (they read the polling word as 1) are still
// delivered, because the change sets every inbound peer's bit.
func TestTransport_LeavingDirectPollingLosesNoRecord(t *testing.T) {
	rx, err := NewTransport(TransportConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rx.Close() })
	sink := newSink(t, rx)
	type sender struct {
		tr *Transport
		to transport.Peer
	}
	var senders []sender
	mk := func() sender {
		tr, err := NewTransport(TransportConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Close() })
		to, c := tr.Resolve(rx.Name())
		if c != 0 {
			t.Fatal(c)
		}
		return sender{tr, to}
	}
	send := func(s sender, msg string) {
		t.Helper()
		h := transport.Header{Kind: transport.KindMsg, Len: uint64(len(msg))}
		if _, c := s.tr.Send(s.to, &h, [][]byte{[]byte(msg)}, 1); c != 0 {
			t.Fatal(c)
		}
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(testTimeout(t))
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (%d messages)", what, sink.n)
			}
			rx.Poll(sink)
			for _, s := range senders {
				s.tr.Poll(newSink(t, s.tr))
			}
		}
	}
	for i := range directMax {
		senders = append(senders, mk())
		send(senders[i], fmt.Sprintf("a%d", i))
	}
	until("the first round", func() bool { return sink.n == directMax })
	for rx.Poll(sink) { // until a Poll finds nothing: it takes the bits set so far
	}
	if rx.polling.Load() == 0 {
		t.Fatal("not polling directly with", directMax, "peers")
	}
	// Each old sender writes once more, skipping its bit; then one more
	// peer connects, which the receiver's next Poll accepts before it
	// looks at any ring.
	for i, s := range senders {
		send(s, fmt.Sprintf("b%d", i))
		if rx.bits.IsSet(s.tr.peers[s.to].bit) {
			t.Fatal("a sender set its bit while the receiver polls directly")
		}
	}
	extra := mk()
	send(extra, "extra")
	for rx.Poll(sink) {
	}
	if rx.polling.Load() != 0 {
		t.Fatal("still polling directly with", len(rx.direct), "peers")
	}
	if sink.n != 2*directMax+1 {
		t.Fatalf("%d messages delivered, want %d", sink.n, 2*directMax+1)
	}
}

// The eager header round-trips every header a sender writes, and the
// decoder refuses what no sender writes without reading past the record.
func FuzzEagerHdr(f *testing.F) {
	f.Add([]byte{byte(transport.KindTagged), 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 'h', 'i'})
	f.Add([]byte{byte(transport.KindMsg), transport.FlagRemoteData, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 2, 0})
	// a slot record: 3 bytes of payload, 2 more of the slot
	f.Add(append([]byte{byte(transport.KindMsg), 0, 0, 1, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0,
		0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee,
		0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, // padding
		3, 0, 0, 0, 7, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, 'a', 'b', 'c', 'd', 'e'))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, ok := getEagerHdr(b)
		if !ok {
			return
		}
		slot := b[3] == 1 // a slot record: the slot words follow
		base := n
		var sh *slotHdr
		if slot {
			if n != slotHdrLen {
				t.Fatalf("slot record header of %d bytes, want %d", n, slotHdrLen)
			}
			base = eagerHdrMin + 8*int(b[2])
			sh = &slotHdr{id: binary.LittleEndian.Uint32(b[slotHdrLen-12:]), rel: binary.LittleEndian.Uint64(b[slotHdrLen-8:])}
		}
		if base != eagerHdrMin && base != eagerHdrMax || n > len(b) || h.Len > uint64(len(b)-n) || !slot && h.Len != uint64(len(b)-n) {
			t.Fatalf("header length %d (slot %v), Len %d for a %d-byte record", n, slot, h.Len, len(b))
		}
		var out [slotHdrLen]byte
		m := putEagerHdr(out[:], &h, sh)
		want := eagerHdrMin + 8*btoi(h.Data != 0)
		if slot {
			want = slotHdrLen
		}
		if m != want {
			t.Fatalf("put wrote %d bytes for data %#x slot %v, want %d", m, h.Data, slot, want)
		}
		// the payload, and for a slot record the rest of the slot
		g, k, ok := getEagerHdr(append(out[:m:m], b[n:]...))
		if !ok || k != m || g != h || slot && !bytes.Equal(out[slotHdrLen-12:m], b[slotHdrLen-12:n]) {
			t.Fatalf("round trip: %+v (%d, %v), want %+v", g, k, ok, h)
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
