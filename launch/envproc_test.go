package launch

// Jobs started the way torchrun starts them: the test runs N processes
// with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT set (torchrun itself is not installed here: it comes with
// PyTorch from PyPI).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// envRun runs n ranks of role as separate processes and waits for all.
// The result's err is the first failure of any rank.
func envRun(t *testing.T, n int, role, arg string, timeout time.Duration, env ...string) runResult {
	t.Helper()
	port := mustFreePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	deadline := time.Now().Add(timeout - 5*time.Second)
	var so, se syncBuffer
	cmds := make([]*exec.Cmd, n)
	start := time.Now()
	for r := range n {
		args := childArgs()
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Env = childEnv(role, arg, deadline, append([]string{
			"RANK=" + strconv.Itoa(r), "WORLD_SIZE=" + strconv.Itoa(n),
			"LOCAL_RANK=" + strconv.Itoa(r), "LOCAL_WORLD_SIZE=" + strconv.Itoa(n),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(port),
			"TORCHELASTIC_RUN_ID=gofi-test", "TORCHELASTIC_RESTART_COUNT=0",
		}, env...)...)
		cmd.Stdout, cmd.Stderr = &so, &se
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
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
	res := runResult{stdout: so.String(), stderr: se.String(), ranks: map[int]string{}, took: time.Since(start)}
	for r, err := range errs {
		if err != nil {
			res.err = errors.Join(res.err, fmt.Errorf("rank %d: %w", r, err))
		}
	}
	if ctx.Err() != nil {
		res.err = fmt.Errorf("ranks did not finish within %v (killed): %v", timeout, res.err)
	}
	for _, m := range rankLine.FindAllStringSubmatch(res.stdout, -1) {
		k, _ := strconv.Atoi(m[1])
		res.ranks[k] = m[2]
	}
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

// TestEnvRing: a ring over launch.Connect with 1, 2, 4 and 8 processes
// started with the torchrun environment, on shm and tcp.
func TestEnvRing(t *testing.T) {
	cases := ringCases
	if testing.Short() {
		cases = cases[1:2]
	}
	slots := make(chan struct{}, launcherSlots)
	for _, c := range cases {
		if c.pmi != "2" && c.n != 8 { // the env has no PMI: half the runs cover it
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
