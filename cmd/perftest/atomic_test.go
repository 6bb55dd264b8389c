package main

import (
	"regexp"
	"testing"
	"time"
)

var atomicRow = regexp.MustCompile(`(?m)^(fetch-add|cswap) ([0-9.]+) ([0-9.]+)$|^rate ([0-9]+)$`)

// TestAtomicBench runs perftest atomic briefly on the providers with
// atomics: the three result lines and the placement come out.
func TestAtomicBench(t *testing.T) {
	bin := buildPerftest(t)
	for _, prov := range []string{"tcp", "shm"} {
		rc, out, errs := runBin(t, bin, 60*time.Second, nil, "atomic", "-p", prov, "-n", "50", "-w", "8")
		if rc != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", prov, rc, out, errs)
		}
		if n := len(atomicRow.FindAllString(out, -1)); n != 3 {
			t.Fatalf("%s: %d result lines:\n%s", prov, n, out)
		}
		if !regexp.MustCompile(`(?m)^# placement: `).MatchString(out) {
			t.Fatalf("%s: no placement line:\n%s", prov, out)
		}
	}
	if rc, _, _ := runBin(t, bin, 10*time.Second, nil, "atomic", "-p", "verbs"); rc != 2 {
		t.Fatalf("unknown provider: exit %d, want 2", rc)
	}
}
