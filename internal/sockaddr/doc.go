// Package sockaddr encodes and decodes Linux socket addresses (struct
// sockaddr_in, 16 bytes, and struct sockaddr_in6, 28 bytes) as gofi keeps
// them in AV entries and Info addresses: family in host (little-endian)
// order, port and address in network order, the IPv6 scope id in host
// order.
//
// It imports only the standard library and is imported by the root
// package fi (whose SockaddrFromAddrPort and AddrPortFromSockaddr hand over
// to it) and internal/avstore. This is an internal package of gofi: it
// carries no compatibility promise.
package sockaddr
