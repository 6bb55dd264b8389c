package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gofi-dev/fi/transport"
)

// TestEndpoint_HeldReceiveBehavesAsTheMatcher runs random sequences of
// receives (tagged with ignore masks, untagged, short buffers, selective),
// eager and rendezvous sends, cancels and reads twice: once with receives
// held in Endpoint.fast when they may be, once with every receive in the
// matcher. Completions, their order and what landed must be the same.
func TestEndpoint_HeldReceiveBehavesAsTheMatcher(t *testing.T) {
	for seed := range uint64(40) {
		var logs [2][]string
		for v, off := range []bool{false, true} {
			logs[v] = heldReceiveRun(t, seed, off)
		}
		if !slices.Equal(logs[0], logs[1]) {
			for i := range max(len(logs[0]), len(logs[1])) {
				var a, b string
				if i < len(logs[0]) {
					a = logs[0][i]
				}
				if i < len(logs[1]) {
					b = logs[1][i]
				}
				if a != b {
					t.Fatalf("seed %d, event %d: held %q, matcher %q", seed, i, a, b)
				}
			}
		}
	}
}

func heldReceiveRun(t *testing.T, seed uint64, noFast bool) []string {
	p := newPair(t, 64, func(c *Config) { c.RxSelective = true })
	p.b.noFast = noFast
	rng := rand.New(rand.NewPCG(seed, 7))
	var log []string
	bufs := map[int][]byte{}
	note := func(es []Entry) {
		for _, e := range es {
			s := fmt.Sprintf("ctx=%v flags=%x len=%d tag=%d err=%d olen=%d", e.Context, e.Flags, e.Len, e.Tag, e.Err, e.OLen)
			if id, ok := e.Context.(int); ok && e.Flags&FlagRecv != 0 && e.Err == 0 {
				s += fmt.Sprintf(" data=%x", bufs[id])
			}
			log = append(log, s)
		}
	}
	read := func() {
		ok, errs := drain(p.cb)
		note(ok)
		note(errs)
		drain(p.ca)
	}
	kinds := []transport.Kind{transport.KindMsg, transport.KindTagged}
	ctx := 0
	for range 120 {
		switch rng.IntN(7) {
		case 0, 1, 2:
			ctx++
			kind := kinds[rng.IntN(2)]
			tag, ignore := uint64(rng.IntN(3)), uint64(0)
			if rng.IntN(4) == 0 {
				ignore = 3
			}
			buf := make([]byte, []int{0, 4, 8, 200}[rng.IntN(4)])
			bufs[ctx] = buf
			flags := uint64(0)
			if rng.IntN(5) != 0 {
				flags = FlagCompletion
			}
			c := p.b.Recv(&RecvArgs{Buf: buf, Src: anySrc, Kind: kind, Tag: tag, Ignore: ignore, Flags: flags}, ctx)
			log = append(log, fmt.Sprintf("recv %d %d/%d/%d -> %d", ctx, kind, tag, ignore, c))
		case 3, 4:
			kind := kinds[rng.IntN(2)]
			n := []int{0, 5, 8, 100}[rng.IntN(4)] // 100: rendezvous (eager 64)
			msg := make([]byte, n)
			for i := range msg {
				msg[i] = byte(rng.IntN(256))
			}
			tag := uint64(rng.IntN(3))
			c := p.a.Send(&SendArgs{Buf: msg, Dest: addrB, Kind: kind, Tag: tag, Flags: FlagCompletion}, "s")
			log = append(log, fmt.Sprintf("send %d/%d %d -> %d", kind, tag, n, c))
		case 5:
			if ctx > 0 {
				id := 1 + rng.IntN(ctx)
				log = append(log, fmt.Sprintf("cancel %d -> %d", id, p.b.Cancel(id)))
			}
		case 6:
			read()
		}
	}
	read()
	p.b.Close()
	read()
	return log
}
