package benchmarks

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gofi-dev/fi"
)

// Public-API benchmarks for the regression guard (benchmarks/compare.sh):
// address-vector operations, and a message round trip between two shm
// endpoints driven from one goroutine. One goroutine means no second core
// and no wake-ups: the figure is gofi's own software cost per message
// (post, match, copy, completion), which moves far less with this
// machine's vCPU placement than a two-process ping-pong does.

type fiSide struct {
	fab *fi.Fabric
	dom *fi.Domain
	av  *fi.AV
	cq  *fi.CQ
	ep  *fi.Endpoint
}

func openFiSide(b *testing.B, prov string, caps fi.Flags) *fiSide {
	b.Helper()
	h := fi.AllocInfo()
	h.Caps = caps
	h.EpAttr.Type = fi.EpRDM
	h.FabricAttr.ProvName = prov
	infos, err := fi.GetInfo(fi.Version(2, 0), "", "", 0, h)
	if err != nil {
		b.Fatal(err)
	}
	s := &fiSide{}
	if s.fab, err = fi.OpenFabric(infos[0].FabricAttr); err != nil {
		b.Fatal(err)
	}
	if s.dom, err = s.fab.OpenDomain(infos[0]); err != nil {
		b.Fatal(err)
	}
	if s.av, err = s.dom.OpenAV(&fi.AVAttr{Type: fi.AVTable}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if s.ep != nil {
			s.ep.Close()
		}
		if s.cq != nil {
			s.cq.Close()
		}
		s.av.Close()
		s.dom.Close()
		s.fab.Close()
	})
	if caps == 0 {
		return s // AV only
	}
	if s.cq, err = s.dom.OpenCQ(&fi.CQAttr{Format: fi.CQFormatTagged}); err != nil {
		b.Fatal(err)
	}
	if s.ep, err = s.dom.OpenEndpoint(infos[0]); err != nil {
		b.Fatal(err)
	}
	if err = s.ep.BindAV(s.av); err != nil {
		b.Fatal(err)
	}
	if err = s.ep.BindCQ(s.cq, fi.Transmit|fi.Recv); err != nil {
		b.Fatal(err)
	}
	if err = s.ep.Enable(); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkFiAV: insert and remove one address (the AV's bookkeeping),
// and look one up (what every send to a new peer costs).
func BenchmarkFiAV(b *testing.B) {
	b.Run("op=insert-remove", func(b *testing.B) {
		s := openFiSide(b, "shm", 0)
		addr := [][]byte{[]byte("fi_shm://bench-peer")}
		b.ReportAllocs()
		for b.Loop() {
			a, err := s.av.Insert(addr, 0)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.av.Remove(a, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("op=lookup", func(b *testing.B) {
		s := openFiSide(b, "shm", 0)
		var addrs [][]byte
		for i := range 1024 {
			addrs = append(addrs, []byte(fmt.Sprintf("fi_shm://bench-peer-%d", i)))
		}
		a, err := s.av.Insert(addrs, 0)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := s.av.Lookup(a[i&1023]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// BenchmarkFiShmRoundTrip: a tagged message there and back between two
// shm endpoints, one goroutine progressing both. Reported per round trip.
func BenchmarkFiShmRoundTrip(b *testing.B) {
	for _, size := range []int{8, 4 << 10, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			x := openFiSide(b, "shm", fi.Tagged)
			y := openFiSide(b, "shm", fi.Tagged)
			nx, _ := x.ep.Name()
			ny, _ := y.ep.Name()
			toY, err := x.av.Insert([][]byte{ny}, 0)
			if err != nil {
				b.Fatal(err)
			}
			toX, err := y.av.Insert([][]byte{nx}, 0)
			if err != nil {
				b.Fatal(err)
			}
			bx, by := make([]byte, size), make([]byte, size)
			rx, ry := make([]byte, size), make([]byte, size)
			ctx := new(int)
			var ent [4]fi.CQEntry
			// reap reads completions from cq until it has seen want receive
			// completions (send completions are counted and dropped). It
			// also reads the other side's CQ: progress is manual, and from
			// 64 KiB the sender streams segments after the receiver's
			// clear-to-send only when its own endpoint is driven.
			reap := func(cq, other *fi.CQ, want int) {
				for spins := 0; want > 0; spins++ {
					n, err := cq.Read(ent[:])
					for i := 0; i < n; i++ {
						if ent[i].Flags&fi.Recv != 0 {
							want--
						}
					}
					if err != nil && !errors.Is(err, fi.ErrAgain) {
						b.Fatal(err)
					}
					if _, err := other.Read(ent[:0]); err != nil && !errors.Is(err, fi.ErrAgain) {
						b.Fatal(err)
					}
					if spins > 1<<26 {
						b.Fatal("no completion")
					}
				}
			}
			b.SetBytes(int64(2 * size))
			b.ReportAllocs()
			for b.Loop() {
				if err := y.ep.TRecv(ry, fi.AddrUnspec, 1, 0, ctx); err != nil {
					b.Fatal(err)
				}
				if err := x.ep.TRecv(rx, fi.AddrUnspec, 2, 0, ctx); err != nil {
					b.Fatal(err)
				}
				if err := x.ep.TSend(bx, toY[0], 1, ctx); err != nil {
					b.Fatal(err)
				}
				reap(y.cq, x.cq, 1)
				if err := y.ep.TSend(by, toX[0], 2, ctx); err != nil {
					b.Fatal(err)
				}
				reap(x.cq, y.cq, 1)
			}
		})
	}
}
