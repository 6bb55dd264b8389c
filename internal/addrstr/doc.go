// Package addrstr parses FI_ADDR_STR addresses (fi_getinfo(3):
// format://node:service/field3?key=value&...) and expands the node and
// service ranges of fi_av_insertsym(3): IP addresses counted as numbers,
// names by their numeric suffix, services as ports.
//
// It imports the standard library and internal/sockaddr; only the root
// package fi imports it, which turns its errors into fi.ErrInval. This is
// an internal package of gofi: it carries no compatibility promise.
package addrstr
