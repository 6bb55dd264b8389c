package ring

import (
	"fmt"
	"math"
	"strings"
	"unsafe"
)

// The copy path.
//
// Go's built-in copy (runtime memmove) already picks its routine by size:
// SSE/AVX moves for small and medium copies, REP MOVSB where ERMS is fast,
// and non-temporal stores from runtimeNT (1 MiB) up. Measured on the
// development machine (AMD EPYC, L2 1 MiB, LLC 32 MiB; see the copy
// benchmarks in benchmarks/copy_test.go):
//
//   - 8 bytes (the size of a tagged message's inline data or a small
//     fixed-size record): one word move that the compiler inlines into
//     the caller. copy calls runtime memmove there, and around any call
//     the caller spills its live registers to the stack; in a ring
//     producer those extra stores fill the store buffer, which is what
//     keeps several ring lines in flight to the consumer's core. Measured
//     in isolation (benchmarks/copy_path_test.go, size=8B) and in the
//     ring throughput benchmark (ring-copy).
//   - other sizes below 1 MiB: nothing written in Go beats copy: it is copy.
//   - at 1 MiB..L2 the runtime's non-temporal stores push to memory data
//     that would have fit in L2; copying in segments of half of L2 (each
//     below the runtime's threshold) keeps it cached and was faster
//     (about 84 vs 78 GB/s at 1 MiB, cache-hot).
//   - above L2 the segmented copy lost (1.25 MiB: 76 vs 80 GB/s; 16 MiB:
//     38 vs 68 GB/s): the runtime's non-temporal stores win, so it is copy.
//
// No assembly is kept, so the noasm build tag changes nothing here. An
// AVX2 non-temporal copy (VMOVNTDQ, 128 bytes a loop, SFENCE) was written
// and measured against copy, not committed:
//
//   - cache-hot, one core: it lost below 1 MiB (4 KiB 23 vs 152 GB/s,
//     64 KiB 65 vs 87, 256 KiB 70 vs 90) and won only at 1 MiB (90 vs 80),
//     where the segmented copy already wins without assembly.
//   - into a buffer another core then reads (the ring case): it lost or
//     tied at 128 KiB..1 MiB (e.g. 128 KiB 3.0 vs 7.0 GB/s, 384 KiB 2.5 vs
//     3.9), as data pushed to memory must come back for the reader.
//
// Nothing beat copy below the runtime's own threshold, so every class
// dispatches to copy, except the word and the segmented ones above.

// runtimeNT is the size from which runtime memmove on amd64 uses
// non-temporal stores (memmove_amd64.s: CMPQ BX, $0x100000).
const runtimeNT = 1 << 20

// CopyPath names a copy routine. A plain value, safe for concurrent use.
type CopyPath uint8

const (
	// PathBuiltin is Go's copy.
	PathBuiltin CopyPath = iota
	// PathSegmented is copy in segments below the runtime's non-temporal
	// threshold, keeping the destination in cache.
	PathSegmented
	// PathWord is one 8-byte move inlined into the caller.
	PathWord
)

func (p CopyPath) String() string {
	switch p {
	case PathBuiltin:
		return "builtin copy"
	case PathSegmented:
		return "segmented copy"
	case PathWord:
		return "word move"
	}
	return fmt.Sprintf("CopyPath(%d)", uint8(p))
}

// plan is the dispatch table, fixed at start-up (tests may override it
// through export_test.go before any concurrent use).
var plan = makePlan(sizing)

type copyPlan struct {
	segFrom, segTo int // sizes in [segFrom, segTo] take the segmented path
	seg            int // segment length
}

func makePlan(s Sizing) copyPlan {
	p := copyPlan{segFrom: math.MaxInt, segTo: -1, seg: runtimeNT / 2}
	if s.L2 >= runtimeNT {
		p.segFrom, p.segTo = runtimeNT, s.L2
		p.seg = min(s.L2/2, runtimeNT/2)
	}
	return p
}

// Copy copies min(len(dst), len(src)) bytes from src to dst and returns
// the count, like copy, choosing the routine for the size (see CopyPlan).
// It never allocates and is safe for concurrent use.
func Copy(dst, src []byte) int {
	if len(src) == 8 && len(dst) >= 8 {
		// One word move, inlined: no call, so the caller spills nothing
		// around it (see "8-byte words" above).
		*(*[8]byte)(dst) = [8]byte(src)
		return 8
	}
	return copyAny(dst, src)
}

// copyAny is Copy for every size but the word, kept out of line so that
// Copy itself stays small enough to inline (the builtin copy alone takes
// most of the inlining budget; Copy is at it, 80, and a test checks it
// still inlines). Other sizes pay this one extra call: about 1 ns (4 KiB:
// 27.4 vs 26.6 ns for copy).
//
//go:noinline
func copyAny(dst, src []byte) int {
	if len(src) < plan.segFrom {
		return copy(dst, src)
	}
	return copyLarge(dst, src)
}

func copyLarge(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < plan.segFrom || n > plan.segTo {
		return copy(dst, src)
	}
	return copySegmented(dst[:n], src[:n], plan.seg)
}

func copySegmented(dst, src []byte, seg int) int {
	n := len(dst)
	if overlap(dst, src) {
		return copy(dst, src)
	}
	for len(src) > seg {
		copy(dst[:seg], src[:seg])
		dst, src = dst[seg:], src[seg:]
	}
	copy(dst, src)
	return n
}

func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa := uintptr(unsafe.Pointer(unsafe.SliceData(a)))
	pb := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// CopyClass is one size class of the copy path. A plain value, safe to
// share.
type CopyClass struct {
	Min, Max int // inclusive byte range; Max == math.MaxInt for "and up"
	Path     CopyPath
	Why      string
}

// CopyClasses returns the dispatch per size class, in increasing size.
func CopyClasses() []CopyClass {
	p := plan
	if p.segFrom > p.segTo {
		cs := wordClasses(math.MaxInt)
		cs[len(cs)-1].Why = fmt.Sprintf("L2 %d KiB is below the runtime's non-temporal threshold (%d KiB): nothing measured beats copy", sizing.L2>>10, runtimeNT>>10)
		return cs
	}
	cs := wordClasses(p.segFrom - 1)
	if last := cs[len(cs)-1].Max; p.segFrom > last+1 {
		cs = append(cs, CopyClass{last + 1, p.segFrom - 1, PathBuiltin,
			"runtime memmove (AVX/ERMS) is the fastest measured below its non-temporal threshold; no assembly beats it"})
	}
	cs = append(cs, CopyClass{p.segFrom, p.segTo, PathSegmented,
		fmt.Sprintf("%d KiB segments stay below the runtime's non-temporal threshold, so data that fits L2 (%d KiB) stays cached for the reader", p.seg>>10, sizing.L2>>10)})
	if p.segTo < math.MaxInt {
		cs = append(cs, CopyClass{p.segTo + 1, math.MaxInt, PathBuiltin,
			"larger than L2: the runtime's non-temporal stores measured faster than segments"})
	}
	return cs
}

// wordClasses returns the classes from 0 to hi around the word move:
// builtin below 8 bytes, the word at 8, builtin from 9 to hi.
func wordClasses(hi int) []CopyClass {
	const small = "runtime memmove (AVX/ERMS) is the fastest measured below its non-temporal threshold; no assembly beats it"
	return []CopyClass{
		{0, 7, PathBuiltin, small},
		{8, 8, PathWord, "one 8-byte move inlined into the caller: no call, so no register spills (measured: ring producer, copy benchmark)"},
		{9, hi, PathBuiltin, small},
	}
}

// CopyPlan describes the CPU sizing and which copy routine serves each size
// class and why, for `perftest info -v`.
func CopyPlan() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cpu: %s\n", sizing)
	for _, c := range CopyClasses() {
		hi := "up"
		if c.Max != math.MaxInt {
			hi = sizeStr(c.Max)
		}
		fmt.Fprintf(&b, "copy %s..%s: %s (%s)\n", sizeStr(c.Min), hi, c.Path, c.Why)
	}
	return b.String()
}

func sizeStr(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
