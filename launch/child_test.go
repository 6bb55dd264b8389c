package launch

// Multi-process test machinery. A test starts ranks (under mpiexec.hydra,
// srun, or by itself with the torchrun environment) that re-execute this
// test binary with -test.run=^TestLaunchChild$ and GOFI_LAUNCH_ROLE naming
// what to do. A rank prints "@@rank R ..." result lines on stdout; the
// test reads them back. Every rank has a watchdog (GOFI_LAUNCH_DEADLINE)
// and every launcher runs under a context deadline with its whole process
// group killed at the end, so nothing outlives the test.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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
func childArgs() []string {
	return []string{os.Args[0], "-test.run=^TestLaunchChild$", "-test.v=false", "-test.count=1"}
}

// runResult is what a launcher run left.
type runResult struct {
	err    error
	stdout string
	stderr string
	ranks  map[int]string // rank -> its result line
	took   time.Duration
}

var rankLine = regexp.MustCompile(`(?m)^@@rank (\d+) (.*)$`)

// runCmd runs a launcher command with a deadline, killing its process
// group when the deadline passes or the command ends, and collects the
// ranks' result lines.
func runCmd(t *testing.T, timeout time.Duration, env []string, name string, args ...string) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	start := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // stragglers of the group
	}
	r := runResult{err: err, stdout: so.String(), stderr: se.String(), ranks: map[int]string{}, took: time.Since(start)}
	if ctx.Err() != nil {
		r.err = fmt.Errorf("%s did not finish within %v (killed): %v", name, timeout, err)
	}
	for _, m := range rankLine.FindAllStringSubmatch(r.stdout, -1) {
		n, _ := strconv.Atoi(m[1])
		r.ranks[n] = m[2]
	}
	return r
}

// report formats a run for a failure message.
func (r runResult) report() string {
	return fmt.Sprintf("err=%v after %v\n--- stdout\n%s--- stderr\n%s", r.err, r.took.Round(time.Millisecond), tail(r.stdout), tail(r.stderr))
}

func tail(s string) string {
	const max = 6000
	if len(s) > max {
		return "..." + s[len(s)-max:]
	}
	return s
}

// expectRanks checks that ranks 0..n-1 each reported a line matching re.
func expectRanks(t *testing.T, r runResult, n int, re string) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("run failed: %s", r.report())
	}
	rx := regexp.MustCompile(re)
	var bad []string
	for i := range n {
		line, ok := r.ranks[i]
		if !ok {
			bad = append(bad, fmt.Sprintf("rank %d: no result", i))
		} else if !rx.MatchString(line) {
			bad = append(bad, fmt.Sprintf("rank %d: %q does not match %q", i, line, re))
		}
	}
	if len(r.ranks) != n {
		bad = append(bad, fmt.Sprintf("%d ranks reported, want %d", len(r.ranks), n))
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("%s\n%s", strings.Join(bad, "\n"), r.report())
	}
}

// fields parses "k=v k=v" result lines.
func fields(line string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(line))
	sc.Split(bufio.ScanWords)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		m[k] = v
	}
	return m
}
