package net

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// Address format: what Name returns and Resolve accepts is a Linux struct
// sockaddr_in (16 bytes) or sockaddr_in6 (28 bytes) as raw bytes: the family
// as a little-endian uint16 (AF_INET = 2, AF_INET6 = 10), the port in
// network byte order, then the address (and, for IPv6, flow info and the
// scope id, little-endian).
const (
	afInet     = 2
	afInet6    = 10
	sockaddr4  = 16
	sockaddr6  = 28
	addrKeyLen = sockaddr6
)

var errBadAddr = errors.New("net: address is not a sockaddr_in or sockaddr_in6 with a port")

// addrKey is a sockaddr padded to a fixed size: the map key of the peer
// table.
type addrKey [addrKeyLen]byte

// encodeSockaddr returns ap in the Linux sockaddr layout.
func encodeSockaddr(ap netip.AddrPort) []byte {
	n := sockaddr6
	if a := ap.Addr(); a.Is4() || a.Is4In6() {
		n = sockaddr4
	}
	b := make([]byte, n)
	putSockaddr(b, ap)
	return b
}

// putSockaddr writes encodeSockaddr's bytes into b (long enough).
func putSockaddr(b []byte, ap netip.AddrPort) {
	a := ap.Addr()
	if a.Is4() || a.Is4In6() {
		binary.LittleEndian.PutUint16(b[0:], afInet)
		binary.BigEndian.PutUint16(b[2:], ap.Port())
		v4 := a.Unmap().As4()
		copy(b[4:8], v4[:])
		return
	}
	binary.LittleEndian.PutUint16(b[0:], afInet6)
	binary.BigEndian.PutUint16(b[2:], ap.Port())
	v6 := a.As16()
	copy(b[8:24], v6[:])
	// Scope ids are kept only when numeric; zone names cannot be mapped
	// without an interface lookup, which Resolve must not do.
}

// parseSockaddr reads a sockaddr produced by encodeSockaddr (or by C code
// filling a struct sockaddr_in / sockaddr_in6). Port 0 is refused: it
// cannot name a listening peer.
func parseSockaddr(b []byte) (netip.AddrPort, error) {
	switch {
	case len(b) == sockaddr4 && binary.LittleEndian.Uint16(b) == afInet:
		port := binary.BigEndian.Uint16(b[2:])
		if port == 0 {
			return netip.AddrPort{}, errBadAddr
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port), nil
	case len(b) == sockaddr6 && binary.LittleEndian.Uint16(b) == afInet6:
		port := binary.BigEndian.Uint16(b[2:])
		if port == 0 {
			return netip.AddrPort{}, errBadAddr
		}
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), port), nil
	}
	return netip.AddrPort{}, errBadAddr
}

// keyOf normalises ap into a map key (IPv4-mapped IPv6 becomes IPv4).
func keyOf(ap netip.AddrPort) addrKey {
	var k addrKey
	if ap.Addr().Is4In6() {
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	putSockaddr(k[:], ap)
	return k
}
