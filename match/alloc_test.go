//go:build !race

package match

import "testing"

type recvOp struct{ id int }
type msgDesc struct{ slot int }

// TestNoAllocsSteadyState: once the slabs and tables have grown to the
// working set, no operation allocates.
func TestNoAllocsSteadyState(t *testing.T) {
	m, err := New[*recvOp, *msgDesc](DirectedRecv(true))
	if err != nil {
		t.Fatal(err)
	}
	op, md := &recvOp{}, &msgDesc{}
	ctx, cancelCtx := new(int), new(int)
	var placed []Placed[*msgDesc]
	for i := 0; i < 256; i++ { // keep 256 exact and 8 wildcard receives posted
		m.PostRecv(Recv[*recvOp]{Want: Want{Tag: uint64(i), Src: AnySource}, Ctx: ctx, Op: op})
	}
	for i := 0; i < 8; i++ {
		m.PostRecv(Recv[*recvOp]{Want: Want{Tag: 1 << 40, Ignore: 0xff, Src: uint64(i)}, Op: op})
	}
	tag := uint64(0)
	cases := []struct {
		name string
		f    func()
	}{
		{"exact arrive then post", func() {
			tag = (tag + 97) % 256
			m.Arrive(Msg[*msgDesc]{Tag: tag, Src: 3, Len: 8, Data: md})
			m.PostRecv(Recv[*recvOp]{Want: Want{Tag: tag, Src: AnySource}, Ctx: ctx, Op: op})
		}},
		{"wildcard arrive then post", func() {
			m.Arrive(Msg[*msgDesc]{Tag: 1<<40 | 5, Src: 2, Len: 8, Data: md})
			m.PostRecv(Recv[*recvOp]{Want: Want{Tag: 1 << 40, Ignore: 0xff, Src: 2}, Op: op})
		}},
		{"unexpected arrive then post", func() {
			m.Arrive(Msg[*msgDesc]{Tag: 1 << 50, Src: 1, Len: 8, Data: md})
			m.PostRecv(Recv[*recvOp]{Want: Want{Tag: 1 << 50, Src: 1}, Op: op})
		}},
		{"peek, claim, take", func() {
			m.Arrive(Msg[*msgDesc]{Tag: 1 << 51, Src: 1, Len: 8, Data: md})
			m.Peek(Want{Tag: 1 << 51, Src: AnySource})
			m.PeekClaim(Want{Tag: 1 << 51, Src: AnySource}, ctx)
			m.Claim(ctx)
		}},
		{"peek discard", func() {
			m.Arrive(Msg[*msgDesc]{Tag: 1 << 52, Src: 1, Len: 8, Data: md})
			m.PeekDiscard(Want{Tag: 1 << 52, Ignore: 1, Src: 1})
		}},
		{"multi-receive", func() {
			m.Arrive(Msg[*msgDesc]{Tag: 1 << 53, Src: 1, Len: 40, Data: md})
			placed, _, _ = m.PostMultiRecv(Recv[*recvOp]{Want: Want{Tag: 1 << 53, Src: AnySource}, Op: op}, 128, placed[:0])
			m.Arrive(Msg[*msgDesc]{Tag: 1 << 53, Src: 1, Len: 40, Data: md})
		}},
		{"post then cancel", func() {
			c := cancelCtx
			m.PostRecv(Recv[*recvOp]{Want: Want{Tag: 1 << 54, Src: AnySource}, Ctx: c, Op: op})
			m.Cancel(c)
		}},
	}
	for _, c := range cases {
		c.f() // warm up: grow slabs and scratch
		if n := testing.AllocsPerRun(1000, c.f); n != 0 {
			t.Errorf("%s: %v allocations per run, want 0", c.name, n)
		}
	}
}
