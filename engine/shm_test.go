package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/shm"
	"github.com/gofi-dev/fi/transport"
)

// TestEndpointOverShm runs the endpoint table over the real shm transport:
// two regions in /dev/shm, rings, doorbells and (where the kernel allows)
// single copy. The "crowded" rows run it in a tmpfs over a quarter full,
// where rings stay at their 4 KiB start and payloads above that ring's
// eager limit go by rendezvous from bounce copies (root only).
func TestEndpointOverShm(t *testing.T) {
	for _, row := range []struct {
		name         string
		cma, crowded bool
	}{{"cma", true, false}, {"segments", false, false}, {"crowded-cma", true, true}, {"crowded-segments", false, true}} {
		cma := row.cma
		t.Run(row.name, func(t *testing.T) {
			if row.crowded {
				crowdShmDir(t)
			}
			old := makeTransports
			defer func() { makeTransports = old }()
			makeTransports = func(t *testing.T, maxEager int) (*hub, transport.Transport, transport.Transport) {
				mk := func() transport.Transport {
					tr, err := shm.NewTransport(shm.TransportConfig{MaxEager: maxEager, NoCMA: !cma, CMAMin: 1})
					if err != nil {
						t.Fatal(err)
					}
					return tr
				}
				return nil, mk(), mk()
			}
			runEndpointTable(t)
		})
	}
}

// crowdShmDir mounts an 8 MiB tmpfs, fills 3 MiB of it and points
// GOFI_SHM_DIR there: shm rings cannot grow (they may use at most a
// quarter of the directory). It skips where mounting is not allowed.
func crowdShmDir(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=8m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(dir, "ballast"), make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(shm.DirEnv, dir)
}

// TestEndpointOverShm_EagerSendsTakeNoSlot: once connected, a small send
// over shm completes inside Send through the transport's SendEager, with
// its completion and counter but without a transmit slot; sends the fast
// path declines (a rendezvous size) still take one.
func TestEndpointOverShm_EagerSendsTakeNoSlot(t *testing.T) {
	old := makeTransports
	defer func() { makeTransports = old }()
	makeTransports = func(t *testing.T, maxEager int) (*hub, transport.Transport, transport.Transport) {
		mk := func() transport.Transport {
			tr, err := shm.NewTransport(shm.TransportConfig{MaxEager: maxEager})
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}
		return nil, mk(), mk()
	}
	cnt := &testCntr{}
	p := newPair(t, 256, func(c *Config) { c.SendCntr = cnt })
	p.warm(t) // connects (the first send takes the general path)
	// Forget the free slots: a send that takes one now grows the table.
	p.a.txFree = p.a.txFree[:0]
	slots, base := len(p.a.tx), cnt.ok.Load()
	const n = 50
	for i := range n {
		if c := recv(p.b, anySrc, transport.KindTagged, 7, 0, make([]byte, 8), i); c != 0 {
			t.Fatal(c)
		}
		if c := send(p.a, addrB, transport.KindTagged, 7, []byte("12345678"), i); c != 0 {
			t.Fatal(c)
		}
	}
	if len(p.a.tx) != slots {
		t.Fatalf("eager sends grew the transmit table from %d to %d slots", slots, len(p.a.tx))
	}
	ok, errs := drain(p.ca, n)
	sends := 0
	for _, e := range ok {
		if e.Flags&FlagSend != 0 {
			sends++
		}
	}
	if sends != n || len(errs) != 0 || cnt.ok.Load()-base != n {
		t.Fatalf("%d send completions, %d errors, counter %d; want %d, 0, %d", sends, len(errs), cnt.ok.Load()-base, n, n)
	}
	if ok, _ := drain(p.cb, n); len(ok) != n {
		t.Fatalf("%d receive completions, want %d", len(ok), n)
	}
	if c := recv(p.b, anySrc, transport.KindTagged, 8, 0, make([]byte, 4096), "big"); c != 0 {
		t.Fatal(c)
	}
	if c := send(p.a, addrB, transport.KindTagged, 8, make([]byte, 4096), "big"); c != 0 {
		t.Fatal(c)
	}
	if len(p.a.tx) != slots+1 {
		t.Fatal("a rendezvous send took no transmit slot")
	}
	drain(p.cb, 1)
	drain(p.ca, 1)
}

// testCntr counts completions for Config's counters.
type testCntr struct{ ok, bad atomic.Int64 }

func (c *testCntr) Add(n uint64)    { c.ok.Add(int64(n)) }
func (c *testCntr) AddErr(n uint64) { c.bad.Add(int64(n)) }

// TestEndpointOverShm_InjectThatBouncesCountsWhenDelivered: an inject of
// at most MaxEager bytes that the shm ring cannot take inline (a crowded
// directory: rings stay at 4 KiB) goes by rendezvous from the
// transport's bounce copy. Its buffer is free when Send returns, the
// payload arrives intact also without single copy (the sender streams
// it after CTS), the send counter counts it once the transport reports
// it done (it holds a transmit slot until then), and no send completion
// is written. Root only (a small tmpfs).
func TestEndpointOverShm_InjectThatBouncesCountsWhenDelivered(t *testing.T) {
	crowdShmDir(t)
	old := makeTransports
	defer func() { makeTransports = old }()
	makeTransports = func(t *testing.T, maxEager int) (*hub, transport.Transport, transport.Transport) {
		mk := func() transport.Transport {
			tr, err := shm.NewTransport(shm.TransportConfig{MaxEager: maxEager, NoCMA: true})
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}
		return nil, mk(), mk()
	}
	cnt := &testCntr{}
	p := newPair(t, 16<<10, func(c *Config) { c.SendCntr = cnt })
	p.warm(t)
	base := cnt.ok.Load()
	const n, size = 5, 8 << 10
	bufs := make([][]byte, n)
	for i := range n {
		bufs[i] = make([]byte, size)
		if c := recv(p.b, anySrc, transport.KindTagged, 9, 0, bufs[i], i); c != 0 {
			t.Fatal(c)
		}
	}
	payload := make([]byte, size)
	held := 0
	for i := range n {
		for j := range payload {
			payload[j] = byte(i + j)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			c := p.a.Send(&SendArgs{Buf: payload, Dest: addrB, Kind: transport.KindTagged, Tag: 9, Flags: FlagInject}, nil)
			if c == 0 {
				break
			}
			if c != CodeAgain || time.Now().After(deadline) {
				t.Fatalf("inject %d: %v", i, c)
			}
			drain(p.ca)
		}
		if p.a.ntx > 0 {
			held++ // bounced: done only once streamed
		}
		clear(payload) // the inject's buffer is the caller's again
	}
	if held == 0 {
		t.Fatal("no inject held a transmit slot: none bounced, the test missed its case")
	}
	ok, errs := drain(p.cb, n)
	if len(ok) != n || len(errs) != 0 {
		t.Fatalf("%d receives, errors %v", len(ok), errs)
	}
	for i, b := range bufs {
		for j := range b {
			if b[j] != byte(i+j) {
				t.Fatalf("inject %d arrived garbled at byte %d", i, j)
			}
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for cnt.ok.Load()-base < n || p.a.ntx > 0 {
		if ok, errs := drain(p.ca); len(ok)+len(errs) > 0 {
			t.Fatalf("inject wrote completions: %v %v", ok, errs)
		}
		if time.Now().After(deadline) {
			t.Fatalf("send counter %d of %d, %d transmit slots held", cnt.ok.Load()-base, n, p.a.ntx)
		}
	}
	if cnt.bad.Load() != 0 {
		t.Fatalf("%d send errors counted", cnt.bad.Load())
	}
}

// TestEndpointOverShm_DiscardCompletesOnlyWhenTheSenderIsTold: an
// FI_DISCARD (with FI_PEEK, or FI_CLAIM after a peek that claimed) of an
// unexpected rendezvous message completes only once the shm transport
// has told the sender, so that the sender's send completes with the
// sender alone progressing after that. The receiver's ring to the
// sender is full of its own unread messages when it discards (the first
// one's size varies the room left: 16 and 8 bytes do not take the ACK);
// the two endpoints' CQs progress only their own endpoint. The receiver
// progresses until its discard completes (the sender too while it does
// not), then only the sender (20 s deadline). Reported at once, as
// before transport.Discarder, the sender waited for good.
func TestEndpointOverShm_DiscardCompletesOnlyWhenTheSenderIsTold(t *testing.T) {
	for _, claim := range []bool{false, true} {
		deferred := 0
		for _, first := range []int{8, 16, 24} {
			t.Run(fmt.Sprintf("claim=%v/first=%d", claim, first), func(t *testing.T) {
				if discardScenario(t, claim, first) {
					deferred++
				}
			})
		}
		if deferred == 0 {
			t.Errorf("claim=%v: every discard completed at once: the test missed its case", claim)
		}
	}
}

// discardScenario runs one case and reports whether the discard's
// completion waited for the transport.
func discardScenario(t *testing.T, claim bool, first int) bool {
	mk := func() transport.Transport {
		tr, err := shm.NewTransport(shm.TransportConfig{MinRingSize: 4 << 10, RingSize: 512 << 10, MaxEager: 16 << 10})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	ta, tb := mk(), mk()
	bk := &book{Names: []string{string(ta.Name()), string(tb.Name())}}
	cnt := &testCntr{}
	ep := func(tr transport.Transport, rc Counter) (*Endpoint, *CQ) {
		cq := NewCQ(1024, nil)
		e, c := NewEndpoint(Config{Transport: tr, Addrs: bk, TxCQ: cq, RxCQ: cq, RecvCntr: rc})
		if c != 0 {
			t.Fatal(c)
		}
		cq.Bind(e, e.Waiter())
		t.Cleanup(func() { e.Close() })
		return e, cq
	}
	a, ca := ep(ta, nil)
	b, cb := ep(tb, cnt)
	// find reads cq (progressing its endpoint only) until an entry with
	// context ctx arrives, progressing other meanwhile when it is set.
	find := func(cq *CQ, ctx any, other *CQ, what string) Entry {
		t.Helper()
		var buf [16]Entry
		deadline := time.Now().Add(20 * time.Second)
		for {
			n, c := cq.Read(buf[:])
			for _, e := range buf[:n] {
				if e.Context == ctx {
					return e
				}
			}
			if c == CodeAvail {
				e, _ := cq.ReadErr()
				if e.Context == ctx {
					return e
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 20 s", what)
			}
			if other != nil {
				other.Read(nil)
			}
		}
	}
	// Connect both ways.
	for _, d := range []struct {
		from, to *Endpoint
		fq, tq   *CQ
		dest     uint64
	}{{a, b, ca, cb, addrB}, {b, a, cb, ca, addrA}} {
		if c := recv(d.to, anySrc, transport.KindTagged, warmTag, 0, make([]byte, 1), "warm"); c != 0 {
			t.Fatal(c)
		}
		if c := send(d.from, d.dest, transport.KindTagged, warmTag, []byte{1}, "warm-send"); c != 0 {
			t.Fatal(c)
		}
		find(d.tq, "warm", d.fq, "warm-up")
		find(d.fq, "warm-send", d.tq, "warm-up send")
	}
	// b fills its ring to a, which does not read.
	sent := 0
	for ; sent < 1000; sent++ {
		m := make([]byte, 8)
		if sent == 0 {
			m = make([]byte, first)
		}
		c := send(b, addrA, transport.KindTagged, 3, m, nil)
		if c == CodeAgain {
			break
		}
		if c != 0 {
			t.Fatal(c)
		}
	}
	// Then empty messages (the smallest record, 24 bytes like the ACK)
	// until no gap takes one.
	for ; sent < 2000; sent++ {
		c := send(b, addrA, transport.KindTagged, 3, nil, nil)
		if c == CodeAgain {
			break
		}
		if c != 0 {
			t.Fatal(c)
		}
	}
	if sent >= 2000 {
		t.Fatal("b's ring to a never filled")
	}
	big := make([]byte, 64<<10)
	if c := send(a, addrB, transport.KindTagged, 5, big, "big"); c != 0 {
		t.Fatal(c)
	}
	waitUnexpected(t, b, cb, 1)
	args := &RecvArgs{Src: anySrc, Kind: transport.KindTagged, Tag: 5, Flags: FlagPeek | FlagDiscard}
	if claim {
		if c := b.Recv(&RecvArgs{Src: anySrc, Kind: transport.KindTagged, Tag: 5, Flags: FlagPeek | FlagClaim}, "discard"); c != 0 {
			t.Fatal(c)
		}
		find(cb, "discard", nil, "the peek")
		args.Flags = FlagClaim | FlagDiscard
	}
	// b's completions so far (its sends'), read without progressing a:
	// the discard's must be the next one.
	for {
		var buf [64]Entry
		if n, _ := cb.Read(buf[:]); n == 0 {
			break
		}
	}
	base := cnt.ok.Load()
	if c := b.Recv(args, "discard"); c != 0 {
		t.Fatal(c)
	}
	deferred := b.dropsHeld()
	if e := find(cb, "discard", ca, "the discard"); e.Err != 0 {
		t.Fatalf("discard: %v", e.Err)
	}
	if cnt.ok.Load() != base+1 {
		t.Fatalf("receive counter +%d, want +1", cnt.ok.Load()-base)
	}
	if e := find(ca, "big", nil, fmt.Sprintf("b sent %d: the send, the sender alone progressing", sent)); e.Err != 0 {
		t.Fatalf("send: %v", e.Err)
	}
	return deferred
}
