package ring_test

import (
	"testing"

	"github.com/gofi-dev/fi/ring"
)

func BenchmarkSingleThread8(b *testing.B) {
	r, _ := ring.New(1 << 18)
	src := make([]byte, 8)
	for i := 0; i < b.N; i++ {
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
