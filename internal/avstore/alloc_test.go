//go:build !race

package avstore

import "testing"

// Find of a probe on the caller's stack allocates nothing, with and
// without a key.
func TestFindAllocatesNothing(t *testing.T) {
	for _, key := range []func([]byte) []byte{nil, stripQuery} {
		tab := NewTable(FormatStr, 4)
		tab.SetKey(key)
		tab.Insert([]byte("fi_link://a?via=shm"))
		allocs := testing.AllocsPerRun(100, func() {
			var probe [16]byte
			copy(probe[:], "fi_link://a")
			if _, ok := tab.Find(probe[:11]); !ok && key != nil {
				t.Fatal("not found")
			}
		})
		if allocs != 0 {
			t.Errorf("key %v: %v allocations per Find", key != nil, allocs)
		}
	}
}
