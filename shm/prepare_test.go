package shm

import (
	"bytes"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// Prepare (the engine calls it at AV insert) makes the connection a first
// send would make: our ring to the peer exists and is announced, with a
// return ring for the peer to write back to us, and the peer's
// announcement to us, when already posted, is accepted. The peer's
// Prepare maps both rings (it makes none), and the first round trip then
// creates, opens and maps no file and follows no switch: the first
// endpoint's accept of the peer's ring takes the return ring it made.
func TestPrepare_ConnectsAheadOfTheFirstMessage(t *testing.T) {
	dir := testDir(t)
	p := newTPair(t, TransportConfig{})
	p.a.Prepare(p.ab)
	if files, _ := ringFiles(t, dir, p.a, p.b); files != 5 {
		t.Fatalf("after a's Prepare: %d ring files, want a's ring to b, the return ring, a's two spares and the return spare", files)
	}
	pa := p.a.peers[p.ab]
	if pa.out == nil || pa.connSlot < 0 || pa.ret == nil {
		t.Fatalf("a's Prepare: out %v, request slot %d, return ring %v: not connected ahead", pa.out != nil, pa.connSlot, pa.ret != nil)
	}
	ret := pa.ret.seg.Name()
	p.b.Prepare(p.ba) // accepts a's request, maps the return ring, posts its request
	pb := p.b.peers[p.ba]
	if pb.in == nil || pb.out == nil {
		t.Fatalf("b's Prepare: inbound ring %v, outbound %v; want both", pb.in != nil, pb.out != nil)
	}
	if pb.seg.Name() != ret || pb.seg.Owner() {
		t.Fatalf("b's ring to a is %s (owner %v), want a's return ring %s", pb.seg.Name(), pb.seg.Owner(), ret)
	}
	if files, _ := ringFiles(t, dir, p.a, p.b); files != 7 {
		t.Fatalf("after both Prepares: %d ring files, want 7 (a ring each way, two spares each, the return spare)", files)
	}
	p.a.Prepare(p.ab) // again: accepts b's request, makes nothing
	if pa.in == nil || pa.inSeg.Name() != ret || !pa.inSeg.Owner() || pa.ret != nil {
		t.Fatalf("a's accept of b's request: inbound ring %v, not the return ring %s it made", pa.in != nil, ret)
	}
	if files, _ := ringFiles(t, dir, p.a, p.b); files != 7 {
		t.Fatalf("a second Prepare made a file: %d ring files", files)
	}
	p.send(transport.KindMsg, seqMsg(1, 8))
	p.until("ping", func() bool { return p.sb.n == 1 })
	p.a, p.b, p.sa, p.sb, p.ab, p.ba = p.b, p.a, p.sb, p.sa, p.ba, p.ab
	p.send(transport.KindMsg, seqMsg(2, 8))
	p.until("pong", func() bool { return p.sb.n == 1 })
	if files, _ := ringFiles(t, dir, p.a, p.b); files != 7 {
		t.Errorf("after the first round trip: %d ring files, want the 7 prepared", files)
	}
	if p.a.switches+p.b.switches != 0 {
		t.Errorf("%d ring switches in an 8-byte round trip", p.a.switches+p.b.switches)
	}
}

// When each side connects before it has seen the other's request (both
// insert at once, or one sends first), each writes to a ring it made and
// the return rings offered are closed: no file is left but the two rings
// and the spares, the rings carry messages both ways in order, and
// nothing is left after Close.
func TestPrepare_ReturnRingsOfferedAtOnceAreDropped(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    func(p *tpair) // b connects to a without accepting a's request
	}{
		{"both prepare", func(p *tpair) {
			if c := p.b.connect(p.b.peers[p.ba], spareSmallCap, true, true); c != 0 {
				t.Fatal(c)
			}
			p.b.makeSpare()
		}},
		{"b sends first", func(p *tpair) {
			h := transport.Header{Kind: transport.KindMsg, Len: 8}
			if _, c := p.b.Send(p.ba, &h, [][]byte{seqMsg(100, 8)}, 1); c != 0 {
				t.Fatal(c)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testDir(t)
			p := newTPair(t, TransportConfig{ShrinkAfter: 20 * time.Millisecond})
			p.a.Prepare(p.ab)
			tc.b(p)
			pa, pb := p.a.peers[p.ab], p.b.peers[p.ba]
			if pb.seg == nil || !pb.seg.Owner() {
				t.Fatal("b's ring to a is not its own")
			}
			var want [][]byte
			for i := range 3 {
				p.sendSeq(&want, 8<<i)
			}
			p.wantGot(want)
			p.until("both accepted", func() bool { return pa.in != nil && pb.in != nil && pa.connSlot < 0 && pb.connSlot < 0 })
			if pa.ret != nil || pb.ret != nil || pa.offer.name != "" || pb.offer.name != "" {
				t.Errorf("return rings left: a %v b %v, offers a %q b %q", pa.ret != nil, pb.ret != nil, pa.offer.name, pb.offer.name)
			}
			if !pa.seg.Owner() || !pb.seg.Owner() || pa.inSeg.Owner() || pb.inSeg.Owner() {
				t.Error("a side writes to a ring it did not make")
			}
			// The return rings set aside go at a tick ShrinkAfter later.
			p.until("the return rings closed", func() bool { return len(p.a.retStale)+len(p.b.retStale) == 0 })
			if files, _ := ringFiles(t, dir, p.a, p.b); files > 6 {
				t.Errorf("%d ring files, want at most 6 (a ring each way, two spares each)", files)
			}
			_ = p.a.Close()
			_ = p.b.Close()
			if files, _ := ringFiles(t, dir); files != 0 {
				t.Errorf("%d files left after both closed", files)
			}
		})
	}
}

// A peer that took our return ring and exits: what it wrote is delivered
// (the file is ours, so it outlives the writer), and the peer is then
// found gone through its region, not through the ring's lock (which is
// ours and always held).
func TestPrepare_ReturnRingWriterGoneIsFound(t *testing.T) {
	dir := testDir(t)
	p := newTPair(t, TransportConfig{ShrinkAfter: 20 * time.Millisecond, PeerTimeout: 10 * time.Millisecond})
	p.a.Prepare(p.ab)
	p.b.Prepare(p.ba)
	p.a.Prepare(p.ab) // accepts b's request: b's Close need not linger
	pa := p.a.peers[p.ab]
	h := transport.Header{Kind: transport.KindMsg, Len: 8}
	if done, c := p.b.Send(p.ba, &h, [][]byte{seqMsg(7, 8)}, 1); !done || c != 0 {
		t.Fatalf("b's send: done %v code %d", done, c)
	}
	if err := p.b.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for p.sa.n == 0 {
		if time.Now().After(deadline) {
			t.Fatal("b's message, written before it closed, never arrived")
		}
		p.a.Poll(p.sa)
	}
	if !bytes.Equal(p.sa.got[0], seqMsg(7, 8)) || !pa.inSeg.Owner() {
		t.Fatalf("got %x (inbound ring ours: %v)", p.sa.got[0], pa.inSeg.Owner())
	}
	if alive, err := pa.inAlive(); err != nil || alive {
		t.Errorf("inAlive after b closed: %v, %v; want dead", alive, err)
	}
	p.wantClosedPeerFoundGone(dir, deadline)
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

// The first growth each way maps no file: the peer that inserted first
// named its spare in its request (the second maps it at its insert) and
// made one for the second's growth back (which the second maps as it maps
// the return ring). A 16 KiB message each way grows both rings into them;
// the payloads come through whole.
func TestPrepare_FirstGrowthsMapNothing(t *testing.T) {
	testDir(t)
	p := newTPair(t, TransportConfig{ShrinkAfter: time.Hour})
	p.a.Prepare(p.ab)
	p.b.Prepare(p.ba)
	p.a.Prepare(p.ab) // accepts b's request
	pa, pb := p.a.peers[p.ab], p.b.peers[p.ba]
	first := pa.seg.Name()
	if pb.inSpare == nil || pb.inSpare.seg.Name() != SpareRingName(first) || pb.inSpare.seg.Owner() {
		t.Fatalf("b did not map a's spare %s ahead", SpareRingName(first))
	}
	if pb.outSpare == nil || pb.outSpare.seg.Name() != ReturnSpareName(first) || pa.inSpare == nil || pa.inSpare.seg != nil && !pa.inSpare.seg.Owner() {
		t.Fatalf("b did not take the return spare %s a made", ReturnSpareName(first))
	}
	msg := seqMsg(1, 16<<10)
	p.send(transport.KindMsg, msg)
	p.until("a's 16 KiB message", func() bool { return p.sb.n == 1 })
	if pb.inSeg.Name() != SpareRingName(first) || pb.inSpare != nil || pa.seg.Name() != SpareRingName(first) {
		t.Errorf("a's growth: a writes %s, b reads %s (spare still mapped aside: %v), want both %s",
			pa.seg.Name(), pb.inSeg.Name(), pb.inSpare != nil, SpareRingName(first))
	}
	p.a, p.b, p.sa, p.sb, p.ab, p.ba = p.b, p.a, p.sb, p.sa, p.ba, p.ab
	back := seqMsg(2, 16<<10)
	p.send(transport.KindMsg, back)
	p.until("b's 16 KiB message", func() bool { return p.sb.n == 1 })
	if pa.inSeg.Name() != ReturnSpareName(first) || !pa.inSeg.Owner() || pa.inSpare != nil || pb.outSpare != nil {
		t.Errorf("b's growth: a reads %s (ours %v), want the return spare %s", pa.inSeg.Name(), pa.inSeg.Owner(), ReturnSpareName(first))
	}
	if !bytes.Equal(p.sb.got[0], back) || !bytes.Equal(p.sa.got[0], msg) {
		t.Error("a payload changed across the growth")
	}
	if pa.inID != pb.outID || pa.inID == 0 {
		t.Errorf("the ring b writes is numbered %d by b and %d by a", pb.outID, pa.inID)
	}
}

// A peer that goes away in the middle of the return-ring set-up leaves
// errors, not hangs, and no file: the writer that took our return ring
// and posted its request closes before we accept it (its Close lingers
// for the accept; what it wrote is delivered from the file we own, and
// it is then found gone through its region), or the endpoint that offered a
// return ring closes before the peer's connect maps it (the peer's first
// send fails as a send to a closed endpoint does).
func TestPrepare_PeerGoneMidSetup(t *testing.T) {
	h := transport.Header{Kind: transport.KindMsg, Len: 8}
	t.Run("writer closes before its request is accepted", func(t *testing.T) {
		dir := testDir(t)
		p := newTPair(t, TransportConfig{ShrinkAfter: 20 * time.Millisecond, PeerTimeout: 10 * time.Millisecond})
		p.a.Prepare(p.ab) // a's ring to b and a return ring
		p.b.Prepare(p.ba) // b maps the return ring as its ring to a and posts its request
		pb := p.b.peers[p.ba]
		if pb.seg == nil || pb.seg.Owner() {
			t.Fatal("b's ring to a is not a's return ring")
		}
		if done, c := p.b.Send(p.ba, &h, [][]byte{seqMsg(7, 8)}, 1); !done || c != 0 {
			t.Fatalf("b's send: done %v code %d", done, c)
		}
		// b's Close lingers (lingerMax) for a to accept the request of a
		// ring that holds a completed send: a polls meanwhile, as its own
		// process would.
		pa := p.a.peers[p.ab]
		deadline := time.Now().Add(20 * time.Second)
		stop, polled := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(polled)
			for {
				select {
				case <-stop:
					return
				default:
					p.a.Poll(p.sa)
				}
			}
		}()
		_ = p.b.Close()
		close(stop)
		<-polled
		for p.sa.n == 0 {
			if time.Now().After(deadline) {
				t.Fatal("b's message, written before it closed, never arrived")
			}
			p.a.Poll(p.sa)
		}
		if !bytes.Equal(p.sa.got[0], seqMsg(7, 8)) || pa.inSeg == nil || !pa.inSeg.Owner() {
			t.Fatalf("got %x; want b's message through a's own return ring", p.sa.got[0])
		}
		p.wantClosedPeerFoundGone(dir, deadline)
	})
	t.Run("offerer closes before the peer maps its return ring", func(t *testing.T) {
		dir := testDir(t)
		p := newTPair(t, TransportConfig{ShrinkAfter: 20 * time.Millisecond, PeerTimeout: 10 * time.Millisecond})
		p.a.Prepare(p.ab)
		deadline := time.Now().Add(20 * time.Second)
		pb := p.b.peers[p.ba]
		for pb.in == nil { // b accepts a's request (and notes the offer) without connecting
			if time.Now().After(deadline) {
				t.Fatal("b never accepted a's request")
			}
			p.b.Poll(p.sb)
		}
		if pb.offer.name == "" {
			t.Fatal("b's accept noted no return ring")
		}
		_ = p.a.Close()
		p.b.Prepare(p.ba) // a hint: fails quietly
		if pb.seg != nil || pb.out != nil || pb.inSpare != nil || pb.outSpare != nil {
			t.Fatalf("b's Prepare to the closed a mapped something: out %v, spares %v %v", pb.out != nil, pb.inSpare != nil, pb.outSpare != nil)
		}
		done, c := p.b.Send(p.ba, &h, [][]byte{make([]byte, 8)}, 1)
		for c == 0 && !done {
			if time.Now().After(deadline) {
				t.Fatal("b's send to the closed a neither failed nor completed")
			}
			p.b.Poll(p.sb)
			done, c = p.b.Send(p.ba, &h, [][]byte{make([]byte, 8)}, 1)
		}
		if c == 0 {
			t.Fatalf("b's send to the closed a: done %v code 0, want an error", done)
		}
		_ = p.b.Close()
		if files, _ := ringFiles(t, dir); files != 0 {
			t.Errorf("%d files left after both closed", files)
		}
	})
}

// wantClosedPeerFoundGone: after b closed, an eager send from a still
// goes into the ring (the connection was made), a's polls then find b
// gone with EConnReset before deadline, and once a closes too no ring
// file is left in dir.
func (p *tpair) wantClosedPeerFoundGone(dir string, deadline time.Time) {
	t := p.t
	t.Helper()
	h := transport.Header{Kind: transport.KindMsg, Len: 8}
	if done, c := p.a.Send(p.ab, &h, [][]byte{make([]byte, 8)}, 1); !done || c != 0 {
		t.Fatalf("eager send to the closed peer: done %v code %d, want sent into the ring", done, c)
	}
	for len(p.sa.errs) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the closed peer was never found gone")
		}
		p.a.Poll(p.sa)
		time.Sleep(50 * time.Microsecond)
	}
	if p.sa.errs[0] != transport.EConnReset {
		t.Errorf("peer down with code %d, want EConnReset", p.sa.errs[0])
	}
	_ = p.a.Close()
	if files, _ := ringFiles(t, dir); files != 0 {
		t.Errorf("%d files left after both closed", files)
	}
}
