//go:build !arm64 && !ppc64 && !ppc64le

package ring

// defaultCacheLine is used when cpuid cannot tell.
const defaultCacheLine = 64
