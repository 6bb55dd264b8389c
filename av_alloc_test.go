//go:build !race

package fi

import "testing"

// The send path (lookupBytes), FI_SOURCE (reverse) and LookupTo allocate
// nothing, for stored entries and compact symmetric ranges alike.
func TestAV_LookupPathsAllocationFree(t *testing.T) {
	av := openTCPAV(t, &AVAttr{Flags: Symmetric})
	av.Insert(sas(t, "10.0.0.1:1", "10.0.0.2:2"), 0)
	av.InsertSym("10.1.0.0", 100, "7000", 4, 0)
	stored, ranged := sa(t, "10.0.0.2:2"), sa(t, "10.1.0.50:7003")
	var scratch [maxSockaddrLen]byte
	buf := make([]byte, 64)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, ok := av.lookupBytes(1, scratch[:]); !ok {
			t.Fatal("lookupBytes(1)")
		}
		if _, ok := av.lookupBytes(200, scratch[:]); !ok {
			t.Fatal("lookupBytes(200)")
		}
		if _, ok := av.reverse(stored); !ok {
			t.Fatal("reverse(stored)")
		}
		if _, ok := av.reverse(ranged); !ok {
			t.Fatal("reverse(ranged)")
		}
		if _, err := av.LookupTo(150, buf); err != nil {
			t.Fatal(err)
		}
		if _, err := av.LookupTo(9999, buf); err == nil {
			t.Fatal("LookupTo(9999)")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per lookup round, want 0", allocs)
	}
}
