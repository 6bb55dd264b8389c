package ring_test

import (
	"testing"

	"github.com/gofi-dev/fi/ring"
)

// BenchmarkOneGoroutineBatch32 is the CPU cost of the ring alone: 32 records
// of 8 bytes written, published once, read and released once, by one
// goroutine (no cache-line transfers). ns/op / 32 is the cost per record.
func BenchmarkOneGoroutineBatch32(b *testing.B) {
	r, _ := ring.New(1 << 18)
	src := make([]byte, 8)
	b.ReportAllocs()
	for b.Loop() {
		for k := 0; k < 32; k++ {
			buf, _ := r.Reserve(8)
			ring.Copy(buf, src)
			r.Commit(1, 8)
		}
		r.Publish()
		for k := 0; k < 32; k++ {
			r.Peek()
			r.Consume()
		}
		r.Release()
	}
}

// BenchmarkOneGoroutineTryWrite8 is one 8-byte record written with TryWrite
// (published at once) and read with TryRead by one goroutine: the CPU cost
// per record of the unbatched path, zeroing ahead included.
func BenchmarkOneGoroutineTryWrite8(b *testing.B) {
	r, _ := ring.New(4096)
	src, dst := make([]byte, 8), make([]byte, 8)
	b.ReportAllocs()
	for b.Loop() {
		_ = r.TryWrite(1, src)
		_, _, _ = r.TryRead(dst)
	}
}

// BenchmarkOneGoroutineReserve24 is the unbatched record of shm's small
// eager message (a 16-byte header and 8 bytes of payload) as shm moves it,
// by one goroutine: Reserve, fill, CommitPublish; Peek, Consume, and the
// Peek that finds the ring empty and releases. Its instructions per op
// (callgrind) are the ring's CPU part of a shm message each way.
func BenchmarkOneGoroutineReserve24(b *testing.B) {
	r, _ := ring.New(4096)
	src := make([]byte, 24)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ := r.Reserve(24)
		copy(buf, src)
		_ = r.CommitPublish(1, 24)
		_, _, _ = r.Peek()
		_ = r.Consume()
		_, _, _ = r.Peek()
	}
}
