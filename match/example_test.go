package match_test

import (
	"fmt"

	"github.com/gofi-dev/fi/match"
)

// recvOp and msgDesc stand for the engine's own descriptors.
type recvOp struct{ name string }
type msgDesc struct{ slot int }

// How an endpoint's progress path uses a tagged Matcher: post receives,
// feed arriving messages, probe with Peek/Claim, cancel by context.
func Example() {
	m, err := match.New[*recvOp, *msgDesc](match.DirectedRecv(true))
	if err != nil {
		panic(err)
	}

	// A receive for tag 7 from peer 2; nothing waits, so it is posted.
	ctx := new(int)
	if _, ok := m.PostRecv(match.Recv[*recvOp]{
		Want: match.Want{Tag: 7, Src: 2}, Ctx: ctx, Op: &recvOp{"r7"},
	}); !ok {
		fmt.Println("posted; waiting:", m.Posted())
	}

	// A message with tag 7 from peer 2 lands in it.
	if r, ok := m.Arrive(match.Msg[*msgDesc]{Tag: 7, Src: 2, Len: 100, Data: &msgDesc{1}}); ok {
		fmt.Println("landed in", r.Op.name, "len", r.Len)
	}

	// A message nobody waits for is queued unexpected; Peek finds it, a
	// Peek+Claim sets it aside for one context, Claim takes it.
	m.Arrive(match.Msg[*msgDesc]{Tag: 9, Src: 3, Len: 5, Data: &msgDesc{2}})
	if _, ok := m.Peek(match.Want{Tag: 8, Src: match.AnySource}); !ok {
		fmt.Println("tag 8: no message (FI_ENOMSG)")
	}
	probe := new(int)
	if msg, ok, _ := m.PeekClaim(match.Want{Tag: 9, Src: match.AnySource}, probe); ok {
		fmt.Println("claimed a message of", msg.Len, "bytes from", msg.Src)
	}
	if msg, ok := m.Claim(probe); ok {
		fmt.Println("took slot", msg.Data.slot)
	}

	// Cancel by context.
	m.PostRecv(match.Recv[*recvOp]{Want: match.Want{Tag: 1, Src: match.AnySource}, Ctx: ctx, Op: &recvOp{"r1"}})
	if r, ok := m.Cancel(ctx); ok {
		fmt.Println("canceled", r.Op.name)
	}
	// Output:
	// posted; waiting: 1
	// landed in r7 len 100
	// tag 8: no message (FI_ENOMSG)
	// claimed a message of 5 bytes from 3
	// took slot 2
	// canceled r1
}
