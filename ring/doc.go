// Package ring is gofi's single-producer single-consumer ring of
// variable-length records, and the CPU-tuned copy path that moves payloads
// into and out of it.
//
// It is an internal package of gofi: it carries no compatibility promise.
//
// A Ring lives in a byte region that is either ordinary Go memory (New) or
// a part of a shared mapping (Init by the creator, Attach by the peer). The
// region is a wire format: a header of magic, version and sizes, then the
// producer's index, the consumer's index and the data area, each on its own
// 128-byte line. The header stores offsets and sizes only, never pointers.
//
// Records are an 8-byte header (payload length, a user-chosen uint16 type,
// a kind) followed by the payload, padded to 8 bytes. A record never splits
// at the end of the data area: the producer fills the tail end with a
// padding record and starts over at offset 0.
//
// Everything read from a shared region is untrusted: an index or record
// header that cannot be right makes the call return ErrCorrupt and marks the
// ring corrupt for good; nothing read from the region can make the package
// panic or read outside the region.
//
// # Memory ordering
//
// All ordering between the two sides comes from sync/atomic, whose
// operations are sequentially consistent in the Go memory model (and, across
// processes, compile to ordinary loads, stores and locked instructions that
// x86-64 and arm64 order the same way within the shared mapping). The
// argument, once:
//
//   - The producer writes a record's payload and header with plain stores,
//     then stores the new tail with tail.Store. The consumer loads tail with
//     tail.Load before reading any header or payload below it. The store
//     synchronizes with the load, so every byte written before the store is
//     visible to every read after the load.
//   - The consumer reads a record, then stores the new head with head.Store.
//     The producer loads head with head.Load before writing into the space
//     below it. So the consumer's reads happen before the producer's reuse
//     of that space: the producer never overwrites a record being read.
//   - Each side writes only its own index and reads the other's; each keeps
//     a private cached copy of the other's index and rereads the shared word
//     only when the cached one says "full" (producer) or "empty" (consumer).
//
// The consumer of a ring in a shared mapping also reads the next record
// header right after loading the tail while polling, before knowing it is
// published (see Init); this is a read of memory the producer may be
// writing, discarded unless the tail says the record is there.
//
// Batching falls out of this: the producer may Commit several records and
// Publish once; the consumer may Consume several and Release once.
//
// # Use
//
// In one process (tcp provider: gnet loop to endpoint): New(capacity).
// Across processes (shm provider): lay rings out in a mapping at offsets
// that are multiples of Align (Size(capacity) is itself a multiple of 128,
// so rings placed back to back stay aligned); the creator calls Init on
// each, the peer Attach, which validates everything. A receiver with many
// inbound rings keeps a Bitmap in its own region; producers Set their bit
// after publishing, the receiver Takes words and drains the rings named.
//
// Producer: Reserve(n) -> fill -> Commit(type, n) ... Publish(), or
// TryWrite(type, p). Consumer: Peek() -> use -> Consume() ... Release(), or
// TryRead(dst). ErrFull and ErrEmpty are the "try again" answers.
//
// The copy path: Copy is copy with a per-size-class dispatch driven by
// cpuid (CPU, CopyPlan, CopyClasses say what was chosen and why).
package ring
