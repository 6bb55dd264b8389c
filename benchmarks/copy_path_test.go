package benchmarks

import (
	"fmt"
	"testing"

	"github.com/gofi-dev/fi/ring"
)

// BenchmarkCopyPath compares ring.Copy (the cpuid-driven dispatch) with Go's
// copy at the sizes of the issue, alternating the two per size. Cache-hot:
// the same source and destination each iteration, as a ring's segments are.
// CopyPlan says which routine serves each size class on this machine.
func BenchmarkCopyPath(b *testing.B) {
	b.Logf("\n%s", ring.CopyPlan())
	for range rounds() {
		for _, n := range []int{8, 4 << 10, 64 << 10, 1 << 20, 16 << 20} {
			copyPathSize(b, n)
		}
	}
}

func copyPathSize(b *testing.B, n int) {
	{
		src, dst := make([]byte, n), make([]byte, n)
		for i := range src {
			src[i] = byte(i)
		}
		name := fmt.Sprintf("size=%s", sizeName(n))
		b.Run(name+"/copy", func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				copy(dst, src)
			}
		})
		b.Run(name+"/ring.Copy", func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				ring.Copy(dst, src)
			}
		})
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	if n < 1<<10 {
		return fmt.Sprintf("%dB", n)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}
