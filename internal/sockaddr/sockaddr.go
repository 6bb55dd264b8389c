package sockaddr

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// Linux socket address layout.
const (
	AfInet  = 2  // AF_INET
	AfInet6 = 10 // AF_INET6
	SizeIn  = 16 // sizeof(struct sockaddr_in)
	SizeIn6 = 28 // sizeof(struct sockaddr_in6)
)

// invalid builds this package's errors; every one means the input is not
// an address it can encode or decode (the root package reports
// fi.ErrInval with the error's text as detail).
func invalid(format string, args ...any) error { return fmt.Errorf(format, args...) }

// Encode returns ap as a sockaddr_in (IPv4) or sockaddr_in6 (otherwise),
// the scope id taken from the zone (a number or an interface name).
func Encode(ap netip.AddrPort) ([]byte, error) {
	ip := ap.Addr()
	if !ip.IsValid() {
		return nil, invalid("invalid address")
	}
	if ip.Is4() {
		b := make([]byte, SizeIn)
		binary.LittleEndian.PutUint16(b[0:], AfInet)
		binary.BigEndian.PutUint16(b[2:], ap.Port())
		a4 := ip.As4()
		copy(b[4:8], a4[:])
		return b, nil
	}
	scope, err := Scope(ip)
	if err != nil {
		return nil, err
	}
	b := make([]byte, SizeIn6)
	binary.LittleEndian.PutUint16(b[0:], AfInet6)
	binary.BigEndian.PutUint16(b[2:], ap.Port())
	// b[4:8] flowinfo stays zero
	a16 := ip.As16()
	copy(b[8:24], a16[:])
	binary.LittleEndian.PutUint32(b[24:], scope)
	return b, nil
}

// Scope returns the IPv6 scope id ip's zone names: 0 without a zone, the
// number of a numeric zone, else the index of the interface so named.
func Scope(ip netip.Addr) (uint32, error) {
	z := ip.Zone()
	if z == "" {
		return 0, nil
	}
	if n, err := strconv.ParseUint(z, 10, 32); err == nil {
		return uint32(n), nil
	}
	if ifi, err := net.InterfaceByName(z); err == nil {
		return uint32(ifi.Index), nil
	}
	return 0, invalid("unknown IPv6 zone %q", z)
}

// Decode reads a sockaddr_in or sockaddr_in6 (longer buffers such as a
// sockaddr_storage are accepted). A non-zero IPv6 scope id becomes a
// decimal zone.
func Decode(b []byte) (netip.AddrPort, error) {
	if len(b) < 2 {
		return netip.AddrPort{}, invalid("%d bytes is too short for a sockaddr", len(b))
	}
	switch fam := binary.LittleEndian.Uint16(b); fam {
	case AfInet:
		if len(b) < SizeIn {
			return netip.AddrPort{}, invalid("%d bytes is too short for a sockaddr_in", len(b))
		}
		ip := netip.AddrFrom4([4]byte(b[4:8]))
		return netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:])), nil
	case AfInet6:
		if len(b) < SizeIn6 {
			return netip.AddrPort{}, invalid("%d bytes is too short for a sockaddr_in6", len(b))
		}
		ip := netip.AddrFrom16([16]byte(b[8:24]))
		if scope := binary.LittleEndian.Uint32(b[24:]); scope != 0 {
			ip = ip.WithZone(strconv.FormatUint(uint64(scope), 10))
		}
		return netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:])), nil
	default:
		return netip.AddrPort{}, invalid("address family %d is neither AF_INET nor AF_INET6", fam)
	}
}

// Words returns ip as a 128-bit number (IPv4 in lo).
func Words(ip netip.Addr) (hi, lo uint64) {
	if ip.Is4() {
		a := ip.As4()
		return 0, uint64(binary.BigEndian.Uint32(a[:]))
	}
	a := ip.As16()
	return binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
}
