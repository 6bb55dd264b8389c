package launch

// Collectives in jobs under real launchers: every rank joins the group of
// all ranks (launch.Connect's addresses, in rank order) and runs the same
// deterministic mix of collectives (every one, reductions over a spread
// of (datatype, op) pairs, counts 0, 1, odd and large), checking its own
// output against the serial reference of coll/colltest. On shm the group
// runs over the node's shared-memory region, on tcp point to point, on
// shm+tcp across two hosts hierarchically.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofi-dev/fi"
	"github.com/gofi-dev/fi/coll/colltest"
	"github.com/gofi-dev/fi/dtype"
	"github.com/gofi-dev/fi/internal/hosts"
	"github.com/gofi-dev/fi/internal/jobtest"
)

func init() {
	roles["coll"] = collRole
}

// collJobCases returns the mix every rank runs (the same on every rank).
func collJobCases(n int, seed uint64) []colltest.Case {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	counts := []int{0, 1, 3, 17, 255, 4099, 70001}
	pairs := colltest.Pairs()
	var out []colltest.Case
	for _, cl := range []dtype.CollOp{dtype.Barrier, dtype.Broadcast, dtype.Allreduce, dtype.Reduce,
		dtype.ReduceScatter, dtype.Allgather, dtype.Alltoall, dtype.Scatter, dtype.Gather} {
		per := 3
		if cl == dtype.Allreduce {
			per = 12
		}
		for range per {
			c := colltest.Case{Coll: cl, Count: counts[rng.IntN(len(counts))], Root: rng.IntN(n), Ranks: n,
				Seed: rng.Uint64(), Type: dtype.Uint16, Op: dtype.Noop}
			switch cl {
			case dtype.Allreduce, dtype.Reduce, dtype.ReduceScatter:
				p := pairs[rng.IntN(len(pairs))]
				c.Type, c.Op = dtype.Type(p[0]), dtype.Op(p[1])
			case dtype.Barrier:
				c.Type, c.Count = dtype.Void, 0
			default:
				c.Type = []dtype.Type{dtype.Int8, dtype.Float, dtype.Double, dtype.LongDouble}[rng.IntN(4)]
			}
			if c.Coll == dtype.Alltoall || c.Coll == dtype.Allgather || c.Coll == dtype.Scatter ||
				c.Coll == dtype.Gather || c.Coll == dtype.ReduceScatter {
				c.Count = min(c.Count, 4099) // per rank block: keep the job small
			}
			out = append(out, c)
		}
	}
	// Large enough for the ring between nodes and several shared-memory
	// chunks.
	out = append(out, colltest.Case{Coll: dtype.Allreduce, Type: dtype.Float, Op: dtype.Sum, Count: 600 << 10,
		Ranks: n, Seed: seed})
	return out
}

// postColl starts case c on the group mc with this rank's buffers.
func postColl(ep *fi.Endpoint, mc fi.Addr, c colltest.Case, buf, res []byte, ctx any) error {
	root := fi.Addr(c.Root)
	dt, op := fi.Datatype(c.Type), fi.AtomicOp(c.Op)
	switch c.Coll {
	case dtype.Barrier:
		return ep.Barrier(mc, ctx)
	case dtype.Broadcast:
		return ep.Broadcast(buf, c.Count, nil, mc, root, dt, 0, ctx)
	case dtype.Allreduce:
		return ep.Allreduce(buf, c.Count, nil, res, nil, mc, dt, op, 0, ctx)
	case dtype.Reduce:
		return ep.Reduce(buf, c.Count, nil, res, nil, mc, root, dt, op, 0, ctx)
	case dtype.ReduceScatter:
		return ep.ReduceScatter(buf, c.Count, nil, res, nil, mc, dt, op, 0, ctx)
	case dtype.Allgather:
		return ep.Allgather(buf, c.Count, nil, res, nil, mc, dt, 0, ctx)
	case dtype.Alltoall:
		return ep.Alltoall(buf, c.Count, nil, res, nil, mc, dt, 0, ctx)
	case dtype.Scatter:
		return ep.Scatter(buf, c.Count, nil, res, nil, mc, root, dt, 0, ctx)
	case dtype.Gather:
		return ep.Gather(buf, c.Count, nil, res, nil, mc, root, dt, 0, ctx)
	}
	return fmt.Errorf("unknown collective %v", c.Coll)
}

// waitCollective waits in Sread for one completion carrying the
// Collective flag and returns its context.
func (e *testEP) waitCollective(deadline time.Time) (any, error) {
	var ents [1]fi.CQEntry
	for {
		if time.Now().After(deadline) {
			return nil, errors.New("no collective completion by the deadline")
		}
		k, err := e.cq.Sread(ents[:], 100*time.Millisecond)
		switch {
		case errors.Is(err, fi.ErrAvail):
			ee, _ := e.cq.ReadErr()
			return nil, fmt.Errorf("error completion: %v", ee.Err)
		case errors.Is(err, fi.ErrAgain):
			continue
		case err != nil:
			return nil, err
		}
		if k == 1 {
			if ents[0].Flags&fi.Collective == 0 {
				return nil, fmt.Errorf("completion without FI_COLLECTIVE: %v", ents[0].Flags)
			}
			return ents[0].Context, nil
		}
	}
}

// collRole: arg is the provider.
func collRole(t *testing.T, prov string) string {
	return runCollRole(t, prov, func(n int) []colltest.Case { return collJobCases(n, 17) })
}

// runCollRole joins every rank to one group over prov and runs the cases
// mix(n) gives for the job's size, each rank checking its own output
// against the serial reference.
func runCollRole(t *testing.T, prov string, mix func(n int) []colltest.Case) string {
	deadline := time.Now().Add(100 * time.Second)
	job, err := Init(Timeout(60 * time.Second))
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	e := openTestEPCaps(t, prov, fi.Msg|fi.Tagged|fi.Collective)
	addrs, err := Connect(job, e.ep, e.av)
	if err != nil {
		t.Fatalf("rank %d: Connect: %v", job.Rank(), err)
	}
	me, n := job.Rank(), job.Size()
	set, err := e.av.NewSet(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if err := set.Insert(a); err != nil {
			t.Fatalf("set insert: %v", err)
		}
	}
	mc, err := e.ep.JoinCollective(set.Addr(), set, 0, "join")
	if err != nil {
		t.Fatalf("rank %d: join: %v", me, err)
	}
	if ctx, err := e.waitCollective(deadline); err != nil || ctx != "join" {
		t.Fatalf("rank %d: join completion %v: %v", me, ctx, err)
	}
	if mc.Rank() != me || mc.Size() != n {
		t.Fatalf("rank %d: group rank %d of %d", me, mc.Rank(), mc.Size())
	}
	cases := mix(n)
	for i, c := range cases {
		buf := c.Input(me)
		if c.Coll == dtype.Broadcast && me != c.Root {
			buf = make([]byte, len(buf))
		}
		res := make([]byte, c.ResultLen(me))
		if err := postColl(e.ep, mc.Addr(), c, buf, res, i); err != nil {
			t.Fatalf("rank %d: %v: post: %v", me, c, err)
		}
		ctx, err := e.waitCollective(deadline)
		if err != nil {
			t.Fatalf("rank %d: %v: %v", me, c, err)
		}
		if ctx != i {
			t.Fatalf("rank %d: %v: completion context %v, want %d", me, c, ctx, i)
		}
		got := res
		if c.Coll == dtype.Broadcast {
			got = buf
		}
		if want := c.Want(me); want != nil {
			if k := c.Diff(want, got); k >= 0 {
				t.Fatalf("rank %d: %v differs from the reference at element %d", me, c, k)
			}
		}
	}
	if err := mc.Close(); err != nil {
		t.Fatalf("rank %d: leave: %v", me, err)
	}
	if err := job.Barrier(); err != nil {
		t.Fatalf("rank %d: Barrier: %v", me, err)
	}
	if err := job.Finalize(); err != nil {
		t.Fatalf("rank %d: Finalize: %v", me, err)
	}
	host := "-"
	if name, _, ok := hosts.Here(); ok {
		host = name
	}
	return fmt.Sprintf("%d ok size=%d prov=%s host=%s cases=%d", me, n, prov, host, len(cases))
}

// openTestEPCaps is openTestEP with other capabilities.
func openTestEPCaps(t testing.TB, prov string, caps fi.Flags) *testEP {
	t.Helper()
	hints := fi.AllocInfo()
	hints.Caps = caps
	hints.EpAttr.Type = fi.EpRDM
	hints.FabricAttr.ProvName = prov
	infos, err := fi.GetInfo(fi.Version(2, 0), "", "", 0, hints)
	if err != nil {
		t.Fatalf("GetInfo(%s, %v): %v", prov, caps, err)
	}
	return openInfoEP(t, infos[0])
}

// collWant is the line every rank of a collective job prints.
func collWant(n int, prov string) string {
	return fmt.Sprintf(`ok size=%d prov=%s host=\S+ cases=%d$`, n, strings.ReplaceAll(prov, "+", `\+`), len(collJobCases(n, 17)))
}

// TestHydraCollectives: every collective under mpiexec.hydra on shm (the
// node's shared-memory region), tcp (point to point) and, when the build
// has it, shm+tcp, on group sizes that are powers of two and not.
func TestHydraCollectives(t *testing.T) {
	needHydra(t)
	type cc struct {
		n    int
		prov string
	}
	cases := []cc{{1, "shm"}, {3, "shm"}, {4, "shm"}, {3, "tcp"}, {4, "tcp"}}
	if haveLinked() {
		cases = append(cases, cc{3, "shm+tcp"})
	}
	if testing.Short() {
		cases = cases[1:2]
	}
	slots := make(chan struct{}, launcherSlots)
	for _, c := range cases {
		t.Run(c.prov+"/n="+strconv.Itoa(c.n), func(t *testing.T) {
			t.Parallel()
			slots <- struct{}{}
			defer func() { <-slots }()
			r := hydraRun(t, c.n, "coll", c.prov, 120*time.Second, nil)
			expectRanks(t, r, c.n, collWant(c.n, c.prov))
		})
	}
}

// TestHydraCollectivesTwoHosts: the collectives across two hosts (network
// namespaces, each with its own /dev/shm): on tcp point to point, on
// shm+tcp hierarchically (each host's ranks over their region, one rank
// per host over tcp).
func TestHydraCollectivesTwoHosts(t *testing.T) {
	needHydra(t)
	nt := hosts.New(t, 2, nil)
	type cc struct {
		n    int
		prov string
	}
	cases := []cc{{4, "tcp"}}
	if haveLinked() {
		cases = append(cases, cc{4, "shm+tcp"}, cc{6, "shm+tcp"})
	}
	for _, c := range cases {
		t.Run(c.prov+"/n="+strconv.Itoa(c.n), func(t *testing.T) {
			timeout := 150 * time.Second
			env := childEnv("coll", c.prov, time.Now().Add(timeout-5*time.Second))
			r := jobtest.RunHydraHosts(t, nt, timeout, env, c.n, c.n/2, childArgs()...)
			expectRanks(t, r, c.n, collWant(c.n, c.prov))
			for i := range c.n {
				if want := fmt.Sprintf("h%d", i/(c.n/2)+1); fields(r.Ranks[i])["host"] != want {
					t.Errorf("rank %d ran on %q, want %s", i, fields(r.Ranks[i])["host"], want)
				}
			}
		})
	}
}
