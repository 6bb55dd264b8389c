package fi

import "sync"

// AVSetAttr holds the attributes of a new AV set (struct fi_av_set_attr,
// fi_av_set(3)). Plain data.
type AVSetAttr struct {
	// Count is the expected number of members (a capacity hint).
	Count uint64
	// StartAddr and EndAddr, inclusive, with Stride pick the initial
	// members: every valid AV address StartAddr + Stride*i up to EndAddr.
	// Both AddrNotAvail (and Stride 0) create an empty set.
	StartAddr, EndAddr Addr
	Stride             uint64
	// CommKey is a fabric manager's communication key. gofi has no fabric
	// manager: a non-empty key is refused with ErrOpNotSupp.
	CommKey []byte
	// Flags: Universe puts every address of the AV in the set.
	Flags Flags
}

// AVSet is an ordered subset of an AV's addresses (fi_av_set(3)): the
// members of a collective group, rank i being the i-th address. Creating
// and changing a set is local; every member builds the same set (same
// addresses in the same order) and joins it with Endpoint.JoinCollective.
//
// An AVSet is safe for concurrent use.
type AVSet struct {
	av     *AV
	id     uint64
	mu     sync.Mutex
	addrs  []Addr
	closed bool
}

// avSetIDs numbers AV sets process-wide, for their collective addresses.
var avSetIDs struct {
	sync.Mutex
	next uint64
}

// Collective addresses live in a part of the fi_addr space no AV index
// reaches: AV sets at setAddrBase + id, joined groups (MC.Addr) at
// mcAddrBase + id.
const (
	setAddrBase Addr = 0xC << 60
	mcAddrBase  Addr = 0xD << 60
	collIDMask  Addr = 1<<60 - 1
)

// NewSet creates an AV set over the AV (fi_av_set). attr may be nil (an
// empty set).
//
// Errors: ErrInval (a range with Stride 0, StartAddr above EndAddr, or
// only one of the two set), ErrBadFlags (flags other than Universe),
// ErrOpNotSupp (a communication key), ErrOpBadState (closed AV).
func (av *AV) NewSet(attr *AVSetAttr) (*AVSet, error) {
	const op = "AV.NewSet"
	var a AVSetAttr
	if attr != nil {
		a = *attr
	}
	if a.Flags&^Universe != 0 {
		return nil, opErr(op, ErrBadFlags, "flags %s (only FI_UNIVERSE applies)", a.Flags&^Universe)
	}
	if len(a.CommKey) > 0 {
		return nil, opErr(op, ErrOpNotSupp, "communication keys need a fabric manager, which gofi has none of")
	}
	ranged := a.StartAddr != AddrNotAvail || a.EndAddr != AddrNotAvail
	if attr == nil {
		ranged = false
	}
	if ranged {
		switch {
		case a.StartAddr == AddrNotAvail || a.EndAddr == AddrNotAvail:
			return nil, opErr(op, ErrInval, "give both StartAddr and EndAddr, or neither")
		case a.StartAddr > a.EndAddr:
			return nil, opErr(op, ErrInval, "StartAddr %d above EndAddr %d", a.StartAddr, a.EndAddr)
		case a.Stride == 0:
			return nil, opErr(op, ErrInval, "Stride 0 with an address range")
		}
	}
	av.mu.RLock()
	defer av.mu.RUnlock()
	if err := av.usable(op, false); err != nil {
		return nil, err
	}
	s := &AVSet{av: av, addrs: make([]Addr, 0, min(a.Count, 1<<16))}
	avSetIDs.Lock()
	avSetIDs.next++
	s.id = avSetIDs.next
	avSetIDs.Unlock()
	hw := av.highWaterLocked()
	switch {
	case a.Flags&Universe != 0:
		for i := uint64(0); i < hw; i++ {
			if av.validLocked(i) {
				s.addrs = append(s.addrs, Addr(i))
			}
		}
	case ranged:
		for i := uint64(a.StartAddr); i <= uint64(a.EndAddr) && i < hw; i += a.Stride {
			if av.validLocked(i) {
				s.addrs = append(s.addrs, Addr(i))
			}
			if i+a.Stride < i { // wrapped
				break
			}
		}
	}
	return s, nil
}

// highWaterLocked returns one past the highest index ever used.
func (av *AV) highWaterLocked() uint64 {
	if av.named != nil {
		return av.named.HW()
	}
	return av.tab.HW()
}

// validAddr reports whether a is an address stored in the AV.
func (av *AV) validAddr(a Addr) bool {
	av.mu.RLock()
	defer av.mu.RUnlock()
	return !av.closed.Load() && av.validLocked(uint64(a))
}

// AV returns the address vector the set belongs to.
func (s *AVSet) AV() *AV { return s.av }

// Addrs returns a copy of the members in order (rank i is Addrs()[i]).
func (s *AVSet) Addrs() []Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Addr(nil), s.addrs...)
}

// Count returns the number of members.
func (s *AVSet) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.addrs)
}

// Addr returns the set's collective address (fi_av_set_addr), what
// Endpoint.JoinCollective takes to join the group the set names.
func (s *AVSet) Addr() Addr { return setAddrBase | Addr(s.id)&collIDMask }

func (s *AVSet) index(a Addr) int {
	for i, x := range s.addrs {
		if x == a {
			return i
		}
	}
	return -1
}

// Insert appends a to the set (fi_av_set_insert). ErrNoEnt: a is not in
// the AV; ErrInval: a is already a member.
func (s *AVSet) Insert(a Addr) error {
	const op = "AVSet.Insert"
	if !s.av.validAddr(a) {
		return opErr(op, ErrNoEnt, "fi_addr %d is not in the AV", uint64(a))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return opErr(op, ErrOpBadState, "set closed")
	}
	if s.index(a) >= 0 {
		return opErr(op, ErrInval, "fi_addr %d is already a member", uint64(a))
	}
	s.addrs = append(s.addrs, a)
	return nil
}

// Remove removes a from the set, keeping the others' order
// (fi_av_set_remove). ErrInval: a is not a member.
func (s *AVSet) Remove(a Addr) error {
	const op = "AVSet.Remove"
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return opErr(op, ErrOpBadState, "set closed")
	}
	i := s.index(a)
	if i < 0 {
		return opErr(op, ErrInval, "fi_addr %d is not a member", uint64(a))
	}
	s.addrs = append(s.addrs[:i], s.addrs[i+1:]...)
	return nil
}

// lockPair locks s and src (once if they are the same set) in a fixed
// order, and checks they share an AV.
func (s *AVSet) lockPair(op string, src *AVSet) (unlock func(), err error) {
	if src == nil {
		return nil, opErr(op, ErrInval, "nil source set")
	}
	if src.av != s.av {
		return nil, opErr(op, ErrInval, "the sets belong to different AVs")
	}
	a, b := s, src
	if b.id < a.id {
		a, b = b, a
	}
	a.mu.Lock()
	if b != a {
		b.mu.Lock()
	}
	unlock = func() {
		if b != a {
			b.mu.Unlock()
		}
		a.mu.Unlock()
	}
	if s.closed || src.closed {
		unlock()
		return nil, opErr(op, ErrOpBadState, "set closed")
	}
	return unlock, nil
}

// Union appends src's members that s lacks, in src's order
// (fi_av_set_union).
func (s *AVSet) Union(src *AVSet) error {
	unlock, err := s.lockPair("AVSet.Union", src)
	if err != nil {
		return err
	}
	defer unlock()
	for _, a := range append([]Addr(nil), src.addrs...) {
		if s.index(a) < 0 {
			s.addrs = append(s.addrs, a)
		}
	}
	return nil
}

// Intersect removes the members of s that src lacks, keeping the order
// of s (fi_av_set_intersect).
func (s *AVSet) Intersect(src *AVSet) error {
	unlock, err := s.lockPair("AVSet.Intersect", src)
	if err != nil {
		return err
	}
	defer unlock()
	k := 0
	for _, a := range s.addrs {
		if src.index(a) >= 0 {
			s.addrs[k] = a
			k++
		}
	}
	s.addrs = s.addrs[:k]
	return nil
}

// Diff removes the members of s that src has, keeping the order of s
// (fi_av_set_diff).
func (s *AVSet) Diff(src *AVSet) error {
	unlock, err := s.lockPair("AVSet.Diff", src)
	if err != nil {
		return err
	}
	defer unlock()
	if src == s {
		s.addrs = s.addrs[:0]
		return nil
	}
	k := 0
	for _, a := range s.addrs {
		if src.index(a) < 0 {
			s.addrs[k] = a
			k++
		}
	}
	s.addrs = s.addrs[:k]
	return nil
}

// Close releases the set. Groups joined from it stay joined.
func (s *AVSet) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return opErr("AVSet.Close", ErrOpBadState, "already closed")
	}
	s.closed = true
	return nil
}
