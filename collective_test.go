package fi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gofi-dev/fi/coll/colltest"
	"github.com/gofi-dev/fi/dtype"
)

const collCaps = Msg | Tagged | Collective

// collRank is one member of an in-process collective group: its own
// fabric, domain, AV, CQs and endpoint over a real transport.
type collRank struct {
	*node
	rank int
	set  *AVSet
	mc   *MC
}

// openCollRanks opens n ranks on prov; every AV holds every rank's
// address at fi_addr = rank. It does not join.
func openCollRanks(t testing.TB, prov string, n int) []*collRank {
	t.Helper()
	rs := make([]*collRank, n)
	var names []string
	for i := range rs {
		rs[i] = &collRank{node: openNode(t, prov, nodeCfg{caps: collCaps}), rank: i}
		names = append(names, rs[i].names())
	}
	for _, r := range rs {
		for i, nm := range names {
			a := r.insertNames(nm, false)
			if a[0] != Addr(i) {
				t.Fatalf("rank address %d inserted at %d", i, a[0])
			}
		}
	}
	return rs
}

// waitColl reads the transmit CQ until one collective completion arrives
// and returns its error (nil for success). It never calls t.Fatal, so it
// may run on any goroutine.
func (r *collRank) waitColl(timeout time.Duration) (CQEntry, error) {
	deadline := time.Now().Add(timeout)
	var buf [1]CQEntry
	for {
		k, err := r.txcq.Read(buf[:])
		switch {
		case k == 1:
			if buf[0].Flags&Collective == 0 {
				return buf[0], fmt.Errorf("completion without FI_COLLECTIVE: %v", buf[0].Flags)
			}
			return buf[0], nil
		case errors.Is(err, ErrAvail):
			e, err := r.txcq.ReadErr()
			if err != nil {
				return CQEntry{}, err
			}
			if e.Flags&Collective == 0 {
				return e.CQEntry, fmt.Errorf("error completion without FI_COLLECTIVE: %v", e.Flags)
			}
			return e.CQEntry, e.Err
		case !errors.Is(err, ErrAgain):
			return CQEntry{}, err
		}
		r.rxcq.Read(buf[:0]) // progress the receive side too
		runtime.Gosched()    // ranks share the test's few cores
		if time.Now().After(deadline) {
			return CQEntry{}, fmt.Errorf("rank %d: no collective completion within %v", r.rank, timeout)
		}
	}
}

// readTx reads one completion from each rank's transmit CQ in rank
// order, from this goroutine; with drive it polls every rank's CQs between
// tries, for ranks that progress only when read. It allocates nothing.
func readTx(t testing.TB, rs []*collRank, es []CQEntry, drive bool) {
	for _, r := range rs {
		for {
			n, err := r.txcq.Read(es[:1])
			if n == 1 {
				break
			}
			if !errors.Is(err, ErrAgain) {
				t.Fatal(err)
			}
			if drive {
				for _, o := range rs {
					o.rxcq.Read(es[:0])
					o.txcq.Read(es[:0])
				}
			}
		}
	}
}

// joinAll joins every rank to the universe set, each from its own
// goroutine, and checks the join completions.
func joinAll(t testing.TB, rs []*collRank) {
	t.Helper()
	err := parallel(rs, func(r *collRank) error {
		set, err := r.av.NewSet(&AVSetAttr{StartAddr: AddrNotAvail, EndAddr: AddrNotAvail, Flags: Universe})
		if err != nil {
			return err
		}
		r.set = set
		r.mc, err = r.ep.JoinCollective(set.Addr(), set, 0, "join")
		if err != nil {
			return err
		}
		e, err := r.waitColl(waitLimit)
		if err != nil {
			return fmt.Errorf("join: %w", err)
		}
		if e.Context != "join" {
			return fmt.Errorf("join completion context %v", e.Context)
		}
		if r.mc.Rank() != r.rank || r.mc.Size() != len(rs) {
			return fmt.Errorf("rank %d/%d, want %d/%d", r.mc.Rank(), r.mc.Size(), r.rank, len(rs))
		}
		return checkLocal(r)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// parallel runs f on every rank at once and returns the first error.
func parallel(rs []*collRank, f func(r *collRank) error) error {
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(r)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// post starts case c on r with the buffers of rank r.rank.
func (r *collRank) post(c colltest.Case, buf, res []byte, ctx any) error {
	mc := r.mc.Addr()
	root := Addr(c.Root)
	dt, op := Datatype(c.Type), AtomicOp(c.Op)
	switch c.Coll {
	case dtype.Barrier:
		return r.ep.Barrier(mc, ctx)
	case dtype.Broadcast:
		return r.ep.Broadcast(buf, c.Count, nil, mc, root, dt, 0, ctx)
	case dtype.Allreduce:
		return r.ep.Allreduce(buf, c.Count, nil, res, nil, mc, dt, op, 0, ctx)
	case dtype.Reduce:
		return r.ep.Reduce(buf, c.Count, nil, res, nil, mc, root, dt, op, 0, ctx)
	case dtype.ReduceScatter:
		return r.ep.ReduceScatter(buf, c.Count, nil, res, nil, mc, dt, op, 0, ctx)
	case dtype.Allgather:
		return r.ep.Allgather(buf, c.Count, nil, res, nil, mc, dt, 0, ctx)
	case dtype.Alltoall:
		return r.ep.Alltoall(buf, c.Count, nil, res, nil, mc, dt, 0, ctx)
	case dtype.Scatter:
		return r.ep.Scatter(buf, c.Count, nil, res, nil, mc, root, dt, 0, ctx)
	case dtype.Gather:
		return r.ep.Gather(buf, c.Count, nil, res, nil, mc, root, dt, 0, ctx)
	}
	return fmt.Errorf("unknown collective %v", c.Coll)
}

// runCase runs c on rank r and checks r's output against the reference.
func (r *collRank) runCase(c colltest.Case) error {
	buf := c.Input(r.rank)
	if c.Coll == dtype.Broadcast && r.rank != c.Root {
		buf = make([]byte, len(buf))
	}
	res := make([]byte, c.ResultLen(r.rank))
	if err := r.post(c, buf, res, c); err != nil {
		return fmt.Errorf("%v: rank %d post: %w", c, r.rank, err)
	}
	e, err := r.waitColl(waitLimit)
	if err != nil {
		return fmt.Errorf("%v: rank %d: %w", c, r.rank, err)
	}
	if e.Context != c {
		return fmt.Errorf("%v: rank %d: completion context %v", c, r.rank, e.Context)
	}
	want := c.Want(r.rank)
	if want == nil {
		return nil
	}
	got := res
	if c.Coll == dtype.Broadcast {
		got = buf
	}
	if i := c.Diff(want, got); i >= 0 {
		return fmt.Errorf("%v: rank %d differs from the reference at element %d", c, r.rank, i)
	}
	return nil
}

// collCases returns a deterministic mix: every collective, reductions over
// a spread of (datatype, op) pairs, counts 0, 1, odd and one large enough
// for the ring and for rendezvous transfers.
func collCases(n int, seed uint64, per int) []colltest.Case {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	counts := []int{0, 1, 3, 17, 255, 4099}
	pairs := colltest.Pairs()
	var out []colltest.Case
	for _, cl := range []dtype.CollOp{dtype.Barrier, dtype.Broadcast, dtype.Allreduce, dtype.Reduce,
		dtype.ReduceScatter, dtype.Allgather, dtype.Alltoall, dtype.Scatter, dtype.Gather} {
		for range per {
			c := colltest.Case{Coll: cl, Count: counts[rng.IntN(len(counts))], Root: rng.IntN(n), Ranks: n, Seed: rng.Uint64(),
				Type: dtype.Uint16, Op: dtype.Noop}
			switch cl {
			case dtype.Allreduce, dtype.Reduce, dtype.ReduceScatter:
				p := pairs[rng.IntN(len(pairs))]
				c.Type, c.Op = dtype.Type(p[0]), dtype.Op(p[1])
			case dtype.Barrier:
				c.Type, c.Count = dtype.Void, 0
			default:
				c.Type = []dtype.Type{dtype.Int8, dtype.Float, dtype.Double, dtype.LongDouble}[rng.IntN(4)]
			}
			out = append(out, c)
		}
	}
	// One allreduce big enough for the ring algorithm and rendezvous.
	out = append(out, colltest.Case{Coll: dtype.Allreduce, Type: dtype.Float, Op: dtype.Sum, Count: 300 << 10 / 4 * 2,
		Ranks: n, Seed: seed})
	return out
}

// TestCollectives_InProcess runs every collective on real shm and tcp
// endpoints (one goroutine per rank, one domain each), on group sizes
// that are and are not powers of two.
func TestCollectives_InProcess(t *testing.T) {
	for _, prov := range collProvs() {
		for _, n := range []int{1, 3, 4} {
			t.Run(fmt.Sprintf("%s/ranks%d", prov, n), func(t *testing.T) {
				shmTestDir(t)
				rs := openCollRanks(t, prov, n)
				joinAll(t, rs)
				cases := collCases(n, 42, 2)
				err := parallel(rs, func(r *collRank) error {
					for _, c := range cases {
						if err := r.runCase(c); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func TestGetInfo_AdvertisesCollective(t *testing.T) {
	for _, prov := range collProvs() {
		h := AllocInfo()
		h.Caps = Collective
		h.FabricAttr.ProvName = prov
		infos := mustGetInfo(t, "", "", 0, h)
		for _, i := range infos {
			if i.Caps&Collective == 0 || i.TxAttr.Caps&Collective == 0 {
				t.Errorf("%s: caps %v tx %v lack FI_COLLECTIVE", prov, i.Caps, i.TxAttr.Caps)
			}
		}
	}
}

// TestQueryCollective checks every (collective, datatype, op) answer
// against what the collectives run: supported pairs say so with the
// element size, unsupported ones give ErrOpNotSupp.
func TestQueryCollective(t *testing.T) {
	shmTestDir(t)
	for _, prov := range collProvs() {
		t.Run(prov, func(t *testing.T) { queryCollective(t, openNode(t, prov, nodeCfg{caps: collCaps})) })
	}
}

func queryCollective(t *testing.T, n *node) {
	for c := CollBarrier; c <= CollGather; c++ {
		for dt := Int8; dt <= Float8E5M2; dt++ {
			for op := OpMin; op <= OpBXor; op++ {
				attr := CollectiveAttr{Op: op, Datatype: dt}
				err := n.dom.QueryCollective(c, &attr, 0)
				var want bool
				switch c {
				case CollBarrier:
					want = true
				case CollAllreduce, CollReduce, CollReduceScatter:
					want = colltest.Reducible(dtype.Type(dt), dtype.Op(op))
				default:
					want = dt.Size() > 0
				}
				if want != (err == nil) {
					t.Fatalf("%s %s %s: err %v, want supported=%v", c, dt, op, err, want)
				}
				if err != nil && !errors.Is(err, ErrOpNotSupp) {
					t.Fatalf("%s %s %s: err %v, want ErrOpNotSupp", c, dt, op, err)
				}
				if err == nil && c != CollBarrier && (attr.DatatypeAttr.Size != dt.Size() || attr.DatatypeAttr.Count <= 0 || attr.MaxMembers < 2) {
					t.Fatalf("%s %s %s: attr %+v", c, dt, op, attr)
				}
			}
		}
	}
	attr := CollectiveAttr{Mode: 1}
	if err := n.dom.QueryCollective(CollBarrier, &attr, 0); !errors.Is(err, ErrInval) {
		t.Errorf("mode 1: %v, want ErrInval", err)
	}
	if err := n.dom.QueryCollective(CollBarrier, nil, 0); !errors.Is(err, ErrInval) {
		t.Errorf("nil attr: %v, want ErrInval", err)
	}
	if err := n.dom.QueryCollective(CollectiveOp(99), &CollectiveAttr{}, 0); !errors.Is(err, ErrInval) {
		t.Errorf("unknown collective: %v, want ErrInval", err)
	}
}

func TestAVSet_Operations(t *testing.T) {
	n := openNode(t, "tcp", nodeCfg{caps: collCaps})
	var addrs [][]byte
	for i := range 10 {
		addrs = append(addrs, []byte{2, 0, byte(0x10 + i), 0x10, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	}
	if _, err := n.av.Insert(addrs, 0); err != nil {
		t.Fatal(err)
	}
	mk := func(a *AVSetAttr) *AVSet {
		t.Helper()
		s, err := n.av.NewSet(a)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	eq := func(s *AVSet, want ...Addr) {
		t.Helper()
		got := s.Addrs()
		if fmt.Sprint(got) != fmt.Sprint(want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("set %v, want %v", got, want)
		}
	}
	all := mk(&AVSetAttr{StartAddr: AddrNotAvail, EndAddr: AddrNotAvail, Flags: Universe})
	eq(all, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	even := mk(&AVSetAttr{StartAddr: 0, EndAddr: 9, Stride: 2})
	eq(even, 0, 2, 4, 6, 8)
	mid := mk(&AVSetAttr{StartAddr: 3, EndAddr: 6, Stride: 1})
	eq(mid, 3, 4, 5, 6)
	past := mk(&AVSetAttr{StartAddr: 8, EndAddr: 1000, Stride: 1})
	eq(past, 8, 9)
	empty := mk(&AVSetAttr{StartAddr: AddrNotAvail, EndAddr: AddrNotAvail})
	eq(empty)
	eq(mk(nil))

	if err := empty.Insert(7); err != nil {
		t.Fatal(err)
	}
	if err := empty.Insert(1); err != nil {
		t.Fatal(err)
	}
	eq(empty, 7, 1)
	if err := empty.Insert(7); !errors.Is(err, ErrInval) {
		t.Errorf("duplicate insert: %v, want ErrInval", err)
	}
	if err := empty.Insert(99); !errors.Is(err, ErrNoEnt) {
		t.Errorf("insert of an address not in the AV: %v, want ErrNoEnt", err)
	}
	if err := empty.Remove(7); err != nil {
		t.Fatal(err)
	}
	eq(empty, 1)
	if err := empty.Remove(7); !errors.Is(err, ErrInval) {
		t.Errorf("remove of a non-member: %v, want ErrInval", err)
	}

	u := mk(&AVSetAttr{StartAddr: 3, EndAddr: 6, Stride: 1})
	if err := u.Union(even); err != nil {
		t.Fatal(err)
	}
	eq(u, 3, 4, 5, 6, 0, 2, 8) // new members at the end, in src's order
	if err := u.Intersect(even); err != nil {
		t.Fatal(err)
	}
	eq(u, 4, 6, 0, 2, 8) // order of the destination kept
	if err := u.Diff(mid); err != nil {
		t.Fatal(err)
	}
	eq(u, 0, 2, 8)
	if err := u.Diff(u); err != nil {
		t.Fatal(err)
	}
	eq(u)
	if all.Addr() == even.Addr() {
		t.Error("two sets share a collective address")
	}

	for _, bad := range []AVSetAttr{
		{StartAddr: 0, EndAddr: 5, Stride: 0},
		{StartAddr: 5, EndAddr: 1, Stride: 1},
		{StartAddr: 0, EndAddr: AddrNotAvail, Stride: 1},
	} {
		if _, err := n.av.NewSet(&bad); !errors.Is(err, ErrInval) {
			t.Errorf("NewSet(%+v): %v, want ErrInval", bad, err)
		}
	}
	if _, err := n.av.NewSet(&AVSetAttr{StartAddr: AddrNotAvail, EndAddr: AddrNotAvail, Flags: Tagged}); !errors.Is(err, ErrBadFlags) {
		t.Errorf("bad flags: %v", err)
	}
	if _, err := n.av.NewSet(&AVSetAttr{StartAddr: AddrNotAvail, EndAddr: AddrNotAvail, CommKey: []byte{1}}); !errors.Is(err, ErrOpNotSupp) {
		t.Errorf("comm key: %v", err)
	}
	other := openNode(t, "tcp", nodeCfg{caps: collCaps})
	os, _ := other.av.NewSet(nil)
	if err := u.Union(os); !errors.Is(err, ErrInval) {
		t.Errorf("union across AVs: %v, want ErrInval", err)
	}
}

// TestJoinCollective_Errors: joins that cannot work are refused at once.
func TestJoinCollective_Errors(t *testing.T) {
	shmTestDir(t)
	rs := openCollRanks(t, "shm", 2)
	r := rs[0]
	notMe, _ := r.av.NewSet(nil)
	notMe.Insert(1)
	if _, err := r.ep.JoinCollective(notMe.Addr(), notMe, 0, nil); !errors.Is(err, ErrInval) {
		t.Errorf("join of a set without this endpoint: %v, want ErrInval", err)
	}
	set, _ := r.av.NewSet(&AVSetAttr{StartAddr: AddrNotAvail, EndAddr: AddrNotAvail, Flags: Universe})
	if _, err := r.ep.JoinCollective(set.Addr(), nil, 0, nil); !errors.Is(err, ErrInval) {
		t.Errorf("nil set: %v", err)
	}
	if _, err := r.ep.JoinCollective(12345, set, 0, nil); !errors.Is(err, ErrInval) {
		t.Errorf("bad collAddr: %v", err)
	}
	if _, err := r.ep.JoinCollective(set.Addr(), set, Tagged, nil); !errors.Is(err, ErrBadFlags) {
		t.Errorf("bad flags: %v", err)
	}
	plain := openNode(t, "shm", nodeCfg{caps: Msg})
	ps, _ := plain.av.NewSet(nil)
	if _, err := plain.ep.JoinCollective(ps.Addr(), ps, 0, nil); !errors.Is(err, ErrOpNotSupp) {
		t.Errorf("endpoint without FI_COLLECTIVE: %v, want ErrOpNotSupp", err)
	}
	if err := r.ep.Barrier(12345, nil); !errors.Is(err, ErrInval) {
		t.Errorf("barrier on a bad address: %v, want ErrInval", err)
	}
}

// TestCollective_ArgumentErrors: bad arguments are refused at once with
// a clear Errno, and the group keeps working.
func TestCollective_ArgumentErrors(t *testing.T) {
	shmTestDir(t)
	rs := openCollRanks(t, "shm", 2)
	joinAll(t, rs)
	r := rs[0]
	mc := r.mc.Addr()
	b8 := make([]byte, 8)
	cases := []struct {
		name string
		err  error
		want Errno
	}{
		{"short result", r.ep.Allreduce(b8, 2, nil, b8[:4], nil, mc, Int32, OpSum, 0, nil), ErrInval},
		{"short buf", r.ep.Allreduce(b8[:4], 2, nil, b8, nil, mc, Int32, OpSum, 0, nil), ErrInval},
		{"allgather result per rank", r.ep.Allgather(b8, 2, nil, b8, nil, mc, Int32, 0, nil), ErrInval},
		{"negative count", r.ep.Broadcast(b8, -1, nil, mc, 0, Int8, 0, nil), ErrInval},
		{"unsupported pair", r.ep.Allreduce(b8, 1, nil, b8, nil, mc, Double, OpBXor, 0, nil), ErrOpNotSupp},
		{"long double reduce", r.ep.Allreduce(make([]byte, 16), 1, nil, make([]byte, 16), nil, mc, LongDouble, OpSum, 0, nil), ErrOpNotSupp},
		{"void broadcast", r.ep.Broadcast(b8, 1, nil, mc, 0, Void, 0, nil), ErrOpNotSupp},
		{"root not a member", r.ep.Broadcast(b8, 1, nil, mc, 7, Int8, 0, nil), ErrInval},
		{"bad flags", r.ep.Broadcast(b8, 1, nil, mc, 0, Int8, Tagged, nil), ErrBadFlags},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	// The group still works.
	err := parallel(rs, func(r *collRank) error {
		return r.runCase(colltest.Case{Coll: dtype.Allreduce, Type: dtype.Int32, Op: dtype.Sum, Count: 5, Ranks: 2, Seed: 1})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rs[1].mc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rs[1].ep.Barrier(rs[1].mc.Addr(), nil); !errors.Is(err, ErrInval) {
		t.Errorf("barrier after close: %v, want ErrInval", err)
	}
}

// TestCollectives_Sread: ranks that wait for their collectives in Sread
// (asleep on the transport between progress passes) are woken by the
// others' arrival at shared-memory phases: many small collectives in a
// row complete, each rank checking its allreduce results.
func TestCollectives_Sread(t *testing.T) {
	shmTestDir(t)
	const n, rounds = 3, 200
	rs := openCollRanks(t, "shm", n)
	joinAll(t, rs)
	err := parallel(rs, func(r *collRank) error {
		buf, res := make([]byte, 8), make([]byte, 8)
		var es [1]CQEntry
		for i := 0; i < rounds; i++ {
			binary.LittleEndian.PutUint64(buf, uint64(r.rank+i))
			if err := r.ep.Allreduce(buf, 1, nil, res, nil, r.mc.Addr(), Uint64, OpSum, 0, nil); err != nil {
				return err
			}
			if err := r.ep.Barrier(r.mc.Addr(), nil); err != nil {
				return err
			}
			for got := 0; got < 2; {
				k, err := r.txcq.Sread(es[:], 20*time.Second)
				if err != nil {
					return fmt.Errorf("rank %d round %d: %w", r.rank, i, err)
				}
				got += k
			}
			if v, want := binary.LittleEndian.Uint64(res), uint64(n*i+n*(n-1)/2); v != want {
				return fmt.Errorf("rank %d round %d: sum %d, want %d", r.rank, i, v, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// collProvs are the providers the collective tests run on: shm, tcp and,
// when the build offers it, the linked shm+tcp.
func collProvs() []string {
	hints := AllocInfo()
	hints.EpAttr.Type = EpRDM
	hints.Caps = collCaps
	hints.FabricAttr.ProvName = "shm+tcp"
	if _, err := GetInfo(Version(2, 0), "", "", 0, hints); err == nil {
		return []string{"shm", "tcp", "shm+tcp"}
	}
	return []string{"shm", "tcp"}
}
