package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPlot_CarriesPlacement: a plot shows the placement its figures were
// measured in (issue #12 item 1): -plot of one run titles its latency panel
// with the probe's class, and `perftest plot` of result files names each
// series' placement class, as the JSON records carry them.
func TestPlot_CarriesPlacement(t *testing.T) {
	bin := buildPerftest(t)
	dir := t.TempDir()
	own, rep := filepath.Join(dir, "own.svg"), filepath.Join(dir, "lat.json")
	rc, out, errs := runBin(t, bin, 60*time.Second, nil, "latency", "-json", "-I", "20", "-S", "8,4k", "-plot", own)
	if rc != 0 {
		t.Fatalf("exit %d: %s", rc, errs)
	}
	var r Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	if r.Placement == nil || r.Placement.Class == "" {
		t.Fatalf("the JSON report carries no placement:\n%s", out)
	}
	for _, res := range r.Results {
		if res.Placement == "" {
			t.Fatalf("result %+v carries no placement", res)
		}
	}
	svg, err := os.ReadFile(own)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(svg, []byte("Latency ("+r.Placement.Class)) {
		t.Fatalf("-plot's latency title lacks the placement %q", r.Placement.Class)
	}
	if err := os.WriteFile(rep, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	both := filepath.Join(dir, "both.svg")
	if rc, out, errs := runBin(t, bin, 60*time.Second, nil, "plot", "-o", both, rep, rep); rc != 0 {
		t.Fatalf("plot: exit %d: %s%s", rc, out, errs)
	}
	if svg, err = os.ReadFile(both); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(svg, []byte("gofi shm latency msg, "+r.Results[0].Placement)) {
		t.Fatalf("overlaid plot's series lack the placement class %q", r.Results[0].Placement)
	}
}

// TestRMABench_PlotAndPlacedRecords: perftest rma draws its figures
// (-plot, as the other subcommands) with the placement in the title, and
// every JSON record carries the placement class (issues #13 and #12 item
// 1).
func TestRMABench_PlotAndPlacedRecords(t *testing.T) {
	bin := buildPerftest(t)
	dir := t.TempDir()
	j, svg := filepath.Join(dir, "rma.json"), filepath.Join(dir, "rma.svg")
	rc, out, errs := runBin(t, bin, 60*time.Second, nil, "rma", "-p", "shm", "-s", "8,4k", "-n", "20", "-w", "4", "-json", j, "-plot", svg)
	if rc != 0 {
		t.Fatalf("exit %d\n%s\n%s", rc, out, errs)
	}
	b, err := os.ReadFile(j)
	if err != nil {
		t.Fatal(err)
	}
	var rep rmaReport
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Results) != 8 {
		t.Fatalf("JSON %v: %s", err, b)
	}
	for _, r := range rep.Results {
		if r.Placement == "" || r.PlacementNs <= 0 && r.Placement != "same-cpu" {
			t.Fatalf("record %+v carries no placement", r)
		}
	}
	img, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Latency (" + rep.Results[0].Placement, "Bandwidth (" + rep.Results[0].Placement,
		"gofi shm latency rma write RegMR", "gofi shm bw rma read RegMR"} {
		if !bytes.Contains(img, []byte(want)) {
			t.Fatalf("plot lacks %q", want)
		}
	}
	if rc, _, errs := runBin(t, bin, 10*time.Second, nil, "rma", "-plot", "x.gif"); rc != 2 || !bytes.Contains([]byte(errs), []byte("want a .svg or .png")) {
		t.Fatalf("-plot x.gif: exit %d: %s", rc, errs)
	}
}
