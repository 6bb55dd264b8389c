package fi

import (
	"testing"

	"github.com/gofi-dev/fi/shm"
)

// BenchmarkCollOneDriver measures the software path of a 2-rank
// collective over shared memory without the wait: one goroutine posts on
// both ranks, then reads both completions (the second rank's post sees
// the first's arrival at once, the first rank's read sees the second's).
// ns/op is two posts, one detecting pass and two completions: what a
// rank spends per call besides waiting for the other.
func BenchmarkCollOneDriver(b *testing.B) {
	dir := b.TempDir()
	b.Setenv(shm.DirEnv, dir)
	rs := openCollRanks(b, "shm", 2)
	joinAll(b, rs)
	var small [2][8]byte
	var es [1]CQEntry
	for _, bc := range []struct {
		name string
		post func(r *collRank) error
	}{
		{"barrier", func(r *collRank) error { return r.ep.Barrier(r.mc.Addr(), nil) }},
		{"allreduce8B", func(r *collRank) error {
			return r.ep.Allreduce(small[r.rank][:], 2, nil, small[r.rank][:], nil, r.mc.Addr(), Float, OpSum, 0, nil)
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, r := range rs {
					if err := bc.post(r); err != nil {
						b.Fatal(err)
					}
				}
				readTx(b, rs, es[:], false)
			}
		})
	}
}

// BenchmarkCollWaitPass measures one pass of a rank waiting for a 2-rank
// barrier over shared memory: a CQ read that finds the other rank not
// arrived. Half a pass is what a spinning rank adds, on average, to the
// time it takes to see the other's arrival.
func BenchmarkCollWaitPass(b *testing.B) {
	b.Setenv(shm.DirEnv, b.TempDir())
	rs := openCollRanks(b, "shm", 2)
	joinAll(b, rs)
	var es [1]CQEntry
	if err := rs[0].ep.Barrier(rs[0].mc.Addr(), nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rs[0].txcq.Read(es[:]); err != ErrAgain {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := rs[1].ep.Barrier(rs[1].mc.Addr(), nil); err != nil {
		b.Fatal(err)
	}
	for _, r := range rs {
		if _, err := r.waitColl(waitLimit); err != nil {
			b.Fatal(err)
		}
	}
}
