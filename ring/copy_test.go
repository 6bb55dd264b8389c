package ring_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/gofi-dev/fi/ring"
)

func TestCopy_EachPathMatchesBuiltinCopy(t *testing.T) {
	paths := []struct {
		path ring.CopyPath
		seg  int
	}{{ring.PathBuiltin, 0}, {ring.PathSegmented, 4096}, {ring.PathSegmented, 64}}
	rng := rand.New(rand.NewPCG(3, 4))
	src := make([]byte, 3<<20)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	for _, p := range paths {
		restore := ring.SetCopyPath(p.path, p.seg)
		for _, n := range []int{0, 1, 7, 8, 9, 16, 63, 64, 4095, 4096, 4097, 1 << 16, 1<<20 - 1, 1 << 20, 1<<20 + 1, 3 << 20} {
			for _, dn := range []int{n, n / 2} {
				dst := make([]byte, dn)
				want := make([]byte, dn)
				if got, w := ring.Copy(dst, src[:n]), copy(want, src[:n]); got != w || !bytes.Equal(dst, want) {
					t.Fatalf("%v seg %d n %d dst %d: returned %d want %d, equal=%v", p.path, p.seg, n, dn, got, w, bytes.Equal(dst, want))
				}
			}
		}
		restore()
	}
}

func TestCopy_OverlappingSlicesBehaveLikeCopy(t *testing.T) {
	defer ring.SetCopyPath(ring.PathSegmented, 16)()
	a := []byte(strings.Repeat("abcdefghij", 20))
	b := bytes.Clone(a)
	ring.Copy(a[5:], a)
	copy(b[5:], b)
	if !bytes.Equal(a, b) {
		t.Fatal("overlapping copy differs from builtin")
	}
}

func TestCopyPlan_NamesEveryClassAndTheCPU(t *testing.T) {
	s := ring.CopyPlan()
	if !strings.Contains(s, "cache line") || !strings.Contains(s, "copy 0B..") {
		t.Fatalf("CopyPlan:\n%s", s)
	}
	cs := ring.CopyClasses()
	if cs[0].Min != 0 {
		t.Fatalf("first class starts at %d", cs[0].Min)
	}
	for i := 1; i < len(cs); i++ {
		if cs[i].Min != cs[i-1].Max+1 {
			t.Fatalf("classes not contiguous: %+v", cs)
		}
	}
	word := false
	for _, c := range cs {
		if c.Path == ring.PathWord {
			word = c.Min == 8 && c.Max == 8
		}
	}
	if !word {
		t.Fatalf("no word class at exactly 8 bytes: %+v", cs)
	}
	if c := ring.CPU(); c.CacheLine > ring.LineSep || c.CacheLine <= 0 {
		t.Fatalf("cpuid cache line %d does not fit the %d-byte shared lines", c.CacheLine, ring.LineSep)
	}
}

func FuzzCopySegmented(f *testing.F) {
	f.Add([]byte("hello"), uint16(3), uint16(2))
	f.Add(bytes.Repeat([]byte{1, 2, 3}, 1000), uint16(100), uint16(2999))
	f.Fuzz(func(t *testing.T, src []byte, seg, dn uint16) {
		defer ring.SetCopyPath(ring.PathSegmented, int(seg)%512+1)()
		dst := make([]byte, dn)
		want := make([]byte, dn)
		if ring.Copy(dst, src) != copy(want, src) || !bytes.Equal(dst, want) {
			t.Fatal("segmented copy differs from builtin")
		}
	})
}

// TestCopy_Inlines: the word move pays only if Copy is inlined into its
// callers (no call, no spills). Copy sits at the inliner's budget, so a
// change to it or to the compiler could silently undo that; the compiler's
// own report says.
func TestCopy_Inlines(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package")
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		t.Skipf("no go tool: %v", err)
	}
	out, err := exec.Command(gobin, "build", "-gcflags=-m", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)copy\.go:\d+:\d+: can inline Copy\b`).Match(out) {
		t.Fatalf("Copy is no longer inlinable:\n%s", out)
	}
}
