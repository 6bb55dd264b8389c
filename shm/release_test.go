package shm

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/gofi-dev/fi/transport"
)

// In a ping-pong of slot records each side's answer tells the other how
// far it has read (slotHdr): the sender's cached head moves on without a
// read of the shared head word, and every payload arrives whole.
func TestTransport_SlotRecordsCarryTheReleasedHead(t *testing.T) {
	defer func(v int) { l1d = v }(l1d)
	l1d = 32 << 10
	p := newTPair(t, TransportConfig{})
	const n, rounds = 4096, 40
	for i := range rounds {
		m := seqMsg(2*i, n)
		p.send(transport.KindMsg, m)
		p.until("the ping", func() bool { return p.sb.n == i+1 })
		if !bytes.Equal(p.sb.got[i], m) {
			t.Fatalf("ping %d differs", i)
		}
		r := seqMsg(2*i+1, n)
		h := transport.Header{Kind: transport.KindMsg, Len: n}
		p.until("the pong sent", func() bool {
			_, c := p.b.Send(p.ba, &h, [][]byte{r}, 1)
			return c == 0
		})
		p.until("the pong", func() bool { return p.sa.n == i+1 })
		if !bytes.Equal(p.sa.got[i], r) {
			t.Fatalf("pong %d differs", i)
		}
	}
	if p.a.released < rounds/2 || p.b.released < rounds/2 {
		t.Fatalf("released heads learnt from answers: a %d, b %d of %d rounds", p.a.released, p.b.released, rounds)
	}
}

// A released position about another ring (an older one, by id, or none)
// or beyond what we published is not applied.
func TestTransport_NoteReleaseTakesOnlyTheCurrentRing(t *testing.T) {
	p := newTPair(t, TransportConfig{})
	p.send(transport.KindMsg, seqMsg(0, 64))
	p.send(transport.KindMsg, seqMsg(1, 64))
	p.until("both", func() bool { return p.sb.n == 2 })
	pa := p.a.peers[p.ab]
	pb := p.b.peers[p.ba]
	if pb.in == nil || pb.inID != pa.outID || pa.outID == 0 {
		t.Fatalf("ring ids: sender %d, receiver %d", pa.outID, pb.inID)
	}
	rel := pb.in.Released()
	w := func(id uint32, pos uint64) []byte {
		b := make([]byte, slotWords)
		binary.LittleEndian.PutUint32(b[4:], id)
		binary.LittleEndian.PutUint64(b[8:], pos)
		return b
	}
	for _, c := range []struct {
		id  uint32
		pos uint64
	}{{0, rel}, {pa.outID + 1, rel}, {pa.outID - 1, rel}, {pa.outID, 1 << 40}} {
		p.a.noteRelease(pa, w(c.id, c.pos))
		if p.a.released != 0 {
			t.Fatalf("ring %d position %d taken for ring %d", c.id, c.pos, pa.outID)
		}
	}
	p.a.noteRelease(pa, w(pa.outID, rel))
	if p.a.released != 1 {
		t.Fatalf("the current ring's released position %d not taken", rel)
	}
}
