package benchmarks

import (
	"slices"
	"testing"
	"time"

	"github.com/gofi-dev/fi/ring"
)

// BenchmarkRingThroughputAlternated streams 8-byte records from one
// goroutine to another through a buffered channel and through the ring
// (BenchmarkRingThroughput's chan and ring variants, same capacity in
// bytes) and through a ring.Duplex (its batching API, as the ring's
// stream), alternated in rounds of altStreamRound records: chan, ring,
// duplex, chan, ring, duplex, ... and reports the median over rounds of
// each round's chan/ring and chan/duplex ratios (how many times the ring's
// rate is the channel's), with the median chan-ns, ring-ns (ns/op) and
// duplex-ns per record and rt-ns, the placement before the run. BenchmarkRingThroughput runs all its records of one
// variant, then the other's, so other processes' load and the vCPUs'
// placement, which change within seconds on this 2-vCPU machine, land on
// one variant and not the other; alternating rounds of 20-150 ms lets
// each round's ratio compare like with like. b.N is the records per
// variant (rounded up to whole rounds; fewer than a round: one round of
// b.N). GOFI_BENCH_PIN=a,b pins the producer's thread to CPU a and the
// consumer's to CPU b, in every variant.
func BenchmarkRingThroughputAlternated(b *testing.B) {
	rt := placementRT()
	r := newStreamRing(b, streamBytes)
	dx, dxPeer, err := ring.NewDuplex(streamBytes)
	if err != nil {
		b.Fatal(err)
	}
	ch := make(chan [8]byte, streamBytes/8)
	per := min(b.N, altStreamRound) // (a smoke run's b.N of 1 streams one record a variant)
	rounds := (b.N + per - 1) / per
	chanNs := make([]float64, rounds)
	ringNs := make([]float64, rounds)
	dxNs := make([]float64, rounds)
	ratio := make([]float64, rounds)
	dxRatio := make([]float64, rounds)
	defer pinFromEnv(b, 0)()
	b.ReportAllocs()
	b.ResetTimer()
	for k := range rounds {
		chanNs[k] = float64(chanRound(b, ch, per).Nanoseconds()) / float64(per)
		ringNs[k] = float64(ringRound(b, r, per).Nanoseconds()) / float64(per)
		dxNs[k] = float64(duplexRound(b, dx, dxPeer, per).Nanoseconds()) / float64(per)
		ratio[k] = chanNs[k] / ringNs[k]
		dxRatio[k] = chanNs[k] / dxNs[k]
	}
	b.StopTimer()
	med := func(v []float64) float64 {
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(med(ringNs), "ns/op")
	b.ReportMetric(med(chanNs), "chan-ns")
	b.ReportMetric(med(ratio), "chan/ring")
	b.ReportMetric(med(dxNs), "duplex-ns")
	b.ReportMetric(med(dxRatio), "chan/duplex")
	b.ReportMetric(rt, "rt-ns")
}

// altStreamRound is the records of one variant in one round of
// BenchmarkRingThroughputAlternated: 2 Mi, half a lap of the 64 MiB ring
// at 16 bytes a record, 20-150 ms.
const altStreamRound = 2 << 20

// chanRound sends n records through ch to a receiving goroutine and
// returns the time until the receiver has them all.
func chanRound(b *testing.B, ch chan [8]byte, n int) time.Duration {
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer pinFromEnv(b, 1)()
		for range n {
			<-ch
		}
		close(done)
	}()
	var v [8]byte
	for range n {
		ch <- v
	}
	<-done
	return time.Since(start)
}

// duplexRound streams n 8-byte records from end to peer as streamTyped
// does through a ring (Reserve, store in place, Commit, Publish every
// publishEvery; Peek, load, Consume, Release every 64, the consumer in a
// goroutine pinned by GOFI_BENCH_PIN's second CPU), through the Duplex's
// methods, and returns the time until peer has them all.
func duplexRound(b *testing.B, end, peer *ring.Duplex, n int) time.Duration {
	start := time.Now()
	done := make(chan [8]byte, 1)
	go func() {
		defer pinFromEnv(b, 1)()
		var last [8]byte
		idle := 0
		for i := 0; i < n; {
			_, p, err := peer.Peek()
			if err != nil {
				if err != ring.ErrEmpty {
					panic(err)
				}
				backoff(&idle)
				continue
			}
			last = *(*[8]byte)(p)
			idle = 0
			peer.Consume()
			if i++; i&63 == 0 {
				peer.Release()
			}
		}
		peer.Release()
		done <- last
	}()
	var v [8]byte
	idle, pending := 0, 0
	for i := 0; i < n; {
		buf, err := end.Reserve(8)
		if err != nil {
			if err != ring.ErrFull {
				b.Fatal(err)
			}
			end.Publish()
			pending = 0
			backoff(&idle)
			continue
		}
		idle = 0
		*(*[8]byte)(buf) = v
		end.Commit(1, 8)
		i++
		if pending++; pending == publishEvery {
			end.Publish()
			pending = 0
		}
	}
	end.Publish()
	<-done
	return time.Since(start)
}

// ringRound streams n 8-byte records through r as ringStreamTyped does
// (streamTyped, the consumer pinned by GOFI_BENCH_PIN) and returns the
// time until the consumer has them all.
func ringRound(b *testing.B, r *ring.Ring, n int) time.Duration {
	start := time.Now()
	streamTyped[[8]byte](b, r, n, true)
	return time.Since(start)
}
