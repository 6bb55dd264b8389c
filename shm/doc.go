// Package shm is the low-level half of gofi's shared-memory provider: named
// segments under /dev/shm, the per-endpoint region (a versioned header, a
// futex doorbell, a connection-request queue, a non-empty bitmap and a table
// of inbound peer slots), owner liveness through flock, reaping of dead
// owners' files, cleanup on Close and on SIGINT/SIGTERM, single-copy reads
// of a peer's memory with process_vm_readv, and a guard that turns a fault
// on a mapped page into an error.
//
// It also holds the shm transport (Transport): per-pair rings that start
// small and are replaced by bigger or smaller ones as traffic comes and
// goes, rendezvous by single copy (from SplitMin shared by both sides
// where that has been faster lately, split.go) or through the rings, blocking progress
// on the region's doorbell, and the listing and removal of dead owners'
// files (Scan, Reap) that perftest shm-gc uses. Rings themselves (package
// ring) are placed in segments created here. One-sided operations (RMA
// and atomics, rma.go) are done by the initiator on AllocMR memory it maps
// (atomics with the element kernels of package dtype/kernel, rma_atomic.go),
// by process_vm_writev/readv (pwrite/pread on the target's
// /proc/<pid>/mem for windows up to 2 KiB, procmem.go), by the target's
// Poll when its application is polling anyway (quick requests,
// rmafast.go), or by the target's
// executor goroutine (rmachan.go), all checked through package rma's key
// table.
//
// One-sided operations (rma.go, rmasvc.go, rmachan.go): an endpoint that
// serves RMA publishes a service segment next to its region (its key
// table's name, its counters, a doorbell, channel entries). Initiators copy
// into AllocMR memory they map, or into registered Go memory with
// process_vm_writev/readv, after checking every range against the target's
// key table; what they cannot do themselves (single copy refused, atomics)
// they post in a channel segment that the target's executor goroutine
// serves. A small operation to a target whose application is inside gofi's
// progress at the moment is first offered to that progress through a
// quick slot of the service segment; what the target does not take within
// microseconds the initiator withdraws (one compare-and-swap decides) and
// does itself. The target's application never has to run for any of it.
//
// Everything read from a shared mapping is untrusted: offsets and lengths
// are checked before use, and a foreign or corrupt region is refused with an
// error wrapping ErrCorrupt, never a panic.
//
// This is an internal package of gofi: it carries no compatibility promise.
// It is Linux only.
package shm
