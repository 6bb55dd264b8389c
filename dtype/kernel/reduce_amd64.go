//go:build amd64 && !purego

package kernel

import (
	"github.com/klauspost/cpuid/v2"

	"github.com/gofi-dev/fi/dtype"
)

//go:generate go run reduce_gen.go

// vectorISA names the instruction set of the CPU-tuned kernels: AVX2 when
// the CPU and the OS (saved YMM state) have it. AVX-512 is not used: the
// kernels are memory-bound from L2 sizes up, where wider registers gain
// little, and the machines this was measured on have no AVX-512 to test
// them on.
var vectorISA = func() string {
	if cpuid.CPU.Supports(cpuid.AVX2) {
		return "avx2"
	}
	return ""
}()

// vectorBody returns the assembly body of (t, op) on this CPU, or nil.
func vectorBody(t dtype.Type, op dtype.Op) func(dst, a, b *byte, n int) {
	if vectorISA == "" {
		return nil
	}
	return avx2Bodies[[2]int{int(t), int(op)}]
}
