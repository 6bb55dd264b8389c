package benchmarks

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gofi-dev/fi"
)

// BenchmarkFiRMA: one RMA write or read at a time into a region of
// another endpoint of this process, through the public API: over shm into
// Go memory (process_vm_writev/readv), into AllocMR memory (a copy into
// the mapping). The target makes no call; the figure is the operation's
// whole cost, system calls included, with no second process to wake. tcp
// is left to perftest rma: in one process its target's event loop parks
// between operations, and the figure measures that park.
func BenchmarkFiRMA(b *testing.B) {
	for _, c := range []struct{ name, prov string }{{"shm", "shm"}, {"shm-alloc", "shm"}} {
		for _, op := range []string{"write", "read"} {
			for _, size := range []int{8, 64 << 10, 1 << 20} {
				b.Run(fmt.Sprintf("%s/%s/size=%d", c.name, op, size), func(b *testing.B) {
					x := openFiSide(b, c.prov, fi.Msg|fi.RMA)
					y := openFiSide(b, c.prov, fi.Msg|fi.RMA)
					ny, _ := y.ep.Name()
					to, err := x.av.Insert([][]byte{ny}, 0)
					if err != nil {
						b.Fatal(err)
					}
					var mr *fi.MR
					if c.name == "shm-alloc" {
						mr, err = y.dom.AllocMR(size, fi.RemoteRead|fi.RemoteWrite)
					} else {
						mr, err = y.dom.RegMR(make([]byte, size), fi.RemoteRead|fi.RemoteWrite, 0, 1, 0)
					}
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { mr.Close() })
					buf := make([]byte, size)
					var ent [1]fi.CQEntry
					b.SetBytes(int64(size))
					b.ReportAllocs()
					for b.Loop() {
						if op == "write" {
							err = x.ep.Write(buf, nil, to[0], 0, mr.Key(), nil)
						} else {
							err = x.ep.Read(buf, nil, to[0], 0, mr.Key(), nil)
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
	}
}
