package jobtest

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofi-dev/fi/internal/hosts"
)

// RunHydraHosts runs argv as n ranks under mpiexec.hydra across the hosts
// of nt, ppn ranks per host in host order (ranks 0..ppn-1 on the first):
// mpiexec.hydra runs on the first host and starts its proxies through
// nt's ssh stand-in, over eth0. Each host has its own /dev/shm; a rank
// learns its host with hosts.Here.
func RunHydraHosts(t testing.TB, nt *hosts.Net, timeout time.Duration, env []string, n, ppn int, argv ...string) Result {
	t.Helper()
	hydra := Hydra(t)
	var ips []string
	for _, h := range nt.Hosts {
		ips = append(ips, h.IP.String())
	}
	args := []string{"-launcher", "ssh", "-launcher-exec", nt.SSH(), "-iface", "eth0",
		"-hosts", strings.Join(ips, ","), "-ppn", strconv.Itoa(ppn), "-n", strconv.Itoa(n)}
	args = append(args, argv...)
	return RunCmd(t, timeout, env, func(ctx context.Context) *exec.Cmd {
		return nt.Hosts[0].Command(ctx, hydra, args...)
	})
}

// RunEnvHosts runs argv as n processes with torchrun's environment across
// the hosts of nt, ppn per host in host order, rank 0's rendezvous on the
// first host's address. LOCAL_RANK and LOCAL_WORLD_SIZE are left out (as
// Kubernetes operators leave them), so the ranks count their host's ranks
// themselves.
func RunEnvHosts(t testing.TB, nt *hosts.Net, timeout time.Duration, env []string, n, ppn int, argv ...string) Result {
	t.Helper()
	return runEnv(t, timeout, env, n, nt.Hosts[0].IP.String(), false, func(ctx context.Context, r int) *exec.Cmd {
		return nt.Hosts[min(r/ppn, len(nt.Hosts)-1)].Command(ctx, argv[0], argv[1:]...)
	})
}
