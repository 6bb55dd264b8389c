package fi

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/gofi-dev/fi/internal/addrstr"
	"github.com/gofi-dev/fi/internal/sockaddr"
	"github.com/gofi-dev/fi/internal/tostr"
)

// FI_ADDR_STR addresses (fi_getinfo(3) ADDRESSING FORMATS) follow
//
//	address_format[://[node][:[service][/[field3]...][?[key=value][&k2=v2]...]]]
//
// for example fi_sockaddr_in://10.31.6.12:7471,
// fi_sockaddr_in6://[fe80::6:12]:7471?qos=3 or fi_shm://name. In gofi an
// FI_ADDR_STR address held in a []byte (Info.SrcAddr, an AV entry) is the
// string's bytes without a terminating NUL; parsers accept one trailing NUL
// for addresses copied from C.

// maxAddrStrLen bounds the FI_ADDR_STR strings gofi parses.
const maxAddrStrLen = addrstr.MaxLen

// StrAddr is a parsed FI_ADDR_STR address. The zero value is invalid (it
// has no Format). Plain data: safe to copy and to read concurrently, not to
// mutate concurrently.
type StrAddr struct {
	Format  string      // address_format, such as "fi_sockaddr_in" or "fi_shm"
	Node    string      // node, IPv6 literals without their brackets
	Service string      // service (a port for sockaddr formats)
	Fields  []string    // field3 and later, in order
	Params  []AddrParam // key=value parameters, in order
}

// AddrParam is one key=value parameter of an FI_ADDR_STR address. Plain
// data.
type AddrParam struct {
	Key, Value string
}

// Param returns the value of the first parameter named key.
func (a StrAddr) Param(key string) (string, bool) {
	for _, p := range a.Params {
		if p.Key == key {
			return p.Value, true
		}
	}
	return "", false
}

// addrStrFormats maps FI_ADDR_STR prefixes to the address format they
// carry, as libfabric spells them.
var addrStrFormats = map[string]AddrFormat{
	"fi_sockaddr":     Sockaddr,
	"fi_sockaddr_in":  SockaddrIn,
	"fi_sockaddr_in6": SockaddrIn6,
	"fi_sockaddr_ib":  SockaddrIB,
	"fi_addr_psmx":    AddrPSMX,
	"fi_addr_psmx2":   AddrPSMX2,
	"fi_addr_psmx3":   AddrPSMX3,
	"fi_addr_gni":     AddrGNI,
	"fi_addr_bgq":     AddrBGQ,
	"fi_addr_mlx":     AddrMLX,
	"fi_addr_efa":     AddrEFA,
	"fi_addr_ib_ud":   AddrIBUD,
	"fi_addr_opx":     AddrOPX,
	"fi_addr_cxi":     AddrCXI,
	"fi_addr_str":     AddrStr,
	"fi_shm":          AddrStr, // the shm provider's native format is the string itself
	"fi_link":         AddrStr, // the linked shm+tcp provider's (package link)
}

// AddrFormat returns the address format named by a's prefix
// (fi_sockaddr_in gives SockaddrIn; fi_shm gives AddrStr), or FormatUnspec
// for a prefix libfabric does not define.
func (a StrAddr) AddrFormat() AddrFormat {
	if f, ok := addrStrFormats[a.Format]; ok {
		return f
	}
	return FormatUnspec
}

// IsAddrStr reports whether s looks like an FI_ADDR_STR address: a known
// address-format prefix followed by "://" (fi_sockaddr_in://..., fi_shm://...).
// GetInfo uses it to tell an FI_ADDR_STR node from a host name.
func IsAddrStr(s string) bool {
	i := strings.Index(s, "://")
	if i <= 0 {
		return false
	}
	_, ok := addrStrFormats[s[:i]]
	return ok
}

// ParseAddrStr parses an FI_ADDR_STR address following the grammar above.
// Any address_format token is accepted ([A-Za-z0-9_]+); use
// (StrAddr).AddrFormat to interpret it. A node in brackets must be an IP
// literal. Errors are ErrInval wrapped with the reason; ParseAddrStr never
// panics. Safe for concurrent use.
func ParseAddrStr(s string) (StrAddr, error) {
	p, err := addrstr.Parse(s)
	if err != nil {
		return StrAddr{}, inval("ParseAddrStr", err)
	}
	a := StrAddr{Format: p.Format, Node: p.Node, Service: p.Service, Fields: p.Fields}
	for _, kv := range p.Params {
		a.Params = append(a.Params, AddrParam(kv))
	}
	return a, nil
}

// inval reports an error of the internal parsers as ErrInval of op.
func inval(op string, err error) error { return opErr(op, ErrInval, "%v", err) }

// validPart reports whether s holds no separator, space or control byte.
func validPart(s string) bool { return addrstr.ValidPart(s) }

// FormatAddrStr formats a as an FI_ADDR_STR string; ParseAddrStr of the
// result gives a back. A node holding ':' (an IPv6 literal) is bracketed.
// Safe for concurrent use.
func FormatAddrStr(a StrAddr) string {
	var b strings.Builder
	b.WriteString(a.Format)
	if a.Node == "" && a.Service == "" && len(a.Fields) == 0 && len(a.Params) == 0 {
		return b.String()
	}
	b.WriteString("://")
	if strings.IndexByte(a.Node, ':') >= 0 {
		b.WriteByte('[')
		b.WriteString(a.Node)
		b.WriteByte(']')
	} else {
		b.WriteString(a.Node)
	}
	if a.Service != "" || len(a.Fields) > 0 {
		b.WriteByte(':')
		b.WriteString(a.Service)
		for _, f := range a.Fields {
			b.WriteByte('/')
			b.WriteString(f)
		}
	}
	for i, p := range a.Params {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(p.Key)
		b.WriteByte('=')
		b.WriteString(p.Value)
	}
	return b.String()
}

// String returns FormatAddrStr(a).
func (a StrAddr) String() string { return FormatAddrStr(a) }

// AddrPort returns the IP address and port of a sockaddr-style FI_ADDR_STR
// (fi_sockaddr, fi_sockaddr_in, fi_sockaddr_in6): the node must be an IP
// literal of the family the format names (fi_sockaddr takes either) and the
// service a decimal port, 0 when empty. Errors are ErrInval.
func (a StrAddr) AddrPort() (netip.AddrPort, error) {
	const op = "StrAddr.AddrPort"
	f := a.AddrFormat()
	if f != Sockaddr && f != SockaddrIn && f != SockaddrIn6 {
		return netip.AddrPort{}, opErr(op, ErrInval, "%q is not a sockaddr format", a.Format)
	}
	ip, err := netip.ParseAddr(a.Node)
	if err != nil {
		return netip.AddrPort{}, opErr(op, ErrInval, "node %q is not an IP address", a.Node)
	}
	if f == SockaddrIn && !ip.Is4() {
		return netip.AddrPort{}, opErr(op, ErrInval, "fi_sockaddr_in needs an IPv4 address, not %q", a.Node)
	}
	if f == SockaddrIn6 && !ip.Is6() {
		return netip.AddrPort{}, opErr(op, ErrInval, "fi_sockaddr_in6 needs an IPv6 address, not %q", a.Node)
	}
	port := uint64(0)
	if a.Service != "" {
		port, err = strconv.ParseUint(a.Service, 10, 16)
		if err != nil {
			return netip.AddrPort{}, opErr(op, ErrInval, "service %q is not a port number", a.Service)
		}
	}
	return netip.AddrPortFrom(ip, uint16(port)), nil
}

// SockaddrStr formats ap as fi_sockaddr_in://a.b.c.d:port for IPv4 or
// fi_sockaddr_in6://[addr]:port for IPv6, the way libfabric prints
// socket addresses.
func SockaddrStr(ap netip.AddrPort) string {
	a := StrAddr{Format: "fi_sockaddr_in6", Node: ap.Addr().String(), Service: strconv.Itoa(int(ap.Port()))}
	if ap.Addr().Is4() {
		a.Format = "fi_sockaddr_in"
	}
	return FormatAddrStr(a)
}

// Linux socket address layout (see internal/sockaddr).
const (
	afInet       = sockaddr.AfInet
	afInet6      = sockaddr.AfInet6
	sizeofSockIn = sockaddr.SizeIn
	sizeofSockI6 = sockaddr.SizeIn6
)

// SockaddrFromAddrPort encodes ap as a Linux struct sockaddr_in (16 bytes,
// for an IPv4 address) or struct sockaddr_in6 (28 bytes, otherwise): family
// in host (little-endian) order, port and address in network order, the
// IPv6 scope id taken from the zone (a number or an interface name). An
// invalid ap or an unknown zone name gives ErrInval.
func SockaddrFromAddrPort(ap netip.AddrPort) ([]byte, error) {
	b, err := sockaddr.Encode(ap)
	if err != nil {
		return nil, opErr("SockaddrFromAddrPort", ErrInval, "%v", err)
	}
	return b, nil
}

// AddrPortFromSockaddr decodes a Linux struct sockaddr_in or sockaddr_in6
// (as SockaddrFromAddrPort writes them; longer buffers such as a
// sockaddr_storage are accepted). A non-zero IPv6 scope id becomes a
// decimal zone. A short buffer or another family gives ErrInval.
func AddrPortFromSockaddr(b []byte) (netip.AddrPort, error) {
	ap, err := sockaddr.Decode(b)
	if err != nil {
		return ap, opErr("AddrPortFromSockaddr", ErrInval, "%v", err)
	}
	return ap, nil
}

// straddr renders an address of the given format for people, the way
// fi_info prints src_addr/dest_addr: sockaddrs as fi_sockaddr_in[6]://...,
// FI_ADDR_STR as its string, nil as "(null)", anything else in hex.
func straddr(format AddrFormat, b []byte) string {
	if b == nil {
		return "(null)"
	}
	switch format {
	case Sockaddr, SockaddrIn, SockaddrIn6:
		if ap, err := AddrPortFromSockaddr(b); err == nil {
			return SockaddrStr(ap)
		}
	case AddrStr:
		return strings.TrimSuffix(string(b), "\x00")
	}
	return tostr.Hex(b)
}
