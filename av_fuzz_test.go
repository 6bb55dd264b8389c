package fi

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"testing"

	"github.com/gofi-dev/fi/internal/avstore"
)

func mustAP(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// splitFuzzAddrs cuts data into addresses: each is a length byte followed
// by that many bytes (cut short at the end).
func splitFuzzAddrs(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 && len(out) < 64 {
		n := int(data[0])
		data = data[1:]
		n = min(n, len(data))
		out = append(out, data[:n])
		data = data[n:]
	}
	return out
}

// checkInsert checks the Insert contract on arbitrary input: never a
// panic; one index per address; failures are AddrNotAvail with a
// matching count and statuses; successes can be looked up, forwards and
// backwards.
func checkInsert(t *testing.T, av *AV, addrs [][]byte) {
	got, err := av.Insert(addrs, SyncErr)
	if len(got) != len(addrs) {
		t.Fatalf("%d indices for %d addresses (err %v)", len(got), len(addrs), err)
	}
	ok := 0
	for i, a := range got {
		if a == AddrNotAvail {
			var ie *InsertError
			if !errors.As(err, &ie) || ie.Errs[i] == nil {
				t.Fatalf("address %d failed without a status: %v", i, err)
			}
			continue
		}
		ok++
		b, lerr := av.Lookup(a)
		if lerr != nil {
			t.Fatalf("Lookup(%d) of an inserted address: %v", a, lerr)
		}
		if j, found := av.reverse(b); !found {
			t.Fatalf("reverse of stored %x not found", b)
		} else if b2, _ := av.Lookup(Addr(j)); !bytes.Equal(b2, b) {
			t.Fatalf("reverse -> %d holding %x, want %x", j, b2, b)
		}
		_ = av.Straddr(b)
	}
	if err != nil {
		var ie *InsertError
		if !errors.As(err, &ie) || ie.Inserted != ok {
			t.Fatalf("err %v with %d inserted", err, ok)
		}
	} else if ok != len(addrs) {
		t.Fatalf("nil error but %d of %d inserted", ok, len(addrs))
	}
	if err := av.Remove(nil, 0); err != nil {
		t.Fatal(err)
	}
}

// FuzzAVInsert feeds arbitrary addresses to AVs of every format the
// providers use.
func FuzzAVInsert(f *testing.F) {
	s4, _ := SockaddrFromAddrPort(mustAP("10.1.2.3:99"))
	s6, _ := SockaddrFromAddrPort(mustAP("[fe80::1%2]:7"))
	f.Add(append([]byte{16}, s4...))
	f.Add(append(append([]byte{28}, s6...), append([]byte{16}, s4...)...))
	f.Add(append([]byte{10}, "fi_shm://a"...))
	f.Add(append([]byte{26}, "fi_sockaddr_in://1.2.3.4:5"...))
	f.Add([]byte{3, 2, 0, 1, 0})
	type avk struct {
		prov string
		f    AddrFormat
	}
	kinds := []avk{{"tcp", SockaddrIn}, {"tcp", SockaddrIn6}, {"tcp", Sockaddr}, {"tcp", AddrStr}, {"shm", FormatUnspec}}
	f.Fuzz(func(t *testing.T, data []byte) {
		addrs := splitFuzzAddrs(data)
		for _, k := range kinds {
			av := openAVFmt(t, k.prov, k.f, nil)
			checkInsert(t, av, addrs)
		}
	})
}

// FuzzInsertSym feeds arbitrary node/service ranges to InsertSym and
// InsertSvc (numeric hosts only: no resolver traffic).
func FuzzInsertSym(f *testing.F) {
	f.Add("10.1.1.1", uint8(2), "5000", uint8(2))
	f.Add("255.255.255.255", uint8(2), "1", uint8(1))
	f.Add("fe80::ffff", uint8(3), "65534", uint8(3))
	f.Add("fi_sockaddr_in://10.0.0.1:7", uint8(2), "", uint8(1))
	f.Add("fi_shm://ep9", uint8(3), "", uint8(1))
	f.Add("", uint8(1), "rank1", uint8(4))
	f.Fuzz(func(t *testing.T, node string, nc uint8, svc string, sc uint8) {
		for _, prov := range []string{"tcp", "shm"} {
			for _, fl := range []Flags{0, Symmetric} {
				format := Sockaddr
				if prov == "shm" {
					format = FormatUnspec
				}
				av := openAVFmt(t, prov, format, &AVAttr{Flags: fl})
				got, err := av.InsertSym(node, int(nc%9), svc, int(sc%9), NumericHost)
				if err == nil && len(got) != int(nc%9)*int(sc%9) {
					t.Fatalf("%d addresses for %d x %d", len(got), nc%9, sc%9)
				}
				for _, a := range got {
					if a == AddrNotAvail {
						continue
					}
					b, err := av.Lookup(a)
					if err != nil {
						t.Fatalf("Lookup(%d): %v", a, err)
					}
					if _, ok := av.reverse(b); !ok {
						t.Fatalf("reverse(%x) not found", b)
					}
				}
				av.InsertSvc(node, svc, NumericHost)
			}
		}
	})
}

// FuzzNamedAVFile opens arbitrary bytes as a named AV file: an error or a
// working AV, never a panic.
func FuzzNamedAVFile(f *testing.F) {
	good := make([]byte, avstore.HdrSize+24)
	copy(good, avstore.Magic)
	good[avstore.OffVersion] = avstore.Version
	good[avstore.OffHdrSize], good[avstore.OffHdrSize+1] = avstore.HdrSize&0xff, avstore.HdrSize>>8
	good[avstore.OffFormat] = byte(SockaddrIn)
	good[avstore.OffSlotSize] = 24
	good[avstore.OffCap+1] = 1024 >> 8
	good[avstore.OffHW] = 3
	good[avstore.HdrSize] = 1
	good[avstore.HdrSize+4] = 200
	f.Add(good)
	f.Add(good[:avstore.OffPids])
	withRange := append([]byte(nil), good...)
	withRange[avstore.OffNRanges] = 1
	withRange[avstore.OffRanges+0] = 2     // start
	withRange[avstore.OffRanges+4] = 8     // count
	withRange[avstore.OffRanges+8] = 2     // services per node
	withRange[avstore.OffRanges+13] = 0x13 // port 0x1300
	withRange[avstore.OffRanges+14] = 1    // IPv4
	withRange[avstore.OffRanges+39] = 10   // base 0.0.0.10
	withRange[avstore.OffHW] = 10
	f.Add(withRange)
	f.Add([]byte(avstore.Magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		name := testAVName(t, "fuzz")
		path, _ := avstore.NamedPath(name)
		if len(data) < avstore.HdrSize+1024*24 {
			// keep the header under test, pad the slots
			data = append(data, make([]byte, avstore.HdrSize+1024*24-len(data))...)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, fl := range []Flags{Read, 0} {
			_, fab, dom := openFirst(t, "tcp")
			nav, err := dom.OpenAV(&AVAttr{Name: name, Flags: fl})
			if err == nil {
				for i := range Addr(16) {
					if b, err := nav.Lookup(i); err == nil {
						nav.reverse(b)
						nav.Straddr(b)
					}
				}
				s4, _ := SockaddrFromAddrPort(mustAP("10.0.0.1:1"))
				nav.Insert([][]byte{s4}, 0)
				nav.Remove([]Addr{0}, 0)
				nav.Count()
				nav.Close()
			}
			dom.Close()
			fab.Close()
		}
	})
}
