package rma

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newTestTable(t testing.TB, slots, cntrs int) *Table {
	t.Helper()
	n, err := Size(slots, cntrs)
	if err != nil {
		t.Fatal(err)
	}
	mem := make([]byte, n+64)
	off := int(-Addr(mem) & 63)
	tb, err := NewTable(mem[off:off+n], slots, cntrs, "gofi-test-table")
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestTable_RegisterAcquireRelease(t *testing.T) {
	tb := newTestTable(t, 4, 2)
	mem := make([]byte, 100)
	slot, key, err := tb.Register(Region{Mem: mem, Key: 42, Base: 1000, Access: AccessRemoteWrite}, false, nil)
	if err != nil || key != 42 {
		t.Fatalf("Register = %d, %d, %v", slot, key, err)
	}
	if _, _, err := tb.Register(Region{Mem: mem, Key: 42}, false, nil); !errors.Is(err, ErrKeyInUse) {
		t.Fatalf("duplicate key: %v, want ErrKeyInUse", err)
	}
	h, c := tb.Acquire(42)
	if c != OK {
		t.Fatalf("Acquire: %d", c)
	}
	if h.Len != 100 || h.Base != 1000 || !h.Allows(AccessRemoteWrite) || h.Allows(AccessRemoteRead) || &h.Mem[0] != &mem[0] {
		t.Fatalf("slot %+v", h.Slot)
	}
	h.Release()
	if _, c := tb.Acquire(43); c != EAccess {
		t.Fatalf("unknown key: %d, want EAccess", c)
	}
	tb.Deregister(slot, nil)
	if _, c := tb.Acquire(42); c != EAccess {
		t.Fatalf("closed key: %d, want EAccess", c)
	}
	// The key is free again, the slot reused with a new generation.
	slot2, _, err := tb.Register(Region{Mem: mem, Key: 42}, false, nil)
	if err != nil || slot2 != slot || tb.Gen(slot2) != 1 {
		t.Fatalf("re-register: slot %d gen %d err %v", slot2, tb.Gen(slot2), err)
	}
}

func TestTable_Full(t *testing.T) {
	tb := newTestTable(t, 2, 0)
	for i := range 2 {
		if _, _, err := tb.Register(Region{Key: uint64(i)}, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tb.Register(Region{Key: 9}, false, nil); !errors.Is(err, ErrFull) {
		t.Fatalf("got %v, want ErrFull", err)
	}
	if _, err := tb.AllocCounter(); !errors.Is(err, ErrFull) {
		t.Fatalf("counter in a table without counters: %v", err)
	}
}

func TestTable_ProviderKeysDistinct(t *testing.T) {
	tb := newTestTable(t, 8, 0)
	seen := map[uint64]bool{}
	for range 8 {
		_, k, err := tb.Register(Region{}, true, nil)
		if err != nil || seen[k] {
			t.Fatalf("key %#x err %v (seen %v)", k, err, seen[k])
		}
		seen[k] = true
	}
}

func TestSlot_Range(t *testing.T) {
	s := Slot{Base: 100, Len: 50}
	cases := []struct {
		addr, n uint64
		off     uint64
		c       Code
	}{
		{100, 50, 0, OK},
		{149, 1, 49, OK},
		{150, 0, 50, OK},
		{150, 1, 0, EInval},
		{99, 1, 0, EInval},
		{100, 51, 0, EInval},
		{120, ^uint64(0) - 10, 0, EInval}, // addr+n wraps
		{^uint64(0), 2, 0, EInval},
	}
	for _, c := range cases {
		off, code := s.Range(c.addr, c.n)
		if code != c.c || (code == OK && off != c.off) {
			t.Errorf("Range(%d, %d) = %d, %d; want %d, %d", c.addr, c.n, off, code, c.off, c.c)
		}
	}
}

// TestTable_ViewSeesOwner opens a view of the owner's memory, as a peer
// process would, and finds keys, generations and counters through it.
func TestTable_ViewSeesOwner(t *testing.T) {
	tb := newTestTable(t, 16, 4)
	mem := make([]byte, 64)
	slot, _, _ := tb.Register(Region{Mem: mem, Key: 7, Base: 0, Access: AccessRemoteRead}, false, nil)
	c, _ := tb.AllocCounter()
	tb.BindCounters(slot, c, nil)
	v, err := OpenTable(tb.mem)
	if err != nil {
		t.Fatal(err)
	}
	if v.Name() != "gofi-test-table" || v.OwnerPID() != os.Getpid() {
		t.Fatalf("view name %q pid %d", v.Name(), v.OwnerPID())
	}
	h, code := v.Acquire(7)
	if code != OK || h.Addr != Addr(mem) || h.Len != 64 || h.CntrW != c.Index() || h.CntrR != -1 || h.Mem != nil {
		t.Fatalf("view slot %+v code %d", h.Slot, code)
	}
	v.Counter(h.CntrW).Add(3)
	h.Release()
	if c.Read() != 3 {
		t.Fatalf("counter through the view: %d", c.Read())
	}
	tb.Deregister(slot, nil)
	if _, code := v.Acquire(7); code != EAccess {
		t.Fatalf("view after deregister: %d", code)
	}
}

// TestTable_DeregisterWaitsForHolders checks that an access in progress
// holds Deregister up, and that no access starts after it returned.
func TestTable_DeregisterWaitsForHolders(t *testing.T) {
	tb := newTestTable(t, 4, 0)
	slot, _, _ := tb.Register(Region{Mem: make([]byte, 8), Key: 1}, false, nil)
	h, c := tb.Acquire(1)
	if c != OK {
		t.Fatal(c)
	}
	var done atomic.Bool
	go func() {
		tb.Deregister(slot, nil)
		done.Store(true)
	}()
	time.Sleep(20 * time.Millisecond)
	if done.Load() {
		t.Fatal("Deregister returned while an access was in progress")
	}
	if _, c := tb.Acquire(1); c != EAccess {
		t.Fatalf("Acquire while closing: %d, want EAccess", c)
	}
	h.Release()
	deadline := time.Now().Add(60 * time.Second)
	for !done.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !done.Load() {
		t.Fatal("Deregister did not return after the release")
	}
}

// TestTable_DeadHolderDoesNotWedge plants a cell held by a pid that does
// not exist: Deregister clears it and returns.
func TestTable_DeadHolderDoesNotWedge(t *testing.T) {
	tb := newTestTable(t, 4, 0)
	slot, _, _ := tb.Register(Region{Mem: make([]byte, 8), Key: 1}, false, nil)
	tb.cell(slot, 3).Store(1 << 30) // no such pid
	done := make(chan struct{})
	go func() { tb.Deregister(slot, ProcessAlive); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Deregister wedged on a dead holder")
	}
}

// TestTable_RaceAcquireDeregister hammers Acquire from several goroutines
// while the region is deregistered: every access that got a Hold released
// it before Deregister returned.
func TestTable_RaceAcquireDeregister(t *testing.T) {
	tb := newTestTable(t, 4, 0)
	for round := range 50 {
		mem := make([]byte, 8)
		slot, _, err := tb.Register(Region{Mem: mem, Key: uint64(round)}, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		var after atomic.Bool
		var bad atomic.Int32
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 200 {
					h, c := tb.Acquire(uint64(round))
					if c != OK {
						continue
					}
					if after.Load() {
						bad.Add(1)
					}
					h.Mem[0]++
					h.Release()
				}
			}()
		}
		tb.Deregister(slot, nil)
		after.Store(true)
		wg.Wait()
		if bad.Load() != 0 {
			t.Fatalf("round %d: %d accesses held after Deregister returned", round, bad.Load())
		}
	}
}

func TestCounter_SleepWakes(t *testing.T) {
	tb := newTestTable(t, 1, 2)
	c, _ := tb.AllocCounter()
	start := time.Now()
	go func() {
		time.Sleep(20 * time.Millisecond)
		c.Add(1)
	}()
	for c.Read() == 0 {
		s := c.Seq()
		if c.Read() != 0 {
			break
		}
		c.Sleep(s, 5*time.Second)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("woke after %v", d)
	}
	c.AddErr(2)
	c.Set(10)
	c.SetErr(1)
	if c.Read() != 10 || c.ReadErr() != 1 {
		t.Fatalf("counter %d/%d", c.Read(), c.ReadErr())
	}
}

func TestOpenTable_RefusesCorrupt(t *testing.T) {
	tb := newTestTable(t, 4, 1)
	good := tb.mem
	mut := []struct {
		name string
		f    func(b []byte)
	}{
		{"magic", func(b []byte) { ne.PutUint32(b[hMagic:], 1) }},
		{"version", func(b []byte) { ne.PutUint32(b[hVersion:], 9) }},
		{"slots", func(b []byte) { ne.PutUint32(b[hSlots:], 1<<20) }},
		{"slot offset", func(b []byte) { ne.PutUint64(b[hSlotOff:], 8) }},
		{"total", func(b []byte) { ne.PutUint64(b[hTotal:], 1<<40) }},
		{"name length", func(b []byte) { ne.PutUint32(b[hNameLen:], 200) }},
		{"reserved", func(b []byte) { b[200] = 1 }},
		{"pid", func(b []byte) { ne.PutUint32(b[hPID:], 0) }},
	}
	for _, m := range mut {
		b := alignedCopy(good)
		m.f(b)
		if _, err := OpenTable(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", m.name, err)
		}
	}
	if _, err := OpenTable(alignedCopy(good)[:100]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short: %v", err)
	}
}

func alignedCopy(b []byte) []byte {
	m := make([]byte, len(b)+64)
	off := int(-Addr(m) & 63)
	out := m[off : off+len(b)]
	copy(out, b)
	return out
}

func FuzzOpenTable(f *testing.F) {
	tb := newTestTable(f, 2, 1)
	f.Add(append([]byte(nil), tb.mem...))
	f.Add(make([]byte, HeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		m := alignedCopy(b)
		v, err := OpenTable(m)
		if err != nil {
			return
		}
		// A view that opened must be safe to use: lookups and counters
		// stay inside the memory whatever the slots hold.
		_, _ = v.Acquire(7)
		_ = v.Counter(0)
		_ = v.Counter(-1)
	})
}

// TestTable_OwnerHintsNeverMislead: the owner's key hints (find) point at
// slots that were since closed or reused under a key sharing the hint
// word: Acquire still answers as the key map does.
func TestTable_OwnerHintsNeverMislead(t *testing.T) {
	tb := newTestTable(t, 4, 2)
	a, b := make([]byte, 10), make([]byte, 20)
	slot, _, err := tb.Register(Region{Mem: a, Key: 3}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	acquire := func(key uint64, want Code, mem []byte) {
		t.Helper()
		h, c := tb.Acquire(key)
		if c != want {
			t.Fatalf("Acquire(%d) = %d, want %d", key, c, want)
		}
		if c == OK {
			if &h.Mem[0] != &mem[0] {
				t.Fatalf("Acquire(%d) gave another region", key)
			}
			h.Release()
		}
	}
	acquire(3, OK, a) // hint for 3 (and 19) -> slot
	tb.Deregister(slot, nil)
	acquire(3, EAccess, nil)
	// 19 shares 3's hint word and takes the same slot.
	if s, _, err := tb.Register(Region{Mem: b, Key: 19}, false, nil); err != nil || s != slot {
		t.Fatalf("Register(19) = %d, %v", s, err)
	}
	acquire(3, EAccess, nil)
	acquire(19, OK, b)
	// 3 again, in another slot, while the hint says 19's slot.
	if _, _, err := tb.Register(Region{Mem: a, Key: 3}, false, nil); err != nil {
		t.Fatal(err)
	}
	acquire(3, OK, a)
	acquire(19, OK, b)
	acquire(35, EAccess, nil)
}

// TestAccessTo_InPlace: AccessTo fills a reused Hold exactly as Access
// returns one, and a refusal leaves it holding nothing (a closed region's
// Deregister does not wait for it).
func TestAccessTo_InPlace(t *testing.T) {
	tb := newTestTable(t, 4, 2)
	mem := make([]byte, 64)
	slot, _, err := tb.Register(Region{Mem: mem, Key: 5, Base: 100, Access: AccessRemoteRead}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, woff, c := tb.Access(5, 108, 8, AccessRemoteRead)
	if c != OK {
		t.Fatal(c)
	}
	want.Release()
	var h Hold
	for _, c := range []struct {
		key, addr, n, want uint64
		code               Code
	}{
		{5, 108, 8, AccessRemoteRead, OK},
		{5, 108, 8, AccessRemoteWrite, EAccess},
		{5, 160, 8, AccessRemoteRead, EInval},
		{9, 108, 8, AccessRemoteRead, EAccess},
		{5, 108, 8, AccessRemoteRead, OK},
	} {
		off, code := tb.AccessTo(&h, c.key, c.addr, c.n, c.want)
		if code != c.code {
			t.Fatalf("AccessTo(%d, %d, %d, %#x) = %d, want %d", c.key, c.addr, c.n, c.want, code, c.code)
		}
		if code != OK {
			if h.cell != nil || h.Slot.Key != 0 || h.Len != 0 || h.Mem != nil {
				t.Fatalf("refused AccessTo left %+v", h.Slot)
			}
			continue
		}
		if off != woff || h.Slot.Index != want.Slot.Index || h.Key != want.Key || h.Len != want.Len || h.Gen != want.Gen ||
			h.Base != want.Base || h.Access != want.Access || h.CntrW != want.CntrW || h.CntrR != want.CntrR {
			t.Fatalf("AccessTo = %+v at %d, Access gave %+v at %d", h.Slot, off, want.Slot, woff)
		}
		h.Release()
	}
	tb.Deregister(slot, nil) // returns: nothing holds a cell
}
