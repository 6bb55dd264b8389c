//go:build race

package match

// diffOps is scaled down under the race detector, which slows this
// single-goroutine test about tenfold; the normal build runs 1,000,000.
const diffOps = 200_000
