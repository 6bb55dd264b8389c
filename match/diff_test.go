package match

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// choices feeds the operation driver: a seeded PRNG for the randomized
// differential test, the fuzzer's bytes for FuzzDifferential.
type choices interface {
	// pick returns a value in [0, n); ok is false when the input is used up.
	pick(n int) (v int, ok bool)
}

type randChoices struct{ r *rand.Rand }

func (c randChoices) pick(n int) (int, bool) { return c.r.IntN(n), true }

type byteChoices struct {
	b []byte
	i int
}

func (c *byteChoices) pick(n int) (int, bool) {
	if c.i >= len(c.b) {
		return 0, false
	}
	v := int(c.b[c.i]) % n
	c.i++
	return v, true
}

// driver applies the same random operations to a Matcher and to the
// reference model and fails on the first outcome they disagree on.
type driver struct {
	t      testing.TB
	c      choices
	m      *Matcher[int, int]
	r      *ref
	ctxs   []any
	nextOp int
	nextID int
	ops    int
	dstM   []Placed[int]
	dstR   []Placed[int]
	log    []logEntry // recent operations, formatted only on failure
	counts [16]int
}

func newDriver(t testing.TB, c choices) *driver {
	d := &driver{t: t, c: c}
	for i := 0; i < 6; i++ {
		p := new(int)
		*p = i + 1 // distinct values, so reflect.DeepEqual tells the pointers apart
		d.ctxs = append(d.ctxs, p)
	}
	d.ctxs = append(d.ctxs, nil, 7, "ctx", []int{1}) // nil, small values, an uncomparable one
	return d
}

func (d *driver) p(n int) int {
	v, ok := d.c.pick(n)
	if !ok {
		panic(errDone)
	}
	return v
}

type doneT struct{}

var errDone = doneT{}

func (d *driver) reset() {
	directed := d.p(2) == 1
	opts := []Option{DirectedRecv(directed)}
	switch d.p(4) {
	case 0:
		opts = append(opts, Buckets(1))
	case 1:
		opts = append(opts, Buckets(4))
	case 2:
		opts = append(opts, Buckets(3))
	}
	m, err := New[int, int](opts...)
	if err != nil {
		d.t.Fatal(err)
	}
	d.m, d.r = m, newRef(directed)
	min := 1 + d.p(24)
	if err := d.m.SetMinMultiRecv(min); err != nil {
		d.t.Fatal(err)
	}
	_ = d.r.SetMinMultiRecv(min)
	d.logf("new matcher directed=%v min=%d", directed, min)
}

type logEntry struct {
	op     int
	format string
	args   []any
}

func (d *driver) logf(format string, a ...any) {
	if len(d.log) >= 40 {
		d.log = d.log[1:]
	}
	d.log = append(d.log, logEntry{d.ops, format, a})
}

func (d *driver) check(what string, got, want any) {
	if !reflect.DeepEqual(got, want) {
		d.t.Fatalf("op %d %s: matcher %+v, reference %+v\nrecent ops:\n%s", d.ops, what, got, want, d.recent())
	}
}

func (d *driver) recent() string {
	s := ""
	for _, l := range d.log {
		s += fmt.Sprintf("  %d: ", l.op) + fmt.Sprintf(l.format, l.args...) + "\n"
	}
	return s
}

func (d *driver) tag() uint64 {
	t := uint64(d.p(8))
	if d.p(4) == 0 {
		t |= 1 << 63
	}
	return t
}

func (d *driver) ignore() uint64 {
	switch d.p(12) {
	case 6:
		return 1
	case 7:
		return 3
	case 8:
		return 1 << 63
	case 9:
		return ^uint64(0)
	case 10:
		return 6
	}
	return 0
}

func (d *driver) want() Want {
	w := Want{Tag: d.tag(), Ignore: d.ignore(), Src: uint64(d.p(5)), Group: uint32(d.p(4) / 3)}
	if w.Src == 4 {
		w.Src = AnySource
	}
	return w
}

func (d *driver) msg() Msg[int] {
	d.nextID++
	m := Msg[int]{Tag: d.tag(), Src: uint64(d.p(4)), Group: uint32(d.p(4) / 3), Len: d.p(40), Data: d.nextID}
	if d.p(16) == 0 {
		m.Src = AnySource
	}
	return m
}

func (d *driver) ctx() any { return d.ctxs[d.p(len(d.ctxs))] }

func (d *driver) recv() Recv[int] {
	d.nextOp++
	return Recv[int]{Want: d.want(), Ctx: d.ctx(), Op: d.nextOp}
}

// step performs one random operation on both and compares.
func (d *driver) step() {
	d.ops++
	op := d.p(100)
	switch {
	case op < 24: // post
		rv := d.recv()
		gm, gok := d.m.PostRecv(rv)
		rm, rok := d.r.PostRecv(rv)
		d.logf("PostRecv %+v -> %v %+v", rv, gok, gm)
		d.check("PostRecv", []any{gm, gok}, []any{rm, rok})
		d.counts[0]++
	case op < 52: // arrive
		msg := d.msg()
		gm, gok := d.m.Arrive(msg)
		rm, rok := d.r.Arrive(msg)
		d.logf("Arrive %+v -> %v %+v", msg, gok, gm)
		d.check("Arrive", []any{gm, gok}, []any{rm, rok})
		d.counts[1]++
	case op < 55: // arrive, split in two calls
		msg := d.msg()
		gm, gok := d.m.MatchPosted(msg)
		rm, rok := d.r.MatchPosted(msg)
		d.logf("MatchPosted %+v -> %v %+v", msg, gok, gm)
		d.check("MatchPosted", []any{gm, gok}, []any{rm, rok})
		if !gok {
			d.m.Enqueue(msg)
			d.r.Enqueue(msg)
		}
		d.counts[2]++
	case op < 63: // multi-receive
		rv := d.recv()
		size := d.p(120) - 4
		var gerr, rerr error
		var gposted, rposted bool
		d.dstM, gposted, gerr = d.m.PostMultiRecv(rv, size, d.dstM[:0])
		d.dstR, rposted, rerr = d.r.PostMultiRecv(rv, size, d.dstR[:0])
		d.logf("PostMultiRecv %+v size %d -> %v %v %+v", rv, size, gposted, gerr, d.dstM)
		d.check("PostMultiRecv", []any{d.dstM, gposted, gerr}, []any{d.dstR, rposted, rerr})
		d.counts[3]++
	case op < 70: // peek
		w := d.want()
		gm, gok := d.m.Peek(w)
		rm, rok := d.r.Peek(w)
		d.logf("Peek %+v -> %v %+v", w, gok, gm)
		d.check("Peek", []any{gm, gok}, []any{rm, rok})
		d.counts[4]++
	case op < 76: // peek + claim
		w, c := d.want(), d.ctx()
		gm, gok, gerr := d.m.PeekClaim(w, c)
		rm, rok, rerr := d.r.PeekClaim(w, c)
		d.logf("PeekClaim %+v %v -> %v %v %+v", w, c, gok, gerr, gm)
		d.check("PeekClaim", []any{gm, gok, gerr}, []any{rm, rok, rerr})
		d.counts[5]++
	case op < 80: // peek + discard
		w := d.want()
		gm, gok := d.m.PeekDiscard(w)
		rm, rok := d.r.PeekDiscard(w)
		d.logf("PeekDiscard %+v -> %v %+v", w, gok, gm)
		d.check("PeekDiscard", []any{gm, gok}, []any{rm, rok})
		d.counts[6]++
	case op < 86: // claim
		c := d.ctx()
		gm, gok := d.m.Claim(c)
		rm, rok := d.r.Claim(c)
		d.logf("Claim %v -> %v %+v", c, gok, gm)
		d.check("Claim", []any{gm, gok}, []any{rm, rok})
		d.counts[7]++
	case op < 94: // cancel
		c := d.ctx()
		gm, gok := d.m.Cancel(c)
		rm, rok := d.r.Cancel(c)
		d.logf("Cancel %v -> %v %+v", c, gok, gm)
		d.check("Cancel", []any{gm, gok}, []any{rm, rok})
		d.counts[8]++
	case op < 96: // minimum free space of multi-receive buffers
		n := d.p(26) - 1
		gerr, rerr := d.m.SetMinMultiRecv(n), d.r.SetMinMultiRecv(n)
		d.logf("SetMinMultiRecv %d -> %v", n, gerr)
		d.check("SetMinMultiRecv", gerr, rerr)
		d.counts[9]++
	case op < 98: // a burst of exact posts or arrivals with one tag: long lists
		n, tag, src := 1+d.p(60), d.tag(), uint64(d.p(4))
		if d.p(2) == 0 {
			for i := 0; i < n; i++ {
				d.nextOp++
				rv := Recv[int]{Want: Want{Tag: tag, Src: src}, Ctx: d.ctxs[i%3], Op: d.nextOp}
				gm, gok := d.m.PostRecv(rv)
				rm, rok := d.r.PostRecv(rv)
				d.check("burst PostRecv", []any{gm, gok}, []any{rm, rok})
			}
			d.logf("burst %d PostRecv tag %#x src %d", n, tag, src)
		} else {
			for i := 0; i < n; i++ {
				d.nextID++
				msg := Msg[int]{Tag: tag, Src: src, Len: i, Data: d.nextID}
				gm, gok := d.m.Arrive(msg)
				rm, rok := d.r.Arrive(msg)
				d.check("burst Arrive", []any{gm, gok}, []any{rm, rok})
			}
			d.logf("burst %d Arrive tag %#x src %d", n, tag, src)
		}
		d.counts[10]++
	case op < 99:
		if d.p(20) == 0 {
			gr, gm := d.m.Drain(nil, nil)
			rr, rm := d.r.Drain(nil, nil)
			d.logf("Drain -> %d recvs %d msgs", len(gr), len(gm))
			d.check("Drain", []any{gr, gm}, []any{rr, rm})
			d.counts[11]++
		}
	default:
		if d.p(50) == 0 {
			d.reset()
			d.counts[12]++
		}
	}
	d.check("counts",
		[3]int{d.m.Posted(), d.m.Unexpected(), d.m.Claimed()},
		[3]int{d.r.Posted(), d.r.Unexpected(), d.r.Claimed()})
}

// run performs operations until n are done or the choices run out.
func (d *driver) run(n int) {
	defer func() {
		if r := recover(); r != nil && r != any(errDone) {
			panic(r)
		}
	}()
	d.reset()
	for i := 0; i < n; i++ {
		d.step()
	}
}

// TestDifferential runs diffOps random operations (1,000,000 in a normal
// build, fewer under -race, see race_test.go) on the matcher and on the
// reference model and requires the same outcome from every one.
func TestDifferential(t *testing.T) {
	n := diffOps
	if testing.Short() {
		n /= 10
	}
	const workers = 4 // independent streams, each from its own seed
	for w := 0; w < workers; w++ {
		d := newDriver(t, randChoices{rand.New(rand.NewPCG(uint64(w)+1, 0x9e3779b97f4a7c15))})
		d.run(n / workers)
		if d.ops != n/workers {
			t.Fatalf("stream %d ran %d ops, want %d", w, d.ops, n/workers)
		}
		t.Logf("stream %d: %d ops; post %d arrive %d split %d multi %d peek %d claim %d discard %d take %d cancel %d setmin %d bursts %d drains %d resets %d",
			w, d.ops, d.counts[0], d.counts[1], d.counts[2], d.counts[3], d.counts[4], d.counts[5], d.counts[6], d.counts[7], d.counts[8], d.counts[9], d.counts[10], d.counts[11], d.counts[12])
	}
}

// FuzzDifferential drives the operation sequence from the fuzzer's bytes
// and compares the matcher with the reference model on every step.
func FuzzDifferential(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 0, 3, 10, 1, 2, 3, 4, 5, 6, 7, 30, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte("post-then-arrive-then-peek-claim-cancel-and-multi-recv"))
	seq := make([]byte, 512)
	for i := range seq {
		seq[i] = byte(i*37 + i>>3)
	}
	f.Add(seq)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 8192 { // a few thousand operations; the reference is O(n) per op
			data = data[:8192]
		}
		d := newDriver(t, &byteChoices{b: data})
		d.run(1 << 30)
	})
}
