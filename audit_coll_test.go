package fi

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gofi-dev/fi/coll/colltest"
)

// TestCollectives_HalfPrecisionRoundedOnce: FLOAT16 and BFLOAT16
// reductions are computed in float32 and rounded once per element (issue
// #17; coll/doc.go). The inputs make every float32 sum exact (values
// 2^-3 <= |x| < 2^5 with 11 or 8 significant bits, at most 5 ranks), so
// the one right answer is the exact sum rounded once, whatever the order;
// a reduction that rounded its partials to 16 bits would differ on many
// elements (checked too, so the inputs really tell the two apart). Small
// counts and one past the ring threshold (AllreduceRingMin, 256 KiB), on
// every collective provider; SUM also through reduce and reduce-scatter.
func TestCollectives_HalfPrecisionRoundedOnce(t *testing.T) {
	ranks, counts := []int{3, 5}, []int{1, 1001, 140001}
	if rmaRace || testing.Short() {
		// the race detector's copies are slow: the ring's count runs
		// without it
		ranks, counts = ranks[:1], counts[:2]
	}
	for _, prov := range collProvs() {
		for _, n := range ranks {
			t.Run(fmt.Sprintf("%s/ranks%d", prov, n), func(t *testing.T) {
				shmTestDir(t)
				rs := openCollRanks(t, prov, n)
				joinAll(t, rs)
				for _, dt := range []Datatype{Float16, BFloat16} {
					for _, count := range counts {
						for _, op := range []AtomicOp{OpSum, OpMin, OpMax} {
							if count != 1001 && op != OpSum {
								continue // MIN and MAX round nothing: one count
							}
							halfCase(t, rs, dt, op, count)
						}
					}
				}
			})
		}
	}
}

// halfInput is rank r's input: count values of dt.
func halfInput(dt Datatype, r, count int) []byte {
	rng := rand.New(rand.NewPCG(uint64(dt), uint64(r)))
	b := make([]byte, 2*count)
	for i := range count {
		x := float32(math.Ldexp(1+rng.Float64(), rng.IntN(8)-3)) // [2^-3, 2^5)
		if rng.IntN(2) == 0 {
			x = -x
		}
		binary.LittleEndian.PutUint16(b[2*i:], narrow(dt, x)) // exactly representable now
	}
	return b
}

func narrow(dt Datatype, x float32) uint16 {
	if dt == BFloat16 {
		return colltest.FloatToBF16(x)
	}
	return colltest.FloatToHalf(x)
}

func widen(dt Datatype, h uint16) float32 {
	if dt == BFloat16 {
		return math.Float32frombits(uint32(h) << 16)
	}
	return colltest.HalfToFloat(h)
}

func halfCase(t *testing.T, rs []*collRank, dt Datatype, op AtomicOp, count int) {
	t.Helper()
	n := len(rs)
	in := make([][]byte, n)
	for r := range in {
		in[r] = halfInput(dt, r, count)
	}
	want := make([]uint16, count)
	stepwise := 0 // elements where rounding each partial would differ
	for i := range count {
		var exact float64
		acc := widen(dt, binary.LittleEndian.Uint16(in[0][2*i:]))
		ext := float64(acc)
		exact = ext
		step := narrow(dt, acc)
		for r := 1; r < n; r++ {
			x := widen(dt, binary.LittleEndian.Uint16(in[r][2*i:]))
			switch op {
			case OpSum:
				exact += float64(x)
				step = narrow(dt, widen(dt, step)+x)
			case OpMin:
				exact = math.Min(exact, float64(x))
			case OpMax:
				exact = math.Max(exact, float64(x))
			}
		}
		if float64(float32(exact)) != exact {
			t.Fatalf("element %d: the float32 sum is not exact: test inputs wrong", i)
		}
		want[i] = narrow(dt, float32(exact))
		if op == OpSum && step != want[i] {
			stepwise++
		}
	}
	if op == OpSum && count > 100 && stepwise < count/100 {
		t.Fatalf("%s: only %d of %d elements tell rounding once from rounding each step", dt, stepwise, count)
	}
	err := parallel(rs, func(r *collRank) error {
		res := make([]byte, 2*count)
		if err := r.ep.Allreduce(in[r.rank], count, nil, res, nil, r.mc.Addr(), dt, op, 0, "h"); err != nil {
			return err
		}
		if _, err := r.waitColl(waitLimit); err != nil {
			return err
		}
		check := func(what string, res []byte, want []uint16) error {
			for i := range want {
				if got := binary.LittleEndian.Uint16(res[2*i:]); got != want[i] {
					return fmt.Errorf("rank %d: %s %s %s count %d: element %d is %#04x, rounded once it is %#04x",
						r.rank, what, dt, op, count, i, got, want[i])
				}
			}
			return nil
		}
		if err := check("allreduce", res, want); err != nil || op != OpSum || count < n {
			return err
		}
		// Reduce to the last rank, and reduce-scatter of blocks of count/n.
		root := n - 1
		if err := r.ep.Reduce(in[r.rank], count, nil, res, nil, r.mc.Addr(), Addr(root), dt, op, 0, "r"); err != nil {
			return err
		}
		if _, err := r.waitColl(waitLimit); err != nil {
			return err
		}
		if r.rank == root {
			if err := check("reduce", res, want); err != nil {
				return err
			}
		}
		c := count / n
		if err := r.ep.ReduceScatter(in[r.rank][:2*c*n], c, nil, res[:2*c], nil, r.mc.Addr(), dt, op, 0, "rs"); err != nil {
			return err
		}
		if _, err := r.waitColl(waitLimit); err != nil {
			return err
		}
		return check("reduce-scatter", res, want[r.rank*c:(r.rank+1)*c])
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCollectives_MoveEveryDatatype: QueryCollective says broadcast,
// allgather, alltoall, scatter and gather take every datatype with a size;
// each runs here with every one of them (the 16- and 32-byte and 8-bit
// float types included, which the differential tests' input generator
// does not make), random bytes, on every collective provider, checked
// byte for byte on every rank.
func TestCollectives_MoveEveryDatatype(t *testing.T) {
	for _, prov := range collProvs() {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			const n = 3
			rs := openCollRanks(t, prov, n)
			joinAll(t, rs)
			for dt := Int8; dt <= Float8E5M2; dt++ {
				es := dt.Size()
				if es == 0 {
					continue
				}
				for _, coll := range []CollectiveOp{CollBroadcast, CollAllgather, CollAlltoall, CollScatter, CollGather} {
					if err := rs[0].dom.QueryCollective(coll, &CollectiveAttr{Datatype: dt}, 0); err != nil {
						t.Fatalf("QueryCollective(%s, %s): %v", coll, dt, err)
					}
					moveCase(t, rs, coll, dt, 5, int(dt)%n)
				}
			}
		})
	}
}

func moveCase(t *testing.T, rs []*collRank, coll CollectiveOp, dt Datatype, count, root int) {
	t.Helper()
	n, bs := len(rs), count*dt.Size()
	rng := rand.New(rand.NewPCG(uint64(coll), uint64(dt)))
	in := make([][]byte, n)
	for r := range in {
		k := bs
		if coll == CollAlltoall || coll == CollScatter {
			k = bs * n
		}
		in[r] = make([]byte, k)
		for i := range in[r] {
			in[r][i] = byte(rng.Uint32())
		}
	}
	want := func(r int) []byte {
		switch coll {
		case CollBroadcast:
			return in[root]
		case CollAllgather:
			return bytes.Join(in, nil)
		case CollAlltoall:
			var out []byte
			for q := range n {
				out = append(out, in[q][r*bs:(r+1)*bs]...)
			}
			return out
		case CollScatter:
			return in[root][r*bs : (r+1)*bs]
		case CollGather:
			if r == root {
				return bytes.Join(in, nil)
			}
		}
		return nil
	}
	err := parallel(rs, func(r *collRank) error {
		buf := append([]byte(nil), in[r.rank]...)
		mc, ro := r.mc.Addr(), Addr(root)
		var res []byte
		var err error
		switch coll {
		case CollBroadcast:
			if r.rank != root {
				clear(buf)
			}
			err = r.ep.Broadcast(buf, count, nil, mc, ro, dt, 0, nil)
		case CollAllgather:
			res = make([]byte, bs*n)
			err = r.ep.Allgather(buf, count, nil, res, nil, mc, dt, 0, nil)
		case CollAlltoall:
			res = make([]byte, bs*n)
			err = r.ep.Alltoall(buf, count, nil, res, nil, mc, dt, 0, nil)
		case CollScatter:
			res = make([]byte, bs)
			err = r.ep.Scatter(buf, count, nil, res, nil, mc, ro, dt, 0, nil)
		case CollGather:
			if r.rank == root {
				res = make([]byte, bs*n)
			}
			err = r.ep.Gather(buf, count, nil, res, nil, mc, ro, dt, 0, nil)
		}
		if err != nil {
			return fmt.Errorf("rank %d: %s %s: %w", r.rank, coll, dt, err)
		}
		if _, err := r.waitColl(waitLimit); err != nil {
			return fmt.Errorf("rank %d: %s %s: %w", r.rank, coll, dt, err)
		}
		got := res
		if coll == CollBroadcast {
			got = buf
		}
		if w := want(r.rank); w != nil && !bytes.Equal(got, w) {
			return fmt.Errorf("rank %d: %s %s: result differs from the reference", r.rank, coll, dt)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCollectives_MismatchThroughAPI: ranks that post an allreduce with
// different counts or datatypes get error completions (with FI_COLLECTIVE)
// on every rank over real shm, tcp and shm+tcp endpoints, rather than a
// hang or mixed data (coll.TestMismatchDetected checks the engine level).
func TestCollectives_MismatchThroughAPI(t *testing.T) {
	for _, prov := range collProvs() {
		for _, mis := range []string{"count", "type"} {
			t.Run(prov+"/"+mis, func(t *testing.T) {
				shmTestDir(t)
				rs := openCollRanks(t, prov, 3)
				joinAll(t, rs)
				err := parallel(rs, func(r *collRank) error {
					count, dt := 4, Int32
					if r.rank == 2 {
						switch mis {
						case "count":
							count = 3
						case "type":
							dt = Float
						}
					}
					buf, res := make([]byte, 16), make([]byte, 16)
					if err := r.ep.Allreduce(buf, count, nil, res, nil, r.mc.Addr(), dt, OpSum, 0, "mis"); err != nil {
						return fmt.Errorf("rank %d: post: %w", r.rank, err)
					}
					e, err := r.waitColl(waitLimit)
					switch {
					case err == nil:
						return fmt.Errorf("rank %d: mismatched allreduce completed without error", r.rank)
					case e.Context != "mis":
						return fmt.Errorf("rank %d: %v (context %v)", r.rank, err, e.Context)
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
