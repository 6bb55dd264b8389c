// Package pipetest is an in-memory transport.Transport for tests: pipes
// on one Hub deliver to each other in one process, driven by the caller's
// Poll, with the shm and tcp transports' contract (eager copies up to
// MaxEager bytes, rendezvous with Fetch above it, per-peer order,
// back-pressure through Arrive). The engine's and the collectives' unit
// tests run on it.
//
// It imports only transport; nothing outside tests may import it.
package pipetest
