package shm

import (
	"bytes"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// A peer whose eager copies ran slow (far: the CPUs share no cache) gets
// payloads above farMin up to MaxEager by rendezvous, but for one in
// farProbe still sent eager (and timed); smaller and larger payloads are
// sent as before; every payload arrives whole and in order.
func TestTransport_FarPeerTakesEagerSizesByRendezvous(t *testing.T) {
	p := newTPair(t, TransportConfig{})
	pa := p.a.peers[p.ab]
	var want [][]byte
	send := func(n int) { p.sendSeq(&want, n) }
	send(64) // connected
	pa.far, pa.copyVotes = true, 0xff
	rdv := func() int { return int(p.sb.nextOp) }
	const sends = 2 * farProbe
	for range sends {
		send(8 << 10)
		pa.far, pa.copyVotes = true, 0xff // (a fast probe would vote it back)
	}
	wantRdv := sends - sends/farProbe
	if !p.a.cma {
		wantRdv = 0 // no single copy: eager stays the better
	}
	if got := rdv(); got != wantRdv {
		t.Fatalf("far: %d of %d 8 KiB messages went by rendezvous, want %d", got, sends, wantRdv)
	}
	before := rdv()
	for _, n := range []int{4 << 10, farMin} {
		for range farProbe {
			send(n)
		}
	}
	if got := rdv() - before; got != 0 {
		t.Fatalf("far: %d messages of at most farMin bytes went by rendezvous", got)
	}
	if len(p.sb.errs) != 0 || len(p.sa.errs) != 0 {
		t.Fatalf("errors %v %v", p.sa.errs, p.sb.errs)
	}
	p.wantGot(want)
}

// The placement vote: far after 6 slow copies of the last 8, near again
// after 6 fast ones; one slow copy (a preemption) among fast ones, or one
// fast among slow, changes nothing.
func TestPeer_VoteCopy(t *testing.T) {
	const n = 8 << 10
	slow := time.Duration(n*farNsPerKiB/1024) + time.Nanosecond
	fast := slow / 4
	p := &peer{}
	steps := []struct {
		d   time.Duration
		far bool
	}{
		{slow, false}, {fast, false}, {slow, false}, {slow, false}, {slow, false}, {slow, false},
		{slow, true}, // 6 of the last 7
		{fast, true}, {slow, true}, {fast, true}, {fast, true}, {fast, true}, {fast, true},
		{fast, false}, // 2 slow of the last 8
		{slow, false}, {fast, false}, {fast, false},
	}
	for i, s := range steps {
		p.voteCopy(n, s.d)
		if p.far != s.far {
			t.Fatalf("step %d (%v): far %v, want %v (votes %08b)", i, s.d, p.far, s.far, p.copyVotes)
		}
	}
}

// An inject's buffer is the caller's again once SendInject returns: to a
// far peer, eager sizes that Send would announce by rendezvous (the
// receiver reading the caller's buffer later) are copied instead, so
// overwriting the buffer at once changes nothing the receiver gets.
func TestTransport_FarPeerInjectIsCopiedBeforeItReturns(t *testing.T) {
	p := newTPair(t, TransportConfig{})
	if !p.a.cma {
		t.Skip("no single copy here: eager-sized payloads never go by rendezvous")
	}
	pa := p.a.peers[p.ab]
	var want [][]byte
	send := func(n int, inject bool) {
		m := seqMsg(len(want), n)
		want = append(want, bytes.Clone(m))
		h := transport.Header{Kind: transport.KindTagged, Tag: uint64(len(want)), Len: uint64(n)}
		deadline := time.Now().Add(20 * time.Second)
		for {
			var c transport.Code
			if inject {
				_, c = p.a.SendInject(p.ab, &h, [][]byte{m}, 1)
			} else {
				_, c = p.a.Send(p.ab, &h, [][]byte{m}, 1)
			}
			if c == 0 {
				break
			}
			if c != transport.EAgain || time.Now().After(deadline) {
				t.Fatalf("send of %d bytes: code %d", n, c)
			}
			p.poll()
		}
		if inject {
			clear(m) // the caller's buffer is free again
		}
		p.until("the message", func() bool { return p.sb.n == len(want) })
	}
	send(64, false) // connected
	for i := range farProbe {
		pa.far, pa.copyVotes = true, 0xff
		send(8<<10+i, true)
	}
	if got := int(p.sb.nextOp); got != 0 {
		t.Fatalf("%d injects of 8 KiB to a far peer went by rendezvous", got)
	}
	pa.far, pa.copyVotes = true, 0xff
	send(8<<10, false) // a plain send still does
	if got := int(p.sb.nextOp); got != 1 {
		t.Fatalf("a far send of 8 KiB: %d rendezvous, want 1", got)
	}
	if len(p.sb.errs) != 0 || len(p.sa.errs) != 0 {
		t.Fatalf("errors %v %v", p.sa.errs, p.sb.errs)
	}
	p.wantGot(want)
}

// The sample (one in farSample) and the probe (one in farProbe) count the
// eager-sized payloads above farMin, not every send: traffic that
// alternates a small header and an 8 KiB payload still has its payloads
// timed while near, and still probed while far, so the peer is not held
// far (every payload by rendezvous) after the CPUs moved near again.
func TestTransport_FarSampleAndProbeCountTheSizesTheyJudge(t *testing.T) {
	p := newTPair(t, TransportConfig{})
	pa := p.a.peers[p.ab]
	var want [][]byte
	send := func(n int) { p.sendSeq(&want, n) }
	send(64) // connected
	// Near: one vote cast in farSample payloads (copyVotes shifts once).
	pa.far, pa.copyVotes = false, 1
	for range farSample {
		send(64)
		send(8 << 10)
		pa.far = false // (a slow copy must not count here)
	}
	if pa.copyVotes != 0b10 && pa.copyVotes != 0b11 {
		t.Fatalf("near: votes %08b after %d payloads, want one vote cast (1x)", pa.copyVotes, farSample)
	}
	if !p.a.cma {
		t.Skip("no single copy here: eager-sized payloads never go by rendezvous")
	}
	// Far: one payload in farProbe still eager.
	before := int(p.sb.nextOp)
	const pairs = 2 * farProbe
	for range pairs {
		pa.far, pa.copyVotes = true, 0xff
		send(64)
		send(8 << 10)
	}
	if got, wantRdv := int(p.sb.nextOp)-before, pairs-pairs/farProbe; got != wantRdv {
		t.Fatalf("far: %d of %d payloads went by rendezvous, want %d (one in %d probed eager)", got, pairs, wantRdv, farProbe)
	}
	p.wantGot(want)
}

// A far peer that cannot read our memory (single copy off on its side:
// FI_SHM_DISABLE_CMA there, another user namespace) still gets every
// payload, whole and in order, when eager-sized ones are announced by
// rendezvous among eager and larger ones in flight together: it asks
// for segments (CTS) and they stream through the ring. Each send
// completes once, without error.
func TestTransport_FarEagerSizesReachAReceiverWithoutSingleCopy(t *testing.T) {
	p := newReceiverWithoutCMAPair(t)
	pa := p.a.peers[p.ab]
	var want [][]byte
	held := 0
	sizes := []int{64, 8 << 10, 12 << 10, 7 << 10, 20 << 10, 16 << 10, 100, 6<<10 + 1}
	const rounds = 2 * farProbe / 8 * 2
	for round := range rounds {
		for _, n := range sizes {
			pa.far, pa.copyVotes = true, 0xff
			m := seqMsg(len(want), n)
			want = append(want, m)
			h := transport.Header{Kind: transport.KindTagged, Tag: uint64(round), Len: uint64(n)}
			deadline := time.Now().Add(20 * time.Second)
			for {
				done, c := p.a.Send(p.ab, &h, [][]byte{m}, transport.Op(len(want)))
				if c == 0 {
					if !done {
						held++
					}
					break
				}
				if c != transport.EAgain || time.Now().After(deadline) {
					t.Fatalf("send of %d bytes: code %d", n, c)
				}
				p.poll()
			}
		}
		p.until("the round's messages", func() bool { return p.sb.n == len(want) && p.sa.sent == held })
	}
	if got := int(p.sb.nextOp) - rounds; got < rounds*4 { // (20 KiB: rendezvous anyway)
		t.Fatalf("%d eager-sized payloads went by rendezvous, want most of %d", got, rounds*5)
	}
	if len(p.sb.errs) != 0 || len(p.sa.errs) != 0 {
		t.Fatalf("errors %v %v", p.sa.errs, p.sb.errs)
	}
	p.wantGot(want)
	if p.sa.sent != held {
		t.Fatalf("%d held sends completed, want %d", p.sa.sent, held)
	}
}

// Without single copy with the peer (p.noCMA: another pid namespace, the
// kernel refused it), a far peer still gets eager-sized payloads eager:
// by rendezvous it would ask for them in segments, two copies as eager
// and a round trip more.
func TestTransport_FarPeerWithoutSingleCopyStaysEager(t *testing.T) {
	p := newTPair(t, TransportConfig{})
	pa := p.a.peers[p.ab]
	var want [][]byte
	send := func(n int) { p.sendSeq(&want, n) }
	send(64) // connected
	pa.noCMA = true
	for range farProbe {
		pa.far, pa.copyVotes = true, 0xff
		send(8 << 10)
	}
	if got := int(p.sb.nextOp); got != 0 {
		t.Fatalf("%d of %d far 8 KiB messages to a peer without single copy went by rendezvous", got, farProbe)
	}
	p.wantGot(want)
}

// A far peer that answers eager-sized rendezvous messages with CTS (no
// single copy on its side) gets them eager again after farCTSMax such
// answers in a row: segments lose to the ring's copies there.
func TestTransport_FarVerdictEndsWhenTheReceiverAnswersCTS(t *testing.T) {
	p := newReceiverWithoutCMAPair(t)
	pa := p.a.peers[p.ab]
	var want [][]byte
	send := func(n int) { p.sendSeq(&want, n) }
	send(64)
	pa.far, pa.copyVotes = true, 0xff
	for range 3 * farCTSMax {
		send(8 << 10)
	}
	if got := int(p.sb.nextOp); got != farCTSMax || pa.far {
		t.Fatalf("%d of %d payloads by rendezvous, far %v; want %d, then eager", got, 3*farCTSMax, pa.far, farCTSMax)
	}
	if len(p.sb.errs) != 0 || len(p.sa.errs) != 0 {
		t.Fatalf("errors %v %v", p.sa.errs, p.sb.errs)
	}
	p.wantGot(want)
}

// newReceiverWithoutCMAPair is a connected pair whose receiver (b) has
// single copy off (NoCMA: as FI_SHM_DISABLE_CMA or another user
// namespace) while the sender (a) has it; skipped where a has none.
func newReceiverWithoutCMAPair(t *testing.T) *tpair {
	t.Helper()
	mk := func(noCMA bool) *Transport {
		tr, err := NewTransport(TransportConfig{NoCMA: noCMA})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Close() })
		return tr
	}
	p := &tpair{t: t, a: mk(false), b: mk(true)}
	if !p.a.cma {
		t.Skip("no single copy here: eager-sized payloads never go by rendezvous")
	}
	p.connect()
	return p
}

// wantGot fails the test unless b got exactly want, whole and in order.
func (p *tpair) wantGot(want [][]byte) {
	p.t.Helper()
	for i, m := range want {
		if !bytes.Equal(p.sb.got[i], m) {
			p.t.Fatalf("message %d (%d B) differs or is out of order", i, len(m))
		}
	}
}

// sendSeq sends the next numbered message of n bytes from a to b, adds it
// to want and waits until b has it.
func (p *tpair) sendSeq(want *[][]byte, n int) {
	p.t.Helper()
	m := seqMsg(len(*want), n)
	*want = append(*want, m)
	p.send(transport.KindMsg, m)
	p.until("the message", func() bool { return p.sb.n == len(*want) })
}
