package link

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gofi-dev/fi/shm"
)

func TestNameRoundTrip(t *testing.T) {
	for _, n := range []Name{
		{TCP: netip.MustParseAddrPort("10.1.2.3:4567"), Shm: "gofi-0-abc", Dom: "0123456789abcdef"},
		{TCP: netip.MustParseAddrPort("[fd00::1]:80"), Shm: "gofi-0-abc", Dom: "0123456789abcdef", Via: RouteTCP},
		{Shm: "gofi-0-abc", Dom: "0123456789abcdef", Via: RouteShm},
		{TCP: netip.MustParseAddrPort("127.0.0.1:1"), Via: RouteTCP},
	} {
		s := n.Format()
		got, err := Parse([]byte(s))
		if err != nil || got != n {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", s, got, err, n)
		}
		if got2, err := Parse(append([]byte(s), 0)); err != nil || got2 != n {
			t.Errorf("Parse(%q NUL) = %+v, %v", s, got2, err)
		}
	}
}

func TestParsePlainMembers(t *testing.T) {
	n, err := Parse([]byte("fi_shm://gofi-0-x"))
	if err != nil || n.Shm != "gofi-0-x" || n.TCP.IsValid() || n.Dom != "" {
		t.Errorf("fi_shm: %+v %v", n, err)
	}
	n, err = Parse([]byte("fi_sockaddr_in://10.0.0.1:99"))
	if err != nil || n.TCP != netip.MustParseAddrPort("10.0.0.1:99") || n.Shm != "" {
		t.Errorf("fi_sockaddr_in: %+v %v", n, err)
	}
	sa := appendSockaddr(nil, netip.MustParseAddrPort("10.0.0.1:99"))
	n, err = Parse(sa)
	if err != nil || n.TCP != netip.MustParseAddrPort("10.0.0.1:99") {
		t.Errorf("sockaddr_in: %+v %v", n, err)
	}
	sa6 := appendSockaddr(nil, netip.MustParseAddrPort("[fe80::1%3]:99"))
	n, err = Parse(sa6)
	if err != nil || n.TCP != netip.MustParseAddrPort("[fe80::1%3]:99") {
		t.Errorf("sockaddr_in6: %+v %v", n, err)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, s := range []string{
		"", "fi_link://", "fi_link://?", "fi_link://?dom=0123456789abcdef",
		"fi_link://10.0.0.1:0", "fi_link://0.0.0.0:5", "fi_link://10.0.0.1",
		"fi_link://10.0.0.1:5?shm=", "fi_link://10.0.0.1:5?shm=a/b",
		"fi_link://10.0.0.1:5?dom=xyz", "fi_link://10.0.0.1:5?via=udp",
		"fi_link://10.0.0.1:5?via=shm", "fi_link://?shm=gofi-0-x&via=tcp",
		"fi_link://10.0.0.1:5?foo=1", "fi_link://10.0.0.1:5?shm=a&shm=b",
		"fi_sockaddr_in://10.0.0.1", "fi_shm://", "fi_shm://../x", "tcp://1.2.3.4:5",
		strings.Repeat("x", 2000),
	} {
		if n, err := Parse([]byte(s)); err == nil || !errors.Is(err, ErrName) {
			t.Errorf("Parse(%q) = %+v, %v; want ErrName", s, n, err)
		}
	}
}

func TestDecideAndCanon(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(shm.DirEnv, dir)
	dom, err := LocalDomain()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gofi-0-here"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tcp := netip.MustParseAddrPort("10.0.0.1:5")
	for _, c := range []struct {
		n    Name
		want Route
	}{
		{Name{TCP: tcp, Shm: "gofi-0-here", Dom: dom}, RouteShm},
		{Name{TCP: tcp, Shm: "gofi-0-gone", Dom: dom}, RouteTCP},                // region not attachable
		{Name{TCP: tcp, Shm: "gofi-0-here", Dom: "00000000000000ff"}, RouteTCP}, // another domain
		{Name{Shm: "gofi-0-here"}, RouteShm},                                    // a plain shm address
		{Name{TCP: tcp}, RouteTCP},                                              // a plain tcp address
		{Name{Shm: "gofi-0-gone"}, RouteNone},
		{Name{Shm: "gofi-0-here", Dom: "00000000000000ff"}, RouteNone},
	} {
		r, err := Decide(c.n, dom)
		if r != c.want || (r == RouteNone) != errors.Is(err, ErrUnreachable) {
			t.Errorf("Decide(%v) = %v, %v; want %v", c.n, r, err, c.want)
		}
		if r == RouteNone {
			continue
		}
		s, err := Canon([]byte(c.n.Format()), dom)
		if err != nil || !strings.HasSuffix(s, "via="+c.want.String()) {
			t.Errorf("Canon(%v) = %q, %v", c.n, s, err)
		}
		// A stored address routes again the same way (an address copied
		// from one AV into another).
		if s2, err := Canon([]byte(s), dom); err != nil || s2 != s {
			t.Errorf("Canon(Canon(%v)) = %q, %v", c.n, s2, err)
		}
	}
}

func TestLocalDomainOverride(t *testing.T) {
	t.Setenv(DomainEnv, "00000000000000ff")
	if d, err := LocalDomain(); err != nil || d != "00000000000000ff" {
		t.Errorf("LocalDomain = %q, %v", d, err)
	}
	t.Setenv(DomainEnv, "nothex")
	if _, err := LocalDomain(); err == nil {
		t.Error("a bad override was accepted")
	}
}

// TestRouteKey: the keys of a stored entry and of the transport's view of
// the same peer agree, for both routes, and differ between peers.
func TestRouteKey(t *testing.T) {
	tcp := netip.MustParseAddrPort("10.0.0.1:5")
	full := Name{TCP: tcp, Shm: "gofi-0-a", Dom: "0123456789abcdef"}
	viaShm, viaTCP := full, full
	viaShm.Via, viaTCP.Via = RouteShm, RouteTCP
	peerShm := Name{Shm: "gofi-0-a", Via: RouteShm}
	peerTCP := Name{TCP: tcp, Via: RouteTCP}
	k := func(n Name) string { return string(RouteKey([]byte(n.Format()))) }
	if k(viaShm) != k(peerShm) || k(viaShm) != "shm=gofi-0-a" {
		t.Errorf("shm keys %q %q", k(viaShm), k(peerShm))
	}
	if k(viaTCP) != k(peerTCP) || k(viaTCP) != "10.0.0.1:5" {
		t.Errorf("tcp keys %q %q", k(viaTCP), k(peerTCP))
	}
	if k(viaShm) == k(viaTCP) {
		t.Error("routes share a key")
	}
	other := Name{Shm: "gofi-0-ab", Via: RouteShm}
	if k(other) == k(peerShm) {
		t.Error("a region name's prefix shares its key")
	}
	b := []byte(viaShm.Format())
	if a := testing.AllocsPerRun(100, func() { _ = RouteKey(b) }); a != 0 {
		t.Errorf("RouteKey allocates %v", a)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"fi_link://10.1.2.3:4567?shm=gofi-0-abc&dom=0123456789abcdef&via=shm",
		"fi_link://[fd00::1]:80?via=tcp", "fi_shm://gofi-0-x", "fi_sockaddr_in6://[::1]:5",
		"fi_link://?shm=x&dom=0123456789abcdef",
	} {
		f.Add([]byte(s))
	}
	f.Add(appendSockaddr(nil, netip.MustParseAddrPort("10.0.0.1:99")))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := Parse(b)
		_ = RouteKey(b)
		if err != nil {
			return
		}
		// Whatever parses formats to a canonical form that parses to
		// the same name.
		s := n.Format()
		m, err := Parse([]byte(s))
		if err != nil || m != n {
			t.Fatalf("%q parsed to %+v, formatted %q, reparsed %+v, %v", b, n, s, m, err)
		}
		if !bytes.HasPrefix([]byte(s), []byte(Scheme)) {
			t.Fatalf("format %q", s)
		}
	})
}

// TestUnrouted: the stored forms of one peer, routed either way, agree
// once the route is dropped.
func TestUnrouted(t *testing.T) {
	n := Name{TCP: netip.MustParseAddrPort("10.0.0.1:5"), Shm: "gofi-0-a", Dom: "0123456789abcdef"}
	viaShm, viaTCP := n, n
	viaShm.Via, viaTCP.Via = RouteShm, RouteTCP
	u1, u2 := Unrouted([]byte(viaShm.Format())), Unrouted([]byte(viaTCP.Format()))
	if string(u1) != n.Format() || string(u2) != n.Format() {
		t.Errorf("Unrouted: %q %q, want %q", u1, u2, n.Format())
	}
	only := Name{TCP: n.TCP, Via: RouteTCP}
	if got := string(Unrouted([]byte(only.Format()))); got != "fi_link://10.0.0.1:5" {
		t.Errorf("Unrouted(%q) = %q", only.Format(), got)
	}
	if got := string(Unrouted([]byte("fi_link://10.0.0.1:5?shm=xvia=tcp"))); got != "fi_link://10.0.0.1:5?shm=xvia=tcp" {
		t.Errorf("a region name ending in via=tcp lost its end: %q", got)
	}
}
