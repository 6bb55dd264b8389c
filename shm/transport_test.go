package shm

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofi-dev/fi/ring"
	"github.com/gofi-dev/fi/transport"
	"golang.org/x/sys/unix"
)

// tsink is a test Sink: it keeps every message that arrives (fetching
// rendezvous payloads at once into fresh buffers) and counts completions.
type tsink struct {
	t      *testing.T
	tr     *Transport
	got    [][]byte             // in order of arrival; filled in when fetched
	n      int                  // messages complete
	bufs   map[transport.Op]int // fetch in progress -> index in got
	nextOp transport.Op
	sent   int
	errs   []transport.Code
	refuse bool // Arrive says "full"
	// discard: rendezvous messages are dropped unread (DiscardOp), each
	// counted in n with an empty payload once the transport says so
	discard bool
	// drop: rendezvous messages are dropped unread with Discard (no
	// completion), each counted in n
	drop bool
}

func newSink(t *testing.T, tr *Transport) *tsink {
	return &tsink{t: t, tr: tr, bufs: map[transport.Op]int{}}
}

func (s *tsink) Arrive(p transport.Peer, h *transport.Header, eager []byte, cookie uint64) bool {
	if s.refuse {
		return false
	}
	if eager != nil || h.Len == 0 {
		s.got = append(s.got, bytes.Clone(eager))
		s.n++
		return true
	}
	if s.drop {
		s.tr.Discard(p, cookie)
		s.got = append(s.got, []byte{})
		s.n++
		return true
	}
	if s.discard {
		s.nextOp++
		s.got = append(s.got, []byte{})
		if s.tr.DiscardOp(p, cookie, s.nextOp) {
			s.n++
		} else {
			s.bufs[s.nextOp] = len(s.got) - 1
		}
		return true
	}
	buf := make([]byte, h.Len)
	s.nextOp++
	op := s.nextOp
	s.got = append(s.got, buf)
	done, n, c := s.tr.Fetch(p, cookie, [][]byte{buf}, op)
	switch {
	case c != 0:
		s.errs = append(s.errs, c)
	case done:
		s.got[len(s.got)-1] = buf[:n]
		s.n++
	default:
		s.bufs[op] = len(s.got) - 1
	}
	return true
}

func (s *tsink) SendDone(op transport.Op, c transport.Code) {
	s.sent++
	if c != 0 {
		s.errs = append(s.errs, c)
	}
}

func (s *tsink) FetchDone(op transport.Op, n int, c transport.Code) {
	if c != 0 {
		s.errs = append(s.errs, c)
		return
	}
	i := s.bufs[op]
	s.got[i] = s.got[i][:n]
	s.n++
	delete(s.bufs, op)
}

func (s *tsink) PeerDown(p transport.Peer, c transport.Code) { s.errs = append(s.errs, c) }

// tpair is two transports in this process, each knowing the other.
type tpair struct {
	t      *testing.T
	a, b   *Transport
	sa, sb *tsink
	ab, ba transport.Peer // a's index of b, b's index of a
}

func newTPair(t *testing.T, cfg TransportConfig) *tpair {
	t.Helper()
	mk := func() *Transport {
		tr, err := NewTransport(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Close() })
		return tr
	}
	p := &tpair{t: t, a: mk(), b: mk()}
	p.connect()
	return p
}

// connect gives the pair its sinks and resolves each side's name at the
// other.
func (p *tpair) connect() {
	p.t.Helper()
	p.sa, p.sb = newSink(p.t, p.a), newSink(p.t, p.b)
	var c transport.Code
	if p.ab, c = p.a.Resolve(p.b.Name()); c != 0 {
		p.t.Fatal(c)
	}
	if p.ba, c = p.b.Resolve(p.a.Name()); c != 0 {
		p.t.Fatal(c)
	}
}

// poll progresses both sides once.
func (p *tpair) poll() bool {
	x := p.a.Poll(p.sa)
	y := p.b.Poll(p.sb)
	return x || y
}

// until polls both sides until cond holds, failing after 20 s.
func (p *tpair) until(what string, cond func() bool) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %s", what)
		}
		if !p.poll() {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// send sends payload from a to b, progressing while the ring is full.
func (p *tpair) send(kind transport.Kind, payload []byte) {
	p.t.Helper()
	h := transport.Header{Kind: kind, Len: uint64(len(payload))}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, c := p.a.Send(p.ab, &h, [][]byte{payload}, 1)
		if c == 0 {
			return
		}
		if c != transport.EAgain {
			p.t.Fatalf("send of %d bytes: code %d (%v)", len(payload), c, p.a.LastError())
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("send of %d bytes still EAgain", len(payload))
		}
		p.poll()
	}
}

// seqMsg is a payload of n bytes (at least 8) starting with seq.
func seqMsg(seq, n int) []byte {
	b := make([]byte, max(n, 8))
	binary.LittleEndian.PutUint64(b, uint64(seq))
	for i := 8; i < len(b); i++ {
		b[i] = byte(seq + i)
	}
	return b
}

// ringFiles returns the bytes of ring segments in the test directory
// (every gofi file but the regions), counted as tmpfs does: allocated
// blocks.
func ringFiles(t *testing.T, dir string, regions ...*Transport) (files int, bytes int64) {
	t.Helper()
	skip := map[string]bool{}
	for _, r := range regions {
		skip[r.region.Name()] = true
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), Prefix()) || skip[e.Name()] {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join(dir, e.Name()), &st) != nil {
			continue
		}
		files++
		bytes += st.Blocks * 512
	}
	return files, bytes
}

// An idle connected pair costs two minimum ring segments: 16 KiB of the
// shm directory with the defaults, within the 64 KiB the issue allows.
func TestTransport_IdlePairCostsTwoSmallRings(t *testing.T) {
	dir := testDir(t)
	p := newTPair(t, TransportConfig{})
	p.send(transport.KindMsg, seqMsg(1, 8))
	p.until("ping", func() bool { return p.sb.n == 1 })
	p.a, p.b, p.sa, p.sb, p.ab, p.ba = p.b, p.a, p.sb, p.sa, p.ba, p.ab // pong
	p.send(transport.KindMsg, seqMsg(2, 8))
	p.until("pong", func() bool { return p.sb.n == 1 })
	files, n := ringFiles(t, dir, p.a, p.b)
	want := int64(2 * RingSegSize(DefaultMinRingSize))
	if files != 2 || n != want {
		t.Errorf("idle pair: %d ring files of %d bytes, want 2 of %d", files, n, want)
	}
	if n > 64<<10 {
		t.Errorf("idle pair costs %d bytes, over 64 KiB", n)
	}
}

// A payload above the small ring's eager limit grows the ring (the
// receiver follows the switch record) and stays eager; order holds across
// the switch, and after ShrinkAfter without sends the ring is small again.
func TestTransport_RingGrowsUnderTrafficAndShrinksWhenIdle(t *testing.T) {
	dir := testDir(t)
	p := newTPair(t, TransportConfig{ShrinkAfter: 50 * time.Millisecond})
	sizes := []int{8, 100, 1000, 3000, 8000, 16 << 10, 8, 200 << 10, 8, 16 << 10}
	for i, n := range sizes {
		p.send(transport.KindTagged, seqMsg(i, n))
	}
	p.until("all messages", func() bool { return p.sb.n == len(sizes) })
	for i, m := range p.sb.got {
		if want := seqMsg(i, sizes[i]); !bytes.Equal(m, want) {
			t.Fatalf("message %d: %d bytes starting %x, want %d bytes of seq %d", i, len(m), m[:min(8, len(m))], len(want), i)
		}
	}
	peer := p.a.peers[p.ab]
	if c := peer.out.Cap(); c <= DefaultMinRingSize {
		t.Errorf("after a 16 KiB eager send the ring has capacity %d, want it grown", c)
	}
	if len(p.sb.errs) > 0 || len(p.sa.errs) > 0 {
		t.Fatalf("errors: %v %v", p.sa.errs, p.sb.errs)
	}
	_, grown := ringFiles(t, dir, p.a, p.b)
	// Idle: both sides keep progressing (as Sread does) and the ring
	// shrinks back.
	p.until("shrink", func() bool { return peer.out.Cap() == DefaultMinRingSize && peer.old == nil })
	p.until("old file closed", func() bool {
		files, _ := ringFiles(t, dir, p.a, p.b)
		return files == 2
	})
	_, idle := ringFiles(t, dir, p.a, p.b)
	t.Logf("ring files: %d bytes busy, %d bytes idle", grown, idle)
	if idle > 64<<10 {
		t.Errorf("idle pair after traffic costs %d bytes, over 64 KiB", idle)
	}
	// And it still works, in order.
	p.send(transport.KindMsg, seqMsg(99, 40))
	p.until("message after shrink", func() bool { return p.sb.n == len(sizes)+1 })
	if !bytes.Equal(p.sb.got[len(sizes)], seqMsg(99, 40)) {
		t.Fatal("message after the shrink garbled")
	}
}

// A receiver that does not read lets the sender's ring fill; the sender
// grows it (writing the switch record once the receiver makes room), and
// nothing is lost or reordered across many switches.
func TestTransport_SwitchUnderFullRingKeepsOrder(t *testing.T) {
	testDir(t)
	for _, cfg := range []TransportConfig{
		{ShrinkAfter: 5 * time.Millisecond},
		// Tiny rings that flip between 1 and 8 KiB all the time.
		{MinRingSize: 1 << 10, RingSize: 8 << 10, MaxEager: 900, ShrinkAfter: time.Millisecond},
	} {
		t.Run(strconv.Itoa(cfg.RingSize), func(t *testing.T) { switchUnderFullRing(t, cfg) })
	}
}

func switchUnderFullRing(t *testing.T, cfg TransportConfig) {
	p := newTPair(t, cfg)
	const total = 3000
	h := transport.Header{Kind: transport.KindMsg}
	next := 0
	deadline := time.Now().Add(30 * time.Second)
	for next < total {
		if time.Now().After(deadline) {
			t.Fatalf("stuck after %d of %d messages", next, total)
		}
		m := seqMsg(next, 8+next%700)
		h.Len = uint64(len(m))
		_, c := p.a.Send(p.ab, &h, [][]byte{m}, 1)
		switch c {
		case 0:
			next++
			continue
		case transport.EAgain:
		default:
			t.Fatalf("send %d: code %d", next, c)
		}
		// Let the receiver read in bursts, the sender idle sometimes (so
		// rings shrink too).
		p.sb.refuse = next%3 == 0
		p.poll()
		p.sb.refuse = false
		if next%500 == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		p.poll()
	}
	p.until("all", func() bool { return p.sb.n == total })
	for i, m := range p.sb.got {
		if !bytes.Equal(m, seqMsg(i, 8+i%700)) {
			t.Fatalf("message %d out of order or garbled (seq %d)", i, binary.LittleEndian.Uint64(m))
		}
	}
	if p.a.switches < 3 {
		t.Errorf("only %d ring switches: the test did not exercise them", p.a.switches)
	}
	t.Logf("%d ring switches, %d declined for want of room for the switch record", p.a.switches, p.a.switchFails)
}

// With the directory over a quarter full rings stay small: payloads above
// the small ring's eager limit go by rendezvous from a bounce copy: the
// caller's buffer is free when Send returns, and the send completes (at
// once or through SendDone; since the bounce fix only the latter, see
// TestTransport_BounceSendNeedsNoSenderProgressAfterCompletion).
func TestTransport_CrowdedDirKeepsSmallRingsAndBounces(t *testing.T) {
	dir := crowdedDir(t)
	for _, noCMA := range []bool{false, true} {
		t.Run("nocma="+strconv.FormatBool(noCMA), func(t *testing.T) {
			p := newTPair(t, TransportConfig{NoCMA: noCMA})
			sizes := []int{8, 3000, 16 << 10, 8, 100 << 10, 16 << 10}
			held := 0
			for i, n := range sizes {
				h := transport.Header{Kind: transport.KindMsg, Len: uint64(n)}
				m := seqMsg(i, n)
				var done bool
				var c transport.Code
				p.until("room", func() bool {
					done, c = p.a.Send(p.ab, &h, [][]byte{m}, 1)
					return c != transport.EAgain
				})
				if c != 0 {
					t.Fatalf("send %d bytes: %d", n, c)
				}
				if !done {
					held++
				}
				if n <= p.a.MaxEager() {
					clear(m) // the transport must have its own copy
				}
			}
			p.until("all", func() bool { return p.sb.n == len(sizes) && p.sa.sent == held })
			if len(p.sa.errs)+len(p.sb.errs) > 0 {
				t.Fatal(p.sa.errs, p.sb.errs)
			}
			if p.a.bounces == 0 {
				t.Error("no send bounced")
			}
			for i, m := range p.sb.got {
				if !bytes.Equal(m, seqMsg(i, sizes[i])) {
					t.Fatalf("message %d garbled", i)
				}
			}
			if c := p.a.peers[p.ab].out.Cap(); c != DefaultMinRingSize {
				t.Errorf("ring grew to %d in a crowded directory", c)
			}
			_, n := ringFiles(t, dir, p.a, p.b)
			if n > int64(2*RingSegSize(DefaultMinRingSize)) {
				t.Errorf("ring files take %d bytes", n)
			}
		})
	}
}

// crowdedDir mounts a small tmpfs, fills a third of it and points DirEnv
// there. Root only (CI).
func crowdedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=8m,mode=0700"); err != nil {
		t.Skipf("cannot mount a small tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(dir, "ballast"), make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(DirEnv, dir)
	return dir
}

// The spin budget follows the ranks the endpoint knows against the CPUs:
// a pair on two or more CPUs spins as long as Sread likes (-1), a job of
// more ranks than CPUs spins briefly; a launcher's count of local ranks
// and GOFI_SHM_SPIN are heeded.
func TestTransport_SpinBudgetFollowsRanksPerCPU(t *testing.T) {
	testDir(t)
	for _, v := range localRanksEnv {
		t.Setenv(v, "")
	}
	cpus := runtime.NumCPU()
	tr, err := NewTransport(TransportConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, c := tr.Resolve(tr.Name()); c != 0 { // itself: not another rank
		t.Fatal(c)
	}
	for i := 0; i < cpus-1; i++ {
		if _, c := tr.Resolve([]byte(Addr(Prefix() + "peer-" + strconv.Itoa(i)))); c != 0 {
			t.Fatal(c)
		}
	}
	if b := tr.SpinBudget(); b != -1 {
		t.Errorf("%d ranks on %d CPUs: budget %d, want -1", cpus, cpus, b)
	}
	if _, c := tr.Resolve([]byte(Addr(Prefix() + "one-too-many"))); c != 0 {
		t.Fatal(c)
	}
	if b := tr.SpinBudget(); b != OversubscribedSpin {
		t.Errorf("%d ranks on %d CPUs: budget %d, want %d", cpus+1, cpus, b, OversubscribedSpin)
	}

	t.Setenv("MPI_LOCALNRANKS", strconv.Itoa(4*cpus))
	tr2, err := NewTransport(TransportConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	if b := tr2.SpinBudget(); b != OversubscribedSpin {
		t.Errorf("launcher says %d local ranks on %d CPUs: budget %d", 4*cpus, cpus, b)
	}
	t.Setenv(SpinEnv, "7")
	tr3, err := NewTransport(TransportConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr3.Close()
	if b := tr3.SpinBudget(); b != 7 {
		t.Errorf("%s=7: budget %d", SpinEnv, b)
	}
	t.Setenv(SpinEnv, "lots")
	if tr4, err := NewTransport(TransportConfig{}); err == nil {
		tr4.Close()
		t.Errorf("%s=lots accepted", SpinEnv)
	}
}

// A receiver that must answer (CTS, ACK) through a connection to a sender
// whose connection queue is full keeps the answer until a slot frees; the
// message is not failed (a 64-rank job starting fills queues).
func TestTransport_AnswerWaitsForAFullConnectionQueue(t *testing.T) {
	testDir(t)
	p := newTPair(t, TransportConfig{})
	msg := seqMsg(5, 100<<10) // rendezvous
	h := transport.Header{Kind: transport.KindMsg, Len: uint64(len(msg))}
	if _, c := p.a.Send(p.ab, &h, [][]byte{msg}, 1); c != 0 {
		t.Fatal(c)
	}
	// Fill a's queue while a does not poll.
	q := p.a.region.ConnQueue()
	var slots []int
	for {
		s, err := q.Post(ConnRequest{SenderName: NewName(), RingName: NewName(), RingSize: 8192})
		if err != nil {
			break
		}
		slots = append(slots, s)
	}
	if len(slots) != q.Len() {
		t.Fatalf("filled %d of %d slots", len(slots), q.Len())
	}
	for i := 0; i < 100; i++ { // b takes the RTS and tries to answer
		p.b.Poll(p.sb)
	}
	if len(p.sb.errs) > 0 {
		t.Fatalf("receiver failed while the sender's queue was full: %v", p.sb.errs)
	}
	p.a.Poll(p.sa) // rejects the junk requests
	for _, s := range slots {
		_ = q.Release(s)
	}
	p.until("message and send completion", func() bool { return p.sb.n == 1 && p.sa.sent == 1 })
	if !bytes.Equal(p.sb.got[0], msg) || len(p.sa.errs)+len(p.sb.errs) > 0 {
		t.Fatalf("after the queue freed: errors %v %v", p.sa.errs, p.sb.errs)
	}
}

// An eager message grows its ring until eagerDepth records of its size
// fit (so the sender rarely rereads the receiver's head); small messages
// leave the smallest ring alone.
func TestTransport_EagerRingHoldsEagerDepthRecords(t *testing.T) {
	p := newTPair(t, TransportConfig{})
	p.send(transport.KindMsg, make([]byte, 64))
	if c := p.a.peers[p.ab].out.Cap(); c != DefaultMinRingSize {
		t.Fatalf("a 64 B message grew the ring to %d", c)
	}
	p.send(transport.KindMsg, make([]byte, 4096))
	want := eagerDepth * (msgHdrLen + 4096 + 16)
	if c := p.a.peers[p.ab].out.Cap(); c < want {
		t.Fatalf("after a 4 KiB message the ring holds %d bytes, want at least %d", c, want)
	}
	p.until("both messages", func() bool { return p.sb.n == 2 })
}

// An eager payload that takes two-slot records (slotsPay: 4 and 5 KiB
// with a 32 KiB L1), sent while the receiver keeps up, takes a whole slot
// of its ring (reserveEager): every record starts a slot, so a
// ping-pong's records alternate between two places; other sizes (2 and
// 8 KiB here) pack their records; a burst the receiver does not keep up
// with packs its records as before; every payload arrives whole and in
// order either way.
func TestTransport_EagerRecordsAlternateTwoSlots(t *testing.T) {
	defer func(v int) { l1d = v }(l1d)
	l1d = 32 << 10
	for _, c := range []struct {
		n     int
		slots bool
	}{{eagerSlotMin, false}, {4096, true}, {5000, true}, {8192, false}} {
		n := c.n
		p := newTPair(t, TransportConfig{})
		var want [][]byte
		send := func() {
			m := seqMsg(len(want), n)
			want = append(want, m)
			p.send(transport.KindMsg, m)
		}
		send()
		p.until("the first message", func() bool { return p.sb.n == 1 })
		slot := 1 << bits.Len(uint(ring.RecordHeader+slotHdrLen+n-1))
		out := p.a.peers[p.ab].out
		if out.Cap() != 2*slot {
			t.Fatalf("%d B: ring of %d bytes, want two %d-byte slots", n, out.Cap(), slot)
		}
		// small records move the tail off the slot boundary (as a
		// ping-pong of small messages before the big ones leaves it);
		// the next records realign it
		for range 3 {
			m := seqMsg(len(want), 8)
			want = append(want, m)
			p.send(transport.KindMsg, m)
		}
		p.until("the small messages", func() bool { return p.sb.n == len(want) })
		for range 2 {
			send()
			p.until("the message", func() bool { return p.sb.n == len(want) })
		}
		aligned := 0
		for range 20 {
			if out.TailAligned(slot) {
				aligned++
			}
			send()
			p.until("the message", func() bool { return p.sb.n == len(want) })
		}
		if c.slots && aligned != 20 || !c.slots && aligned > 10 {
			t.Fatalf("%d B: %d of 20 records started a slot, want slots %v", n, aligned, c.slots)
		}
		for range 5 { // a burst, then the ring is drained
			send()
		}
		p.until("the burst", func() bool { return p.sb.n == len(want) })
		if len(p.sb.errs) != 0 || len(p.sa.errs) != 0 {
			t.Fatalf("%d B: errors %v %v", n, p.sa.errs, p.sb.errs)
		}
		for i, m := range want {
			if !bytes.Equal(p.sb.got[i], m) {
				t.Fatalf("%d B: message %d differs", n, i)
			}
		}
	}
}
