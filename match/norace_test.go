//go:build !race

package match

// diffOps is the number of random operations TestDifferential runs.
const diffOps = 1_000_000
