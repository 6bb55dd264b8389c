package launch

// Jobs across two "hosts" (internal/hosts: network namespaces joined by a
// bridge, each with its own /dev/shm): ranks 0-1 on h1, 2-3 on h2. The
// launcher's process mapping (Hydra) or the ranks' hellos (env) must say
// two ranks per host, and the ring must cross the hosts over tcp (shm
// cannot reach the other host's memory).

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/gofi-dev/fi/internal/hosts"
	"github.com/gofi-dev/fi/internal/jobtest"
)

// checkHosts checks each rank ran on host h<rank/ppn+1> and counted ppn
// ranks there, and that a linked endpoint reaches its right neighbour over
// shm on its host and over tcp on the other.
func checkHosts(t *testing.T, r runResult, n, ppn int) {
	t.Helper()
	for i := range n {
		f := fields(r.Ranks[i])
		if f["prov"] == "shm+tcp" {
			want := "tcp"
			if i/ppn == (i+1)%n/ppn {
				want = "shm"
			}
			if f["right"] != want {
				t.Errorf("rank %d reaches rank %d over %q, want %s", i, (i+1)%n, f["right"], want)
			}
		}
		if want := fmt.Sprintf("h%d", i/ppn+1); f["host"] != want {
			t.Errorf("rank %d ran on %q, want %s", i, f["host"], want)
		}
		if want := fmt.Sprintf("%d/%d", i%ppn, ppn); f["local"] != want {
			t.Errorf("rank %d: local %s, want %s", i, f["local"], want)
		}
	}
}

func TestHydraTwoHosts(t *testing.T) {
	needHydra(t)
	nt := hosts.New(t, 2, nil)
	cases := []ringCase{{4, "tcp", "2"}, {4, "tcp", "1"}}
	if haveLinked() { // local ranks over shm, the other host's over tcp
		cases = append(cases, ringCase{4, "shm+tcp", "2"}, ringCase{6, "shm+tcp", "1"})
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/n=%d/pmi%s", c.prov, c.n, c.pmi), func(t *testing.T) {
			timeout := 120 * time.Second
			env := childEnv("ring", c.prov, time.Now().Add(timeout-5*time.Second), "GOFI_PMI="+c.pmi)
			ppn := c.n / 2
			r := jobtest.RunHydraHosts(t, nt, timeout, env, c.n, ppn, childArgs()...)
			want := fmt.Sprintf(`ok size=%d local=\d+/%d launcher=pmi%s prov=%s host=h[12] right=\S+$`, c.n, ppn, c.pmi, regexp.QuoteMeta(c.prov))
			expectRanks(t, r, c.n, want)
			checkHosts(t, r, c.n, ppn)
		})
	}
}

func TestEnvTwoHosts(t *testing.T) {
	nt := hosts.New(t, 2, nil)
	timeout := 120 * time.Second
	env := childEnv("ring", "tcp", time.Now().Add(timeout-5*time.Second))
	r := jobtest.RunEnvHosts(t, nt, timeout, env, 4, 2, childArgs()...)
	expectRanks(t, r, 4, `ok size=4 local=\d+/2 launcher=env prov=tcp host=h[12] right=-$`)
	checkHosts(t, r, 4, 2)
}
