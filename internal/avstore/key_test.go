package avstore

import (
	"bytes"
	"fmt"
	"os"
	"testing"
)

// stripQuery is a key that ignores everything from '?' on.
func stripQuery(b []byte) []byte {
	if i := bytes.IndexByte(b, '?'); i >= 0 {
		return b[:i]
	}
	return b
}

// With SetKey, Find of a key matches the stored addresses with that key,
// in a private table and in a named AV.
func TestSetKey(t *testing.T) {
	tab := NewTable(FormatStr, 4)
	tab.SetKey(stripQuery)
	name := fmt.Sprintf("test-%d-key", os.Getpid())
	o := NamedOpts{}
	named, err := OpenNamed(name, FormatStr, &o)
	if err != nil {
		t.Skipf("no named AV here: %v", err)
	}
	defer named.Close()
	named.SetKey(stripQuery)
	if err := named.Lock(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []interface {
		Insert([]byte) (uint64, error)
		Find([]byte) (uint64, bool)
	}{tab, named} {
		if _, err := s.Insert([]byte("fi_link://a?via=shm")); err != nil {
			t.Fatal(err)
		}
		i, err := s.Insert([]byte("fi_link://b?via=tcp"))
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := s.Find(stripQuery([]byte("fi_link://b?shm=x"))); !ok || got != i {
			t.Errorf("%T: Find by key = %d, %v; want %d", s, got, ok, i)
		}
		if _, ok := s.Find(stripQuery([]byte("fi_link://c?via=tcp"))); ok {
			t.Errorf("%T: found an address with another key", s)
		}
	}
	named.Unlock()
}
