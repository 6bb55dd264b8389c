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
	if files, _ := ringFiles(t, dir, p.a, p.b); files != 3 {
		t.Fatalf("after a's Prepare: %d ring files, want a's ring to b and a's two spares", files)
	}
	pa := p.a.peers[p.ab]
	if pa.out == nil || pa.connSlot < 0 {
		t.Fatalf("a's Prepare: out %v, request slot %d: not connected ahead", pa.out != nil, pa.connSlot)
	}
	p.b.Prepare(p.ba) // accepts a's request, posts its own
	if pb := p.b.peers[p.ba]; pb.in == nil || pb.out == nil {
		t.Fatalf("b's Prepare: inbound ring %v, outbound %v; want both", pb.in != nil, pb.out != nil)
	}
	if files, _ := ringFiles(t, dir, p.a, p.b); files != 6 {
		t.Fatalf("after both Prepares: %d ring files, want 6 (a ring each way, two spares each)", files)
	}
	p.a.Prepare(p.ab) // again: nothing more
	if files, _ := ringFiles(t, dir, p.a, p.b); files != 6 {
		t.Fatalf("a second Prepare made a file: %d ring files", files)
	}
	p.send(transport.KindMsg, seqMsg(1, 8))
	p.until("ping", func() bool { return p.sb.n == 1 })
	p.a, p.b, p.sa, p.sb, p.ab, p.ba = p.b, p.a, p.sb, p.sa, p.ba, p.ab
	p.send(transport.KindMsg, seqMsg(2, 8))
	p.until("pong", func() bool { return p.sb.n == 1 })
	if files, _ := ringFiles(t, dir, p.a, p.b); files != 6 {
		t.Errorf("after the first round trip: %d ring files, want the 6 prepared", files)
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

// The first prepareWide rings Prepare makes hold a 2-5 KiB message's
// eagerDepth records (spareSmallCap), so that such messages' first round
// trips follow no switch; the growths after take the spare segments made
// then, the smallest that covers each: a 16 KiB message (whose records
// need 64 KiB) the large one, with no file made on its way; a growth
// beyond makes one as before. The rings of the peers prepared later start
// at MinRingSize, and a 4 KiB message to one of them takes the small spare
// (TestPrepare_LaterRingsStartSmall).
func TestPrepare_FirstGrowthTakesTheSpare(t *testing.T) {
	testDir(t)
	p := newTPair(t, TransportConfig{ShrinkAfter: time.Hour})
	p.a.Prepare(p.ab)
	p.b.Prepare(p.ba)
	small, spare := p.a.spareSmall, p.a.spare
	if small == nil || spare == nil {
		t.Fatal("no spares after Prepare")
	}
	pa := p.a.peers[p.ab]
	prepared := &ringSeg{seg: pa.seg}
	for i, c := range []struct {
		size     int
		seg      *ringSeg // the ring's segment after the message (nil: a new one)
		capacity int
	}{
		{8, prepared, spareSmallCap},
		{4 << 10, prepared, spareSmallCap},
		{5 << 10, prepared, spareSmallCap},
		{16 << 10, spare, spareCap},
		{64 << 10, nil, 2 * spareCap}, // eager up to MaxEager only: a 64 KiB window
	} {
		if c.size > DefaultMaxEager {
			// not eager: grow as a full ring does, once the last
			// switch is done
			p.until("the replaced ring closed", func() bool { return pa.old == nil })
			if !p.a.growTo(pa, c.capacity) {
				t.Fatalf("growth to %d refused", c.capacity)
			}
		} else {
			p.send(transport.KindMsg, seqMsg(i+1, c.size))
			p.until("message", func() bool { return p.sb.n == i+1 })
			if !bytes.Equal(p.sb.got[i], seqMsg(i+1, c.size)) {
				t.Fatalf("%d B: payload changed across the switch", c.size)
			}
		}
		if c.seg != nil && (pa.seg != c.seg.seg || pa.out.Cap() != c.capacity) ||
			c.seg == nil && (pa.seg == small.seg || pa.seg == spare.seg || pa.seg == prepared.seg || pa.out.Cap() != c.capacity) {
			t.Fatalf("after %d B: ring capacity %d, the prepared ring %v, the small spare %v, the large %v",
				c.size, pa.out.Cap(), pa.seg == prepared.seg, pa.seg == small.seg, pa.seg == spare.seg)
		}
		if c.seg == prepared && p.a.switches != 0 {
			t.Fatalf("after %d B: %d ring switches, want none", c.size, p.a.switches)
		}
	}
	if p.a.spare != nil {
		t.Error("the spare taken is still kept")
	}
	if p.a.spareSmall != small {
		t.Error("the small spare, which no growth needed, was taken")
	}
}

// Prepare's first prepareWide rings start at spareSmallCap, the later ones
// at MinRingSize (what each peer costs up front); the first 4 KiB message
// to a later one grows its ring into the small spare, made ahead.
func TestPrepare_LaterRingsStartSmall(t *testing.T) {
	testDir(t)
	a, err := NewTransport(TransportConfig{ShrinkAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var last *Transport
	var lastIdx transport.Peer
	for i := 0; i < prepareWide+2; i++ {
		b, err := NewTransport(TransportConfig{ShrinkAfter: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		pi, c := a.Resolve(b.Name())
		if c != 0 {
			t.Fatal(c)
		}
		a.Prepare(pi)
		want := spareSmallCap
		if i >= prepareWide {
			want = DefaultMinRingSize
		}
		if got := a.peers[pi].out.Cap(); got != want {
			t.Fatalf("prepared ring %d: capacity %d, want %d", i, got, want)
		}
		last, lastIdx = b, pi
	}
	small := a.spareSmall
	if small == nil {
		t.Fatal("no small spare after Prepare")
	}
	sb := newSink(t, last)
	msg := seqMsg(1, 4<<10)
	h := transport.Header{Kind: transport.KindMsg, Len: uint64(len(msg))}
	sa := newSink(t, a)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, c := a.Send(lastIdx, &h, [][]byte{msg}, 1)
		if c == 0 {
			break
		}
		if c != transport.EAgain || time.Now().After(deadline) {
			t.Fatalf("4 KiB send: code %d", c)
		}
		a.Poll(sa)
		last.Poll(sb)
	}
	for sb.n == 0 {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the 4 KiB message")
		}
		a.Poll(sa)
		last.Poll(sb)
	}
	if !bytes.Equal(sb.got[0], msg) {
		t.Error("payload changed across the switch")
	}
	if pl := a.peers[lastIdx]; pl.seg != small.seg || pl.out.Cap() != spareSmallCap {
		t.Errorf("after 4 KiB to a later peer: ring capacity %d, the small spare %v", pl.out.Cap(), pl.seg == small.seg)
	}
}

// An unused spare goes after ShrinkAfter without sends, as grown rings
// shrink then: an idle pair made ahead is back to its two small rings.
func TestPrepare_UnusedSpareGoesWhenIdle(t *testing.T) {
	dir := testDir(t)
	p := newTPair(t, TransportConfig{ShrinkAfter: 20 * time.Millisecond})
	p.a.Prepare(p.ab)
	p.b.Prepare(p.ba)
	if p.a.spare == nil || p.b.spare == nil || p.a.spareSmall == nil || p.b.spareSmall == nil {
		t.Fatal("no spares after Prepare")
	}
	pa, pb := p.a.peers[p.ab], p.b.peers[p.ba]
	if pa.out.Cap() != spareSmallCap || pb.out.Cap() != spareSmallCap {
		t.Fatalf("prepared rings of %d and %d, want %d (prepareWide)", pa.out.Cap(), pb.out.Cap(), spareSmallCap)
	}
	p.until("spares closed and rings shrunk", func() bool {
		return p.a.spare == nil && p.b.spare == nil && p.a.spareSmall == nil && p.b.spareSmall == nil &&
			pa.out.Cap() == DefaultMinRingSize && pb.out.Cap() == DefaultMinRingSize && pa.old == nil && pb.old == nil
	})
	if files, n := ringFiles(t, dir, p.a, p.b); files != 2 || n != int64(2*RingSegSize(DefaultMinRingSize)) {
		t.Errorf("idle prepared pair: %d ring files of %d bytes, want the 2 small rings", files, n)
	}
}
