// Package avstore is the storage behind fi.AV: Table, the private table
// of one process (paged, lock-free lookups, a reverse index, compact
// symmetric ranges), and Named, a named AV shared between the processes
// of one user on one host through a file in /dev/shm (a checked wire
// format, flock for writers, pid registration and stale-file reclaim).
//
// It stores canonical addresses as bytes and knows nothing of endpoints,
// providers or user ids: the root package fi checks and canonicalises
// addresses, keeps user ids and the AV's lock, and turns this package's
// *Error values into *fi.OpError. It imports the standard library,
// golang.org/x/sys/unix, mmap-go and internal/sockaddr; only the root
// package imports it. This is an internal package of gofi: it carries no
// compatibility promise.
package avstore
