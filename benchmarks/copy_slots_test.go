package benchmarks

import (
	"runtime"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkCopyPingPongSlots: the data movement of a 4 KiB eager
// ping-pong alone, by how many buffer slots each direction cycles
// through. Two goroutines (pinned by GOFI_BENCH_PIN, each on its own
// thread) pass a 4 KiB message both ways: the sender copies it from its
// own buffer into the direction's next slot and stores a flag, the
// receiver spins on the flag and copies the slot out into its own buffer,
// then answers the same way. One slot is libfabric shm's pattern (a ping-
// pong takes the same inject buffer from its free stack every time); 32
// is gofi's 4 KiB eager records in a 128 KiB ring. The slot counts
// alternate in batches of 20 000 round trips, so every count sees the
// same placement; ns/op is the median half round trip of slots=1,
// slotsN-ns the others', rt-ns the round trip of the flags alone (the
// placement, measured by the pinned pair in the same alternation).
//
// Measured (issue 12, 2026-11-25, chrt -f 1, pinned, load 8-12): near
// (52-66 ns) 1-2 slots 410-440 ns, 3 slots 479-484, 4-32 slots 566-690;
// far (330-345 ns) 1 slot 1983-1995, 31-32 slots 2560-2686. gofi's own
// 4 KiB ping-pong (perftest pingpong, 50k) in the same hours: near
// 0.75-0.89 us, far 2.63-3.00; fi_pingpong near 0.62-0.73, far 2.27-2.41.
// So most of gofi's 4 KiB gap to libfabric is the ring's working set: a
// ring that reused its first slot while the peer keeps up (or a 16 KiB
// ring, 3 slots: near 0.67-0.72, far 2.55-2.63 as measured) closes it.
func BenchmarkCopyPingPongSlots(b *testing.B) {
	const size = 4096
	counts := []int{0, 1, 2, 3, 4, 8, 32} // 0: the flags alone (the placement)
	maxSlots := counts[len(counts)-1]
	area := make([]byte, 2*maxSlots*size+128)
	var flags [2]struct {
		v atomic.Uint64
		_ [120]byte
	}
	slot := func(dir, slots int, seq uint64) []byte {
		o := (dir*maxSlots + int((seq-1)%uint64(slots))) * size
		return area[o : o+size]
	}
	var slotsNow atomic.Int64
	var stop atomic.Bool
	done := make(chan struct{})
	go func() { // the peer: receives on direction 0, answers on 1
		defer close(done)
		defer pinFromEnv(b, 1)()
		in, out := make([]byte, size), make([]byte, size)
		for seq := uint64(1); ; seq++ {
			for flags[0].v.Load() != seq {
				if stop.Load() {
					return
				}
			}
			if n := int(slotsNow.Load()); n > 0 {
				copy(in, slot(0, n, seq))
				copy(slot(1, n, seq), out)
			}
			flags[1].v.Store(seq)
		}
	}()
	defer pinFromEnv(b, 0)()
	out, in := make([]byte, size), make([]byte, size)
	const batch = 20000
	rounds := max(1, b.N/batch)
	times := make(map[int][]float64)
	deadline := time.Now().Add(30 * time.Second)
	var seq uint64
	b.ResetTimer()
	for r := 0; r < rounds && time.Now().Before(deadline); r++ {
		for _, n := range counts {
			slotsNow.Store(int64(n))
			st := time.Now()
			for range batch {
				seq++
				if n > 0 {
					copy(slot(0, n, seq), out)
				}
				flags[0].v.Store(seq)
				for flags[1].v.Load() != seq {
				}
				if n > 0 {
					copy(in, slot(1, n, seq))
				}
			}
			times[n] = append(times[n], float64(time.Since(st).Nanoseconds())/batch/2)
		}
	}
	b.StopTimer()
	stop.Store(true)
	<-done
	runtime.KeepAlive(area)
	med := func(v []float64) float64 {
		sort.Float64s(v)
		return v[len(v)/2]
	}
	b.ReportMetric(med(times[1]), "ns/op")
	for _, n := range counts[2:] {
		b.ReportMetric(med(times[n]), "slots"+strconv.Itoa(n)+"-ns")
	}
	b.ReportMetric(2*med(times[0]), "rt-ns") // the flags' round trip
}
