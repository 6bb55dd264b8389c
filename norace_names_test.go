package fi_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Tests that build only without the race detector (files tagged
// //go:build !race: the allocation counts, which the race detector's own
// allocations would spoil) never run under go test -race. CI runs them
// with go test -run Alloc ./..., so every test function in such a file
// must have Alloc in its name, or CI would never run it.
func TestNoRaceTestsAreNamedAlloc(t *testing.T) {
	testFunc := regexp.MustCompile(`(?m)^func (Test\w*)\(`)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Contains(src, []byte("//go:build !race")) {
			return nil
		}
		for _, m := range testFunc.FindAllSubmatch(src, -1) {
			if !bytes.Contains(m[1], []byte("Alloc")) {
				t.Errorf("%s: %s builds only without -race but has no Alloc in its name: CI's go test -run Alloc would skip it", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
