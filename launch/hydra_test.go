package launch

// Jobs under MPICH's Hydra (mpiexec.hydra; /usr/bin/mpiexec may be Open
// MPI's and is not used).

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/gofi-dev/fi"
	"github.com/gofi-dev/fi/internal/jobtest"
)

// needHydra returns mpiexec.hydra's path or skips (fails in CI).
func needHydra(t *testing.T) string { return jobtest.Hydra(t) }

// hydraRun runs n ranks of role under mpiexec.hydra. extra are mpiexec
// options; env adds to the ranks' environment.
func hydraRun(t *testing.T, n int, role, arg string, timeout time.Duration, extra []string, env ...string) runResult {
	t.Helper()
	deadline := time.Now().Add(timeout - 5*time.Second)
	return jobtest.RunHydra(t, timeout, childEnv(role, arg, deadline, env...), n, extra, childArgs()...)
}

// ringCase is one ring run: ranks, provider, PMI version.
type ringCase struct {
	n    int
	prov string
	pmi  string
}

// ringCases are the rings every launcher runs: 1, 2, 4 and 8 ranks on shm
// and tcp, PMI-1 and PMI-2 mixed across them.
var ringCases = []ringCase{
	{1, "shm", "2"}, {2, "shm", "2"}, {4, "shm", "1"}, {8, "shm", "2"},
	{1, "tcp", "1"}, {2, "tcp", "1"}, {4, "tcp", "2"}, {8, "tcp", "1"},
}

// linkedCases are the rings on the linked shm+tcp endpoint, when GetInfo
// offers it (local ranks over shm, remote ranks over tcp).
var linkedCases = []ringCase{
	{1, "shm+tcp", "1"}, {2, "shm+tcp", "2"}, {4, "shm+tcp", "1"}, {8, "shm+tcp", "2"},
}

// haveLinked reports whether this build offers the shm+tcp provider.
func haveLinked() bool {
	hints := fi.AllocInfo()
	hints.EpAttr.Type = fi.EpRDM
	hints.FabricAttr.ProvName = "shm+tcp"
	_, err := fi.GetInfo(fi.Version(2, 0), "", "", 0, hints)
	return err == nil
}

// allRingCases are ringCases and, when shm+tcp exists, linkedCases.
func allRingCases(t *testing.T) []ringCase {
	if !haveLinked() {
		t.Log("no shm+tcp provider in this build: its rings are left out")
		return ringCases
	}
	return append(append([]ringCase(nil), ringCases...), linkedCases...)
}

// launcherSlots bounds the launcher runs a test has going at once: a run
// mostly waits for processes to start, so a few overlap well even on two
// cores.
const launcherSlots = 3

// TestHydraRing: a ring over launch.Connect under mpiexec.hydra.
func TestHydraRing(t *testing.T) {
	needHydra(t)
	cases := allRingCases(t)
	if testing.Short() {
		cases = cases[1:2]
	}
	slots := make(chan struct{}, launcherSlots)
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/n=%d/pmi%s", c.prov, c.n, c.pmi), func(t *testing.T) {
			t.Parallel()
			slots <- struct{}{}
			defer func() { <-slots }()
			r := hydraRun(t, c.n, "ring", c.prov, 120*time.Second, nil, "GOFI_PMI="+c.pmi)
			checkRing(t, r, c, "pmi"+c.pmi, c.n)
		})
	}
}

// checkRing checks every rank of a ring run reported success, and its
// place on the host (localSize ranks per host, in rank order).
func checkRing(t *testing.T, r runResult, c ringCase, launcher string, localSize int) {
	t.Helper()
	want := fmt.Sprintf(`ok size=%d local=\d+/%d launcher=%s prov=%s host=\S+ right=\S+$`, c.n, localSize, launcher, regexp.QuoteMeta(c.prov))
	expectRanks(t, r, c.n, want)
	for i := range c.n {
		f := fields(r.Ranks[i])
		if f["local"] != fmt.Sprintf("%d/%d", i%localSize, localSize) {
			t.Errorf("rank %d: local %s, want %d/%d", i, f["local"], i%localSize, localSize)
		}
		// One host: the linked endpoint reaches every neighbour over shm.
		if c.prov == "shm+tcp" && c.n > 1 && localSize == c.n && f["right"] != "shm" {
			t.Errorf("rank %d reaches its neighbour over %q, want shm on one host", i, f["right"])
		}
	}
}
