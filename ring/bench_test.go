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

// BenchmarkOneGoroutineDuplexBatch32 is BenchmarkOneGoroutineBatch32
// through a Duplex (end 0's Reserve, Commit, Publish; end 1's Peek,
// Consume, Release): the CPU cost a stream pays for the duplex's slot
// rules. The first record of a run goes through the slot, the rest
// through the ring (end 1 never sends, so end 0 never learns it has
// received them).
func BenchmarkOneGoroutineDuplexBatch32(b *testing.B) {
	a, z, _ := ring.NewDuplex(1 << 18)
	src := make([]byte, 8)
	b.ReportAllocs()
	for b.Loop() {
		for k := 0; k < 32; k++ {
			buf, _ := a.Reserve(8)
			ring.Copy(buf, src)
			a.Commit(1, 8)
		}
		a.Publish()
		for k := 0; k < 32; k++ {
			z.Peek()
			z.Consume()
		}
		z.Release()
	}
}

// BenchmarkOneGoroutineDuplexPingPong8 is one round trip of an 8-byte
// record through a Duplex by one goroutine (TryWrite and TryRead each
// way, through the slots): compare with two BenchmarkOneGoroutineTryWrite8.
func BenchmarkOneGoroutineDuplexPingPong8(b *testing.B) {
	a, z, _ := ring.NewDuplex(4096)
	src, dst := make([]byte, 8), make([]byte, 8)
	b.ReportAllocs()
	for b.Loop() {
		_ = a.TryWrite(1, src)
		_, _, _ = z.TryRead(dst)
		_ = z.TryWrite(1, dst)
		_, _, _ = a.TryRead(dst)
	}
}
