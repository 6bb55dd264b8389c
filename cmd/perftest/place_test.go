package main

import (
	"os/exec"
	"strings"
	"testing"
)

func TestCompare_SplitsRoundsByPlacement(t *testing.T) {
	near := &Placement{RTNs: 80, Class: "near"}
	far := &Placement{RTNs: 400, Class: "far"}
	rv := func(ours, theirs float64, before, after *Placement) roundVals {
		return roundVals{ours: measure{usec: ours}, theirs: measure{usec: theirs}, hasOurs: true, hasTheirs: true,
			place: roundPlace{before: before, after: after}}
	}
	row := compareRow{size: 8, iters: 10, rounds: []roundVals{
		rv(0.25, 0.375, near, near), rv(0.5, 1, far, far), rv(0.75, 1.25, far, far), rv(5, 5, near, far),
	}}
	all, _ := row.summarize(nil)
	if all.class != "mixed" || all.ours.usec != 0.625 {
		t.Fatalf("all rounds: class %q, gofi %v; want mixed, 0.625", all.class, all.ours.usec)
	}
	split := byClass([]compareRow{row})
	if n, f := split["near"], split["far"]; len(n) != 1 || len(f) != 1 ||
		n[0].ours.usec != 0.25 || n[0].theirs.usec != 0.375 || n[0].placeNs != 80 ||
		f[0].ours.usec != 0.625 || f[0].theirs.usec != 1.125 || f[0].class != "far" {
		t.Fatalf("split %+v: want the near round alone and the two far rounds (the mixed one in neither)", split)
	}
	s := placeSummary([]roundPlace{{near, near}, {far, far}, {far, far}, {near, far}})
	for _, want := range []string{"2 of 4 rounds far (400 ns)", "1 of 4 rounds mixed", "1 of 4 rounds near (80 ns)"} {
		if !strings.Contains(s, want) {
			t.Fatalf("summary %q lacks %q", s, want)
		}
	}
	if byClass([]compareRow{{rounds: []roundVals{rv(1, 1, far, far)}}}) != nil {
		t.Fatal("one class only: want no split")
	}
}

func TestReport_StampsResultsWithThePlacement(t *testing.T) {
	rep := newReport("t")
	rep.add(Result{Size: 1})
	rep.setPlacement(&Placement{RTNs: 75, Class: "near"})
	rep.add(Result{Size: 2})
	rep.setPlacement(&Placement{RTNs: 390, Class: "far"})
	rep.add(Result{Size: 3})
	rep.add(Result{Size: 4, Placement: "mixed", PlacementNs: 200})
	want := []string{"", "near", "far", "mixed"}
	for i, r := range rep.Results {
		if r.Placement != want[i] {
			t.Fatalf("result %d stamped %q, want %q", i, r.Placement, want[i])
		}
	}
	if rep.Placement.Class != "near" || rep.PlacementEnd.Class != "far" {
		t.Fatalf("start %+v, end %+v", rep.Placement, rep.PlacementEnd)
	}
}

// printRounds lists each round's figures in order with both tools'
// context switches per 1000 iterations ("-" when not known).
func TestCompare_PrintsRoundsWithTheirSwitches(t *testing.T) {
	near := &Placement{RTNs: 80, Class: "near"}
	far := &Placement{RTNs: 400, Class: "far"}
	row := compareRow{size: 4096, iters: 10000, rounds: []roundVals{
		{ours: measure{usec: 0.84, switches: 170}, theirs: measure{usec: 1.03, switches: 20}, hasOurs: true, hasTheirs: true,
			place: roundPlace{near, near}},
		{ours: measure{usec: 2.5, switches: 20090}, theirs: measure{usec: 7.5, switches: -1}, hasOurs: true, hasTheirs: true,
			place: roundPlace{near, far}},
	}}
	var b strings.Builder
	printRounds(&b, []compareRow{row, {size: 8, iters: 100}})
	for _, want := range []string{
		"# 4k x 10k gofi: 0.84 [17] near 2.50 [2009] mixed; libfabric: 1.03 [2] near 7.50 [-] mixed\n",
		"# 8 x 100 gofi: -; libfabric: -\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("rounds:\n%s\nlack %q", b.String(), want)
		}
	}
}

// involuntary reads an exited child's count; addSwitches keeps "not
// known" (-1).
func TestInvoluntarySwitches(t *testing.T) {
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Skip(err)
	}
	if n := involuntary(c.ProcessState); n < 0 {
		t.Fatalf("exited child: %d involuntary switches", n)
	}
	if involuntary(nil) != -1 || selfInvoluntary() < 0 {
		t.Fatal("no process: want -1; this process: want a count")
	}
	if addSwitches(3, 4) != 7 || addSwitches(-1, 4) != -1 || addSwitches(3, -1) != -1 {
		t.Fatal("addSwitches")
	}
}
