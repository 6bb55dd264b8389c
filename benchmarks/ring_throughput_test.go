package benchmarks

import (
	"fmt"
	"testing"
	"time"

	"github.com/gofi-dev/fi/ring"
)

// BenchmarkRingThroughput streams records from one goroutine to another,
// through a gofi ring (copy in with TryWrite, zero-copy Peek/Consume on
// the reader, batched Release) and through a buffered channel of the same
// element size (the baseline), alternating the two within each size so
// both see the same placement of the machine's two vCPUs. Reported: msgs/s
// and ns/op per message; compare msgs/s of ring and chan at each size.
func BenchmarkRingThroughput(b *testing.B) {
	for range rounds() {
		for _, size := range []int{8, 64, 4096} {
			ringThroughputSize(b, size)
		}
	}
}

func ringThroughputSize(b *testing.B, size int) {
	{
		b.Run(fmt.Sprintf("size=%d/chan", size), func(b *testing.B) {
			switch size {
			case 8:
				chanStream[[8]byte](b)
			case 64:
				chanStream[[64]byte](b)
			default:
				chanStream[[4096]byte](b)
			}
		})
		b.Run(fmt.Sprintf("size=%d/ring", size), func(b *testing.B) { ringStream(b, size, publishEvery) })
		b.Run(fmt.Sprintf("size=%d/ring-unbatched", size), func(b *testing.B) { ringStream(b, size, 1) })
	}
}

// publishEvery is the producer's batch: it commits that many records and
// publishes the tail once (the consumer releases every 64). The
// "ring-unbatched" variant publishes every record with TryWrite.
const publishEvery = 128

// ringBytes is the ring capacity; chanBytes/size is the channel buffer, so
// both hold about the same bytes in flight.
const (
	ringBytes = 256 << 10
	chanBytes = 256 << 10
)

func ringStream(b *testing.B, size, batch int) {
	r, err := ring.New(ringBytes)
	if err != nil {
		b.Fatal(err)
	}
	src := make([]byte, size)
	done := make(chan int)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	go func() {
		sum, idle := 0, 0
		for i := 0; i < b.N; {
			_, p, err := r.Peek()
			if err != nil {
				if err != ring.ErrEmpty {
					panic(err)
				}
				backoff(&idle)
				continue
			}
			sum += int(p[0])
			idle = 0
			r.Consume()
			if i++; i&63 == 0 {
				r.Release()
			}
		}
		r.Release()
		done <- sum
	}()
	idle := 0
	if batch == 1 {
		for i := 0; i < b.N; {
			src[0] = byte(i)
			if err := r.TryWrite(1, src); err != nil {
				if err != ring.ErrFull {
					b.Fatal(err)
				}
				backoff(&idle)
				continue
			}
			idle = 0
			i++
		}
	} else {
		pending := 0
		for i := 0; i < b.N; {
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
			src[0] = byte(i)
			ring.Copy(buf, src)
			r.Commit(1, size)
			i++
			if pending++; pending == batch {
				r.Publish()
				pending = 0
			}
		}
		r.Publish()
	}
	<-done
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

func chanStream[T any](b *testing.B) {
	var zero T
	size := int(sizeOf(zero))
	ch := make(chan T, chanBytes/size)
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
