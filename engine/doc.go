// Package engine is gofi's provider-neutral core: endpoint state, the
// transmit and receive paths, protocol selection by size, completion
// queues and progress, over a Transport that a provider (shm, tcp)
// implements. It carries no compatibility promise: only the root package
// fi is public API.
//
// # Imports
//
// engine imports match and transport, internal/getcpu (where a reader
// polls, for the move off a peer's CPU) and the standard library; the
// providers' glue in the root package, package coll and package link
// import it. It imports no transport implementation.
package engine
