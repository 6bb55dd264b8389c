package link

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/gofi-dev/fi/shm"
)

// Scheme starts every linked address.
const Scheme = "fi_link://"

// Route says which member carries a peer's traffic.
type Route uint8

const (
	RouteNone Route = iota // not decided (an endpoint's own Name)
	RouteShm               // the shared-memory member
	RouteTCP               // the tcp member
)

func (r Route) String() string {
	switch r {
	case RouteShm:
		return "shm"
	case RouteTCP:
		return "tcp"
	}
	return ""
}

// maxNameLen bounds the names Parse reads.
const maxNameLen = 1024

// ErrName is wrapped by every error about a malformed or unusable name.
var ErrName = errors.New("link: bad address")

// ErrUnreachable is wrapped when a name has no member this endpoint can
// reach it through (an shm-only name of another shared-memory domain).
var ErrUnreachable = errors.New("link: peer unreachable")

// Name is a parsed linked address. Either member part may be absent (a
// plain shm or tcp address parsed into a Name has one only).
type Name struct {
	TCP netip.AddrPort // the tcp member's listening address (invalid: none)
	Shm string         // the shm member's region name ("": none)
	Dom string         // the shared-memory domain identity ("": unknown)
	Via Route          // the route chosen for it (AV entries only)
}

// Format writes n in canonical form: the tcp address as the node, then
// the parameters shm, dom and via in that order, each only when set.
// RouteKey relies on this layout.
func (n Name) Format() string {
	var b strings.Builder
	b.WriteString(Scheme)
	if n.TCP.IsValid() {
		b.WriteString(n.TCP.String())
	}
	sep := byte('?')
	param := func(k, v string) {
		b.WriteByte(sep)
		sep = '&'
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
	}
	if n.Shm != "" {
		param("shm", n.Shm)
	}
	if n.Dom != "" {
		param("dom", n.Dom)
	}
	if n.Via != RouteNone {
		param("via", n.Via.String())
	}
	return b.String()
}

func (n Name) String() string { return n.Format() }

// Parse reads a linked address (fi_link://...), or a plain member address:
// fi_shm://<region>, fi_sockaddr_in://a.b.c.d:port,
// fi_sockaddr_in6://[addr]:port or a raw sockaddr_in / sockaddr_in6. One
// trailing NUL is accepted. Errors wrap ErrName. It never panics.
func Parse(b []byte) (Name, error) {
	var n Name
	if len(b) > maxNameLen {
		return n, fmt.Errorf("%w: %d bytes is longer than %d", ErrName, len(b), maxNameLen)
	}
	if ap, ok := parseSockaddr(b); ok {
		n.TCP = ap
		return n, nil
	}
	if len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	s := string(b)
	switch {
	case strings.HasPrefix(s, shm.AddrScheme):
		name, err := shm.ParseAddr(s)
		if err != nil {
			return n, fmt.Errorf("%w: %v", ErrName, err)
		}
		n.Shm = name
		return n, nil
	case strings.HasPrefix(s, "fi_sockaddr_in://"), strings.HasPrefix(s, "fi_sockaddr_in6://"), strings.HasPrefix(s, "fi_sockaddr://"):
		_, hp, _ := strings.Cut(s, "://")
		ap, err := parseHostPort(hp)
		if err != nil {
			return n, err
		}
		n.TCP = ap
		return n, nil
	case !strings.HasPrefix(s, Scheme):
		return n, fmt.Errorf("%w: %q is not an fi_link://, fi_shm:// or fi_sockaddr address", ErrName, s)
	}
	rest := s[len(Scheme):]
	node, query, _ := strings.Cut(rest, "?")
	if node != "" {
		ap, err := parseHostPort(node)
		if err != nil {
			return n, err
		}
		n.TCP = ap
	}
	seen := 0
	for query != "" {
		var kv string
		kv, query, _ = strings.Cut(query, "&")
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			return Name{}, fmt.Errorf("%w: parameter %q has no value", ErrName, kv)
		}
		bit := 0
		switch k {
		case "shm":
			if err := shm.ValidName(v); err != nil {
				return Name{}, fmt.Errorf("%w: shm region: %v", ErrName, err)
			}
			n.Shm, bit = v, 1
		case "dom":
			if len(v) != domLen || !isHex(v) {
				return Name{}, fmt.Errorf("%w: dom %q is not %d hex digits", ErrName, v, domLen)
			}
			n.Dom, bit = v, 2
		case "via":
			switch v {
			case "shm":
				n.Via = RouteShm
			case "tcp":
				n.Via = RouteTCP
			default:
				return Name{}, fmt.Errorf("%w: via %q (shm or tcp)", ErrName, v)
			}
			bit = 4
		default:
			return Name{}, fmt.Errorf("%w: unknown parameter %q", ErrName, k)
		}
		if seen&bit != 0 {
			return Name{}, fmt.Errorf("%w: parameter %q given twice", ErrName, k)
		}
		seen |= bit
	}
	if !n.TCP.IsValid() && n.Shm == "" {
		return Name{}, fmt.Errorf("%w: %q names neither a tcp address nor a shm region", ErrName, s)
	}
	if n.Via == RouteShm && n.Shm == "" || n.Via == RouteTCP && !n.TCP.IsValid() {
		return Name{}, fmt.Errorf("%w: %q routes via a member it does not name", ErrName, s)
	}
	return n, nil
}

// parseHostPort reads host:port ([v6]:port), port non-zero.
func parseHostPort(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: tcp address %q: %v", ErrName, s, err)
	}
	if ap.Port() == 0 || ap.Addr().IsUnspecified() {
		return netip.AddrPort{}, fmt.Errorf("%w: tcp address %q cannot name a listening peer", ErrName, s)
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Sockaddr layout (Linux): family (little-endian u16; 2 inet, 10 inet6),
// port (big-endian), address; sockaddr_in6 adds flow info and scope id.
const (
	afInet    = 2
	afInet6   = 10
	sockaddr4 = 16
	sockaddr6 = 28
)

// parseSockaddr reads a raw sockaddr_in / sockaddr_in6 of exactly its size.
func parseSockaddr(b []byte) (netip.AddrPort, bool) {
	if len(b) != sockaddr4 && len(b) != sockaddr6 {
		return netip.AddrPort{}, false
	}
	fam := uint16(b[0]) | uint16(b[1])<<8
	port := uint16(b[2])<<8 | uint16(b[3])
	if port == 0 {
		return netip.AddrPort{}, false
	}
	switch {
	case fam == afInet && len(b) == sockaddr4:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port), true
	case fam == afInet6 && len(b) == sockaddr6:
		a := netip.AddrFrom16([16]byte(b[8:24]))
		if scope := uint32(b[24]) | uint32(b[25])<<8 | uint32(b[26])<<16 | uint32(b[27])<<24; scope != 0 {
			a = a.WithZone(strconv.FormatUint(uint64(scope), 10))
		}
		return netip.AddrPortFrom(a.Unmap(), port), true
	}
	return netip.AddrPort{}, false
}

// appendSockaddr appends ap as a sockaddr_in (IPv4) or sockaddr_in6.
func appendSockaddr(b []byte, ap netip.AddrPort) []byte {
	a := ap.Addr().Unmap()
	p := ap.Port()
	if a.Is4() {
		v := a.As4()
		b = append(b, afInet, 0, byte(p>>8), byte(p))
		b = append(b, v[:]...)
		return append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	}
	v := a.As16()
	b = append(b, afInet6, 0, byte(p>>8), byte(p), 0, 0, 0, 0)
	b = append(b, v[:]...)
	var scope uint32
	if z := a.Zone(); z != "" {
		if n, err := strconv.ParseUint(z, 10, 32); err == nil {
			scope = uint32(n)
		}
	}
	return append(b, byte(scope), byte(scope>>8), byte(scope>>16), byte(scope>>24))
}

// domLen is the length of a domain identity: 16 hex digits.
const domLen = 16

var domCache struct {
	sync.Mutex
	dir, dom string
}

// DomainEnv names the environment variable that overrides LocalDomain
// with 16 hex digits: processes given different values reach each other
// over tcp although they share memory (tests; measuring tcp between local
// ranks). It never makes a region of another domain look attachable.
const DomainEnv = "GOFI_LINK_DOMAIN"

// LocalDomain returns the identity of the shared-memory domain this
// process lives in: a digest of the kernel's boot id, the shm directory's
// device and inode (a private /dev/shm mount differs) and the effective
// user id. Two endpoints with the same identity can map each other's
// regions. The answer is cached per shm directory.
func LocalDomain() (string, error) {
	if v := os.Getenv(DomainEnv); v != "" {
		if len(v) != domLen || !isHex(v) {
			return "", fmt.Errorf("link: $%s=%q is not %d lower-case hex digits", DomainEnv, v, domLen)
		}
		return v, nil
	}
	dir := shm.Dir()
	domCache.Lock()
	defer domCache.Unlock()
	if domCache.dom != "" && domCache.dir == dir {
		return domCache.dom, nil
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("link: kernel boot id: %w", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return "", fmt.Errorf("link: shm directory: %w", err)
	}
	h := sha256.Sum256(fmt.Appendf(nil, "%s|%d|%d|%d", bytes.TrimSpace(boot), st.Dev, st.Ino, os.Geteuid()))
	domCache.dir, domCache.dom = dir, hex.EncodeToString(h[:domLen/2])
	return domCache.dom, nil
}

// attachable reports whether region is a segment of this user in the shm
// directory, so that the shm member can connect to it.
func attachable(region string) bool {
	fi, err := os.Stat(filepath.Join(shm.Dir(), region))
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// Decide picks the route to n from the shared-memory domain dom: shm when
// n names a region and either carries dom or (a plain shm address) no
// identity at all, and the region is there to attach; tcp when n names a
// tcp address; otherwise ErrUnreachable.
func Decide(n Name, dom string) (Route, error) {
	if n.Shm != "" && (n.Dom == dom || n.Dom == "") && attachable(n.Shm) {
		return RouteShm, nil
	}
	if n.TCP.IsValid() {
		return RouteTCP, nil
	}
	if n.Dom != "" && n.Dom != dom {
		return RouteNone, fmt.Errorf("%w: %s lives in another shared-memory domain and names no tcp address", ErrUnreachable, n.Format())
	}
	return RouteNone, fmt.Errorf("%w: shm region %q is not in %s and %s names no tcp address", ErrUnreachable, n.Shm, shm.Dir(), n.Format())
}

// Canon returns the form an address vector stores for raw (any address
// Parse reads): the canonical linked address with the route decided from
// dom (an earlier via= is decided again).
func Canon(raw []byte, dom string) (string, error) {
	n, err := Parse(raw)
	if err != nil {
		return "", err
	}
	if n.Via, err = Decide(n, dom); err != nil {
		return "", err
	}
	return n.Format(), nil
}

// RouteKey returns the part of a canonical address (Format's layout) that
// identifies the peer on its route: "shm=<region>" for via=shm, the tcp
// address for via=tcp; the whole address when it has no route. The
// transport's PeerAddr answers in forms with the same keys, so an address
// vector finds the entry of a message's sender (FI_SOURCE) by comparing
// keys. It allocates nothing.
func RouteKey(b []byte) []byte {
	switch {
	case bytes.HasSuffix(b, viaShm):
		i := bytes.Index(b, shmParam)
		if i < 0 {
			return b
		}
		k := b[i+1:]
		if j := bytes.IndexByte(k, '&'); j >= 0 {
			k = k[:j]
		}
		return k
	case bytes.HasSuffix(b, viaTCP) && bytes.HasPrefix(b, scheme):
		k := b[len(scheme):]
		if j := bytes.IndexByte(k, '?'); j >= 0 {
			k = k[:j]
		}
		return k
	}
	return b
}

// Unrouted returns a canonical address without its route: what every
// process calls the peer, whichever way it reaches it (the stored forms
// differ between processes: via=shm on the peer's host, via=tcp
// elsewhere). Collectives hash members' names with it. It allocates
// nothing.
func Unrouted(b []byte) []byte {
	for _, v := range [][]byte{viaShm, viaTCP} {
		if bytes.HasSuffix(b, v) && len(b) > len(v) && (b[len(b)-len(v)-1] == '&' || b[len(b)-len(v)-1] == '?') {
			return b[:len(b)-len(v)-1]
		}
	}
	return b
}

var (
	scheme   = []byte(Scheme)
	viaShm   = []byte("via=shm")
	viaTCP   = []byte("via=tcp")
	shmParam = []byte("?shm=")
)
