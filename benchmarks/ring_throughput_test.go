package benchmarks

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/gofi-dev/fi/ring"
)

// BenchmarkRingThroughput streams records from one goroutine to another
// and reports msgs/s, alternating within each size (and each round, see
// rounds) so that every variant sees the same placement of the machine's
// two vCPUs; rt-ns is that placement, measured just before each variant
// (see placementRT). Variants:
//
//   - chan: the baseline, a buffered channel whose element is the record
//     ([N]byte), holding the same bytes as the ring.
//   - ring: the zero-copy API, used as a Go program streaming fixed-size
//     records would, like the channel's typed element: the producer
//     Reserves, stores the [N]byte value in place and Commits, publishing
//     every publishEvery records; the consumer Peeks, loads the value and
//     Consumes, releasing every 64.
//   - ring-copy: the copy API from byte slices: Reserve, ring.Copy from a
//     []byte, Commit (batched as above); the consumer copies out with
//     TryRead.
//   - ring-unbatched: TryWrite (publishes every record) and TryRead.
//   - ring-256KiB: ring with a ring that stays in cache (see streamBytes).
func BenchmarkRingThroughput(b *testing.B) {
	for range rounds() {
		ringThroughputSize[[8]byte](b)
		ringThroughputSize[[64]byte](b)
		ringThroughputSize[[4096]byte](b)
	}
}

func ringThroughputSize[T any](b *testing.B) {
	var zero T
	size := int(sizeOf(zero))
	variants := []struct {
		name string
		run  func(*testing.B)
	}{
		{"chan", chanStream[T]},
		{"ring", func(b *testing.B) { ringStreamTyped[T](b, streamBytes) }},
		{"ring-copy", func(b *testing.B) { ringStreamCopy(b, size, publishEvery) }},
		{"ring-unbatched", func(b *testing.B) { ringStreamCopy(b, size, 1) }},
		{"ring-256KiB", func(b *testing.B) { ringStreamTyped[T](b, 256<<10) }},
	}
	for _, v := range variants {
		b.Run(fmt.Sprintf("size=%d/%s", size, v.name), func(b *testing.B) {
			rt := placementRT()
			v.run(b)
			b.ReportMetric(rt, "rt-ns") // after the run's ResetTimer, which drops metrics
		})
	}
}

// publishEvery is the producer's batch: it commits that many records and
// publishes once (the consumer releases every 64 or, with TryRead, every
// quarter ring).
const publishEvery = 128

// streamBytes is the ring capacity and the channel's buffer in bytes (its
// element count is streamBytes/size), so both hold the same bytes in
// flight: twice the last-level cache, rounded up to a power of two. In the
// machine's far vCPU placement (the two cores on different L3s) a ring
// that fits the consumer's L3 still has last lap's lines there when the
// producer comes back, and each of its writes waits for an invalidation
// across the chips; at 8 B a 256 KiB or 4 MiB ring streamed at 13.3-13.6
// ns a record there, a 64 MiB one at 8.0-8.6 ns (near placement: 3.5-4.2
// ns for all three). The channel measured the same with a 256 KiB and a
// 64 MiB buffer. The cost: records of 4 KiB stream from memory rather
// than from cache in the near placement; ring-256KiB shows that case.
var streamBytes = func() int {
	n := 256 << 10
	for n < 2*ring.CPU().LLC && n < ring.MaxCapacity {
		n <<= 1
	}
	return n
}()

// ringStreamTyped: the zero-copy API with T stored and loaded in place.
func ringStreamTyped[T any](b *testing.B, capacity int) {
	var v T
	r := newStreamRing(b, capacity)
	b.SetBytes(int64(sizeOf(v)))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	streamTyped[T](b, r, b.N, false)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

// streamTyped streams n records of T through r, produced here (Reserve,
// store in place, Commit, Publish every publishEvery) and consumed by a
// goroutine (Peek, load, Consume, Release every 64), and returns when the
// consumer has them all. pin: the consumer's thread is pinned by
// GOFI_BENCH_PIN (pinFromEnv's second CPU).
func streamTyped[T any](b *testing.B, r *ring.Ring, n int, pin bool) {
	var v T
	size := int(sizeOf(v))
	done := make(chan T, 1)
	go func() {
		if pin {
			defer pinFromEnv(b, 1)()
		}
		var last T // each record is loaded into it, as chan's receive does
		idle := 0
		for i := 0; i < n; {
			_, p, err := r.Peek()
			if err != nil {
				if err != ring.ErrEmpty {
					panic(err)
				}
				backoff(&idle)
				continue
			}
			last = *(*T)(unsafe.Pointer(unsafe.SliceData(p)))
			idle = 0
			r.Consume()
			if i++; i&63 == 0 {
				r.Release()
			}
		}
		r.Release()
		done <- last
	}()
	idle, pending := 0, 0
	for i := 0; i < n; {
		buf, err := r.Reserve(size)
		if err != nil {
			if err != ring.ErrFull {
				b.Fatal(err)
			}
			r.Publish()
			pending = 0
			backoff(&idle)
			continue
		}
		idle = 0
		*(*T)(unsafe.Pointer(unsafe.SliceData(buf))) = v
		r.Commit(1, size)
		i++
		if pending++; pending == publishEvery {
			r.Publish()
			pending = 0
		}
	}
	r.Publish()
	<-done
}

// ringStreamCopy: the copy API, from and to byte slices; batch 1 is
// TryWrite (publish per record), more is Reserve/Copy/Commit and a
// Publish per batch.
func ringStreamCopy(b *testing.B, size, batch int) {
	r := newStreamRing(b, streamBytes)
	// Rotating sources, filled once: the loop stores nothing into them,
	// so no narrow store stalls the wide load of the copy behind it.
	var srcs [8][]byte
	for k := range srcs {
		srcs[k] = make([]byte, size)
		srcs[k][0] = byte(k)
	}
	done := make(chan int)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	go func() {
		dst := make([]byte, size)
		sum, idle := 0, 0
		for i := 0; i < b.N; {
			_, n, err := r.TryRead(dst)
			if err != nil {
				if err != ring.ErrEmpty {
					panic(err)
				}
				backoff(&idle)
				continue
			}
			sum += n
			idle = 0
			i++
		}
		done <- sum
	}()
	idle, pending := 0, 0
	for i := 0; i < b.N; {
		if batch == 1 {
			if err := r.TryWrite(1, srcs[i&7]); err != nil {
				if err != ring.ErrFull {
					b.Fatal(err)
				}
				backoff(&idle)
				continue
			}
			idle = 0
			i++
			continue
		}
		buf, err := r.Reserve(size)
		if err != nil {
			if err != ring.ErrFull {
				b.Fatal(err)
			}
			r.Publish()
			pending = 0
			backoff(&idle)
			continue
		}
		idle = 0
		ring.Copy(buf, srcs[i&7])
		r.Commit(1, size)
		i++
		if pending++; pending == batch {
			r.Publish()
			pending = 0
		}
	}
	r.Publish()
	<-done
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

func newStreamRing(b *testing.B, capacity int) *ring.Ring {
	r, err := ring.New(capacity)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

func chanStream[T any](b *testing.B) {
	var zero T
	size := int(sizeOf(zero))
	ch := make(chan T, streamBytes/size)
	done := make(chan int)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	go func() {
		n := 0
		for v := range ch {
			_ = v
			n++
		}
		done <- n
	}()
	var v T
	for i := 0; i < b.N; i++ {
		ch <- v
	}
	close(ch)
	<-done
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
