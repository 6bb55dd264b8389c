package launch

// Jobs under Slurm's srun --mpi=pmi2 on the one-node cluster
// internal/jobtest starts (once for the package; TestMain stops it).

import (
	"fmt"
	"testing"
	"time"

	"github.com/gofi-dev/fi/internal/jobtest"
)

// srunRun runs n tasks of role with srun --mpi=pmi2.
func srunRun(t *testing.T, c *jobtest.Cluster, n int, role, arg string, timeout time.Duration, env ...string) runResult {
	t.Helper()
	deadline := time.Now().Add(timeout - 5*time.Second)
	return c.RunSrun(t, timeout, childEnv(role, arg, deadline, env...), n, childArgs()...)
}

// TestSlurmRing: a ring over launch.Connect under srun --mpi=pmi2.
func TestSlurmRing(t *testing.T) {
	c := jobtest.Slurm(t)
	cases := allRingCases(t)
	if testing.Short() {
		cases = cases[1:2]
	}
	slots := make(chan struct{}, launcherSlots)
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/n=%d/pmi%s", tc.prov, tc.n, tc.pmi), func(t *testing.T) {
			t.Parallel()
			slots <- struct{}{}
			defer func() { <-slots }()
			r := srunRun(t, c, tc.n, "ring", tc.prov, 120*time.Second, "GOFI_PMI="+tc.pmi)
			if r.Err != nil {
				t.Logf("cluster logs:\n%s", c.Logs())
			}
			checkRing(t, r, tc, "pmi"+tc.pmi, tc.n)
		})
	}
}
