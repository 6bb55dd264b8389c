package ring

import (
	"fmt"

	"github.com/klauspost/cpuid/v2"
)

// Sizing is what the CPU tells the ring and copy path, read once at
// start-up from cpuid (klauspost/cpuid/v2) with per-arch fallbacks where
// cpuid reports nothing. It is a plain value, safe to copy and share.
type Sizing struct {
	CacheLine int // bytes per cache line (fallback defaultCacheLine)
	L2        int // bytes of L2 per core (fallback 512 KiB)
	LLC       int // bytes of the last-level cache (fallback 8 MiB)
	// Segment is the suggested unit for streaming a large payload through
	// a ring (and for publishing the index while doing so): a sixteenth of
	// L2, within [16 KiB, 256 KiB], so a segment in flight on each side
	// stays in L2 (MEASURED.md: 64 KiB segments through a 4 MiB ring).
	Segment int
	// RingBytes is the suggested capacity of a ring that streams large
	// payloads: 4x L2, within [256 KiB, 8 MiB], a power of two.
	RingBytes int
	// NonTemporal is the copy size above which non-temporal stores pay,
	// so the copy path lets the runtime's own run. The first guess was half
	// the LLC; measured here it is L2 (or the runtime's 1 MiB threshold if
	// L2 is smaller): a copy whose source and destination overflow L2 runs
	// faster with non-temporal stores even when the LLC could hold it.
	NonTemporal int
	AVX2        bool
	AVX512      bool
	ERMS        bool
}

var sizing = readSizing()

// CPU returns the sizing read at start-up.
func CPU() Sizing { return sizing }

// CacheLine returns the CPU's cache-line size in bytes.
func CacheLine() int { return sizing.CacheLine }

func readSizing() Sizing {
	c := &cpuid.CPU
	s := Sizing{
		CacheLine: c.CacheLine,
		L2:        c.Cache.L2,
		LLC:       c.Cache.L3,
		AVX2:      c.Supports(cpuid.AVX2),
		AVX512:    c.Supports(cpuid.AVX512F),
		ERMS:      c.Supports(cpuid.ERMS),
	}
	if s.CacheLine <= 0 || s.CacheLine&(s.CacheLine-1) != 0 {
		s.CacheLine = defaultCacheLine
	}
	if s.L2 <= 0 {
		s.L2 = 512 << 10
	}
	if s.LLC <= 0 {
		s.LLC = max(s.L2, 8<<20)
	}
	s.Segment = pow2Floor(min(max(s.L2/16, 16<<10), 256<<10))
	s.RingBytes = pow2Floor(min(max(4*s.L2, 256<<10), 8<<20))
	s.NonTemporal = max(s.L2, runtimeNT)
	return s
}

func pow2Floor(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}

func (s Sizing) String() string {
	return fmt.Sprintf("cache line %d B, L2 %d KiB, LLC %d KiB, segment %d KiB, ring %d KiB, non-temporal from %d KiB, avx2=%t avx512=%t erms=%t",
		s.CacheLine, s.L2>>10, s.LLC>>10, s.Segment>>10, s.RingBytes>>10, s.NonTemporal>>10, s.AVX2, s.AVX512, s.ERMS)
}
