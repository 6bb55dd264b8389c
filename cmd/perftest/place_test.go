package main

import (
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
