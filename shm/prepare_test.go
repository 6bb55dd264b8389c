package shm

import (
	"bytes"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// Prepare (the engine calls it at AV insert) makes the connection a first
// send would make: our ring to the peer exists and is announced, and the
// peer's announcement to us, when already posted, is accepted. The first
// round trip then creates no file and follows no switch.
func TestPrepare_ConnectsAheadOfTheFirstMessage(t *testing.T) {
	dir := testDir(t)
	p := newTPair(t, TransportConfig{})
	p.a.Prepare(p.ab)
	if files, _ := ringFiles(t, dir, p.a, p.b); files != 2 {
		t.Fatalf("after a's Prepare: %d ring files, want a's ring to b and a's spare", files)
	}
	pa := p.a.peers[p.ab]
	if pa.out == nil || pa.connSlot < 0 {
		t.Fatalf("a's Prepare: out %v, request slot %d: not connected ahead", pa.out != nil, pa.connSlot)
	}
	p.b.Prepare(p.ba) // accepts a's request, posts its own
	if pb := p.b.peers[p.ba]; pb.in == nil || pb.out == nil {
		t.Fatalf("b's Prepare: inbound ring %v, outbound %v; want both", pb.in != nil, pb.out != nil)
	}
	if files, _ := ringFiles(t, dir, p.a, p.b); files != 4 {
		t.Fatalf("after both Prepares: %d ring files, want 4 (a ring each way, a spare each)", files)
	}
	p.a.Prepare(p.ab) // again: nothing more
	if files, _ := ringFiles(t, dir, p.a, p.b); files != 4 {
		t.Fatalf("a second Prepare made a file: %d ring files", files)
	}
	p.send(transport.KindMsg, seqMsg(1, 8))
	p.until("ping", func() bool { return p.sb.n == 1 })
	p.a, p.b, p.sa, p.sb, p.ab, p.ba = p.b, p.a, p.sb, p.sa, p.ba, p.ab
	p.send(transport.KindMsg, seqMsg(2, 8))
	p.until("pong", func() bool { return p.sb.n == 1 })
	if files, _ := ringFiles(t, dir, p.a, p.b); files != 4 {
		t.Errorf("after the first round trip: %d ring files, want the 4 prepared", files)
	}
	if p.a.switches+p.b.switches != 0 {
		t.Errorf("%d ring switches in an 8-byte round trip", p.a.switches+p.b.switches)
	}
}

// A Prepare that cannot connect (the peer's region does not exist) leaves
// nothing made and reports nothing; the first send then fails as it did
// without it.
func TestPrepare_FailureIsLeftToTheFirstSend(t *testing.T) {
	dir := testDir(t)
	a, err := NewTransport(TransportConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	pi, c := a.Resolve([]byte(Addr(NewName())))
	if c != 0 {
		t.Fatal(c)
	}
	a.Prepare(pi)
	if files, _ := ringFiles(t, dir, a); files != 0 {
		t.Errorf("failed Prepare left %d files", files)
	}
	if err := a.LastError(); err != nil {
		t.Errorf("failed Prepare set LastError: %v", err)
	}
	if p := a.peers[pi]; p.dead || p.out != nil || p.region != nil {
		t.Errorf("failed Prepare left state: dead %v, ring %v, region %v", p.dead, p.out != nil, p.region != nil)
	}
	h := transport.Header{Kind: transport.KindMsg, Len: 1}
	if _, c := a.Send(pi, &h, [][]byte{{1}}, 1); c != transport.EConnRefuse {
		t.Errorf("send to a missing peer after Prepare: code %d, want EConnRefuse", c)
	}
}

// Prepare connects ahead to at most prepareOut peers; the others connect on
// their first message, so a rank inserting a big host's every address does
// not make a ring to each.
func TestPrepare_StopsAtPrepareOutRings(t *testing.T) {
	testDir(t)
	a, err := NewTransport(TransportConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for i := 0; i < prepareOut+2; i++ {
		b, err := NewTransport(TransportConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		pi, c := a.Resolve(b.Name())
		if c != 0 {
			t.Fatal(c)
		}
		a.Prepare(pi)
	}
	out := 0
	for _, p := range a.peers {
		if p.out != nil {
			out++
		}
	}
	if out != prepareOut {
		t.Errorf("%d rings out after preparing %d peers, want %d", out, prepareOut+2, prepareOut)
	}
}

// A receiver that leaves our records unread for PeerTimeout has its
// liveness checked (tick): with a connection made ahead, an eager send to
// a peer that died completes at once, and nothing else would notice it.
func TestTransport_UnreadRingToADeadPeerFailsIt(t *testing.T) {
	testDir(t)
	p := newTPair(t, TransportConfig{ShrinkAfter: 20 * time.Millisecond, PeerTimeout: 10 * time.Millisecond})
	p.a.Prepare(p.ab)
	p.b.Prepare(p.ba)
	if err := p.b.Close(); err != nil { // its region's lock goes with it
		t.Fatal(err)
	}
	h := transport.Header{Kind: transport.KindMsg, Len: 8}
	if done, c := p.a.Send(p.ab, &h, [][]byte{make([]byte, 8)}, 1); !done || c != 0 {
		t.Fatalf("eager send to the closed peer: done %v code %d, want sent into the ring", done, c)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(p.sa.errs) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the peer that never reads its ring was never found gone")
		}
		p.a.Poll(p.sa)
		time.Sleep(50 * time.Microsecond)
	}
	if p.sa.errs[0] != transport.EConnReset {
		t.Errorf("peer down with code %d, want EConnReset", p.sa.errs[0])
	}
	if _, c := p.a.Send(p.ab, &h, [][]byte{make([]byte, 8)}, 1); c == 0 {
		t.Error("a send to the failed peer succeeded")
	}
}

// The first growth of a ring after Prepare takes the spare segment made
// then: a 4 KiB message (whose eagerDepth records need a 64 KiB ring)
// makes no file on its way; the next growth beyond makes one as before.
func TestPrepare_FirstGrowthTakesTheSpare(t *testing.T) {
	testDir(t)
	p := newTPair(t, TransportConfig{ShrinkAfter: time.Hour})
	p.a.Prepare(p.ab)
	p.b.Prepare(p.ba)
	spare := p.a.spare
	if spare == nil {
		t.Fatal("no spare after Prepare")
	}
	p.send(transport.KindMsg, seqMsg(1, 4<<10))
	p.until("4 KiB message", func() bool { return p.sb.n == 1 })
	pa := p.a.peers[p.ab]
	if p.a.spare != nil || pa.seg != spare.seg || pa.out.Cap() != spareCap {
		t.Fatalf("after the first 4 KiB message: spare kept %v, ring is the spare %v, capacity %d",
			p.a.spare != nil, pa.seg == spare.seg, pa.out.Cap())
	}
	if !bytes.Equal(p.sb.got[0], seqMsg(1, 4<<10)) {
		t.Fatal("payload changed across the switch to the spare")
	}
	p.send(transport.KindMsg, seqMsg(2, 16<<10)) // needs 256 KiB: a new file
	p.until("16 KiB message", func() bool { return p.sb.n == 2 })
	if pa.seg == spare.seg || pa.out.Cap() <= spareCap || !bytes.Equal(p.sb.got[1], seqMsg(2, 16<<10)) {
		t.Fatalf("16 KiB after the spare: ring capacity %d", pa.out.Cap())
	}
}

// An unused spare goes after ShrinkAfter without sends, as grown rings
// shrink then: an idle pair made ahead is back to its two small rings.
func TestPrepare_UnusedSpareGoesWhenIdle(t *testing.T) {
	dir := testDir(t)
	p := newTPair(t, TransportConfig{ShrinkAfter: 20 * time.Millisecond})
	p.a.Prepare(p.ab)
	p.b.Prepare(p.ba)
	if p.a.spare == nil || p.b.spare == nil {
		t.Fatal("no spare after Prepare")
	}
	p.until("spares closed", func() bool { return p.a.spare == nil && p.b.spare == nil })
	if files, n := ringFiles(t, dir, p.a, p.b); files != 2 || n != int64(2*RingSegSize(DefaultMinRingSize)) {
		t.Errorf("idle prepared pair: %d ring files of %d bytes, want the 2 small rings", files, n)
	}
}
