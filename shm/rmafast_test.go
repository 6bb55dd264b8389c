package shm

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/rma"
	"github.com/gofi-dev/fi/transport"
)

// fastRig is a target's service and key table in this process's heap (a
// region of 4096 bytes at remote address 1000 under key 7, 64 guard bytes
// on both sides, an endpoint remote-write and remote-read counter) and an
// initiator transport with its peer state, for the quick-request tests.
type fastRig struct {
	s      *svc
	tab    *rma.Table
	x      *rma.Target
	all    []byte // guards and region
	region []byte
	tgt    *Transport // serves (rmaServeFast)
	ini    *Transport
	rp     *rmaPeer
}

func newFastRig(t testing.TB) *fastRig {
	// Outside the Go heap, as a mapping is: the race detector does not see
	// the two sides' plain accesses, ordered by the slot's state word.
	mem, err := unix.Mmap(-1, 0, svcSize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(mem) })
	putSvcHeader(mem, 1234, NewName(), -1, -1)
	s, err := parseSvc(&Segment{mem: mem})
	if err != nil {
		t.Fatal(err)
	}
	size, _ := rma.Size(4, 4)
	tmem := make([]byte, size+64)
	off := int(-rma.Addr(tmem) & 63)
	tab, err := rma.NewTable(tmem[off:off+size], 4, 4, "")
	if err != nil {
		t.Fatal(err)
	}
	all := make([]byte, 4096+128)
	for i := range all {
		all[i] = 0xee
	}
	region := all[64 : 64+4096]
	if _, _, err := tab.Register(rma.Region{Mem: region, Key: 7, Base: 1000, Access: rma.AccessRemoteRead | rma.AccessRemoteWrite}, false, nil); err != nil {
		t.Fatal(err)
	}
	cw, err := tab.AllocCounter()
	if err != nil {
		t.Fatal(err)
	}
	cr, err := tab.AllocCounter()
	if err != nil {
		t.Fatal(err)
	}
	x := &rma.Target{Table: tab, RemoteWrite: cw, RemoteRead: cr}
	tgt := &Transport{}
	tgt.rma.svc = s
	tgt.rma.exec = &executor{x: x}
	ini := &Transport{}
	ini.cfg.PeerTimeout = time.Second
	return &fastRig{s: s, tab: tab, x: x, all: all, region: region, tgt: tgt, ini: ini,
		rp: &rmaPeer{svc: s, fast: fastUnclaimed}}
}

// guardsOK reports whether the guard bytes are intact (read under a hold,
// which orders it after the server's accesses for the race detector).
func (g *fastRig) guardsOK(t testing.TB) {
	t.Helper()
	h, c := g.tab.Acquire(7)
	if c != rma.OK {
		t.Fatal(c)
	}
	defer h.Release()
	ee := bytes.Repeat([]byte{0xee}, 64)
	if !bytes.Equal(g.all[:64], ee) || !bytes.Equal(g.all[64+4096:], ee) {
		t.Fatal("a guard byte changed")
	}
}

// regionCopy copies the region under a hold.
func (g *fastRig) regionCopy() []byte {
	h, _ := g.tab.Acquire(7)
	defer h.Release()
	return append([]byte(nil), g.region...)
}

func (g *fastRig) counts() (w, r uint64) { return g.x.RemoteWrite.Read(), g.x.RemoteRead.Read() }

// serving runs the target's Poll side on a goroutine until stop is
// called, and makes initiators wait for it as long as it takes (the
// machine may be loaded: these tests are about who executes, not when).
func (g *fastRig) serving(t testing.TB) (stop func()) {
	old := fastWait
	fastWait = time.Minute
	var quit atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !quit.Load() {
			g.tgt.rmaServeFast()
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			quit.Store(true)
			wg.Wait()
			fastWait = old
		})
	}
	t.Cleanup(stop)
	return stop
}

func writeReq(local []byte, addr uint64) *transport.RMAReq {
	return &transport.RMAReq{Kind: transport.RMAWrite, Local: [][]byte{local},
		Remote: []transport.RMAIOV{{Addr: addr, Len: uint64(len(local)), Key: 7}}}
}

// TestFastTaken: with the target's progress running, a quick write and
// read are executed by it: the bytes land, are read back, and count once
// each; the guard bytes stay.
func TestFastTaken(t *testing.T) {
	g := newFastRig(t)
	g.serving(t)
	src := []byte("quick requests!!")
	c, taken := g.ini.rmaFast(g.rp, writeReq(src, 1000+4096-16), 1, 16)
	if !taken || c != transport.OK || g.rp.fastBack != 0 {
		t.Fatalf("write: taken %v code %d backoff %d", taken, c, g.rp.fastBack)
	}
	got := make([]byte, 16)
	rd := &transport.RMAReq{Kind: transport.RMARead, Local: [][]byte{got[:5], got[5:]},
		Remote: []transport.RMAIOV{{Addr: 1000 + 4096 - 16, Len: 10, Key: 7}, {Addr: 1000 + 4096 - 6, Len: 6, Key: 7}}}
	c, taken = g.ini.rmaFast(g.rp, rd, 2, 16)
	if !taken || c != transport.OK || !bytes.Equal(got, src) {
		t.Fatalf("read: taken %v code %d %q", taken, c, got)
	}
	if w, r := g.counts(); w != 1 || r != 1 {
		t.Fatalf("counted %d writes, %d reads; want 1, 1", w, r)
	}
	g.guardsOK(t)
}

// TestFastWithdrawn: with no progress running, the initiator withdraws
// its request after fastWait: nothing is executed or counted, the
// service is marked inactive, and a server that comes later finds
// nothing to take.
func TestFastWithdrawn(t *testing.T) {
	g := newFastRig(t)
	g.s.active().Store(1)
	c, taken := g.ini.rmaFast(g.rp, writeReq([]byte("never"), 1000), 1, 5)
	if taken || c != 0 {
		t.Fatalf("taken %v code %d with no server", taken, c)
	}
	if g.s.active().Load() != 0 {
		t.Fatal("service still marked active")
	}
	if g.rp.fastSkip != 1 {
		t.Fatalf("skipping %d operations after one withdrawal", g.rp.fastSkip)
	}
	g.rp.fastSkip = 0
	if _, taken := g.ini.rmaFast(g.rp, writeReq([]byte("never"), 1000), 1, 5); taken || g.rp.fastSkip != 2 {
		t.Fatalf("second withdrawal: taken %v, skipping %d", taken, g.rp.fastSkip)
	}
	if g.tgt.rmaServeFast() {
		t.Fatal("the server executed a withdrawn request")
	}
	if !bytes.Equal(g.regionCopy(), bytes.Repeat([]byte{0xee}, 4096)) {
		t.Fatal("a withdrawn write changed the region")
	}
	if w, r := g.counts(); w != 0 || r != 0 {
		t.Fatalf("counted %d, %d", w, r)
	}
	g.guardsOK(t)
}

// TestFastClaimRace: a server polling while the initiator posts and
// withdraws at once, many times: each request is executed by exactly
// one side (counted by the target exactly when it took it), and whichever
// won, the bytes are the ones written.
func TestFastClaimRace(t *testing.T) {
	g := newFastRig(t)
	stop := g.serving(t)
	slotIdx, tok := g.s.claimFast(time.Second)
	if slotIdx < 0 {
		t.Fatal("no quick slot")
	}
	defer g.s.releaseFast(slotIdx, tok)
	slot := g.s.fastSlot(slotIdx)
	st := fastState(slot)
	served, withdrawn := 0, 0
	for i := 0; i < 2000; i++ {
		r := rma.Request{Kind: rma.KindWrite, NIOV: 1, Payload: 8}
		r.IOV[0] = rma.IOV{Addr: 1000 + uint64(i%512)*8, Len: 8, Key: 7}
		n := r.Encode(slot[fReq:])
		ne.PutUint64(fastData(slot, n), uint64(i))
		st.Store(fPosted)
		for k := 0; k < (i%64)*(i%7)*8; k++ {
			_ = st.Load()
		}
		if st.CompareAndSwap(fPosted, fFree) {
			withdrawn++
			continue
		}
		for st.Load() != fAnswered {
		}
		if ne.Uint32(slot[fStatus:]) != 0 {
			t.Fatalf("request %d answered %d", i, ne.Uint32(slot[fStatus:]))
		}
		served++
		st.Store(fFree)
	}
	stop()
	if w, _ := g.counts(); w != uint64(served) {
		t.Fatalf("target counted %d writes, it took %d (withdrawn %d)", w, served, withdrawn)
	}
	t.Logf("served %d, withdrawn %d", served, withdrawn)
	if served == 0 || withdrawn == 0 {
		t.Skipf("one side always won (served %d, withdrawn %d): the race was not run", served, withdrawn)
	}
	g.guardsOK(t)
}

// TestFastRefusals: unknown keys, ranges leaving the region (also by
// overflow), missing rights and oversized requests are answered with an
// error by the server and touch nothing.
func TestFastRefusals(t *testing.T) {
	g := newFastRig(t)
	g.serving(t)
	for _, c := range []struct {
		name string
		req  *transport.RMAReq
		want transport.Code
	}{
		{"key", &transport.RMAReq{Kind: transport.RMAWrite, Local: [][]byte{make([]byte, 8)}, Remote: []transport.RMAIOV{{Addr: 1000, Len: 8, Key: 8}}}, transport.Code(rma.EAccess)},
		{"below", writeReq(make([]byte, 8), 999), transport.Code(rma.EInval)},
		{"above", writeReq(make([]byte, 8), 1000+4096-7), transport.Code(rma.EInval)},
		{"overflow", &transport.RMAReq{Kind: transport.RMAWrite, Local: [][]byte{make([]byte, 8)}, Remote: []transport.RMAIOV{{Addr: ^uint64(0) - 3, Len: 8, Key: 7}}}, transport.Code(rma.EInval)},
	} {
		code, taken := g.ini.rmaFast(g.rp, c.req, 1, 8)
		if !taken || code != c.want {
			t.Errorf("%s: taken %v code %d, want %d", c.name, taken, code, c.want)
		}
	}
	if !bytes.Equal(g.regionCopy(), bytes.Repeat([]byte{0xee}, 4096)) {
		t.Fatal("a refused write changed the region")
	}
	if w, r := g.counts(); w != 0 || r != 0 {
		t.Fatalf("counted %d, %d", w, r)
	}
	g.guardsOK(t)
}

// TestFastDeadOwner: a slot whose owner died is freed by the target's
// housekeeping and reset by the next claimer, even with a request of the
// dead owner still posted.
func TestFastDeadOwner(t *testing.T) {
	g := newFastRig(t)
	for i := 0; i < SvcEntries; i++ {
		g.s.fastOwner(i).Store(uint64(1<<31-2)<<32 | 1) // no such process
	}
	fastState(g.s.fastSlot(5)).Store(fPosted)
	if i, _ := g.s.claimFast(time.Second); i >= 0 {
		t.Fatalf("claimed slot %d of a full service", i)
	}
	g.s.fastOwner(5).Store(0)
	g.s.freeDeadFast()
	for i := 0; i < SvcEntries; i++ {
		if g.s.fastOwner(i).Load() != 0 {
			t.Fatalf("slot %d of a dead owner kept", i)
		}
	}
	i, tok := g.s.claimFast(time.Second)
	if i != 0 || tok>>32 == 0 {
		t.Fatalf("claimed %d, %#x", i, tok)
	}
	g.s.fastOwner(0).Store(0)
	g.s.fastOwner(1).Store(0)
	for k := 0; k < 5; k++ {
		g.s.fastOwner(k).Store(1)
	}
	if i, _ := g.s.claimFast(time.Second); i != 5 || fastState(g.s.fastSlot(5)).Load() != fFree {
		t.Fatalf("claimed %d, state %d", i, fastState(g.s.fastSlot(5)).Load())
	}
}

// FuzzFastSlot: a quick slot of any bytes, posted, served against a table
// with one region: it is answered, never a panic, and no byte outside the
// region ever changes.
func FuzzFastSlot(f *testing.F) {
	seed := func(k rma.Kind, addr, n uint64, pay int) []byte {
		s := make([]byte, fReq+rma.MaxReqHeader+pay)
		r := rma.Request{Kind: k, NIOV: 1, Payload: uint64(pay)}
		r.IOV[0] = rma.IOV{Addr: addr, Len: n, Key: 7}
		r.Encode(s[fReq:])
		return s
	}
	f.Add(seed(rma.KindWrite, 1000, 16, 16))
	f.Add(seed(rma.KindRead, 1000+4000, 96, 0))
	f.Add(seed(rma.KindWrite, 999, 16, 16))
	f.Add(seed(rma.KindAtomic, 1000, 8, 8))
	f.Add(seed(rma.KindRead, 1000, 4096, 0))
	g := newFastRig(f)
	var fs fastServer
	f.Fuzz(func(t *testing.T, in []byte) {
		slot := g.s.fastSlot(3)
		clear(slot)
		copy(slot, in)
		fastState(slot).Store(fPosted)
		if !fs.serve(g.x, slot) {
			t.Fatal("a posted slot was not served")
		}
		if fastState(slot).Load() != fAnswered {
			t.Fatalf("state %d after serving", fastState(slot).Load())
		}
		g.guardsOK(t)
	})
}

// BenchmarkFastRoundTrip: one 8-byte quick write at a time to a server
// goroutine polling the slot (the target's Poll side), through rmaFast:
// the protocol's cost without the API, the rings or a second process.
func BenchmarkFastRoundTrip(b *testing.B) {
	g := newFastRig(b)
	g.serving(b)
	req := writeReq(make([]byte, 8), 1000)
	if _, taken := g.ini.rmaFast(g.rp, req, 1, 8); !taken {
		b.Fatal("not taken")
	}
	b.ReportAllocs()
	for b.Loop() {
		if c, taken := g.ini.rmaFast(g.rp, req, 1, 8); !taken || c != 0 {
			b.Fatalf("taken %v code %d", taken, c)
		}
	}
}

// BenchmarkFastServe: the target's side of one 8-byte quick write (take,
// check, copy, count, answer), posted and served on one goroutine: the
// part of a quick operation's latency the target's Poll adds.
func BenchmarkFastServe(b *testing.B) {
	g := newFastRig(b)
	slot := g.s.fastSlot(0)
	r := rma.Request{Kind: rma.KindWrite, NIOV: 1, Payload: 8}
	r.IOV[0] = rma.IOV{Addr: 1000, Len: 8, Key: 7}
	n := r.Encode(slot[fReq:])
	ne.PutUint64(fastData(slot, n), 42)
	var fs fastServer
	b.ReportAllocs()
	for b.Loop() {
		fastState(slot).Store(fPosted)
		if !fs.serve(g.x, slot) {
			b.Fatal("not served")
		}
	}
}

// BenchmarkFastPostWithdraw: the initiator's side of a quick write
// without a target (fastWait 0: posted, then withdrawn): the request's
// building, posting and the withdrawal, for instruction counts.
func BenchmarkFastPostWithdraw(b *testing.B) {
	g := newFastRig(b)
	old := fastWait
	fastWait = 0
	b.Cleanup(func() { fastWait = old })
	req := writeReq(make([]byte, 8), 1000)
	b.ReportAllocs()
	for b.Loop() {
		if _, taken := g.ini.rmaFast(g.rp, req, 1, 8); taken {
			b.Fatal("taken without a target")
		}
	}
}
