package match

import "sort"

// ref is the reference model: the matching rules written as plainly as
// possible, with linear slices in post / arrival order. The differential
// and fuzz tests check that Matcher agrees with it on every outcome.

type refRecv struct {
	w         Want
	ctx       any
	op        int
	multi     bool
	size, off int
}

type refMsg struct {
	msg Msg[int]
	ctx any // claiming context
	n   int // arrival number
}

type ref struct {
	directed bool
	min      int
	posted   []refRecv // in post order
	unexp    []refMsg  // unclaimed messages in arrival order
	claimed  []refMsg  // claimed messages in claim order
	arrivals int
}

func newRef(directed bool) *ref { return &ref{directed: directed, min: DefaultMinMultiRecv} }

// matches is the rule of fi_tagged(3) plus peer groups.
func (r *ref) matches(w Want, m Msg[int]) bool {
	if (m.Tag^w.Tag)&^w.Ignore != 0 {
		return false
	}
	if m.Group != w.Group {
		return false
	}
	if r.directed && w.Src != AnySource && w.Src != m.Src {
		return false
	}
	return true
}

// same compares contexts with ==, treating a panic (uncomparable) as "not
// the same".
func same(a, b any) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a == b
}

func canCompare(a any) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return a == a
}

// firstUnexp is the index of the earliest unclaimed message w matches, or -1.
func (r *ref) firstUnexp(w Want) int {
	for i, u := range r.unexp {
		if r.matches(w, u.msg) {
			return i
		}
	}
	return -1
}

func (r *ref) removeUnexp(i int) Msg[int] {
	m := r.unexp[i].msg
	r.unexp = append(r.unexp[:i], r.unexp[i+1:]...)
	return m
}

func (r *ref) place(off *int, size, n int) (at, put int, trunc, released bool) {
	at = *off
	free := size - *off
	put = n
	if put > free {
		put = free
		trunc = true
	}
	*off += put
	released = size-*off < r.min
	return
}

func (r *ref) PostRecv(rv Recv[int]) (Msg[int], bool) {
	if i := r.firstUnexp(rv.Want); i >= 0 {
		return r.removeUnexp(i), true
	}
	r.posted = append(r.posted, refRecv{w: rv.Want, ctx: rv.Ctx, op: rv.Op})
	return Msg[int]{}, false
}

func (r *ref) PostMultiRecv(rv Recv[int], size int, dst []Placed[int]) ([]Placed[int], bool, error) {
	if size < r.min {
		return dst, false, ErrMultiRecvSize
	}
	off := 0
	for {
		i := r.firstUnexp(rv.Want)
		if i < 0 {
			break
		}
		m := r.removeUnexp(i)
		p := Placed[int]{Msg: m}
		p.Offset, p.Len, p.Truncated, p.Released = r.place(&off, size, m.Len)
		dst = append(dst, p)
		if p.Released {
			return dst, false, nil
		}
	}
	r.posted = append(r.posted, refRecv{w: rv.Want, ctx: rv.Ctx, op: rv.Op, multi: true, size: size, off: off})
	return dst, true, nil
}

func (r *ref) MatchPosted(m Msg[int]) (Match[int], bool) {
	for i := range r.posted {
		p := &r.posted[i]
		if !r.matches(p.w, m) {
			continue
		}
		res := Match[int]{Op: p.op, Len: m.Len, Released: true}
		if p.multi {
			res.Multi = true
			res.Offset, res.Len, res.Truncated, res.Released = r.place(&p.off, p.size, m.Len)
		}
		if res.Released {
			r.posted = append(r.posted[:i], r.posted[i+1:]...)
		}
		return res, true
	}
	return Match[int]{}, false
}

func (r *ref) Enqueue(m Msg[int]) {
	r.arrivals++
	r.unexp = append(r.unexp, refMsg{msg: m, n: r.arrivals})
}

func (r *ref) Arrive(m Msg[int]) (Match[int], bool) {
	if res, ok := r.MatchPosted(m); ok {
		return res, true
	}
	r.Enqueue(m)
	return Match[int]{}, false
}

func (r *ref) Peek(w Want) (Msg[int], bool) {
	if i := r.firstUnexp(w); i >= 0 {
		return r.unexp[i].msg, true
	}
	return Msg[int]{}, false
}

func (r *ref) PeekClaim(w Want, ctx any) (Msg[int], bool, error) {
	if !canCompare(ctx) {
		return Msg[int]{}, false, ErrContext
	}
	i := r.firstUnexp(w)
	if i < 0 {
		return Msg[int]{}, false, nil
	}
	u := r.unexp[i]
	u.ctx = ctx
	r.unexp = append(r.unexp[:i], r.unexp[i+1:]...)
	r.claimed = append(r.claimed, u)
	return u.msg, true, nil
}

func (r *ref) PeekDiscard(w Want) (Msg[int], bool) {
	if i := r.firstUnexp(w); i >= 0 {
		return r.removeUnexp(i), true
	}
	return Msg[int]{}, false
}

func (r *ref) Claim(ctx any) (Msg[int], bool) {
	for i, u := range r.claimed {
		if same(u.ctx, ctx) {
			r.claimed = append(r.claimed[:i], r.claimed[i+1:]...)
			return u.msg, true
		}
	}
	return Msg[int]{}, false
}

func (r *ref) Cancel(ctx any) (Match[int], bool) {
	for i, p := range r.posted {
		if same(p.ctx, ctx) {
			r.posted = append(r.posted[:i], r.posted[i+1:]...)
			return Match[int]{Op: p.op, Multi: p.multi, Offset: p.off, Released: true}, true
		}
	}
	return Match[int]{}, false
}

func (r *ref) SetMinMultiRecv(n int) error {
	if n < 1 {
		return ErrMinMultiRecv
	}
	r.min = n
	return nil
}

func (r *ref) Posted() int     { return len(r.posted) }
func (r *ref) Unexpected() int { return len(r.unexp) }
func (r *ref) Claimed() int    { return len(r.claimed) }

// Drain returns the posted receives in post order and all messages,
// claimed or not, in arrival order, and empties the model.
func (r *ref) Drain(recvs []Match[int], msgs []Msg[int]) ([]Match[int], []Msg[int]) {
	for _, p := range r.posted {
		recvs = append(recvs, Match[int]{Op: p.op, Multi: p.multi, Offset: p.off, Released: true})
	}
	all := append(append([]refMsg{}, r.unexp...), r.claimed...)
	sort.Slice(all, func(i, j int) bool { return all[i].n < all[j].n })
	for _, u := range all {
		msgs = append(msgs, u.msg)
	}
	r.posted, r.unexp, r.claimed = nil, nil, nil
	return recvs, msgs
}
