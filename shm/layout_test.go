package shm

import (
	"errors"
	"os"
	"testing"
)

func TestComputeLayout_DefaultsAreSmallAlignedAndDisjoint(t *testing.T) {
	l, err := ComputeLayout(DefaultConnSlots, DefaultMaxPeers)
	if err != nil {
		t.Fatal(err)
	}
	if l.TotalSize > 64<<10 || l.TotalSize%os.Getpagesize() != 0 {
		t.Errorf("default region is %d bytes, want a page multiple <= 64 KiB", l.TotalSize)
	}
	areas := []struct {
		what     string
		off, len int
	}{
		{"header", 0, HeaderSize},
		{"doorbell", l.DoorbellOff, doorbellArea},
		{"connection sequence", l.ConnSeqOff, doorbellArea},
		{"nudge", l.NudgeOff, doorbellArea},
		{"bitmap", l.BitmapOff, l.BitmapLen},
		{"connection slots", l.ConnOff, l.ConnSlots * ConnSlotSize},
		{"peer slots", l.PeerOff, l.PeerSlots * PeerSlotSize},
	}
	end := 0
	for _, a := range areas {
		if a.off%(2*LineSize) != 0 {
			t.Errorf("%s at %d is not 128-byte aligned", a.what, a.off)
		}
		if a.off < end {
			t.Errorf("%s at %d overlaps the previous area ending at %d", a.what, a.off, end)
		}
		end = a.off + a.len
	}
	if end > l.TotalSize {
		t.Errorf("areas end at %d beyond the region's %d bytes", end, l.TotalSize)
	}
	if l.BitmapLen*8 < l.PeerSlots {
		t.Errorf("bitmap of %d bytes cannot cover %d peers", l.BitmapLen, l.PeerSlots)
	}
}

func TestComputeLayout_RefusesOutOfRangeCounts(t *testing.T) {
	for _, c := range [][2]int{{0, 1}, {1, 0}, {MaxConnSlots + 1, 1}, {1, MaxPeersLimit + 1}, {-1, 1}} {
		if _, err := ComputeLayout(c[0], c[1]); !errors.Is(err, ErrSize) {
			t.Errorf("ComputeLayout(%d, %d) = %v, want ErrSize", c[0], c[1], err)
		}
	}
}

// validHeader returns a whole region image with a published header.
func validHeader(t testing.TB, conn, peers int) ([]byte, Layout) {
	l, err := ComputeLayout(conn, peers)
	if err != nil {
		t.Fatal(err)
	}
	l.Name, l.OwnerPID = NewName(), os.Getpid()
	b := make([]byte, l.TotalSize)
	l.encode(b)
	ne.PutUint32(b[hMagic:], Magic)
	return b, l
}

func TestParseHeader_RoundTrips(t *testing.T) {
	b, want := validHeader(t, 7, 1000)
	got, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("ParseHeader = %+v, want %+v", got, want)
	}
}

func TestParseHeader_RefusesForeignAndCorruptRegions(t *testing.T) {
	put32 := func(off int, v uint32) func([]byte) []byte {
		return func(b []byte) []byte { ne.PutUint32(b[off:], v); return b }
	}
	put64 := func(off int, v uint64) func([]byte) []byte {
		return func(b []byte) []byte { ne.PutUint64(b[off:], v); return b }
	}
	for _, tc := range []struct {
		what string
		mod  func([]byte) []byte
		want error
	}{
		{"unpublished (zero magic)", put32(hMagic, 0), ErrNotReady},
		{"foreign magic", put32(hMagic, 0x12345678), ErrCorrupt},
		{"other version", put32(hVersion, 1), ErrCorrupt},
		{"other header size", put32(hHeaderSize, 512), ErrCorrupt},
		{"other line size", put32(hLineSize, 128), ErrCorrupt},
		{"other page size", put32(hPageSize, 65536), ErrCorrupt},
		{"zero owner pid", put32(hOwnerPID, 0), ErrCorrupt},
		{"huge owner pid", put32(hOwnerPID, 1<<31), ErrCorrupt},
		{"zero connection slots", put32(hConnSlots, 0), ErrCorrupt},
		{"too many peers", put32(hPeerSlots, MaxPeersLimit+1), ErrCorrupt},
		{"counts disagreeing with offsets", put32(hPeerSlots, 2000), ErrCorrupt},
		{"wrong slot size", put32(hConnSlotSize, 64), ErrCorrupt},
		{"wrong peer slot size", put32(hPeerSlotSize, 64), ErrCorrupt},
		{"doorbell offset outside", put64(hDoorbellOff, 1<<40), ErrCorrupt},
		{"bitmap overlapping the header", put64(hBitmapOff, 8), ErrCorrupt},
		{"bitmap length too long", put64(hBitmapLen, 1<<20), ErrCorrupt},
		{"connection slots offset moved", put64(hConnOff, 4096), ErrCorrupt},
		{"peer slots offset moved", put64(hPeerOff, 0), ErrCorrupt},
		{"total size lying", put64(hTotalSize, 1<<30), ErrCorrupt},
		{"reserved word set", put32(hReserved0, 1), ErrCorrupt},
		{"reserved tail set", put32(HeaderSize-4, 1), ErrCorrupt},
		{"empty name", put32(hNameLen, 0), ErrCorrupt},
		{"name too long", put32(hNameLen, 64), ErrCorrupt},
		{"bytes after the name", func(b []byte) []byte { b[hName+nameField-1] = 'x'; return b }, ErrCorrupt},
		{"reserved bytes after the nudge offset", func(b []byte) []byte { b[hEnd] = 1; return b }, ErrCorrupt},
		{"name with a slash", func(b []byte) []byte { b[hName+len(Prefix())] = '/'; return b }, ErrCorrupt},
		{"mapping shorter than the layout", func(b []byte) []byte { return b[:len(b)-4096] }, ErrCorrupt},
		{"mapping longer than the layout", func(b []byte) []byte { return append(b, make([]byte, 4096)...) }, ErrCorrupt},
		{"smaller than a header", func(b []byte) []byte { return b[:HeaderSize-1] }, ErrCorrupt},
		{"empty", func([]byte) []byte { return nil }, ErrCorrupt},
	} {
		b, _ := validHeader(t, DefaultConnSlots, DefaultMaxPeers)
		if _, err := ParseHeader(tc.mod(b)); !errors.Is(err, tc.want) {
			t.Errorf("%s: ParseHeader = %v, want %v", tc.what, err, tc.want)
		}
	}
}

// Arbitrary bytes as a region: an error or a layout that fits, never a
// panic. The input is used as is and also padded to the size its own
// counts imply, so the fuzzer gets past the size check.
func FuzzParseHeader(f *testing.F) {
	good, _ := validHeader(f, 3, 70)
	f.Add(good[:HeaderSize])
	f.Add(make([]byte, HeaderSize))
	f.Add([]byte("GOFS"))
	bad := append([]byte(nil), good[:HeaderSize]...)
	ne.PutUint32(bad[hPeerSlots:], 0xffffffff)
	f.Add(bad)
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(b []byte) {
			l, err := ParseHeader(b)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotReady) {
					t.Fatalf("error %v wraps neither ErrCorrupt nor ErrNotReady", err)
				}
				return
			}
			if l.TotalSize != len(b) || l.PeerOff+l.PeerSlots*PeerSlotSize > len(b) ||
				l.BitmapOff+l.BitmapLen > l.ConnOff || ValidName(l.Name) != nil {
				t.Fatalf("accepted an inconsistent layout %+v for %d bytes", l, len(b))
			}
			// A region laid out this way is usable: build the accessors.
			r := newRegionOver(b, l)
			for i := range l.ConnSlots {
				if req, err := r.ConnQueue().Read(i); err == nil && (ValidName(req.SenderName) != nil || ValidName(req.RingName) != nil) {
					t.Fatalf("slot %d: accepted bad request %+v", i, req)
				}
			}
			for i := range l.PeerSlots {
				if p, ok, err := r.Peers().Get(i); err == nil && ok && (len(p.SenderName) > MaxNameLen || len(p.RingName) > MaxNameLen) {
					t.Fatalf("peer %d: accepted bad slot %+v", i, p)
				}
			}
		}
		check(data)
		if len(data) >= HeaderSize {
			l, err := ComputeLayout(int(ne.Uint32(data[hConnSlots:])), int(ne.Uint32(data[hPeerSlots:])))
			if err == nil && l.TotalSize >= len(data) {
				b := make([]byte, l.TotalSize)
				copy(b, data)
				check(b)
			}
		}
	})
}
