//go:build arm64 || ppc64 || ppc64le

package ring

// defaultCacheLine is used when cpuid cannot tell (128 covers Apple and
// some Neoverse parts on arm64, and POWER).
const defaultCacheLine = 128
