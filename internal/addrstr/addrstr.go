package addrstr

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/gofi-dev/fi/internal/sockaddr"
)

// MaxLen bounds the FI_ADDR_STR strings gofi parses.
const MaxLen = 4096

// Addr is a parsed FI_ADDR_STR address (fi.StrAddr's fields).
type Addr struct {
	Format  string
	Node    string
	Service string
	Fields  []string
	Params  []Param
}

// Param is one key=value parameter (fi.AddrParam's fields).
type Param struct {
	Key, Value string
}

// invalid builds this package's errors: every one means the input does
// not follow the grammar (the root package reports fi.ErrInval with the
// error's text as detail).
func invalid(format string, args ...any) error { return fmt.Errorf(format, args...) }

// Parse parses s following the grammar of fi_getinfo(3) (see the root
// package's ParseAddrStr); it never panics.
func Parse(s string) (Addr, error) {
	var a Addr
	if len(s) > MaxLen {
		return a, invalid("address longer than %d bytes", MaxLen)
	}
	s = strings.TrimSuffix(s, "\x00")
	format, rest, hasRest := strings.Cut(s, "://")
	if !validToken(format) {
		return a, invalid("bad address format %q", format)
	}
	a.Format = format
	if !hasRest {
		return a, nil
	}
	// node
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return Addr{}, invalid("unterminated '[' in %q", s)
		}
		lit := rest[1:end]
		if _, err := netip.ParseAddr(lit); err != nil {
			return Addr{}, invalid("bracketed node %q is not an IP address", lit)
		}
		a.Node = lit
		rest = rest[end+1:]
	} else {
		end := strings.IndexAny(rest, ":/?")
		if end < 0 {
			end = len(rest)
		}
		a.Node = rest[:end]
		rest = rest[end:]
		if !ValidPart(a.Node) {
			return Addr{}, invalid("bad node %q", a.Node)
		}
	}
	if strings.HasPrefix(rest, "/") {
		return Addr{}, invalid("fields need a ':' before them in %q", s)
	}
	// service and fields
	if strings.HasPrefix(rest, ":") {
		rest = rest[1:]
		end := strings.IndexAny(rest, "/?")
		if end < 0 {
			end = len(rest)
		}
		a.Service = rest[:end]
		rest = rest[end:]
		if !ValidPart(a.Service) {
			return Addr{}, invalid("bad service %q", a.Service)
		}
		for strings.HasPrefix(rest, "/") {
			rest = rest[1:]
			end := strings.IndexAny(rest, "/?")
			if end < 0 {
				end = len(rest)
			}
			f := rest[:end]
			rest = rest[end:]
			if !ValidPart(f) {
				return Addr{}, invalid("bad field %q", f)
			}
			a.Fields = append(a.Fields, f)
		}
	}
	// parameters
	if strings.HasPrefix(rest, "?") {
		rest = rest[1:]
		if rest != "" {
			for kv := range strings.SplitSeq(rest, "&") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" || !ValidPart(k) || !ValidPart(v) || strings.Contains(v, "=") {
					return Addr{}, invalid("bad parameter %q (want key=value)", kv)
				}
				a.Params = append(a.Params, Param{Key: k, Value: v})
			}
		}
		rest = ""
	}
	if rest != "" {
		return Addr{}, invalid("unexpected %q in %q", rest, s)
	}
	return a, nil
}

// validToken reports whether s is a non-empty [A-Za-z0-9_]+ token.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// ValidPart reports whether s holds no separator, space or control byte.
func ValidPart(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c == 0x7f || strings.IndexByte(":/?[]&", c) >= 0 {
			return false
		}
	}
	return true
}

// Port parses service (a number or a service name) as the first of
// svccnt ports.
func Port(service string, svccnt int) (uint16, error) {
	if service == "" {
		return 0, invalid("a service (port) is needed")
	}
	var p uint64
	if n, err := strconv.ParseUint(service, 10, 16); err == nil {
		p = n
	} else if n, err := net.LookupPort("tcp", service); err == nil {
		p = uint64(n)
	} else {
		return 0, invalid("unknown service %q", service)
	}
	if p+uint64(svccnt)-1 > 65535 {
		return 0, invalid("ports %d+%d run past 65535", p, svccnt)
	}
	return uint16(p), nil
}

// IPRange returns ip and its n-1 successors, counting the address as one
// number (IPv4 32-bit, IPv6 128-bit), so 10.1.1.255 + 1 is 10.1.2.0. Running
// past the last address is an error.
func IPRange(ip netip.Addr, n int) ([]netip.Addr, error) {
	out := make([]netip.Addr, 0, n)
	hi, lo := sockaddr.Words(ip)
	zone := ip.Zone()
	for k := 0; k < n; k++ {
		var x netip.Addr
		if ip.Is4() {
			if lo > 0xffffffff {
				return nil, invalid("%d addresses from %v run past 255.255.255.255", n, ip)
			}
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], uint32(lo))
			x = netip.AddrFrom4(b)
		} else {
			var b [16]byte
			binary.BigEndian.PutUint64(b[:8], hi)
			binary.BigEndian.PutUint64(b[8:], lo)
			x = netip.AddrFrom16(b).WithZone(zone)
		}
		out = append(out, x)
		var c uint64
		lo, c = bits.Add64(lo, 1, 0)
		hi, c = bits.Add64(hi, 0, c)
		if c != 0 && k+1 < n {
			return nil, invalid("%d addresses from %v run past the last IPv6 address", n, ip)
		}
	}
	return out, nil
}

// SuffixRange returns name and its n-1 successors by its numeric suffix,
// keeping the suffix's width (host09, host10). With n > 1 a name without a
// numeric suffix is an error.
func SuffixRange(name string, n int) ([]string, error) {
	if n == 1 {
		return []string{name}, nil
	}
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	digits := name[i:]
	if digits == "" {
		return nil, invalid("node %q has no numeric suffix but nodecnt is %d", name, n)
	}
	if len(digits) > 18 {
		return nil, invalid("numeric suffix of %q is too long", name)
	}
	v, _ := strconv.ParseUint(digits, 10, 64)
	out := make([]string, n)
	for k := range out {
		s := strconv.FormatUint(v+uint64(k), 10)
		for len(s) < len(digits) {
			s = "0" + s
		}
		out[k] = name[:i] + s
	}
	return out, nil
}
