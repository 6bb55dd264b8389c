//go:build !race

package fi

import (
	"testing"

	"github.com/gofi-dev/fi/dtype"
)

// TestCollectives_ZeroAllocs: after the join and a first operation of a
// size, collectives allocate nothing: posting, progress, completion. On
// shm, the whole path; tcp is left out because its transport allocates
// when its event loop parks a connection (net/own.go), which the
// collectives do not control.
func TestCollectives_ZeroAllocs(t *testing.T) {
	for _, prov := range []string{"shm"} {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			rs := openCollRanks(t, prov, 3)
			joinAll(t, rs)
			small := make([][]byte, len(rs))
			large := make([][]byte, len(rs))
			for i := range rs {
				small[i] = make([]byte, 8)
				large[i] = make([]byte, 1<<20)
			}
			ctx := new(int)
			var es [1]CQEntry
			// run posts op on every rank, then drives all of them from
			// this goroutine until each has its completion.
			run := func(op func(r *collRank, i int) error) {
				for i, r := range rs {
					if err := op(r, i); err != nil {
						t.Fatal(err)
					}
				}
				readTx(t, rs, es[:], true)
			}
			for name, op := range map[string]func(r *collRank, i int) error{
				"barrier": func(r *collRank, i int) error { return r.ep.Barrier(r.mc.Addr(), ctx) },
				"allreduce8B": func(r *collRank, i int) error {
					return r.ep.Allreduce(small[i], 2, nil, small[i], nil, r.mc.Addr(), Float, OpSum, 0, ctx)
				},
				"bcast8B": func(r *collRank, i int) error {
					return r.ep.Broadcast(small[i], 8, nil, r.mc.Addr(), 0, Uint8, 0, ctx)
				},
				"allreduce1MiB": func(r *collRank, i int) error {
					return r.ep.Allreduce(large[i], 1<<18, nil, large[i], nil, r.mc.Addr(), Float, OpSum, 0, ctx)
				},
			} {
				run(op) // warm-up: scratch and plan buffers grow once
				run(op)
				if a := testing.AllocsPerRun(20, func() { run(op) }); a != 0 {
					t.Errorf("%s: %.1f allocations per collective (3 ranks), want 0", name, a)
				}
			}
			_ = dtype.Float
		})
	}
}
