package rma

import (
	"bytes"
	"testing"
)

// runRig: a table with two regions (keys 1 and 2, 64 bytes each at remote
// address 1000, counters bound) and a target with endpoint counters.
func runRig(t *testing.T) (*Target, [2][]byte, [2][2]*Counter) {
	tb := newTestTable(t, 4, 8)
	var mems [2][]byte
	var rc [2][2]*Counter
	for i := range mems {
		mems[i] = make([]byte, 64)
		slot, _, err := tb.Register(Region{Mem: mems[i], Key: uint64(i + 1), Base: 1000, Access: AccessRemoteRead | AccessRemoteWrite}, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := tb.AllocCounter()
		r, _ := tb.AllocCounter()
		tb.BindCounters(slot, w, r)
		rc[i] = [2]*Counter{w, r}
	}
	ew, _ := tb.AllocCounter()
	er, _ := tb.AllocCounter()
	return &Target{Table: tb, RemoteWrite: ew, RemoteRead: er}, mems, rc
}

// TestDone_SplitOperation: a read over two regions split into three
// requests (the second range cut in two) counts once per range and once
// at the endpoint, as the whole request would.
func TestDone_SplitOperation(t *testing.T) {
	x, _, rc := runRig(t)
	parts := []Request{
		{Kind: KindRead, Flags: FlagMore, NIOV: 2, IOV: [MaxIOV]IOV{{Addr: 1000, Len: 64, Key: 1}, {Addr: 1000, Len: 10, Key: 2}}},
		{Kind: KindRead, Flags: FlagMore | FlagCont, NIOV: 1, IOV: [MaxIOV]IOV{{Addr: 1010, Len: 30, Key: 2}}},
		{Kind: KindRead, Flags: FlagCont, NIOV: 1, IOV: [MaxIOV]IOV{{Addr: 1040, Len: 24, Key: 2}}},
	}
	for i := range parts {
		x.Done(&parts[i])
	}
	if a, b, e := rc[0][1].Read(), rc[1][1].Read(), x.RemoteRead.Read(); a != 1 || b != 1 || e != 1 {
		t.Fatalf("region read counters %d, %d, endpoint %d; want 1 each", a, b, e)
	}
	if w := x.RemoteWrite.Read() + rc[0][0].Read() + rc[1][0].Read(); w != 0 {
		t.Fatalf("a read counted %d writes", w)
	}
	// Run counts the same way for one range.
	buf := make([]byte, 64)
	r := Request{Kind: KindRead, Flags: FlagMore | FlagCont, NIOV: 1, IOV: [MaxIOV]IOV{{Addr: 1000, Len: 8, Key: 1}}}
	if c, n := x.Run(&r, buf, nil, true); c != OK || n != 8 {
		t.Fatalf("Run = %d, %d", c, n)
	}
	if a, e := rc[0][1].Read(), x.RemoteRead.Read(); a != 1 || e != 1 {
		t.Fatalf("a continued middle part counted: region %d, endpoint %d", a, e)
	}
}

// TestRun_AgreesWithAccess: Peek and Run give the codes Access gives
// (unknown key, missing right, ranges outside the region, overflow), Run
// touches nothing and counts nothing when it refuses, and a write and a
// read of one and of two ranges move the bytes and count once.
func TestRun_AgreesWithAccess(t *testing.T) {
	x, mems, rc := runRig(t)
	for _, c := range []struct {
		key, addr, n, want uint64
	}{
		{3, 1000, 8, AccessRemoteWrite},
		{1, 999, 8, AccessRemoteWrite},
		{1, 1000 + 57, 8, AccessRemoteWrite},
		{1, ^uint64(0) - 3, 8, AccessRemoteWrite},
		{1, 1000, 8, AccessRemoteWrite | AccessSend},
		{1, 1000, 64, AccessRemoteRead},
	} {
		_, _, ca := x.Table.Access(c.key, c.addr, c.n, c.want)
		_, _, cp := x.Table.Peek(c.key, c.addr, c.n, c.want)
		if ca != cp {
			t.Errorf("%+v: Access %d, Peek %d", c, ca, cp)
		}
		if c.want != AccessRemoteWrite || ca == OK {
			continue
		}
		r := Request{Kind: KindWrite, NIOV: 1, Payload: c.n, IOV: [MaxIOV]IOV{{Addr: c.addr, Len: c.n, Key: c.key}}}
		data := bytes.Repeat([]byte{9}, 64)
		if code, _ := x.Run(&r, data, nil, true); code != ca {
			t.Errorf("%+v: Run %d, Access %d", c, code, ca)
		}
	}
	if !bytes.Equal(mems[0], make([]byte, 64)) || x.RemoteWrite.Read() != 0 || rc[0][0].Read() != 0 {
		t.Fatal("a refused Run wrote or counted")
	}
	data := make([]byte, 128)
	copy(data, "abcdefghijklmnop")
	one := Request{Kind: KindWrite, NIOV: 1, Payload: 8, IOV: [MaxIOV]IOV{{Addr: 1056, Len: 8, Key: 1}}}
	two := Request{Kind: KindWrite, NIOV: 2, Payload: 16, IOV: [MaxIOV]IOV{{Addr: 1000, Len: 8, Key: 1}, {Addr: 1000, Len: 8, Key: 2}}}
	for _, r := range []*Request{&one, &two} {
		if c, n := x.Run(r, data, nil, true); c != OK || n != 0 {
			t.Fatalf("write: %d, %d", c, n)
		}
	}
	if string(mems[0][56:]) != "abcdefgh" || string(mems[0][:8]) != "abcdefgh" || string(mems[1][:8]) != "ijklmnop" {
		t.Fatalf("memory %q %q", mems[0], mems[1])
	}
	if x.RemoteWrite.Read() != 2 || rc[0][0].Read() != 2 || rc[1][0].Read() != 1 {
		t.Fatalf("write counts %d %d %d", x.RemoteWrite.Read(), rc[0][0].Read(), rc[1][0].Read())
	}
	rd := Request{Kind: KindRead, NIOV: 2, IOV: [MaxIOV]IOV{{Addr: 1056, Len: 8, Key: 1}, {Addr: 1000, Len: 8, Key: 2}}}
	if c, n := x.Run(&rd, data[:16], nil, false); c != OK || n != 16 || string(data[:16]) != "abcdefghijklmnop" {
		t.Fatalf("read: %d, %d, %q", c, n, data[:16])
	}
	if c, _ := x.Run(&rd, data[:15], nil, false); c != EMsgSize {
		t.Fatalf("read into a short buffer: %d", c)
	}
	if x.RemoteRead.Read() != 0 {
		t.Fatal("Run counted without count")
	}
}

// TestDoneHolds_CountsAsDone: DoneHolds, counting through holds the
// caller took on every range, counts what Done counts for the same
// requests (a read split in three parts, a whole two-range write, an
// atomic read): once per range not continued from an earlier part, once
// at the endpoint for the last part.
func TestDoneHolds_CountsAsDone(t *testing.T) {
	reqs := []Request{
		{Kind: KindRead, Flags: FlagMore, NIOV: 2, IOV: [MaxIOV]IOV{{Addr: 1000, Len: 64, Key: 1}, {Addr: 1000, Len: 10, Key: 2}}},
		{Kind: KindRead, Flags: FlagMore | FlagCont, NIOV: 1, IOV: [MaxIOV]IOV{{Addr: 1010, Len: 30, Key: 2}}},
		{Kind: KindRead, Flags: FlagCont, NIOV: 1, IOV: [MaxIOV]IOV{{Addr: 1040, Len: 24, Key: 2}}},
		{Kind: KindWrite, Payload: 16, NIOV: 2, IOV: [MaxIOV]IOV{{Addr: 1000, Len: 8, Key: 1}, {Addr: 1000, Len: 8, Key: 2}}},
		{Kind: KindFetch, Datatype: 5, Op: opAtomicRead, Payload: 0, NIOV: 1, IOV: [MaxIOV]IOV{{Addr: 1000, Len: 8, Key: 2}}},
	}
	counts := func(x *Target, rc [2][2]*Counter) [6]uint64 {
		return [6]uint64{rc[0][0].Read(), rc[0][1].Read(), rc[1][0].Read(), rc[1][1].Read(), x.RemoteWrite.Read(), x.RemoteRead.Read()}
	}
	for i := range reqs {
		x1, _, rc1 := runRig(t)
		x2, _, rc2 := runRig(t)
		r := &reqs[i]
		x1.Done(r)
		var holds [MaxIOV]Hold
		for j := 0; j < r.NIOV; j++ {
			if c := x2.Table.AcquireTo(&holds[j], r.IOV[j].Key); c != OK {
				t.Fatalf("request %d range %d: AcquireTo %d", i, j, c)
			}
		}
		x2.DoneHolds(r, holds[:r.NIOV])
		for j := 0; j < r.NIOV; j++ {
			holds[j].Release()
		}
		if a, b := counts(x1, rc1), counts(x2, rc2); a != b {
			t.Errorf("request %d: Done counted %v, DoneHolds %v", i, a, b)
		}
		// The continued middle part counts nothing; every other one counts.
		if a := counts(x1, rc1); (a == [6]uint64{}) != (i == 1) {
			t.Errorf("request %d counted %v", i, a)
		}
	}
}
