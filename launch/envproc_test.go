package launch

// Jobs started the way torchrun starts them: the test runs N processes
// with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT set (torchrun itself is not installed here: it comes with
// PyTorch from PyPI).

import (
	"fmt"
	"testing"
	"time"

	"github.com/gofi-dev/fi/internal/jobtest"
)

// envRun runs n ranks of role as separate processes with the torchrun
// environment and waits for all.
func envRun(t *testing.T, n int, role, arg string, timeout time.Duration, env ...string) runResult {
	t.Helper()
	deadline := time.Now().Add(timeout - 5*time.Second)
	return jobtest.RunEnv(t, timeout, childEnv(role, arg, deadline, env...), n, childArgs()...)
}

// TestEnvRing: a ring over launch.Connect with 1, 2, 4 and 8 processes
// started with the torchrun environment, on shm and tcp.
func TestEnvRing(t *testing.T) {
	cases := ringCases
	if testing.Short() {
		cases = cases[1:2]
	}
	slots := make(chan struct{}, launcherSlots)
	for _, c := range cases {
		if c.n != 4 && c.n != 8 || c.prov == "tcp" && c.n == 8 { // no PMI here: 3 runs cover it
			continue
		}
		t.Run(fmt.Sprintf("%s/n=%d", c.prov, c.n), func(t *testing.T) {
			t.Parallel()
			slots <- struct{}{}
			defer func() { <-slots }()
			r := envRun(t, c.n, "ring", c.prov, 120*time.Second)
			checkRing(t, r, c, "env", c.n)
		})
	}
}
