package shm

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/gofi-dev/fi/ring"
	"golang.org/x/sys/unix"
)

// A ring segment is the file one sender creates for one receiver: a ring
// (package ring's layout) at offset 0 and, on the 128-byte line after it,
// the segment trailer:
//
//	trailer+0  want u32, atomic: the producer has records it could not
//	           write for lack of room and may sleep; the consumer, after
//	           releasing space, swaps it to 0 and nudges the producer's
//	           region (Region.Nudge)
//	trailer+4  id u32: the creator's number for this ring (ringSegIDs),
//	           which the receiver names the ring by when it tells the
//	           sender how far it has read (slot records, see slotHdr)
//	trailer+8  reserved, zero (120 B)
//
// The file is a page multiple: a ring of capacity 4 KiB takes 8 KiB.
const trailerSize = 128

// trailerOff is where the trailer of a ring of the given capacity starts.
func trailerOff(capacity int) int { return roundUp(ring.Size(capacity), 128) }

// RingSegSize returns the bytes of /dev/shm a ring segment of the given
// capacity occupies (ring, trailer, page rounding), or -1 for an invalid
// capacity.
func RingSegSize(capacity int) int {
	if ring.Size(capacity) < 0 {
		return -1
	}
	return roundUp(trailerOff(capacity)+trailerSize, os.Getpagesize())
}

// ringSeg is one ring segment as mapped by either side.
type ringSeg struct {
	seg  *Segment
	r    *ring.Ring
	want *atomic.Uint32
	id   uint32 // trailer+4: the creator's number for the ring (not 0)
}

// ringSegIDs numbers the ring segments this process creates: every ring
// a sender writes has an id no earlier ring of this process had (until
// 2^32 rings), so a receiver's note of how far it read one ring is never
// taken for another (slotHdr).
var ringSegIDs atomic.Uint32

// createRingSeg creates and formats a ring segment of the given capacity.
func createRingSeg(capacity int) (*ringSeg, error) {
	return createRingSegNamed(NewName(), capacity)
}

// createRingSegNamed is createRingSeg with the segment's name given.
func createRingSegNamed(name string, capacity int) (*ringSeg, error) {
	size := RingSegSize(capacity)
	if size < 0 {
		return nil, fmt.Errorf("%w: ring capacity %d", ErrSize, capacity)
	}
	seg, err := CreateSegment(name, size)
	if err != nil {
		return nil, err
	}
	populate(seg.Bytes())
	r, err := ring.Init(seg.Bytes(), capacity)
	if err != nil {
		_ = seg.Close()
		return nil, err
	}
	id := newRingID()
	word32(seg.Bytes(), trailerOff(capacity)+4).Store(id)
	return &ringSeg{seg: seg, r: r, want: word32(seg.Bytes(), trailerOff(capacity)), id: id}, nil
}

// newRingID returns the next ring id of this process (never 0).
func newRingID() uint32 {
	id := ringSegIDs.Add(1)
	for id == 0 {
		id = ringSegIDs.Add(1)
	}
	return id
}

// adoptRingSeg maps a return ring a peer made for us to write to it
// (ConnRequest.ReturnSize) and numbers it as a ring of ours: the ids a
// receiver's slot records name are the sender's (ringSegIDs), and a ring
// numbered by its receiver could carry the id of a later ring we make,
// so that a stale note about it would be taken for the new one.
func adoptRingSeg(name string, size int) (*ringSeg, error) {
	rs, err := openRingSeg(name, size)
	if err != nil {
		return nil, err
	}
	id := newRingID()
	if gerr := Guard(func() { word32(rs.seg.Bytes(), trailerOff(rs.r.Cap())+4).Store(id) }); gerr != nil {
		_ = rs.seg.Close()
		return nil, gerr
	}
	rs.id = id
	return rs, nil
}

// openRingSeg maps the ring segment name a peer created and attaches its
// ring (under Guard: the file is the peer's). size is the size the peer
// announced; the file must have it.
func openRingSeg(name string, size int) (*ringSeg, error) {
	seg, err := OpenSegment(name)
	if err != nil {
		return nil, err
	}
	if seg.Size() != size {
		_ = seg.Close()
		return nil, fmt.Errorf("%w: ring segment %s has %d bytes, announced %d", ErrCorrupt, name, seg.Size(), size)
	}
	// Our mapping of the peer's pages is new: the receiver reads the whole
	// ring within its first lap (and Attach its first page now), a fault
	// per 64 KiB (the kernel's fault-around) on the message path, 3 of
	// the 9 a 4 KiB ping-pong's client took inside fi_pingpong's timed
	// loop, and the first of them inside the first round trip.
	populateRead(seg.Bytes())
	var r *ring.Ring
	if gerr := Guard(func() { r, err = ring.Attach(seg.Bytes()) }); gerr != nil {
		err = gerr
	}
	if err == nil && RingSegSize(r.Cap()) != size {
		err = fmt.Errorf("%w: ring segment %s of %d bytes holds a ring of capacity %d", ErrCorrupt, name, size, r.Cap())
	}
	var id uint32
	if err == nil {
		if gerr := Guard(func() { id = word32(seg.Bytes(), trailerOff(r.Cap())+4).Load() }); gerr != nil {
			err = gerr
		}
	}
	if err != nil {
		_ = seg.Close()
		return nil, fmt.Errorf("shm: ring segment %s: %w", name, err)
	}
	return &ringSeg{seg: seg, r: r, want: word32(seg.Bytes(), trailerOff(r.Cap())), id: id}, nil
}

// madvPopulateWrite and madvPopulateRead are MADV_POPULATE_WRITE and
// MADV_POPULATE_READ (Linux 5.14); x/sys/unix has no name for them on
// every architecture.
const (
	madvPopulateWrite = 23
	madvPopulateRead  = 22
)

// populateRead maps the pages of a peer's segment into our page table by
// read faults, which the kernel takes 64 KiB at a time (fault-around)
// where a write population takes every page by itself.
func populateRead(b []byte) {
	if len(b) > 0 {
		_ = unix.Madvise(b, madvPopulateRead)
	}
}

// populate maps every page of a ring segment (or a region) into our page
// table now, in one call: the sender writes the whole ring within its
// first pass, and a page fault per page on that path costs 2-3 us each on the
// development VM (300-430 us for a 512 KiB ring, against 220 us for the
// call). Older kernels refuse the advice (EINVAL): the pages then fault
// in as before.
func populate(b []byte) {
	if len(b) > 0 {
		_ = unix.Madvise(b, madvPopulateWrite)
	}
}
