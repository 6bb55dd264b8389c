package match

import (
	"errors"
	"testing"
)

type mt = Matcher[string, string]

func newM(t *testing.T, opts ...Option) *mt {
	t.Helper()
	m, err := New[string, string](opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func any0(tag uint64) Want { return Want{Tag: tag, Src: AnySource} }

func post(t *testing.T, m *mt, w Want, op string, ctx any) {
	t.Helper()
	if msg, ok := m.PostRecv(Recv[string]{Want: w, Ctx: ctx, Op: op}); ok {
		t.Fatalf("post %s: matched unexpected %+v, want posted", op, msg)
	}
}

func arrive(m *mt, tag, src uint64, group uint32, data string) (string, bool) {
	r, ok := m.Arrive(Msg[string]{Tag: tag, Src: src, Group: group, Len: 8, Data: data})
	return r.Op, ok
}

func TestArrive_TagMatchesUnderIgnoreMask(t *testing.T) {
	cases := []struct {
		name            string
		recvTag, ignore uint64
		msgTag          uint64
		match           bool
	}{
		{"exact equal", 0x1234, 0, 0x1234, true},
		{"exact differs in one bit", 0x1234, 0, 0x1235, false},
		{"ignored low bits differ", 0x1200, 0xff, 0x12ab, true},
		{"unignored high bits differ", 0x1200, 0xff, 0x13ab, false},
		{"ignore all matches anything", 0, ^uint64(0), 0xdeadbeef, true},
		{"top bit ignored", 1 << 63, 1 << 63, 0, true},
		{"top bit compared", 1 << 63, 0, 0, false},
		{"receive tag bits under ignore are irrelevant", 0xff, 0xff, 0x00, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newM(t)
			post(t, m, Want{Tag: c.recvTag, Ignore: c.ignore, Src: AnySource}, "r", nil)
			_, ok := arrive(m, c.msgTag, 3, 0, "m")
			if ok != c.match {
				t.Fatalf("matched=%v, want %v", ok, c.match)
			}
			left := 1 // not matched: the receive stays posted and the message queues
			if c.match {
				left = 0
			}
			if m.Unexpected() != left || m.Posted() != left {
				t.Fatalf("posted=%d unexpected=%d", m.Posted(), m.Unexpected())
			}
		})
	}
}

func TestArrive_EarliestPostedWins(t *testing.T) {
	type p struct {
		w  Want
		op string
	}
	cases := []struct {
		name     string
		directed bool
		posts    []p
		tag, src uint64
		want     string
	}{
		{"two exact same tag: first", false, []p{{any0(5), "a"}, {any0(5), "b"}}, 5, 1, "a"},
		{"wildcard before exact: wildcard", false, []p{{Want{Tag: 0, Ignore: 0xf, Src: AnySource}, "w"}, {any0(5), "e"}}, 5, 1, "w"},
		{"exact before wildcard: exact", false, []p{{any0(5), "e"}, {Want{Tag: 0, Ignore: 0xf, Src: AnySource}, "w"}}, 5, 1, "e"},
		{"non-matching wildcard first is skipped", false, []p{{Want{Tag: 0x100, Ignore: 0xf, Src: AnySource}, "w"}, {any0(5), "e"}}, 5, 1, "e"},
		{"any-source before specific source", true, []p{{any0(5), "any"}, {Want{Tag: 5, Src: 1}, "s1"}}, 5, 1, "any"},
		{"specific source before any-source", true, []p{{Want{Tag: 5, Src: 1}, "s1"}, {any0(5), "any"}}, 5, 1, "s1"},
		{"other source skipped", true, []p{{Want{Tag: 5, Src: 2}, "s2"}, {any0(5), "any"}}, 5, 1, "any"},
		{"wildcard from other source skipped", true, []p{{Want{Ignore: ^uint64(0), Src: 2}, "w2"}, {Want{Tag: 5, Src: 1}, "s1"}}, 5, 1, "s1"},
		{"three-way: oldest of exact, any, wildcard", true, []p{
			{Want{Tag: 5, Src: 1}, "s1"}, {any0(5), "any"}, {Want{Ignore: 1, Tag: 4, Src: AnySource}, "w"}}, 5, 1, "s1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newM(t, DirectedRecv(c.directed))
			for _, x := range c.posts {
				post(t, m, x.w, x.op, nil)
			}
			got, ok := arrive(m, c.tag, c.src, 0, "m")
			if !ok || got != c.want {
				t.Fatalf("landed in %q (ok=%v), want %q", got, ok, c.want)
			}
			if m.Posted() != len(c.posts)-1 {
				t.Fatalf("posted=%d, want %d", m.Posted(), len(c.posts)-1)
			}
		})
	}
}

func TestDirectedRecv_Source(t *testing.T) {
	cases := []struct {
		name     string
		directed bool
		recvSrc  uint64
		msgSrc   uint64
		match    bool
	}{
		{"directed: same source", true, 7, 7, true},
		{"directed: other source", true, 7, 8, false},
		{"directed: any source", true, AnySource, 8, true},
		{"directed: unknown sender only matches any", true, 7, AnySource, false},
		{"directed: unknown sender, any-source receive", true, AnySource, AnySource, true},
		{"not directed: source ignored", false, 7, 8, true},
		{"not directed: unknown sender", false, 7, AnySource, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, wild := range []uint64{0, 0xf} { // hashed and wildcard paths
				m := newM(t, DirectedRecv(c.directed))
				post(t, m, Want{Tag: 0x10, Ignore: wild, Src: c.recvSrc}, "r", nil)
				if _, ok := arrive(m, 0x10, c.msgSrc, 0, "m"); ok != c.match {
					t.Fatalf("ignore %#x: matched=%v, want %v", wild, ok, c.match)
				}
				// and the other direction: receive posted after the message
				m = newM(t, DirectedRecv(c.directed))
				arrive(m, 0x10, c.msgSrc, 0, "m")
				_, ok := m.PostRecv(Recv[string]{Want: Want{Tag: 0x10, Ignore: wild, Src: c.recvSrc}, Op: "r"})
				if ok != c.match {
					t.Fatalf("ignore %#x, unexpected path: matched=%v, want %v", wild, ok, c.match)
				}
			}
		})
	}
}

func TestGroups_MustAgree(t *testing.T) {
	m := newM(t)
	post(t, m, Want{Tag: 1, Src: AnySource, Group: 2}, "g2", nil)
	if _, ok := arrive(m, 1, 0, 3, "m3"); ok {
		t.Fatal("message of group 3 landed in a group 2 receive")
	}
	if _, ok := arrive(m, 1, 0, 0, "m0"); ok {
		t.Fatal("message of group 0 landed in a group 2 receive")
	}
	if got, ok := arrive(m, 1, 0, 2, "m2"); !ok || got != "g2" {
		t.Fatalf("group 2 message: %q %v", got, ok)
	}
	// and a wildcard tag does not widen the group: m3 and m0 wait, each
	// taken only by a receive of its own group
	msg, ok := m.PostRecv(Recv[string]{Want: Want{Ignore: ^uint64(0), Src: AnySource, Group: 5}, Op: "w5"})
	if ok {
		t.Fatalf("group 5 wildcard receive took %+v", msg)
	}
	msg, ok = m.PostRecv(Recv[string]{Want: Want{Ignore: ^uint64(0), Src: AnySource, Group: 0}, Op: "w0"})
	if !ok || msg.Data != "m0" {
		t.Fatalf("group 0 wildcard receive took %+v %v, want m0", msg, ok)
	}
}

func TestPostRecv_EarliestUnexpectedWinsAcrossBuckets(t *testing.T) {
	cases := []struct {
		name     string
		directed bool
		w        Want
		want     string
	}{
		{"wildcard tag, any source: earliest overall", false, Want{Ignore: ^uint64(0), Src: AnySource}, "t9"},
		{"partial mask spans tags 2,3: earliest of them", false, Want{Tag: 2, Ignore: 1, Src: AnySource}, "t3"},
		{"exact tag: earliest with that tag", false, any0(2), "t2a"},
		{"directed exact tag and source", true, Want{Tag: 2, Src: 1}, "t2b"},
		{"directed wildcard from a source", true, Want{Ignore: ^uint64(0), Src: 1}, "t3"},
		{"directed source with nothing queued", true, Want{Ignore: ^uint64(0), Src: 5}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newM(t, DirectedRecv(c.directed))
			arrive(m, 9, 0, 0, "t9")
			arrive(m, 3, 1, 0, "t3")
			arrive(m, 2, 0, 0, "t2a")
			arrive(m, 2, 1, 0, "t2b")
			msg, ok := m.PostRecv(Recv[string]{Want: c.w, Op: "r"})
			if c.want == "" {
				if ok || m.Posted() != 1 {
					t.Fatalf("took %+v, want the receive posted", msg)
				}
				return
			}
			if !ok || msg.Data != c.want {
				t.Fatalf("took %q (ok=%v), want %q", msg.Data, ok, c.want)
			}
			if m.Unexpected() != 3 || m.Posted() != 0 {
				t.Fatalf("unexpected=%d posted=%d", m.Unexpected(), m.Posted())
			}
		})
	}
}

func TestPostRecv_LongSourceListStillEarliest(t *testing.T) {
	// Many messages from source 1 with other tags make its list longer
	// than the tag bucket; the answer must not depend on which is walked.
	m := newM(t, DirectedRecv(true), Buckets(1))
	for i := 0; i < 50; i++ {
		arrive(m, uint64(100+i), 1, 0, "noise")
	}
	arrive(m, 7, 2, 0, "other-src")
	arrive(m, 7, 1, 0, "want")
	arrive(m, 7, 1, 0, "later")
	msg, ok := m.PostRecv(Recv[string]{Want: Want{Tag: 7, Src: 1}, Op: "r"})
	if !ok || msg.Data != "want" {
		t.Fatalf("took %+v", msg)
	}
}

func TestPeek(t *testing.T) {
	m := newM(t)
	if _, ok := m.Peek(any0(4)); ok {
		t.Fatal("peek on empty queue found something")
	}
	arrive(m, 4, 0, 0, "a")
	arrive(m, 4, 0, 0, "b")
	for i := 0; i < 2; i++ { // peeking twice finds the same message: nothing removed
		msg, ok := m.Peek(any0(4))
		if !ok || msg.Data != "a" || msg.Len != 8 || msg.Tag != 4 {
			t.Fatalf("peek %d: %+v %v", i, msg, ok)
		}
	}
	if m.Unexpected() != 2 {
		t.Fatalf("unexpected=%d after peeks", m.Unexpected())
	}
	if _, ok := m.Peek(any0(5)); ok {
		t.Fatal("peek for an absent tag found something (want the not-found result, FI_ENOMSG)")
	}
	if _, ok := m.Peek(Want{Tag: 4, Src: AnySource, Group: 1}); ok {
		t.Fatal("peek in another group found something")
	}
}

func TestPeekClaim_ThenClaimByContext(t *testing.T) {
	m := newM(t)
	ctxA, ctxB := new(int), new(int)
	arrive(m, 4, 0, 0, "a")
	arrive(m, 4, 0, 0, "b")
	msg, ok, err := m.PeekClaim(any0(4), ctxA)
	if err != nil || !ok || msg.Data != "a" {
		t.Fatalf("PeekClaim: %+v %v %v", msg, ok, err)
	}
	if m.Claimed() != 1 || m.Unexpected() != 1 {
		t.Fatalf("claimed=%d unexpected=%d", m.Claimed(), m.Unexpected())
	}
	// the claimed message is invisible to peeks and receives
	if msg, _ := m.Peek(any0(4)); msg.Data != "b" {
		t.Fatalf("peek after claim found %q, want b", msg.Data)
	}
	if _, ok := m.Claim(ctxB); ok {
		t.Fatal("Claim with another context took the message")
	}
	if msg, ok := m.PostRecv(Recv[string]{Want: any0(4), Op: "r"}); !ok || msg.Data != "b" {
		t.Fatalf("receive took %q, want b (a is claimed)", msg.Data)
	}
	if _, ok := m.PostRecv(Recv[string]{Want: any0(4), Op: "r2"}); ok {
		t.Fatal("receive took the claimed message")
	}
	if msg, ok := m.Claim(ctxA); !ok || msg.Data != "a" {
		t.Fatalf("Claim: %+v %v", msg, ok)
	}
	if _, ok := m.Claim(ctxA); ok {
		t.Fatal("second Claim found the message again")
	}
	if m.Claimed() != 0 {
		t.Fatalf("claimed=%d", m.Claimed())
	}
}

func TestPeekClaim_NotFoundAndBadContext(t *testing.T) {
	m := newM(t)
	if _, ok, err := m.PeekClaim(any0(1), new(int)); ok || err != nil {
		t.Fatalf("empty: ok=%v err=%v", ok, err)
	}
	arrive(m, 1, 0, 0, "a")
	if _, ok, err := m.PeekClaim(any0(1), []int{1}); ok || !errors.Is(err, ErrContext) {
		t.Fatalf("slice context: ok=%v err=%v, want ErrContext", ok, err)
	}
	if _, ok, err := m.PeekClaim(any0(1), struct{ x any }{[]int{}}); ok || !errors.Is(err, ErrContext) {
		t.Fatalf("struct holding a slice: ok=%v err=%v, want ErrContext", ok, err)
	}
	if m.Unexpected() != 1 || m.Claimed() != 0 {
		t.Fatal("a refused claim changed the queues")
	}
}

func TestPeekDiscard_RemovesAndReturns(t *testing.T) {
	m := newM(t)
	if _, ok := m.PeekDiscard(any0(1)); ok {
		t.Fatal("discard on empty queue")
	}
	arrive(m, 1, 0, 0, "a")
	arrive(m, 1, 0, 0, "b")
	if msg, ok := m.PeekDiscard(any0(1)); !ok || msg.Data != "a" {
		t.Fatalf("discard: %+v %v", msg, ok)
	}
	if msg, _ := m.Peek(any0(1)); msg.Data != "b" || m.Unexpected() != 1 {
		t.Fatalf("after discard: %q, %d queued", msg.Data, m.Unexpected())
	}
}

func TestMultiRecv_AbsorbsUntilBelowMinimum(t *testing.T) {
	m := newM(t)
	if err := m.SetMinMultiRecv(16); err != nil {
		t.Fatal(err)
	}
	dst, posted, err := m.PostMultiRecv(Recv[string]{Want: any0(0), Op: "buf"}, 64, nil)
	if err != nil || !posted || len(dst) != 0 {
		t.Fatalf("post: %v %v %v", dst, posted, err)
	}
	steps := []struct {
		n               int
		off, put        int
		trunc, released bool
	}{
		{20, 0, 20, false, false},  // 44 left
		{20, 20, 20, false, false}, // 24 left
		{10, 40, 10, false, true},  // 14 left < 16: released
	}
	for i, s := range steps {
		r, ok := m.Arrive(Msg[string]{Len: s.n, Data: "m"})
		if !ok || !r.Multi || r.Op != "buf" || r.Offset != s.off || r.Len != s.put || r.Truncated != s.trunc || r.Released != s.released {
			t.Fatalf("step %d: %+v", i, r)
		}
	}
	if m.Posted() != 0 {
		t.Fatal("released buffer still posted")
	}
	if _, ok := arrive(m, 0, 0, 0, "x"); ok {
		t.Fatal("message landed in a released buffer")
	}
}

func TestMultiRecv_TruncatesOversizedMessage(t *testing.T) {
	m := newM(t)
	_ = m.SetMinMultiRecv(4)
	m.PostMultiRecv(Recv[string]{Want: any0(0), Op: "buf"}, 32, nil)
	m.Arrive(Msg[string]{Len: 20})
	r, _ := m.Arrive(Msg[string]{Len: 20}) // 12 left
	if r.Offset != 20 || r.Len != 12 || !r.Truncated || !r.Released {
		t.Fatalf("%+v", r)
	}
}

func TestMultiRecv_PostAbsorbsWaitingMessagesInOrder(t *testing.T) {
	m := newM(t)
	_ = m.SetMinMultiRecv(8)
	for _, d := range []string{"a", "b", "c", "d"} {
		m.Arrive(Msg[string]{Len: 10, Data: d})
	}
	m.Arrive(Msg[string]{Tag: 9, Len: 10, Data: "other-tag"})
	dst, posted, err := m.PostMultiRecv(Recv[string]{Want: any0(0), Op: "buf"}, 35, nil)
	if err != nil || posted {
		t.Fatalf("posted=%v err=%v", posted, err)
	}
	want := []Placed[string]{
		{Msg: Msg[string]{Len: 10, Data: "a"}, Offset: 0, Len: 10},
		{Msg: Msg[string]{Len: 10, Data: "b"}, Offset: 10, Len: 10},
		{Msg: Msg[string]{Len: 10, Data: "c"}, Offset: 20, Len: 10, Released: true}, // 5 left < 8
	}
	if len(dst) != len(want) {
		t.Fatalf("placed %d: %+v", len(dst), dst)
	}
	for i := range want {
		if dst[i] != want[i] {
			t.Fatalf("placed[%d] = %+v, want %+v", i, dst[i], want[i])
		}
	}
	if m.Unexpected() != 2 || m.Posted() != 0 {
		t.Fatalf("unexpected=%d posted=%d", m.Unexpected(), m.Posted())
	}
	// a second buffer takes the rest and stays posted, keeping its offset
	dst, posted, _ = m.PostMultiRecv(Recv[string]{Want: any0(0), Op: "buf2"}, 100, dst[:0])
	if !posted || len(dst) != 1 || dst[0].Msg.Data != "d" {
		t.Fatalf("second buffer: %v %+v", posted, dst)
	}
	r, _ := m.Arrive(Msg[string]{Len: 5})
	if r.Op != "buf2" || r.Offset != 10 {
		t.Fatalf("next message: %+v", r)
	}
}

func TestMultiRecv_KeepsItsPlaceInOrder(t *testing.T) {
	// A multi-receive buffer posted first keeps winning over receives
	// posted after it, message after message.
	m := newM(t)
	_ = m.SetMinMultiRecv(1)
	m.PostMultiRecv(Recv[string]{Want: Want{Ignore: ^uint64(0), Src: AnySource}, Op: "buf"}, 100, nil)
	post(t, m, any0(3), "exact", nil)
	for i := 0; i < 3; i++ {
		if got, _ := arrive(m, 3, 0, 0, "m"); got != "buf" {
			t.Fatalf("message %d landed in %q", i, got)
		}
	}
}

func TestMultiRecv_BadSizes(t *testing.T) {
	m := newM(t)
	for _, size := range []int{-1, 0, DefaultMinMultiRecv - 1} {
		if _, _, err := m.PostMultiRecv(Recv[string]{Want: any0(0)}, size, nil); !errors.Is(err, ErrMultiRecvSize) {
			t.Fatalf("size %d: err=%v, want ErrMultiRecvSize", size, err)
		}
	}
	if m.Posted() != 0 {
		t.Fatal("refused buffer was posted")
	}
	for _, n := range []int{0, -5} {
		if err := m.SetMinMultiRecv(n); !errors.Is(err, ErrMinMultiRecv) {
			t.Fatalf("SetMinMultiRecv(%d) = %v", n, err)
		}
	}
	if m.MinMultiRecv() != DefaultMinMultiRecv {
		t.Fatal("refused minimum was applied")
	}
}

func TestCancel_ByContext(t *testing.T) {
	m := newM(t)
	a, b := new(int), new(int)
	post(t, m, any0(1), "a1", a)
	post(t, m, Want{Tag: 0x100, Ignore: 1, Src: AnySource}, "b", b)
	post(t, m, any0(2), "a2", a)
	if _, ok := m.Cancel(new(int)); ok {
		t.Fatal("canceled with an unknown context")
	}
	if _, ok := m.Cancel([]int{}); ok { // uncomparable: found nowhere, no panic
		t.Fatal("canceled with a slice context")
	}
	r, ok := m.Cancel(a)
	if !ok || r.Op != "a1" {
		t.Fatalf("cancel a: %+v %v (want the earliest, a1)", r, ok)
	}
	if _, ok := arrive(m, 1, 0, 0, "m"); ok {
		t.Fatal("message landed in a canceled receive")
	}
	if r, _ := m.Cancel(b); r.Op != "b" {
		t.Fatalf("cancel b: %+v", r)
	}
	if r, _ := m.Cancel(a); r.Op != "a2" {
		t.Fatalf("cancel a again: %+v", r)
	}
	if m.Posted() != 0 {
		t.Fatalf("posted=%d", m.Posted())
	}
}

func TestCancel_MultiRecvReportsOffset(t *testing.T) {
	m := newM(t)
	_ = m.SetMinMultiRecv(1)
	c := new(int)
	m.PostMultiRecv(Recv[string]{Want: any0(0), Ctx: c, Op: "buf"}, 100, nil)
	m.Arrive(Msg[string]{Len: 30})
	r, ok := m.Cancel(c)
	if !ok || !r.Multi || r.Offset != 30 {
		t.Fatalf("%+v %v", r, ok)
	}
}

func TestMatchPostedThenEnqueue_SameAsArrive(t *testing.T) {
	m := newM(t)
	msg := Msg[string]{Tag: 3, Src: 1, Len: 4, Data: "x"}
	if _, ok := m.MatchPosted(msg); ok {
		t.Fatal("matched with nothing posted")
	}
	if m.Unexpected() != 0 {
		t.Fatal("MatchPosted queued the message")
	}
	m.Enqueue(msg)
	if got, ok := m.PostRecv(Recv[string]{Want: any0(3)}); !ok || got != msg {
		t.Fatalf("%+v %v", got, ok)
	}
}

func TestDrain_ReturnsEverythingInOrder(t *testing.T) {
	m := newM(t, Buckets(2))
	post(t, m, any0(10), "r1", nil)
	post(t, m, Want{Tag: 20, Ignore: 1, Src: AnySource}, "r2", nil)
	post(t, m, any0(30), "r3", nil)
	arrive(m, 1, 0, 0, "m1")
	arrive(m, 2, 0, 0, "m2")
	arrive(m, 3, 0, 0, "m3")
	m.PeekClaim(any0(2), new(int))
	recvs, msgs := m.Drain(nil, nil)
	if len(recvs) != 3 || recvs[0].Op != "r1" || recvs[1].Op != "r2" || recvs[2].Op != "r3" {
		t.Fatalf("recvs %+v", recvs)
	}
	if len(msgs) != 3 || msgs[0].Data != "m1" || msgs[1].Data != "m2" || msgs[2].Data != "m3" {
		t.Fatalf("msgs %+v", msgs)
	}
	if m.Posted()+m.Unexpected()+m.Claimed() != 0 {
		t.Fatal("not empty after Drain")
	}
}

func TestBucketGrowth_KeepsPostOrder(t *testing.T) {
	m := newM(t, Buckets(1))
	for i := 0; i < 500; i++ {
		post(t, m, any0(uint64(i%7)), string(rune('a'+i%26))+string(rune(i)), nil)
	}
	for i := 0; i < 500; i++ {
		arrive(m, 100+uint64(i%5), 0, 0, "u") // grows the unexpected table too
	}
	for tag := 0; tag < 7; tag++ {
		for i := tag; i < 500; i += 7 {
			got, ok := arrive(m, uint64(tag), 0, 0, "m")
			if want := string(rune('a'+i%26)) + string(rune(i)); !ok || got != want {
				t.Fatalf("tag %d: landed in %q, want %q", tag, got, want)
			}
		}
	}
	if len(m.pb) < 128 || len(m.ub) < 128 {
		t.Fatalf("tables did not grow: %d posted buckets, %d unexpected", len(m.pb), len(m.ub))
	}
}

func TestNew_Options(t *testing.T) {
	for _, n := range []int{0, -1, 1<<24 + 1} {
		if _, err := New[int, int](Buckets(n)); !errors.Is(err, ErrBuckets) {
			t.Fatalf("Buckets(%d): %v", n, err)
		}
	}
	m, err := New[int, int](Buckets(1000), DirectedRecv(true))
	if err != nil || len(m.pb) != 1024 || !m.DirectedRecv() {
		t.Fatalf("%v %d", err, len(m.pb))
	}
}
