package benchmarks

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gofi-dev/fi"
)

// BenchmarkFiAtomic: one 8-byte fetch-add or compare-and-swap at a time
// on a uint64 of another endpoint of this process, over shm, through the
// public API, into AllocMR memory (the initiator runs the processor's
// atomic on its mapping) and reaping the completion: the whole cost of
// perftest atomic's default shm operation without a second process, so
// its instruction count (callgrind) is repeatable.
func BenchmarkFiAtomic(b *testing.B) {
	for _, op := range []string{"fetch-add", "cswap"} {
		b.Run("shm-alloc/"+op, func(b *testing.B) {
			x := openFiSide(b, "shm", fi.Msg|fi.RMA|fi.Atomic)
			y := openFiSide(b, "shm", fi.Msg|fi.RMA|fi.Atomic)
			ny, _ := y.ep.Name()
			to, err := x.av.Insert([][]byte{ny}, 0)
			if err != nil {
				b.Fatal(err)
			}
			mr, err := y.dom.AllocMR(64, fi.RemoteRead|fi.RemoteWrite)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { mr.Close() })
			var buf [3][8]byte // operand, compare, result
			binary.NativeEndian.PutUint64(buf[0][:], 1)
			var ent [1]fi.CQEntry
			b.ReportAllocs()
			for b.Loop() {
				if op == "cswap" {
					buf[1] = buf[2]
					binary.NativeEndian.PutUint64(buf[0][:], binary.NativeEndian.Uint64(buf[2][:])+1)
					err = x.ep.CompareAtomic(buf[0][:], 1, nil, buf[1][:], nil, buf[2][:], nil, to[0], 0, mr.Key(), fi.Uint64, fi.OpCSwap, nil)
				} else {
					err = x.ep.FetchAtomic(buf[0][:], 1, nil, buf[2][:], nil, to[0], 0, mr.Key(), fi.Uint64, fi.OpSum, nil)
				}
				if err != nil {
					b.Fatal(err)
				}
				for spins := 0; ; spins++ {
					n, err := x.cq.Read(ent[:])
					if n == 1 {
						break
					}
					if !errors.Is(err, fi.ErrAgain) || spins > 1<<26 {
						b.Fatalf("no completion: %v", err)
					}
				}
			}
		})
	}
}
