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
// bytes), alternated in rounds of altStreamRound records: chan, ring,
// chan, ring, ... and reports the median over rounds of each round's
// chan/ring ratio (how many times the ring's rate is the channel's), with
// the median chan-ns and ring-ns per record and rt-ns, the placement
// before the run. BenchmarkRingThroughput runs all its records of one
// variant, then the other's, so other processes' load and the vCPUs'
// placement, which change within seconds on this 2-vCPU machine, land on
// one variant and not the other; alternating rounds of 20-150 ms lets
// each round's ratio compare like with like. b.N is the records per
// variant (rounded up to whole rounds). GOFI_BENCH_PIN=a,b pins the
// producer's thread to CPU a and the consumer's to CPU b, in both
// variants.
func BenchmarkRingThroughputAlternated(b *testing.B) {
	rt := placementRT()
	r := newStreamRing(b, streamBytes)
	ch := make(chan [8]byte, streamBytes/8)
	rounds := (b.N + altStreamRound - 1) / altStreamRound
	chanNs := make([]float64, rounds)
	ringNs := make([]float64, rounds)
	ratio := make([]float64, rounds)
	defer pinFromEnv(b, 0)()
	b.ReportAllocs()
	b.ResetTimer()
	for k := range rounds {
		chanNs[k] = float64(chanRound(b, ch, altStreamRound).Nanoseconds()) / altStreamRound
		ringNs[k] = float64(ringRound(b, r, altStreamRound).Nanoseconds()) / altStreamRound
		ratio[k] = chanNs[k] / ringNs[k]
	}
	b.StopTimer()
	med := func(v []float64) float64 {
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(med(ringNs), "ns/op")
	b.ReportMetric(med(chanNs), "chan-ns")
	b.ReportMetric(med(ratio), "chan/ring")
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

// ringRound streams n 8-byte records through r as ringStreamTyped does
// (streamTyped, the consumer pinned by GOFI_BENCH_PIN) and returns the
// time until the consumer has them all.
func ringRound(b *testing.B, r *ring.Ring, n int) time.Duration {
	start := time.Now()
	streamTyped[[8]byte](b, r, n, true)
	return time.Since(start)
}
