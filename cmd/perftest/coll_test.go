package main

// perftest coll: self-spawned and under Hydra, the tables, JSON and plot.
// Short runs (-I, -S): they check the wiring, the checked results and the
// output, not the speed.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofi-dev/fi/internal/hosts"
	"github.com/gofi-dev/fi/internal/jobtest"
	"github.com/gofi-dev/fi/internal/placement"
)

// TestColl_SelfSpawnJSONAndPlot: three ranks (not a power of two) started
// by perftest itself; every collective and size has a result with the
// rank count, min <= avg <= max, and the plot is drawn.
func TestColl_SelfSpawnJSONAndPlot(t *testing.T) {
	bin := buildPerftest(t)
	svg := filepath.Join(t.TempDir(), "coll.svg")
	rc, out, errs := runBin(t, bin, 90*time.Second, launchEnv(), "coll", "-n", "3", "-S", "8,1k", "-I", "20", "-x", "2", "-json", "-plot", svg)
	if rc != 0 {
		t.Fatalf("exit %d:\n%s\n%s", rc, out, errs)
	}
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	got := map[string]int{}
	for _, r := range rep.Results {
		got[r.Test]++
		if r.Tool != "gofi" || r.Ranks != 3 || r.Provider != "shm" || r.Iterations != 20 || r.Load == "" {
			t.Errorf("result %+v", r)
		}
		if !(r.MinUsec <= r.Usec && r.Usec <= r.MaxUsec && r.Usec > 0 && r.P50 > 0) {
			t.Errorf("%s %d B: min %v avg %v max %v p50 %v", r.Test, r.Size, r.MinUsec, r.Usec, r.MaxUsec, r.P50)
		}
	}
	want := map[string]int{"barrier": 1, "bcast": 2, "allreduce": 2, "allgather": 2, "alltoall": 2}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%d %s results, want %d (%v)", got[k], k, v, got)
		}
	}
	if rep.Placement == nil {
		t.Errorf("no placement in the report")
	}
	b, err := os.ReadFile(svg)
	if err != nil || !bytes.Contains(b, []byte("gofi shm allreduce")) {
		t.Errorf("plot: %v", err)
	}
}

var collRowRe = regexp.MustCompile(`(?m)^1024\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+10\s+[0-9.]+\s+[0-9.]+$`)

// TestColl_Hydra: under mpiexec.hydra the launcher's ranks run, rank 0
// prints each table once, with the placement and the load.
func TestColl_Hydra(t *testing.T) {
	bin := buildPerftest(t)
	r := jobtest.RunHydra(t, 90*time.Second, launchEnv(), 3, nil, bin, "coll", "-c", "allreduce,alltoall", "-S", "1k", "-I", "10", "-x", "1")
	if r.Err != nil {
		t.Fatalf("%s", r.Report())
	}
	for _, h := range []string{"# perftest coll: 3 ranks (3 on this host) on shm", "# allreduce (FLOAT SUM)", "# alltoall (size per rank)", "# placement:", "# CPUs allowed per rank: 0:"} {
		if n := strings.Count(r.Stdout, h); n != 1 {
			t.Errorf("%q printed %d times, want once:\n%s", h, n, r.Report())
		}
	}
	if n := len(collRowRe.FindAllString(r.Stdout, -1)); n != 2 {
		t.Errorf("%d rows for 1024 B of 10 calls, want 2:\n%s", n, r.Report())
	}
}

// TestColl_HydraTwoHosts: four ranks, two on each of two hosts
// (internal/hosts: own network namespace and /dev/shm each): the default
// provider is tcp, every result checked; and shm+tcp when the build's
// linked endpoint offers collectives.
func TestColl_HydraTwoHosts(t *testing.T) {
	bin := buildPerftest(t)
	jobtest.Hydra(t)
	nt := hosts.New(t, 2, nil)
	provs := []string{"tcp"}
	if _, err := collInfo("shm+tcp"); err == nil {
		provs = append(provs, "shm+tcp")
	}
	for _, p := range provs {
		r := jobtest.RunHydraHosts(t, nt, 90*time.Second, launchEnv(), 4, 2, bin, "coll", "-p", p, "-c", "barrier,allreduce,alltoall", "-S", "8,64k", "-I", "10", "-x", "1")
		if r.Err != nil || !strings.Contains(r.Stdout, "# perftest coll: 4 ranks (2 on this host) on "+p+",") ||
			!regexp.MustCompile(`(?m)^65536\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+10\s`).MatchString(r.Stdout) {
			t.Errorf("%s across hosts:\n%s", p, r.Report())
		}
	}
}

// TestColl_DumpAndBind: -dump writes every rank's timed calls, in order,
// to prefix.RANK; two self-spawned ranks are bound to a CPU each (as Open
// MPI's mpirun binds two ranks), unless -bind none (bindCPUs).
func TestColl_DumpAndBind(t *testing.T) {
	bin := buildPerftest(t)
	prefix := filepath.Join(t.TempDir(), "calls")
	rc, out, errs := runBin(t, bin, 90*time.Second, launchEnv(), "coll", "-n", "2", "-c", "barrier,allreduce", "-S", "8", "-I", "30", "-x", "2", "-dump", prefix)
	if rc != 0 {
		t.Fatalf("exit %d:\n%s\n%s", rc, out, errs)
	}
	for r := range 2 {
		b, err := os.ReadFile(prefix + "." + strconv.Itoa(r))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 1+60 || !strings.HasPrefix(lines[0], "# perftest coll -dump, rank "+strconv.Itoa(r)) {
			t.Fatalf("rank %d's dump: %d lines, header %q", r, len(lines), lines[0])
		}
		var last int64
		for i, l := range lines[1:] {
			var name string
			var size, start, ns int64
			if n, err := fmt.Sscan(l, &name, &size, &start, &ns); n != 4 || err != nil || ns <= 0 || start < last ||
				(i < 30 && (name != "barrier" || size != 0)) || (i >= 30 && (name != "allreduce" || size != 8)) {
				t.Fatalf("rank %d's dump line %d: %q", r, i+1, l)
			}
			last = start
		}
	}
	cpus, _ := placement.Allowed()
	if len(cpus) >= 2 {
		want := fmt.Sprintf("# CPUs allowed per rank: 0:%d 1:%d\n", cpus[0], cpus[1])
		if !strings.Contains(out, want) {
			t.Errorf("bound ranks: want %q in\n%s", want, out)
		}
		rc, out, errs = runBin(t, bin, 90*time.Second, launchEnv(), "coll", "-n", "2", "-c", "barrier", "-I", "10", "-x", "1", "-bind", "none")
		if want := "# CPUs allowed per rank: 0:" + cpuList(cpus) + " 1:" + cpuList(cpus) + "\n"; rc != 0 || !strings.Contains(out, want) {
			t.Errorf("-bind none: exit %d, want %q in\n%s\n%s", rc, want, out, errs)
		}
	}
}

func TestColl_BadFlagsExit2(t *testing.T) {
	bin := buildPerftest(t)
	for _, args := range [][]string{{"coll", "-c", "scan"}, {"coll", "-S", "8", "-m", "4:8"}, {"coll", "-n", "0"}, {"coll", "-wait", "nap"}, {"coll", "-bind", "socket"}, {"coll", "extra"}} {
		if rc, _, errs := runBin(t, bin, 30*time.Second, nil, args...); rc != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, rc, errs)
		}
	}
}

func TestParseRange(t *testing.T) {
	if s, err := parseRange("4:64"); err != nil || len(s) != 5 || s[0] != 4 || s[4] != 64 {
		t.Errorf("4:64 = %v, %v", s, err)
	}
	if s, err := parseRange("1k"); err != nil || len(s) != 11 || s[10] != 1024 {
		t.Errorf("1k = %v, %v", s, err)
	}
	if _, err := parseRange("64:4"); err == nil {
		t.Errorf("64:4 accepted")
	}
}

// TestBindCPUs: self-spawned ranks are bound round-robin over the allowed
// CPUs by default (spread), one CPU each with core (refused with more
// ranks than CPUs), not at all with none.
func TestBindCPUs(t *testing.T) {
	cpus := []int{3, 5}
	for _, c := range []struct {
		mode  string
		ranks int
		want  []int
		fail  bool
	}{
		{"spread", 2, []int{3, 5}, false},
		{"spread", 5, []int{3, 5, 3, 5, 3}, false},
		{"core", 2, []int{3, 5}, false},
		{"core", 3, nil, true},
		{"none", 4, nil, false},
	} {
		got, err := bindCPUs(c.mode, c.ranks, cpus)
		if (err != nil) != c.fail || !slices.Equal(got, c.want) {
			t.Errorf("bindCPUs(%s, %d, %v) = %v, %v; want %v (error %v)", c.mode, c.ranks, cpus, got, err, c.want, c.fail)
		}
	}
	if got, err := bindCPUs("spread", 4, nil); got != nil || err != nil {
		t.Errorf("no CPUs known: %v, %v", got, err)
	}
}
