//go:build !amd64 || purego

package kernel

import "github.com/gofi-dev/fi/dtype"

// vectorISA is empty: no CPU-tuned kernels on this architecture (or with
// the purego build tag).
const vectorISA = ""

// vectorBody returns nil: the portable kernels serve every pair.
func vectorBody(t dtype.Type, op dtype.Op) func(dst, a, b *byte, n int) { return nil }
