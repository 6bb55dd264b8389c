package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

var rmaRow = regexp.MustCompile(`(?m)^(write|read)-(lat|bw) [0-9]+ [0-9.]+( [0-9.]+)?$`)

// TestRMABench runs perftest rma briefly on shm (Go memory and AllocMR)
// and tcp: four result lines per size, the placement, and the JSON.
func TestRMABench(t *testing.T) {
	bin := buildPerftest(t)
	for _, c := range [][]string{{"-p", "shm"}, {"-p", "shm", "-alloc"}, {"-p", "tcp"}} {
		j := filepath.Join(t.TempDir(), "rma.json")
		args := append([]string{"rma", "-s", "8,64k", "-n", "20", "-w", "4", "-json", j}, c...)
		rc, out, errs := runBin(t, bin, 60*time.Second, nil, args...)
		if rc != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", c, rc, out, errs)
		}
		if n := len(rmaRow.FindAllString(out, -1)); n != 8 {
			t.Fatalf("%v: %d result lines:\n%s", c, n, out)
		}
		if !regexp.MustCompile(`(?m)^# placement: `).MatchString(out) {
			t.Fatalf("%v: no placement line:\n%s", c, out)
		}
		b, err := os.ReadFile(j)
		if err != nil {
			t.Fatal(err)
		}
		var rep rmaReport
		if err := json.Unmarshal(b, &rep); err != nil || len(rep.Results) != 8 || len(rep.Placement) == 0 {
			t.Fatalf("%v: JSON %v: %s", c, err, b)
		}
	}
	if rc, _, _ := runBin(t, bin, 10*time.Second, nil, "rma", "-p", "verbs"); rc != 2 {
		t.Fatalf("unknown provider: exit %d, want 2", rc)
	}
}
