package benchmarks

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/gofi-dev/fi/match"
)

// Matching benchmarks (issue 4). Each iteration is one steady-state step:
// a message arrives and lands in one of N posted receives, and a receive
// like the consumed one is posted again, so N stay posted. The tags hit are
// drawn at random, so a matchLinear list walks N/2 entries on average (hitting
// them in post order would always find the head).
//
// impl=match is the match package; impl=matchLinear is the naive baseline: one
// list in post order, walked from the head until the first match (what a
// provider without hashing does), on a slab with a free list so that it
// allocates nothing either and the comparison is about the search.
//
// Shapes:
//   exact      N receives with distinct exact tags (ignore 0)
//   exact-directed  the same with DirectedRecv on and each receive naming
//              its source (the matcher then looks up two buckets)
//   wildcard   N receives each with an ignore mask (tag i<<8, ignore 0xff):
//              both implementations must walk the list in post order
//   unexpected N messages wait unexpected with distinct tags; a receive
//              arrives for one of them, then a new message refills

// matchLinear is the naive posted/unexpected list.
type matchLinear struct {
	ents       []matchLent
	free       int32
	head, tail int32
}

type matchLent struct {
	tag, ignore, src uint64
	next, prev       int32
	op               *matchRecvOp
}

type matchRecvOp struct{ id int }
type matchMsgDesc struct{ slot int }

func newMatchLinear() *matchLinear { return &matchLinear{free: -1, head: -1, tail: -1} }

func (l *matchLinear) push(tag, ignore, src uint64, op *matchRecvOp) {
	i := l.free
	if i >= 0 {
		l.free = l.ents[i].next
	} else {
		l.ents = append(l.ents, matchLent{})
		i = int32(len(l.ents) - 1)
	}
	l.ents[i] = matchLent{tag: tag, ignore: ignore, src: src, next: -1, prev: l.tail, op: op}
	if l.tail >= 0 {
		l.ents[l.tail].next = i
	} else {
		l.head = i
	}
	l.tail = i
}

// take removes and returns the first entry matching (tag, src): a message
// against posted receives, or a receive (tag, ignore) against messages.
func (l *matchLinear) take(tag, ignore, src uint64) *matchRecvOp {
	for i := l.head; i >= 0; i = l.ents[i].next {
		e := &l.ents[i]
		if (tag^e.tag)&^(e.ignore|ignore) == 0 && (e.src == match.AnySource || e.src == src) {
			if e.prev >= 0 {
				l.ents[e.prev].next = e.next
			} else {
				l.head = e.next
			}
			if e.next >= 0 {
				l.ents[e.next].prev = e.prev
			} else {
				l.tail = e.prev
			}
			op := e.op
			*e = matchLent{next: l.free}
			l.free = i
			return op
		}
	}
	return nil
}

var matchSizes = []int{1, 64, 1024}

// matchCPUTimer reports, next to the wall-clock ns/op, the CPU time the
// benchmark's own thread spent per op ("cpu-ns/op", from
// getrusage(RUSAGE_THREAD)). On a machine shared with other work the wall
// figure includes time spent descheduled; the CPU figure does not.
type matchCPUTimer struct{ start time.Duration }

func matchThreadCPU() time.Duration {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD (Linux)
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startMatchCPUTimer(b *testing.B) *matchCPUTimer {
	runtime.LockOSThread()
	b.ResetTimer()
	return &matchCPUTimer{start: matchThreadCPU()}
}

func (t *matchCPUTimer) stop(b *testing.B) {
	d := matchThreadCPU() - t.start
	b.StopTimer()
	runtime.UnlockOSThread()
	if d > 0 {
		b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// order returns a random sequence of indices in [0, n), length a power of two.
func matchOrder(n int) []int {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	s := make([]int, 4096)
	for i := range s {
		s[i] = r.IntN(n)
	}
	return s
}

func BenchmarkMatch(b *testing.B) {
	for _, shape := range []string{"exact", "exact-directed", "wildcard", "unexpected"} {
		for _, n := range matchSizes {
			b.Run(fmt.Sprintf("%s/N=%d/impl=match", shape, n), func(b *testing.B) { benchMatchHashed(b, shape, n) })
			b.Run(fmt.Sprintf("%s/N=%d/impl=linear", shape, n), func(b *testing.B) { benchMatchLinear(b, shape, n) })
		}
	}
}

func matchRecvWant(shape string, i int) match.Want {
	switch shape {
	case "wildcard":
		return match.Want{Tag: uint64(i) << 8, Ignore: 0xff, Src: match.AnySource}
	case "exact-directed":
		return match.Want{Tag: uint64(i) * 0x10001, Src: 3}
	}
	return match.Want{Tag: uint64(i) * 0x10001, Src: match.AnySource}
}

func matchMsgTag(shape string, i int) uint64 {
	if shape == "wildcard" {
		return uint64(i)<<8 | uint64(i&0xff)
	}
	return uint64(i) * 0x10001
}

func benchMatchHashed(b *testing.B, shape string, n int) {
	m, err := match.New[*matchRecvOp, *matchMsgDesc](match.DirectedRecv(shape == "exact-directed"))
	if err != nil {
		b.Fatal(err)
	}
	op, md := &matchRecvOp{}, &matchMsgDesc{}
	seq := matchOrder(n)
	const src = 3
	if shape == "unexpected" {
		for i := 0; i < n; i++ {
			m.Arrive(match.Msg[*matchMsgDesc]{Tag: matchMsgTag(shape, i), Src: src, Len: 64, Data: md})
		}
	} else {
		for i := 0; i < n; i++ {
			m.PostRecv(match.Recv[*matchRecvOp]{Want: matchRecvWant(shape, i), Op: op})
		}
	}
	b.ReportAllocs()
	ct := startMatchCPUTimer(b)
	defer ct.stop(b)
	for i := 0; i < b.N; i++ {
		k := seq[i&4095]
		if shape == "unexpected" {
			if _, ok := m.PostRecv(match.Recv[*matchRecvOp]{Want: matchRecvWant(shape, k), Op: op}); !ok {
				b.Fatal("no unexpected match")
			}
			m.Arrive(match.Msg[*matchMsgDesc]{Tag: matchMsgTag(shape, k), Src: src, Len: 64, Data: md})
			continue
		}
		if _, ok := m.Arrive(match.Msg[*matchMsgDesc]{Tag: matchMsgTag(shape, k), Src: src, Len: 64, Data: md}); !ok {
			b.Fatal("no match")
		}
		m.PostRecv(match.Recv[*matchRecvOp]{Want: matchRecvWant(shape, k), Op: op})
	}
}

func benchMatchLinear(b *testing.B, shape string, n int) {
	l := newMatchLinear()
	op := &matchRecvOp{}
	seq := matchOrder(n)
	const src = 3
	if shape == "unexpected" {
		for i := 0; i < n; i++ {
			l.push(matchMsgTag(shape, i), 0, src, op)
		}
	} else {
		for i := 0; i < n; i++ {
			w := matchRecvWant(shape, i)
			l.push(w.Tag, w.Ignore, w.Src, op)
		}
	}
	b.ReportAllocs()
	ct := startMatchCPUTimer(b)
	defer ct.stop(b)
	for i := 0; i < b.N; i++ {
		k := seq[i&4095]
		if shape == "unexpected" {
			w := matchRecvWant(shape, k)
			if l.take(w.Tag, w.Ignore, src) == nil {
				b.Fatal("no unexpected match")
			}
			l.push(matchMsgTag(shape, k), 0, src, op)
			continue
		}
		if l.take(matchMsgTag(shape, k), 0, src) == nil {
			b.Fatal("no match")
		}
		w := matchRecvWant(shape, k)
		l.push(w.Tag, w.Ignore, w.Src, op)
	}
}
