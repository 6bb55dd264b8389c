package coll

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
)

// FuzzCheckHeader: a region header written by another process is
// checked without panicking, and accepted only when it matches what the
// member knows and the mapping holds the region it describes.
func FuzzCheckHeader(f *testing.F) {
	good := make([]byte, regionHdr)
	binary.LittleEndian.PutUint64(good[hMagic:], regionMagic)
	binary.LittleEndian.PutUint32(good[hVersion:], regionVersion)
	binary.LittleEndian.PutUint32(good[hLocal:], 3)
	binary.LittleEndian.PutUint64(good[hSlot:], minSlot)
	binary.LittleEndian.PutUint32(good[hGroup:], 7)
	binary.LittleEndian.PutUint64(good[hHash:], 99)
	binary.LittleEndian.PutUint64(good[hNonce:], 5)
	f.Add(good, 3, 0)
	f.Add(good[:100], 3, 0)
	f.Add(good, 4, 1<<20)
	f.Fuzz(func(t *testing.T, hdr []byte, n, extra int) {
		if n < 1 || n > maxLocal || extra < 0 || extra > 4<<20 {
			return
		}
		m := append(append([]byte(nil), hdr...), make([]byte, extra)...)
		slot, ok := checkHeader(m, n, 7, 99, 5)
		if !ok {
			return
		}
		if slot < slotMin(n) || slot > maxSlot || regionSize(n, slot) > len(m) ||
			binary.LittleEndian.Uint32(m[hLocal:]) != uint32(n) {
			t.Fatalf("accepted slot %d for %d ranks in %d bytes", slot, n, len(m))
		}
	})
}

// TestRegionSizeAtScale: the region of a group of dozens of ranks stays a
// few MiB of /dev/shm (issue 18: 64 ranks in a 64 MB tmpfs), and slots
// are never smaller than an operation needs.
func TestRegionSizeAtScale(t *testing.T) {
	t.Setenv(ShmBudgetEnv, "")
	for _, n := range []int{2, 8, 9, 16, 64, 256, maxLocal} {
		s := slotFor(n, shmBudget(n))
		size := regionSize(n, s)
		if size > SmallShmBudget || size > 6<<20+512<<10 && n > SmallGroup && n <= 64 || size > 9<<20 && n > SmallGroup {
			t.Errorf("%d ranks: region %d bytes (slot %d)", n, size, s)
		}
		if s < n*64 || s < minSlot {
			t.Errorf("%d ranks: slot %d too small", n, s)
		}
		t.Logf("%d ranks: slot %d KiB, region %.1f MiB", n, s>>10, float64(size)/(1<<20))
	}
}

// TestSlotAboveDefault: slots above 1 MiB only when the budget allows
// them: 8 MiB keeps 2 ranks at 1 MiB slots; groups of up to SmallGroup
// local ranks get SmallShmBudget by default (2 MiB slots at 2 and 4
// ranks, 1 MiB at 8), larger ones DefaultShmBudget.
func TestSlotAboveDefault(t *testing.T) {
	for _, c := range []struct{ n, budget, want int }{
		{2, DefaultShmBudget, 1 << 20},
		{2, 32 << 20, 4 << 20},
		{2, 16 << 20, 2 << 20},
		{8, 64 << 20, 2 << 20},
		{2, 1 << 30, maxSlot},
	} {
		if s := slotFor(c.n, c.budget); s != c.want || regionSize(c.n, s) > c.budget {
			t.Errorf("%d ranks, budget %d: slot %d, want %d", c.n, c.budget, s, c.want)
		}
	}
	t.Setenv(ShmBudgetEnv, "")
	for _, c := range []struct{ n, want int }{{2, 2 << 20}, {4, 2 << 20}, {8, 1 << 20}, {9, 256 << 10}, {64, 32 << 10}} {
		if s := slotFor(c.n, shmBudget(c.n)); s != c.want {
			t.Errorf("%d ranks, default budget: slot %d, want %d", c.n, s, c.want)
		}
	}
	t.Setenv(ShmBudgetEnv, "4194304")
	if b := shmBudget(2); b != 4<<20 {
		t.Errorf("%s=4194304: budget %d", ShmBudgetEnv, b)
	}
}

// TestArrivedSkipsOwnWord: a rank asks whether the others arrived only
// after publishing its own arrival, which it does not load back (a load
// of its control line after another CPU read it may miss): its own
// arrive word is not consulted, every other one is.
func TestArrivedSkipsOwnWord(t *testing.T) {
	r := &region{n: 3, me: 1, mem: make([]byte, regionHdr+ctrlBytes(3))}
	r.index()
	r.ph = 5
	r.arriveWord(0, 5).Store(5)
	r.arriveWord(2, 5).Store(4) // rank 2 still in the phase before
	if r.arrived() {
		t.Fatal("arrived with rank 2 missing")
	}
	r.arriveWord(2, 5).Store(5)
	if !r.arrived() {
		t.Fatal("not arrived: the own word (never written here) was consulted")
	}
}

// TestLeanFoldReadsOwnCopy: a lean fold takes the others' operands from
// their control lines and this rank's from its private copy (region.own),
// in rank order.
func TestLeanFoldReadsOwnCopy(t *testing.T) {
	r := &region{n: 3, me: 1, mem: make([]byte, regionHdr+ctrlBytes(3))}
	r.index()
	for set := 0; set < 2; set++ {
		for j := 0; j < 3; j++ {
			binary.LittleEndian.PutUint64(r.inline(j, set), uint64(10+j))
		}
		binary.LittleEndian.PutUint64(r.own[:], 1000) // differs from the line's 11
		got := make([]byte, 8)
		foldSum[uint64](got, r.fin[set])
		if v := binary.LittleEndian.Uint64(got); v != 10+1000+12 {
			t.Fatalf("set %d: fold %d, want %d (rank 1's operand from own)", set, v, 10+1000+12)
		}
	}
}

// TestOthersElsewhere: a waiting rank publishes its CPU and hears that a
// yield cannot help only when every rank still missing from the phase
// last waited on another CPU; a missing rank whose CPU is unknown or
// the same, and never an arrived one, says otherwise.
func TestOthersElsewhere(t *testing.T) {
	r := &region{n: 4, me: 1, mem: make([]byte, regionHdr+ctrlBytes(4))}
	r.index()
	r.ph = 3
	cpuWord := func(i int) *atomic.Uint64 { return r.u64(regionHdr + i*ctrlLine + cpuOff) }
	r.arriveWord(0, 3).Store(3) // rank 0 arrived; 2 and 3 missing
	if r.othersElsewhere(1) {
		t.Fatal("elsewhere while the missing ranks' CPUs are unknown")
	}
	if got := cpuWord(1).Load(); got != 2 {
		t.Fatalf("own CPU word %d, want CPU 1 + 1", got)
	}
	cpuWord(0).Store(2) // arrived: its CPU does not matter
	cpuWord(2).Store(1)
	cpuWord(3).Store(1)
	if !r.othersElsewhere(1) {
		t.Fatal("not elsewhere: both missing ranks wait on CPU 0, this one on CPU 1")
	}
	cpuWord(3).Store(2)
	if r.othersElsewhere(1) {
		t.Fatal("elsewhere while missing rank 3 waits on this CPU")
	}
	r.arriveWord(3, 3).Store(3) // rank 3 arrives: only rank 2 is missing
	if !r.othersElsewhere(1) {
		t.Fatal("not elsewhere: the one missing rank waits on CPU 0")
	}
	if r.othersElsewhere(0) {
		t.Fatal("elsewhere after moving onto the missing rank's CPU 0")
	}
}
