package launch

// Multi-process test machinery. A test starts ranks (under mpiexec.hydra,
// srun, or by itself with the torchrun environment; internal/jobtest runs
// the launchers) that re-execute this test binary with
// -test.run=^TestLaunchChild$ and GOFI_LAUNCH_ROLE naming what to do. A
// rank prints "@@rank R ..." result lines on stdout; the test reads them
// back. Every rank has a watchdog (GOFI_LAUNCH_DEADLINE) and every
// launcher runs under a deadline with its whole process group killed at
// the end, so nothing outlives the test.

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gofi-dev/fi/internal/jobtest"
)

const (
	roleEnv     = "GOFI_LAUNCH_ROLE"
	argEnv      = "GOFI_LAUNCH_ARG"
	deadlineEnv = "GOFI_LAUNCH_DEADLINE" // unix nanoseconds
)

// roles maps a role name to a rank's body; it returns the rank's result
// line (printed as "@@rank R <line>") or fails the child test.
var roles = map[string]func(t *testing.T, arg string) string{}

// TestLaunchChild is the entry point of ranks; run directly it skips.
func TestLaunchChild(t *testing.T) {
	role := os.Getenv(roleEnv)
	if role == "" {
		t.Skip("rank process: started by the launcher tests")
	}
	body, ok := roles[role]
	if !ok {
		t.Fatalf("unknown role %q", role)
	}
	deadline := time.Now().Add(2 * time.Minute)
	if ns, err := strconv.ParseInt(os.Getenv(deadlineEnv), 10, 64); err == nil {
		deadline = time.Unix(0, ns)
	}
	go func() {
		time.Sleep(time.Until(deadline))
		fmt.Fprintf(os.Stderr, "rank role %s: deadline passed, exiting\n", role)
		os.Exit(4)
	}()
	out := body(t, os.Getenv(argEnv))
	if !t.Failed() {
		fmt.Printf("@@rank %s\n", out)
	}
}

// childEnv is the environment of ranks playing role.
func childEnv(role, arg string, deadline time.Time, extra ...string) []string {
	env := append(os.Environ(),
		roleEnv+"="+role,
		argEnv+"="+arg,
		deadlineEnv+"="+strconv.FormatInt(deadline.UnixNano(), 10),
	)
	return append(env, extra...)
}

// childArgs are the test binary's arguments for a rank.
func childArgs() []string { return jobtest.ChildArgs("TestLaunchChild") }

// Short names for jobtest's.
type runResult = jobtest.Result

var (
	expectRanks = jobtest.ExpectRanks
	fields      = jobtest.Fields
	waitFor     = jobtest.WaitFor
	freePort    = jobtest.FreePort
)
