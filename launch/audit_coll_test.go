package launch

// The differential test of issue #17 under Hydra at full width: every
// collective with every datatype it moves, and every reducible (datatype,
// op) pair through allreduce, reduce and reduce-scatter, checked on every
// rank against the serial reference, on shm, tcp and shm+tcp, on group
// sizes TestHydraCollectives does not run (2, 5, 6, 7, 8 ranks).

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/gofi-dev/fi/coll/colltest"
	"github.com/gofi-dev/fi/dtype"
)

func init() {
	roles["collpairs"] = func(t *testing.T, prov string) string { return runCollRole(t, prov, collPairCases) }
}

// collPairCases: every reducible pair through the three reductions, every
// datatype colltest generates through the five moving collectives, counts
// 7, 1 and 3 in turn, roots spread over the ranks, and every collective
// once with count 0.
func collPairCases(n int) []colltest.Case {
	counts := []int{7, 1, 3} // every case moves data; count 0 below
	var out []colltest.Case
	k := 0
	next := func(c colltest.Case) {
		c.Count, c.Root, c.Ranks, c.Seed = counts[k%len(counts)], k%n, n, uint64(k)
		out = append(out, c)
		k++
	}
	out = append(out, colltest.Case{Coll: dtype.Barrier, Type: dtype.Void, Ranks: n})
	for _, cl := range []dtype.CollOp{dtype.Broadcast, dtype.Allreduce, dtype.Reduce, dtype.ReduceScatter,
		dtype.Allgather, dtype.Alltoall, dtype.Scatter, dtype.Gather} {
		out = append(out, colltest.Case{Coll: cl, Type: dtype.Int32, Op: dtype.Sum, Count: 0, Root: n - 1, Ranks: n})
	}
	for _, p := range colltest.Pairs() {
		for _, cl := range []dtype.CollOp{dtype.Allreduce, dtype.Reduce, dtype.ReduceScatter} {
			next(colltest.Case{Coll: cl, Type: dtype.Type(p[0]), Op: dtype.Op(p[1])})
		}
	}
	for t := dtype.Int8; t <= dtype.Float8E5M2; t++ {
		switch t {
		case dtype.Int128, dtype.Uint128, dtype.LongDoubleComplex, dtype.Float8E4M3, dtype.Float8E5M2:
			continue // colltest makes no inputs of these: TestCollectives_MoveEveryDatatype (root package) has them
		}
		for _, cl := range []dtype.CollOp{dtype.Broadcast, dtype.Allgather, dtype.Alltoall, dtype.Scatter, dtype.Gather} {
			next(colltest.Case{Coll: cl, Type: t, Op: dtype.Noop})
		}
	}
	return out
}

func TestHydraCollectivesEveryPair(t *testing.T) {
	needHydra(t)
	type cc struct {
		n    int
		prov string
	}
	cases := []cc{{2, "shm"}, {5, "shm"}, {6, "shm"}, {7, "shm"}, {8, "shm"}, {2, "tcp"}, {5, "tcp"}, {6, "tcp"}, {8, "tcp"}}
	if haveLinked() {
		cases = append(cases, cc{2, "shm+tcp"}, cc{5, "shm+tcp"}, cc{8, "shm+tcp"})
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
			r := hydraRun(t, c.n, "collpairs", c.prov, 120*time.Second, nil)
			want := fmt.Sprintf(`ok size=%d prov=%s host=\S+ cases=%d$`, c.n, regexp.QuoteMeta(c.prov), len(collPairCases(c.n)))
			expectRanks(t, r, c.n, want)
			t.Log(r.Ranks[0])
		})
	}
}
