package main

// perftest started by real launchers (launched.go, multi.go): two ranks
// print the table the self-spawning run prints, more ranks the multi-pair
// tables. The runs are short (-I, -S): they check the wiring and the
// output, not the speed.

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gofi-dev/fi/internal/hosts"
	"github.com/gofi-dev/fi/internal/jobtest"
)

// launchEnv is the ranks' environment: a short launch timeout, so a rank
// that cannot reach the other fails fast.
func launchEnv() []string {
	return append(os.Environ(), "FI_PROVIDER=", "GOFI_LAUNCH_TIMEOUT=60s")
}

var ppRowRe = regexp.MustCompile(`(?m)^64\s+20\s+=20\s+`)

// checkPingpong checks a launched pingpong printed fi_pingpong's table
// once (rank 0 only), the placement once when both ranks share the host
// (pingpong cannot ask a remote peer where it runs), and a row for 64
// bytes.
func checkPingpong(t *testing.T, r jobtest.Result, sameHost bool) {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("%s", r.Report())
	}
	if n := strings.Count(r.Stdout, ppHeader()); n != 1 {
		t.Errorf("fi_pingpong's header printed %d times, want once:\n%s", n, r.Report())
	}
	if !ppRowRe.MatchString(r.Stdout) {
		t.Errorf("no 64-byte row of 20 iterations:\n%s", r.Report())
	}
	if n := strings.Count(r.Stderr, "# placement:"); sameHost && (n < 1 || n > 2) || !sameHost && n != 0 {
		t.Errorf("placement printed %d times (rank 0 only: at the start, and at the end if it changed):\n%s", n, r.Report())
	}
}

func TestLaunched_HydraPingpong(t *testing.T) {
	bin := buildPerftest(t)
	for _, prov := range []string{"shm", "tcp"} {
		r := jobtest.RunHydra(t, 90*time.Second, launchEnv(), 2, nil, bin, "pingpong", "-p", prov, "-I", "20", "-S", "64")
		checkPingpong(t, r, true)
	}
}

func TestLaunched_SrunPingpong(t *testing.T) {
	bin := buildPerftest(t)
	c := jobtest.Slurm(t)
	r := c.RunSrun(t, 90*time.Second, launchEnv(), 2, bin, "pingpong", "-I", "20", "-S", "64")
	checkPingpong(t, r, true)
}

// torchrun is not installable here (it comes with PyTorch, from PyPI):
// the test gives the processes the environment torchrun gives.
func TestLaunched_EnvPingpong(t *testing.T) {
	bin := buildPerftest(t)
	r := jobtest.RunEnv(t, 90*time.Second, launchEnv(), 2, bin, "pingpong", "-I", "20", "-S", "64")
	checkPingpong(t, r, true)
}

// TestLaunched_HydraLatencyAndSweep: latency prints its table; the
// default run prints the default table (shm, tcp, Go net) against rank 1.
func TestLaunched_HydraLatencyAndSweep(t *testing.T) {
	bin := buildPerftest(t)
	r := jobtest.RunHydra(t, 90*time.Second, launchEnv(), 2, nil, bin, "latency", "-S", "8,4k", "-I", "50")
	if r.Err != nil || strings.Count(r.Stdout, "# latency, shm msg") != 1 || !regexp.MustCompile(`(?m)^4k\s+50\s`).MatchString(r.Stdout) {
		t.Errorf("latency:\n%s", r.Report())
	}
	r = jobtest.RunHydra(t, 120*time.Second, launchEnv(), 2, nil, bin, "-I", "20")
	if r.Err != nil {
		t.Fatalf("default run:\n%s", r.Report())
	}
	for _, p := range []string{"shm", "tcp"} {
		if !regexp.MustCompile(`(?m)^` + p + `\s+8\s`).MatchString(r.Stdout) {
			t.Errorf("default run: no %s row:\n%s", p, r.Report())
		}
	}
}

// TestLaunched_HydraMulti: four ranks run two pairs at once (latency and
// bandwidth) and a ring; rank 0 prints one table each.
func TestLaunched_HydraMulti(t *testing.T) {
	bin := buildPerftest(t)
	cases := []struct {
		args []string
		head string
		row  string
	}{
		{[]string{"latency", "-S", "8,1k", "-I", "50"}, "# latency over 2 pairs at once (rank i with rank i+2", `(?m)^1k\s+50\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+$`},
		{[]string{"bw", "-S", "4k", "-I", "128", "-W", "16"}, "# bw over 2 pairs at once", `(?m)^4k\s+128\s+16\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+$`},
		{[]string{"pingpong", "-pattern", "ring", "-p", "tcp", "-S", "64", "-I", "20"}, "# latency around a ring of 4 ranks", `(?m)^64\s+20\s`},
	}
	for _, c := range cases {
		r := jobtest.RunHydra(t, 90*time.Second, launchEnv(), 4, nil, append([]string{bin}, c.args...)...)
		if r.Err != nil || strings.Count(r.Stdout, c.head) != 1 || !regexp.MustCompile(c.row).MatchString(r.Stdout) {
			t.Errorf("%v:\n%s", c.args, r.Report())
		}
		if strings.HasPrefix(c.head, "# latency over") && !strings.Contains(r.Stdout, "# placement of each pair") {
			t.Errorf("%v: no placement line:\n%s", c.args, r.Report())
		}
	}
}

// TestLaunched_RankFailsJobEnds: a rank that fails (a bad flag) ends the
// job at once with its status, rather than leaving the other to time out.
func TestLaunched_RankFailsJobEnds(t *testing.T) {
	bin := buildPerftest(t)
	r := jobtest.RunHydra(t, 90*time.Second, launchEnv(), 2, nil, bin, "pingpong", "-compare")
	if r.Err == nil || !strings.Contains(r.Stderr, "-compare runs both sides") || r.Took > 30*time.Second {
		t.Errorf("want a quick failure naming -compare:\n%s", r.Report())
	}
}

// TestLaunched_HydraTwoHosts: ranks on two hosts (internal/hosts: own
// network namespace and /dev/shm each): pingpong over tcp, the default run
// without shm, and pairs that cross the hosts.
func TestLaunched_HydraTwoHosts(t *testing.T) {
	bin := buildPerftest(t)
	jobtest.Hydra(t)
	nt := hosts.New(t, 2, nil)
	r := jobtest.RunHydraHosts(t, nt, 90*time.Second, launchEnv(), 2, 1, bin, "pingpong", "-p", "tcp", "-I", "20", "-S", "64")
	checkPingpong(t, r, false)
	r = jobtest.RunHydraHosts(t, nt, 120*time.Second, launchEnv(), 2, 1, bin, "-I", "20")
	if r.Err != nil || !regexp.MustCompile(`(?m)^tcp\s+8\s`).MatchString(r.Stdout) || regexp.MustCompile(`(?m)^shm\s`).MatchString(r.Stdout) {
		t.Errorf("default run across hosts: want tcp rows and no shm rows:\n%s", r.Report())
	}
	r = jobtest.RunHydraHosts(t, nt, 90*time.Second, launchEnv(), 4, 2, bin, "latency", "-S", "64", "-I", "50")
	if r.Err != nil || !strings.Contains(r.Stdout, "provider tcp") || !regexp.MustCompile(`(?m)^64\s+50\s`).MatchString(r.Stdout) {
		t.Errorf("pairs across hosts:\n%s", r.Report())
	}
	// The linked endpoint: a ring whose hops are shm on a host and tcp
	// between them.
	if _, err := getInfo(fabricOpts{prov: "shm+tcp", epType: "rdm"}, ""); err == nil {
		r = jobtest.RunHydraHosts(t, nt, 90*time.Second, launchEnv(), 4, 2, bin, "latency", "-pattern", "ring", "-p", "shm+tcp", "-S", "64", "-I", "50")
		if r.Err != nil || !strings.Contains(r.Stdout, "provider shm+tcp") || !regexp.MustCompile(`(?m)^64\s+50\s`).MatchString(r.Stdout) {
			t.Errorf("shm+tcp ring across hosts:\n%s", r.Report())
		}
	}
}
