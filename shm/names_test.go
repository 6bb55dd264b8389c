package shm

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestNewName_UniqueValidPrintable(t *testing.T) {
	const goroutines, each = 8, 500
	var mu sync.Mutex
	seen := make(map[string]bool)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				n := NewName()
				mu.Lock()
				if seen[n] {
					t.Errorf("duplicate name %q", n)
				}
				seen[n] = true
				mu.Unlock()
				if err := ValidName(n); err != nil {
					t.Errorf("NewName() = %q: %v", n, err)
				}
			}
		}()
	}
	wg.Wait()
}

func TestValidName_RejectsUnsafeNames(t *testing.T) {
	p := Prefix()
	for _, tc := range []struct{ what, name string }{
		{"empty", ""},
		{"without the user prefix", "gofi-x-1-1-ab"},
		{"of another user", "gofi-4242424-1-1-ab"},
		{"with a slash", p + "a/b"},
		{"with dot-dot path", p + "../x"},
		{"with a space", p + "a b"},
		{"with a control byte", p + "a\x00b"},
		{"with non-ASCII", p + "é"},
		{"longer than MaxNameLen", p + strings.Repeat("a", MaxNameLen)},
	} {
		if tc.what == "of another user" && strings.HasPrefix(tc.name, p) {
			continue
		}
		if err := ValidName(tc.name); !errors.Is(err, ErrName) {
			t.Errorf("ValidName(name %s %q) = %v, want ErrName", tc.what, tc.name, err)
		}
	}
	if err := ValidName(p + strings.Repeat("a", MaxNameLen-len(p))); err != nil {
		t.Errorf("name of exactly MaxNameLen bytes refused: %v", err)
	}
}

func TestParseAddr_RoundTripsAndRejectsOtherSchemes(t *testing.T) {
	n := NewName()
	got, err := ParseAddr(Addr(n))
	if err != nil || got != n {
		t.Fatalf("ParseAddr(Addr(%q)) = %q, %v", n, got, err)
	}
	for _, a := range []string{n, "fi_sockaddr_in://1.2.3.4:5", "fi_shm://", "fi_shm://" + n + "/x", "FI_SHM://" + n} {
		if _, err := ParseAddr(a); !errors.Is(err, ErrName) {
			t.Errorf("ParseAddr(%q) = %v, want ErrName", a, err)
		}
	}
}

func FuzzParseAddr(f *testing.F) {
	f.Add(Addr(NewName()))
	f.Add("fi_shm://")
	f.Add("fi_shm://gofi-0-1-2-3/../x")
	f.Add("fi_sockaddr_in://127.0.0.1:1")
	f.Fuzz(func(t *testing.T, s string) {
		name, err := ParseAddr(s)
		if err != nil {
			return
		}
		if Addr(name) != s || ValidName(name) != nil || strings.ContainsAny(name, "/\x00 ") {
			t.Fatalf("ParseAddr(%q) accepted %q", s, name)
		}
	})
}
