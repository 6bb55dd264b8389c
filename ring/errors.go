package ring

import "errors"

// Errors returned by the ring. The hot-path ones (ErrFull, ErrEmpty,
// ErrTooLarge, ErrShortBuffer, ErrCorrupt) are preallocated sentinels and
// are returned unwrapped, so comparing with == or errors.Is costs nothing.
var (
	// ErrFull: the producer has no room for the record now; retry after
	// the consumer releases space.
	ErrFull = errors.New("ring: full")
	// ErrEmpty: the consumer found no record.
	ErrEmpty = errors.New("ring: empty")
	// ErrTooLarge: the record is larger than MaxPayload; it could never
	// fit, so waiting would hang.
	ErrTooLarge = errors.New("ring: record larger than the ring can hold")
	// ErrShortBuffer: TryRead's destination is smaller than the next
	// record; the record stays in the ring.
	ErrShortBuffer = errors.New("ring: destination buffer too short for record")
	// ErrCorrupt: an index or record header read from the region cannot
	// be right. The ring is marked corrupt; every later call fails too.
	ErrCorrupt = errors.New("ring: corrupt shared state")
	// ErrNotReserved: Commit without a successful Reserve, or committing
	// more bytes than were reserved.
	ErrNotReserved = errors.New("ring: commit without matching reserve")
	// ErrNotPeeked: Consume without a successful Peek.
	ErrNotPeeked = errors.New("ring: consume without matching peek")
	// ErrBadCapacity: capacity is not a power of two within
	// [MinCapacity, MaxCapacity].
	ErrBadCapacity = errors.New("ring: capacity must be a power of two in [MinCapacity, MaxCapacity]")
	// ErrBadRegion: the memory handed to Init, Attach or NewBitmap is too
	// small, misaligned, or (Attach) does not hold a ring of this layout
	// version. Returned wrapped with the detail.
	ErrBadRegion = errors.New("ring: bad region")
	// ErrRange: a bitmap index outside [0, Len()).
	ErrRange = errors.New("ring: bitmap index out of range")
)
