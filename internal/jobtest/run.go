package jobtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// InCI reports whether the tests run in CI, where a missing launcher is a
// failure rather than a skip.
func InCI() bool { return os.Getenv("CI") != "" }

// need skips the test (fails it in CI) with why.
func need(t testing.TB, why string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s (CI installs it: see .ci/run)", why)
	}
	t.Skip(why + "; skipping")
}

// Hydra returns the path of mpiexec.hydra or skips the test.
func Hydra(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		need(t, "mpiexec.hydra not installed (apt-get install mpich)")
	}
	return p
}

// ChildArgs are the arguments that re-execute the test binary running only
// the test named test (the rank's entry point).
func ChildArgs(test string) []string {
	return []string{os.Args[0], "-test.run=^" + test + "$", "-test.v=false", "-test.count=1"}
}

// Result is what a job left.
type Result struct {
	Err    error
	Stdout string
	Stderr string
	Ranks  map[int]string // rank -> the rest of its "@@rank R ..." line
	Took   time.Duration
}

var rankLine = regexp.MustCompile(`(?m)^@@rank (\d+) (.*)$`)

func (r *Result) collect() {
	r.Ranks = map[int]string{}
	for _, m := range rankLine.FindAllStringSubmatch(r.Stdout, -1) {
		n, _ := strconv.Atoi(m[1])
		r.Ranks[n] = m[2]
	}
}

// Report formats a result for a failure message.
func (r Result) Report() string {
	return fmt.Sprintf("err=%v after %v\n--- stdout\n%s--- stderr\n%s", r.Err, r.Took.Round(time.Millisecond), Tail(r.Stdout), Tail(r.Stderr))
}

// Tail is the end of s, at most a few KiB.
func Tail(s string) string {
	const max = 6000
	if len(s) > max {
		return "..." + s[len(s)-max:]
	}
	return s
}

// Run runs a launcher command with env under a deadline; when it passes,
// or the command ends, its process group is killed.
func Run(t testing.TB, timeout time.Duration, env []string, name string, args ...string) Result {
	t.Helper()
	return RunCmd(t, timeout, env, func(ctx context.Context) *exec.Cmd { return exec.CommandContext(ctx, name, args...) })
}

// RunCmd is Run of the command mk makes (on a host of internal/hosts, say),
// under a context that ends at the deadline.
func RunCmd(t testing.TB, timeout time.Duration, env []string, mk func(ctx context.Context) *exec.Cmd) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := mk(ctx)
	name := cmd.Path
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
	r := Result{Err: err, Stdout: so.String(), Stderr: se.String(), Took: time.Since(start)}
	if ctx.Err() != nil {
		r.Err = fmt.Errorf("%s did not finish within %v (killed): %v", name, timeout, err)
	}
	r.collect()
	return r
}

// RunHydra runs argv as n ranks under mpiexec.hydra (opts go before -n).
func RunHydra(t testing.TB, timeout time.Duration, env []string, n int, opts []string, argv ...string) Result {
	t.Helper()
	hydra := Hydra(t)
	args := append(append(append([]string(nil), opts...), "-n", strconv.Itoa(n)), argv...)
	return Run(t, timeout, env, hydra, args...)
}

// RunEnv runs argv as n processes with the environment torchrun gives its
// workers (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT on a free port, TORCHELASTIC_RUN_ID) added to env, and
// waits for all. Err joins the failures of every rank.
func RunEnv(t testing.TB, timeout time.Duration, env []string, n int, argv ...string) Result {
	t.Helper()
	return runEnv(t, timeout, env, n, "127.0.0.1", true, func(ctx context.Context, _ int) *exec.Cmd {
		return exec.CommandContext(ctx, argv[0], argv[1:]...)
	})
}

// runEnv starts n ranks made by mk with torchrun's environment, rank 0
// reachable at master; local adds LOCAL_RANK and LOCAL_WORLD_SIZE (all
// ranks on one host).
func runEnv(t testing.TB, timeout time.Duration, env []string, n int, master string, local bool, mk func(ctx context.Context, rank int) *exec.Cmd) Result {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var so, se syncBuffer
	cmds := make([]*exec.Cmd, n)
	start := time.Now()
	for r := range n {
		cmd := mk(ctx, r)
		cmd.Env = append(append([]string(nil), env...),
			"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n),
			"MASTER_ADDR="+master, "MASTER_PORT="+strconv.Itoa(port),
			"TORCHELASTIC_RUN_ID=gofi-test-"+strconv.Itoa(port), "TORCHELASTIC_RESTART_COUNT=0")
		if local {
			cmd.Env = append(cmd.Env, "LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(n))
		}
		cmd.Stdout, cmd.Stderr = &so, &se
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			for _, c := range cmds[:r] {
				syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
				c.Wait()
			}
			t.Fatal(err)
		}
		cmds[r] = cmd
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, cmd := range cmds {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = cmd.Wait() }()
	}
	wg.Wait()
	res := Result{Stdout: so.String(), Stderr: se.String(), Took: time.Since(start)}
	for r, err := range errs {
		if err != nil {
			res.Err = errors.Join(res.Err, fmt.Errorf("rank %d: %w", r, err))
		}
	}
	if ctx.Err() != nil {
		res.Err = fmt.Errorf("ranks did not finish within %v (killed): %v", timeout, res.Err)
	}
	res.collect()
	return res
}

// syncBuffer is a bytes.Buffer several processes' output may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ExpectRanks checks that ranks 0..n-1, and no others, each reported a
// line matching re.
func ExpectRanks(t testing.TB, r Result, n int, re string) {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("run failed: %s", r.Report())
	}
	rx := regexp.MustCompile(re)
	var bad []string
	for i := range n {
		line, ok := r.Ranks[i]
		if !ok {
			bad = append(bad, fmt.Sprintf("rank %d: no result", i))
		} else if !rx.MatchString(line) {
			bad = append(bad, fmt.Sprintf("rank %d: %q does not match %q", i, line, re))
		}
	}
	if len(r.Ranks) != n {
		bad = append(bad, fmt.Sprintf("%d ranks reported, want %d", len(r.Ranks), n))
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("%s\n%s", strings.Join(bad, "\n"), r.Report())
	}
}

// Fields parses "k=v k=v" result lines.
func Fields(line string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(line))
	sc.Split(bufio.ScanWords)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		m[k] = v
	}
	return m
}

// FreePort returns a TCP port free on 127.0.0.1 at the time of the call.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
