package engine

// BufPool keeps payload buffers for messages that arrive before their
// receive (unexpected eager messages here, early collective messages in
// package coll) in power-of-two size classes, so steady-state traffic
// does not allocate. The zero value is ready; it keeps up to Keep free
// buffers per class (64 when Keep is 0). Not safe for concurrent use.
type BufPool struct {
	free [40][][]byte
	Keep int
}

func sizeClass(n int) int {
	c := 0
	for 1<<c < n {
		c++
	}
	return c
}

// Get returns a buffer of length n, reused when one of its class is free.
func (p *BufPool) Get(n int) []byte {
	c := sizeClass(n)
	if l := len(p.free[c]); l > 0 {
		b := p.free[c][l-1]
		p.free[c] = p.free[c][:l-1]
		return b[:n]
	}
	return make([]byte, n, 1<<c)
}

// Put gives b back for a later Get (nil and empty-capacity buffers are
// ignored, and so are buffers beyond the class's Keep).
func (p *BufPool) Put(b []byte) {
	if cap(b) == 0 {
		return
	}
	keep := p.Keep
	if keep == 0 {
		keep = 64
	}
	c := sizeClass(cap(b))
	if len(p.free[c]) < keep {
		p.free[c] = append(p.free[c], b[:0])
	}
}
