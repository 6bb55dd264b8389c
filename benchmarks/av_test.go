package benchmarks

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"

	fi "github.com/gofi-dev/fi"
)

// Address-vector benchmarks: insertion and lookup rates, and memory per
// entry, for one million entries, against a baseline in the same run (a
// [][]byte table plus a map[string]uint32 reverse index, the obvious Go
// AV). Lookup must be O(1): compare the 1K and 1M lookup rates.

const avEntries = 1 << 20

// avOpen opens an AV on the first tcp domain with address format f.
func avOpen(b *testing.B, f fi.AddrFormat, attr *fi.AVAttr) (*fi.AV, func()) {
	b.Helper()
	h := fi.AllocInfo()
	h.FabricAttr.ProvName = "tcp"
	infos, err := fi.GetInfo(fi.Version(2, 0), "", "", 0, h)
	if err != nil {
		b.Fatal(err)
	}
	info := infos[0]
	info.AddrFormat = f
	fab, err := fi.OpenFabric(info.FabricAttr)
	if err != nil {
		b.Fatal(err)
	}
	dom, err := fab.OpenDomain(info)
	if err != nil {
		b.Fatal(err)
	}
	av, err := dom.OpenAV(attr)
	if err != nil {
		b.Fatal(err)
	}
	return av, func() { av.Close(); dom.Close(); fab.Close() }
}

// avAddr writes the i-th test address (distinct for every i < 2^24) as a
// sockaddr_in or sockaddr_in6 into buf.
func avAddr(buf []byte, i int, v6 bool) []byte {
	var ap netip.AddrPort
	if v6 {
		var a [16]byte
		a[0], a[1] = 0xfd, 0x00
		binary.BigEndian.PutUint32(a[12:], uint32(i>>4))
		ap = netip.AddrPortFrom(netip.AddrFrom16(a), uint16(5000+i&15))
	} else {
		ap = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), uint16(5000+i>>24))
	}
	s, _ := fi.SockaddrFromAddrPort(ap)
	return append(buf[:0], s...)
}

// batch fills addrs (reusing their buffers) with addresses from..from+len.
func batch(addrs [][]byte, from int, v6 bool) {
	for k := range addrs {
		addrs[k] = avAddr(addrs[k], from+k, v6)
	}
}

// fillAV inserts n addresses in batches of 1024.
func fillAV(b *testing.B, av *fi.AV, n int, v6 bool) {
	addrs := make([][]byte, 1024)
	for k := range addrs {
		addrs[k] = make([]byte, 0, 28)
	}
	for i := 0; i < n; i += len(addrs) {
		batch(addrs, i, v6)
		if _, err := av.Insert(addrs[:min(len(addrs), n-i)], 0); err != nil {
			b.Fatal(err)
		}
	}
}

// baselineAV is the obvious Go address vector.
type baselineAV struct {
	table [][]byte
	rev   map[string]uint32
}

func (t *baselineAV) insert(addrs [][]byte) {
	for _, a := range addrs {
		c := append([]byte(nil), a...)
		t.rev[string(c)] = uint32(len(t.table))
		t.table = append(t.table, c)
	}
}

// BenchmarkAVInsert: ns per inserted address, in batches of 1024, into
// AVs growing to one million entries.
func BenchmarkAVInsert(b *testing.B) {
	for _, c := range []struct {
		name string
		v6   bool
	}{{"ipv4", false}, {"ipv6", true}} {
		b.Run("gofi/"+c.name, func(b *testing.B) {
			format := fi.SockaddrIn
			if c.v6 {
				format = fi.SockaddrIn6
			}
			addrs := make([][]byte, 1024)
			b.ReportAllocs()
			var av *fi.AV
			closeAV := func() {}
			n := avEntries
			for i := 0; i < b.N; i += len(addrs) {
				if n >= avEntries {
					b.StopTimer()
					closeAV()
					av, closeAV = avOpen(b, format, nil)
					n = 0
					b.StartTimer()
				}
				b.StopTimer()
				batch(addrs, n, c.v6)
				b.StartTimer()
				if _, err := av.Insert(addrs, 0); err != nil {
					b.Fatal(err)
				}
				n += len(addrs)
			}
			b.StopTimer()
			closeAV()
		})
		b.Run("baseline-map/"+c.name, func(b *testing.B) {
			addrs := make([][]byte, 1024)
			b.ReportAllocs()
			var t *baselineAV
			n := avEntries
			for i := 0; i < b.N; i += len(addrs) {
				if n >= avEntries {
					t = &baselineAV{rev: make(map[string]uint32)}
					n = 0
				}
				b.StopTimer()
				batch(addrs, n, c.v6)
				b.StartTimer()
				t.insert(addrs)
				n += len(addrs)
			}
		})
	}
}

// BenchmarkAVLookup: ns per LookupTo in random order over 1K and 1M
// entries (O(1): the 1M rate is bounded by cache misses, not size), and
// over a compact symmetric range.
func BenchmarkAVLookup(b *testing.B) {
	for _, n := range []int{1 << 10, avEntries} {
		name := "1K"
		if n == avEntries {
			name = "1M"
		}
		perm := make([]uint32, n)
		for i := range perm {
			perm[i] = uint32(i)
		}
		rand.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		b.Run("gofi/ipv4/"+name, func(b *testing.B) {
			av, done := avOpen(b, fi.SockaddrIn, nil)
			defer done()
			fillAV(b, av, n, false)
			buf := make([]byte, 28)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := av.LookupTo(fi.Addr(perm[i&(n-1)]), buf); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("gofi/symmetric/"+name, func(b *testing.B) {
			av, done := avOpen(b, fi.SockaddrIn, &fi.AVAttr{Flags: fi.Symmetric})
			defer done()
			if _, err := av.InsertSym("10.0.0.0", n/16, "5000", 16, 0); err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 28)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := av.LookupTo(fi.Addr(perm[i&(n-1)]), buf); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("baseline-slice/ipv4/"+name, func(b *testing.B) {
			t := &baselineAV{rev: make(map[string]uint32)}
			addrs := make([][]byte, 1024)
			for i := 0; i < n; i += len(addrs) {
				batch(addrs, i, false)
				t.insert(addrs[:min(len(addrs), n-i)])
			}
			buf := make([]byte, 28)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				copy(buf, t.table[perm[i&(n-1)]])
			}
		})
	}
}

// heapBytes returns the live heap after a full collection.
func heapBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkAVMemory reports the heap bytes per entry of an AV holding one
// million entries (metric B/entry; run with -benchtime=1x).
func BenchmarkAVMemory(b *testing.B) {
	cases := []struct {
		name  string
		build func(b *testing.B) (keep any, done func())
	}{
		{"gofi/ipv4", func(b *testing.B) (any, func()) {
			av, done := avOpen(b, fi.SockaddrIn, nil)
			fillAV(b, av, avEntries, false)
			return av, done
		}},
		{"gofi/ipv6", func(b *testing.B) (any, func()) {
			av, done := avOpen(b, fi.SockaddrIn6, nil)
			fillAV(b, av, avEntries, true)
			return av, done
		}},
		{"gofi/symmetric", func(b *testing.B) (any, func()) {
			av, done := avOpen(b, fi.SockaddrIn, &fi.AVAttr{Flags: fi.Symmetric})
			if _, err := av.InsertSym("10.0.0.0", avEntries/16, "5000", 16, 0); err != nil {
				b.Fatal(err)
			}
			return av, done
		}},
		{"baseline-map/ipv4", func(b *testing.B) (any, func()) {
			t := &baselineAV{rev: make(map[string]uint32)}
			addrs := make([][]byte, 1024)
			for i := 0; i < avEntries; i += len(addrs) {
				batch(addrs, i, false)
				t.insert(addrs)
			}
			return t, func() {}
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var per float64
			for range b.N {
				before := heapBytes()
				keep, done := c.build(b)
				after := heapBytes()
				runtime.KeepAlive(keep)
				per = float64(int64(after)-int64(before)) / avEntries
				done()
			}
			b.ReportMetric(per, "B/entry")
		})
	}
}
