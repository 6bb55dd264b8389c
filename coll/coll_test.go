package coll_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gofi-dev/fi/coll"
	"github.com/gofi-dev/fi/coll/colltest"
	"github.com/gofi-dev/fi/dtype"
)

// runCase posts c on every rank of w and compares each rank's output with
// the serial reference.
func (w *world) runCase(t *testing.T, c colltest.Case) {
	t.Helper()
	n := len(w.g)
	args := make([]coll.Args, n)
	in := c.Inputs()
	for r := 0; r < n; r++ {
		a := coll.Args{Coll: c.Coll, Type: c.Type, Op: c.Op, Count: c.Count, Root: c.Root,
			Buf: append([]byte(nil), in[r]...), Result: make([]byte, c.ResultLen(r))}
		if c.Coll == dtype.Broadcast && r != c.Root {
			a.Buf = make([]byte, len(a.Buf))
		}
		args[r] = a
	}
	for r := range w.g {
		if e := w.g[r].Post(&args[r], r); e != 0 {
			t.Fatalf("%v: rank %d post: %v", c, r, e)
		}
	}
	for r, e := range w.waitAll(nil) {
		if e != 0 {
			t.Fatalf("%v: rank %d completion: %v", c, r, e)
		}
	}
	for r := 0; r < n; r++ {
		want := c.WantFrom(in, r)
		if want == nil {
			continue
		}
		got := args[r].Result
		if c.Coll == dtype.Broadcast {
			got = args[r].Buf
		}
		if i := c.Diff(want, got); i >= 0 {
			t.Fatalf("%v: rank %d differs at element %d", c, r, i)
		}
	}
}

func setThresholds(ar, rs int) func() {
	a, r := coll.AllreduceRingMin, coll.ReduceScatterRingMin
	coll.AllreduceRingMin, coll.ReduceScatterRingMin = ar, rs
	return func() { coll.AllreduceRingMin, coll.ReduceScatterRingMin = a, r }
}

func TestReducibleMatchesIssue(t *testing.T) {
	for typ := dtype.Type(0); typ <= dtype.Void; typ++ {
		for op := dtype.Op(0); op <= dtype.Noop; op++ {
			if got, want := coll.Reducible(typ, op), colltest.Reducible(typ, op); got != want {
				t.Errorf("Reducible(%s, %s) = %v, want %v", typ.Name(), op.Name(), got, want)
			}
		}
	}
}

// TestDifferential runs every collective and every reducible (datatype,
// op) pair on 1 to 8 ranks, with sizes 0, 1, odd and larger, through both
// algorithm choices, point to point and over a shared-memory region, and
// compares with the serial reference.
func TestDifferential(t *testing.T) {
	for _, shm := range []bool{false, true} {
		for _, large := range []bool{false, true} {
			for n := 1; n <= 8; n++ {
				if large && n != 2 && n != 3 && n != 6 && n != 7 {
					continue // the ring on powers of two and not, enough
				}
				t.Run(fmt.Sprintf("shm%v/ranks%d/large%v", shm, n, large), func(t *testing.T) {
					differential(t, n, shm, large, uint64(n))
				})
			}
		}
	}
}

// forceLarge makes every collective take its large-buffer algorithm: the
// ring point to point; parallel slices and the smallest slots (so most
// buffers take several chunks) over shared memory.
func forceLarge(t *testing.T) {
	t.Setenv(coll.ShmBudgetEnv, "1")
	f := coll.ShmFoldMax
	coll.ShmFoldMax = 0
	t.Cleanup(setThresholds(0, 0))
	t.Cleanup(func() { coll.ShmFoldMax = f })
}

// hierLayouts are node keys of groups spread over nodes: contiguous,
// interleaved, with a rank alone on its node (key 0, or a key of its own).
var hierLayouts = [][]uint64{
	{1, 1, 2},
	{1, 1, 2, 2, 2},
	{1, 2, 1, 2, 1, 2},
	{1, 1, 1, 0},
	{3, 3, 3, 3, 5, 5, 7},
	{1, 2, 2, 1, 3, 3, 3, 4},
}

// TestHierarchical runs every collective on groups spread over nodes
// (each node's ranks sharing a region, the nodes talking point to point)
// and compares with the serial reference.
func TestHierarchical(t *testing.T) {
	for li, keys := range hierLayouts {
		for _, large := range []bool{false, true} {
			if large && li%2 == 0 {
				continue // the large algorithms on half the layouts: enough
			}
			t.Run(fmt.Sprintf("layout%d/large%v", li, large), func(t *testing.T) {
				w := newWorldKeys(256, keys)
				if large {
					forceLarge(t)
				}
				differentialOn(t, w, large, true, uint64(li))
			})
		}
	}
}

func differential(t *testing.T, n int, shm, large bool, seed uint64) {
	if large {
		forceLarge(t)
	}
	var key uint64
	if shm {
		key = 42
	}
	differentialOn(t, newWorldKey(n, 256, key), large, shm, seed)
}

func differentialOn(t *testing.T, w *world, large, shm bool, seed uint64) {
	n := len(w.names)
	rng := rand.New(rand.NewPCG(seed, 2))
	counts := []int{0, 1, 2, 3, 7, 64, 1001}
	if large && shm {
		counts = append(counts, 3000, 9001) // several 4 KiB chunks
	}
	moves := []dtype.CollOp{dtype.Broadcast, dtype.Allgather, dtype.Alltoall, dtype.Scatter, dtype.Gather, dtype.Barrier}
	if err := w.join(); err != nil {
		t.Fatal(err)
	}
	defer w.leave()
	for _, p := range colltest.Pairs() {
		for _, cl := range []dtype.CollOp{dtype.Allreduce, dtype.Reduce, dtype.ReduceScatter} {
			w.runCase(t, colltest.Case{Coll: cl, Type: dtype.Type(p[0]), Op: dtype.Op(p[1]),
				Count: counts[rng.IntN(len(counts))], Root: rng.IntN(n), Ranks: n, Seed: rng.Uint64()})
		}
	}
	for _, typ := range []dtype.Type{dtype.Int8, dtype.Uint32, dtype.Double, dtype.LongDouble, dtype.Float16} {
		for _, cl := range moves {
			w.runCase(t, colltest.Case{Coll: cl, Type: typ, Op: dtype.Noop,
				Count: counts[rng.IntN(len(counts))], Root: rng.IntN(n), Ranks: n, Seed: rng.Uint64()})
		}
	}
}

// TestSameBitsEverywhere: with values whose sums round differently in
// different orders, every rank still gets the same bits; over shared
// memory they are the documented left fold in rank order.
func TestSameBitsEverywhere(t *testing.T) {
	for li, keys := range hierLayouts {
		for _, large := range []bool{false, true} {
			t.Run(fmt.Sprintf("layout%d/large%v", li, large), func(t *testing.T) {
				if large {
					forceLarge(t)
				}
				sameBitsOn(t, newWorldKeys(256, keys), false)
			})
		}
	}
	for _, shm := range []bool{false, true} {
		for _, large := range []bool{false, true} {
			for _, n := range []int{3, 5, 8} {
				t.Run(fmt.Sprintf("shm%v/large%v/ranks%d", shm, large, n), func(t *testing.T) {
					sameBits(t, n, shm, large)
				})
			}
		}
	}
}

func sameBits(t *testing.T, n int, shm, large bool) {
	if large {
		forceLarge(t)
	}
	var key uint64
	if shm {
		key = 7
	}
	sameBitsOn(t, newWorldKey(n, 256, key), shm)
}

func sameBitsOn(t *testing.T, w *world, fold bool) {
	n := len(w.names)
	shm := fold
	if err := w.join(); err != nil {
		t.Fatal(err)
	}
	defer w.leave()
	const count = 3333
	args := make([]coll.Args, n)
	rng := rand.New(rand.NewPCG(uint64(n), 9))
	for r := range args {
		buf := make([]byte, count*4)
		for i := 0; i < len(buf); i += 4 {
			f := float32(rng.NormFloat64() * 1e3)
			putF32(buf[i:], f)
		}
		args[r] = coll.Args{Coll: dtype.Allreduce, Type: dtype.Float, Op: dtype.Sum, Count: count, Buf: buf, Result: make([]byte, count*4)}
		w.g[r].Post(&args[r], r)
	}
	for r, e := range w.waitAll(nil) {
		if e != 0 {
			t.Fatalf("rank %d: %v", r, e)
		}
	}
	for r := 1; r < n; r++ {
		if string(args[r].Result) != string(args[0].Result) {
			t.Fatalf("rank %d's result differs from rank 0's", r)
		}
	}
	if !shm {
		return
	}
	for i := 0; i < count; i++ {
		acc := getF32(args[0].Buf[i*4:])
		for r := 1; r < n; r++ {
			acc += getF32(args[r].Buf[i*4:])
		}
		if got := getF32(args[0].Result[i*4:]); got != acc {
			t.Fatalf("element %d: %v, the left fold in rank order gives %v", i, got, acc)
		}
	}
}

// TestMismatchDetected: ranks calling different collectives fail with an
// error completion on every rank rather than hang or mix data.
func TestMismatchDetected(t *testing.T) {
	for _, keys := range [][]uint64{{0, 0, 0, 0}, {9, 9, 9, 9}, {1, 1, 2, 2}} {
		for _, mis := range []string{"type", "count", "coll"} {
			key := keys
			w := newWorldKeys(256, keys)
			if err := w.join(); err != nil {
				t.Fatal(err)
			}
			for i := range w.g {
				a := coll.Args{Coll: dtype.Allreduce, Type: dtype.Int32, Op: dtype.Sum, Count: 4,
					Buf: make([]byte, 16), Result: make([]byte, 16)}
				if i == 2 {
					switch mis {
					case "type":
						a.Type = dtype.Float
					case "count":
						a.Count = 3
					case "coll":
						a.Coll = dtype.Barrier
					}
				}
				w.g[i].Post(&a, i)
			}
			for i, c := range w.waitAll(nil) {
				if c == 0 {
					t.Errorf("keys %v, %s: rank %d: mismatched allreduce completed without error", key, mis, i)
				}
			}
			w.leave()
		}
	}
}

// TestPeerDeath: a rank that dies mid-collective gives the others error
// completions, never a hang; later collectives fail at once.
func TestPeerDeath(t *testing.T) {
	for _, keys := range [][]uint64{{0, 0, 0, 0, 0}, {11, 11, 11, 11, 11}, {1, 1, 2, 2, 2}} {
		peerDeath(t, keys)
	}
}

func peerDeath(t *testing.T, keys []uint64) {
	w := newWorldKeys(64, keys)
	if err := w.join(); err != nil {
		t.Fatal(err)
	}
	defer w.leave()
	for i := range w.g {
		if i == 3 {
			continue
		}
		a := coll.Args{Coll: dtype.Allreduce, Type: dtype.Int64, Op: dtype.Sum, Count: 1000,
			Buf: make([]byte, 8000), Result: make([]byte, 8000)}
		w.g[i].Post(&a, i)
	}
	w.h.Kill("rank3")
	for i, c := range w.waitAll(map[int]bool{3: true}) {
		if i != 3 && c == 0 {
			t.Errorf("rank %d: completed without error although rank 3 died", i)
		}
	}
	if c := w.g[0].Post(&coll.Args{Coll: dtype.Barrier}, nil); c == 0 {
		t.Error("a broken group accepted a new collective")
	}
}

// TestAllreduceRing_InPlaceAndInputKept: the ring allreduce reads each
// rank's input where it is (no copy into the result first), so it must
// give the reference result both out of place, leaving the input as it
// was, and in place (Result is Buf), on powers of two and not, with
// widened types too.
func TestAllreduceRing_InPlaceAndInputKept(t *testing.T) {
	t.Cleanup(setThresholds(0, 0))
	for _, n := range []int{2, 3, 5} {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) {
			w := newWorld(n, 256)
			if err := w.join(); err != nil {
				t.Fatal(err)
			}
			defer w.leave()
			seed := uint64(n)
			for _, p := range [][2]int{{int(dtype.Float), int(dtype.Sum)}, {int(dtype.Double), int(dtype.Sum)},
				{int(dtype.Int32), int(dtype.Max)}, {int(dtype.Float16), int(dtype.Sum)}} {
				for _, count := range []int{n, 7, 1001} {
					for _, inPlace := range []bool{false, true} {
						seed++
						c := colltest.Case{Coll: dtype.Allreduce, Type: dtype.Type(p[0]), Op: dtype.Op(p[1]),
							Count: count, Ranks: n, Seed: seed}
						w.runAllreduce(t, c, inPlace)
					}
				}
			}
		})
	}
}

// runAllreduce posts allreduce c on every rank of w, in place (Result is
// Buf) or not, and checks every rank's result against the reference and,
// out of place, that its input is unchanged.
func (w *world) runAllreduce(t *testing.T, c colltest.Case, inPlace bool) {
	t.Helper()
	n := len(w.g)
	in := c.Inputs()
	args := make([]coll.Args, n)
	for r := range args {
		a := coll.Args{Coll: c.Coll, Type: c.Type, Op: c.Op, Count: c.Count, Buf: append([]byte(nil), in[r]...)}
		a.Result = a.Buf
		if !inPlace {
			a.Result = make([]byte, c.ResultLen(r))
		}
		args[r] = a
	}
	for r := range w.g {
		if e := w.g[r].Post(&args[r], r); e != 0 {
			t.Fatalf("%v in place %v: rank %d post: %v", c, inPlace, r, e)
		}
	}
	for r, e := range w.waitAll(nil) {
		if e != 0 {
			t.Fatalf("%v in place %v: rank %d completion: %v", c, inPlace, r, e)
		}
	}
	for r := range args {
		if i := c.Diff(c.WantFrom(in, r), args[r].Result); i >= 0 {
			t.Fatalf("%v in place %v: rank %d differs at element %d", c, inPlace, r, i)
		}
		if !inPlace && string(args[r].Buf) != string(in[r]) {
			t.Fatalf("%v: rank %d's input changed", c, r)
		}
	}
}
