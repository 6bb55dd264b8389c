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
// Records are an 8-byte header word (payload length, a user-chosen uint16
// type, a kind that is never 0) followed by the payload, padded to 8 bytes.
// A record never splits at the end of the data area: the producer fills the
// tail end with a padding record and starts over at offset 0. The header
// word is also the record's publication flag: the word at the producer's
// next write position is always 0, so the consumer polls one word on the
// line the next record lands in, and a record costs one cache-line transfer
// between the two cores, like a bare flag, rather than one for a tail
// index and one for the data.
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
//   - Invariant: the header word at the first unpublished position (the
//     consumer's read position once it has caught up) is 0. Init zeroes
//     the word at position 0; publishing zeroes the word just after the
//     last record published before any of them becomes visible, unless it
//     is zero already: after each publication the producer zeroes free
//     space up to the end of the next cache line (zeroAhead), and keeps
//     the mark to which it knows the data area is zero. (Space for that
//     word is part of every reservation.)
//   - The producer writes payloads, the headers of all but the first
//     record of a batch and the zero word after the batch with plain
//     stores, then publishes with one atomic Store of the first record's
//     header. (It also stores its position to the tail word now and then,
//     a hint for Attach and Len; nobody polls it.)
//     The consumer reads a header with an atomic Load and reads nothing of
//     the record, nor the header after it, before that Load returns
//     non-zero. The Store synchronizes with the Load, so every byte the
//     producer wrote before publishing is visible after it, including the
//     next header or the zero word after the batch. The consumer is never
//     looking at a word the producer writes plainly: that word lies beyond
//     the first unpublished header.
//   - The consumer reads records, then stores the new head with head.Store.
//     The producer loads head with head.Load before writing into the space
//     below it (plus one word, for the zero after the record). So the
//     consumer's reads happen before the producer's reuse of that space:
//     the producer never overwrites a record being read.
//   - The producer keeps a private copy of the consumer's head and rereads
//     the shared word only when the copy says "full".
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
// # Duplex
//
// A pair of one-way rings costs a ping-pong two cache lines: each side
// writes a line the other polls. Where the two CPUs sit close together
// that is about twice the round trip of a flag word both sides write in
// turn (one line handed over for writing with each read). A Duplex is the
// two rings plus a turn line: one 64-byte line in which each end has a
// 32-byte slot (a stamp, a meta word and SlotPayload bytes of payload).
// A record of at most SlotPayload bytes goes through the sender's slot
// when the other end has received every record the sender has sent (so
// the slot is free and nothing waits in the ring before it); anything
// else goes through the ring. A ping-pong of small records then moves
// the one turn line back and forth, like the flag.
//
//   - Order: a slot record is written only when everything sent before it
//     has been received, so at most one slot record is unread, and it
//     precedes every unread ring record. The receiver counts records
//     (slot and ring alike) and takes the slot's record when its stamp is
//     the next count, else the ring's next record. It loads the ring's
//     header before the stamp: if a ring record sent after a slot record
//     is visible, so is the slot record (its stamp was stored first).
//   - Freeing the slot: the meta word carries the low 32 bits of the
//     count of records its writer had received, and so does an ack word
//     each end stores (on a line of its own) when it sends through the
//     ring after receiving everything (so that two ends in the ring's
//     mode find their way back to the slots, and two streams crossing do
//     not pass a shared line back and forth). Fewer than 2^32 records
//     are ever outstanding, so a count equal to the low bits of one's
//     own sent count means all received, whatever its age.
//   - A slot is rewritten only after the other end has said it received
//     the record in it, and that saying is ordered after its reads of the
//     slot (it reads, then stores its own stamp or ack word; the writer
//     loads them before rewriting): no byte of a slot is read while it
//     is written.
//   - The stamp is a 64-bit sequence number, not a flag to clear: the
//     receiver never writes the other end's slot, and a stale stamp can
//     never equal the count expected. A stamp beyond it, a length over
//     SlotPayload or reserved meta bits set mark the duplex corrupt.
//
// Streams through a Duplex go through the rings after their first record
// (the receiver of a stream sends nothing, so the sender never learns the
// slot is free), batched with Reserve, Commit and Publish as through a
// Ring. An end's methods are called by one goroutine at a time (its
// sends and receives share its counts).
//
// The copy path: Copy is copy with a per-size-class dispatch driven by
// cpuid (CPU, CopyPlan, CopyClasses say what was chosen and why).
package ring
