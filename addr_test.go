package fi

import (
	"bytes"
	"errors"
	"net/netip"
	"reflect"
	"testing"
)

func TestParseAddrStr_Grammar(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want StrAddr
	}{
		{"sockaddr_in", "fi_sockaddr_in://10.31.6.12:7471",
			StrAddr{Format: "fi_sockaddr_in", Node: "10.31.6.12", Service: "7471"}},
		{"sockaddr_in6 with param", "fi_sockaddr_in6://[fe80::6:12]:7471?qos=3",
			StrAddr{Format: "fi_sockaddr_in6", Node: "fe80::6:12", Service: "7471", Params: []AddrParam{{"qos", "3"}}}},
		{"sockaddr with param", "fi_sockaddr://10.31.6.12:7471?qos=3",
			StrAddr{Format: "fi_sockaddr", Node: "10.31.6.12", Service: "7471", Params: []AddrParam{{"qos", "3"}}}},
		{"shm name", "fi_shm://gofi-1234-0", StrAddr{Format: "fi_shm", Node: "gofi-1234-0"}},
		{"format only", "fi_sockaddr_in", StrAddr{Format: "fi_sockaddr_in"}},
		{"empty authority", "fi_sockaddr_in://", StrAddr{Format: "fi_sockaddr_in"}},
		{"fields", "fi_addr_str://node:svc/f3/f4", StrAddr{Format: "fi_addr_str", Node: "node", Service: "svc", Fields: []string{"f3", "f4"}}},
		{"fields empty service", "fi_addr_str://node:/f3", StrAddr{Format: "fi_addr_str", Node: "node", Fields: []string{"f3"}}},
		{"two params", "fi_x://n:1?a=b&c=", StrAddr{Format: "fi_x", Node: "n", Service: "1", Params: []AddrParam{{"a", "b"}, {"c", ""}}}},
		{"params after node", "fi_x://n?a=b", StrAddr{Format: "fi_x", Node: "n", Params: []AddrParam{{"a", "b"}}}},
		{"trailing NUL from C", "fi_shm://abc\x00", StrAddr{Format: "fi_shm", Node: "abc"}},
		{"zone in brackets", "fi_sockaddr_in6://[fe80::1%eth0]:1", StrAddr{Format: "fi_sockaddr_in6", Node: "fe80::1%eth0", Service: "1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseAddrStr(c.in)
			if err != nil {
				t.Fatalf("ParseAddrStr(%q): %v", c.in, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ParseAddrStr(%q) = %#v, want %#v", c.in, got, c.want)
			}
			again, err := ParseAddrStr(FormatAddrStr(got))
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("round trip via %q: %#v, %v", FormatAddrStr(got), again, err)
			}
		})
	}
}

func TestParseAddrStr_RejectsMalformed(t *testing.T) {
	bad := []string{
		"", "://x", "fi sockaddr://x", "fi_sockaddr_in://[fe80::1", "fi_sockaddr_in6://[notip]:1",
		"fi_x://a b", "fi_x://a/f", "fi_x://a:1?noeq", "fi_x://a:1?=v", "fi_x://a:1?a=b&",
		"fi_x://a:1?a=b=c", "fi_x://a:1]", "fi_x://a\x01", "fi_x://[::1]x", string(make([]byte, 5000)),
	}
	for _, s := range bad {
		if _, err := ParseAddrStr(s); !errors.Is(err, ErrInval) {
			t.Errorf("ParseAddrStr(%q) err = %v, want ErrInval", s, err)
		}
	}
}

func TestStrAddr_AddrFormatAndAddrPort(t *testing.T) {
	cases := []struct {
		in     string
		format AddrFormat
		ap     string // "" when AddrPort must fail
	}{
		{"fi_sockaddr_in://10.31.6.12:7471", SockaddrIn, "10.31.6.12:7471"},
		{"fi_sockaddr_in6://[fe80::6:12]:7471?qos=3", SockaddrIn6, "[fe80::6:12]:7471"},
		{"fi_sockaddr://10.31.6.12:7471?qos=3", Sockaddr, "10.31.6.12:7471"},
		{"fi_sockaddr_in://10.0.0.1", SockaddrIn, "10.0.0.1:0"},
		{"fi_sockaddr_in://[::1]:1", SockaddrIn, ""},
		{"fi_sockaddr_in6://10.0.0.1:1", SockaddrIn6, ""},
		{"fi_sockaddr_in://host:1", SockaddrIn, ""},
		{"fi_sockaddr_in://1.2.3.4:70000", SockaddrIn, ""},
		{"fi_shm://x", AddrStr, ""},
		{"fi_unknown://x", FormatUnspec, ""},
	}
	for _, c := range cases {
		a, err := ParseAddrStr(c.in)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if a.AddrFormat() != c.format {
			t.Errorf("%q: format %v, want %v", c.in, a.AddrFormat(), c.format)
		}
		ap, err := a.AddrPort()
		if c.ap == "" {
			if !errors.Is(err, ErrInval) {
				t.Errorf("%q: AddrPort = %v, %v; want ErrInval", c.in, ap, err)
			}
			continue
		}
		if err != nil || ap.String() != c.ap {
			t.Errorf("%q: AddrPort = %v, %v; want %s", c.in, ap, err, c.ap)
		}
	}
	if !IsAddrStr("fi_sockaddr_in://1.2.3.4:5") || !IsAddrStr("fi_shm://a") || IsAddrStr("localhost") || IsAddrStr("foo://bar") {
		t.Error("IsAddrStr misclassifies")
	}
}

func TestSockaddr_LinuxLayout(t *testing.T) {
	b, err := SockaddrFromAddrPort(netip.MustParseAddrPort("10.31.6.12:7471"))
	if err != nil {
		t.Fatal(err)
	}
	want4 := []byte{2, 0, 0x1d, 0x2f, 10, 31, 6, 12, 0, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(b, want4) {
		t.Fatalf("sockaddr_in = % x, want % x", b, want4)
	}
	b6, err := SockaddrFromAddrPort(netip.MustParseAddrPort("[fe80::6:12%3]:7471"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b6) != 28 || b6[0] != 10 || b6[1] != 0 || b6[2] != 0x1d || b6[3] != 0x2f || b6[8] != 0xfe || b6[9] != 0x80 || b6[24] != 3 {
		t.Fatalf("sockaddr_in6 = % x", b6)
	}
	for _, s := range []string{"10.31.6.12:7471", "[fe80::6:12%3]:7471", "[::1]:0", "[::ffff:1.2.3.4]:9"} {
		ap := netip.MustParseAddrPort(s)
		raw, err := SockaddrFromAddrPort(ap)
		if err != nil {
			t.Fatal(err)
		}
		back, err := AddrPortFromSockaddr(raw)
		if err != nil || back != ap {
			t.Errorf("round trip %s: %v, %v", s, back, err)
		}
	}
	if _, err := SockaddrFromAddrPort(netip.AddrPort{}); !errors.Is(err, ErrInval) {
		t.Errorf("invalid AddrPort: %v", err)
	}
	if _, err := SockaddrFromAddrPort(netip.MustParseAddrPort("[fe80::1%nosuchif0]:1")); !errors.Is(err, ErrInval) {
		t.Errorf("unknown zone: %v", err)
	}
	for _, raw := range [][]byte{nil, {2}, want4[:15], b6[:27], {1, 0, 0, 0}} {
		if _, err := AddrPortFromSockaddr(raw); !errors.Is(err, ErrInval) {
			t.Errorf("AddrPortFromSockaddr(% x) err = %v, want ErrInval", raw, err)
		}
	}
}

func TestSockaddrStr_LibfabricSpelling(t *testing.T) {
	if got := SockaddrStr(netip.MustParseAddrPort("192.0.2.2:0")); got != "fi_sockaddr_in://192.0.2.2:0" {
		t.Errorf("got %q", got)
	}
	if got := SockaddrStr(netip.MustParseAddrPort("[fe80::fc:ff:fe00:1]:0")); got != "fi_sockaddr_in6://[fe80::fc:ff:fe00:1]:0" {
		t.Errorf("got %q", got)
	}
}

func FuzzParseAddrStr(f *testing.F) {
	for _, s := range []string{
		"fi_sockaddr_in://10.31.6.12:7471", "fi_sockaddr_in6://[fe80::6:12]:7471?qos=3",
		"fi_sockaddr://10.31.6.12:7471?qos=3", "fi_shm://name", "fi_addr_str://n:s/f3/f4?a=b&c=d",
		"fi_x", "fi_x://", "fi_x://[", "fi_x://a:b/c?d",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddrStr(s)
		if err != nil {
			if !errors.Is(err, ErrInval) {
				t.Fatalf("non-ErrInval error %v", err)
			}
			return
		}
		out := FormatAddrStr(a)
		b, err := ParseAddrStr(out)
		if err != nil {
			t.Fatalf("reparse of %q (from %q): %v", out, s, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip %q -> %q: %#v != %#v", s, out, a, b)
		}
		if ap, err := a.AddrPort(); err == nil {
			raw, err := SockaddrFromAddrPort(ap)
			if err != nil && ap.Addr().Zone() == "" {
				t.Fatalf("encode %v: %v", ap, err)
			}
			if err == nil {
				back, err := AddrPortFromSockaddr(raw)
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if back.Port() != ap.Port() || back.Addr().WithZone("") != ap.Addr().WithZone("") {
					t.Fatalf("sockaddr round trip %v -> %v", ap, back)
				}
			}
		}
	})
}

func FuzzAddrPortFromSockaddr(f *testing.F) {
	f.Add([]byte{2, 0, 0x1d, 0x2f, 10, 31, 6, 12, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(make([]byte, 28))
	f.Add([]byte{10, 0, 0, 1, 0, 0, 0, 0, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ap, err := AddrPortFromSockaddr(b)
		if err != nil {
			if !errors.Is(err, ErrInval) {
				t.Fatalf("non-ErrInval error %v", err)
			}
			return
		}
		raw, err := SockaddrFromAddrPort(ap)
		if err != nil {
			t.Fatalf("re-encode %v: %v", ap, err)
		}
		back, err := AddrPortFromSockaddr(raw)
		if err != nil || back != ap {
			t.Fatalf("round trip %v -> %v (%v)", ap, back, err)
		}
		_ = straddr(SockaddrIn, b)
	})
}
