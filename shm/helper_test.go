package shm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Multi-process tests re-exec this test binary. The child runs
// TestHelperProcess, which dispatches on roleEnv.
const roleEnv = "GOFI_SHM_TEST_ROLE"

// childRoles maps a role name to the child's body. It reads commands from
// stdin and reports on stdout, one line each; returning ends the child with
// status 0, a panic or os.Exit(1) with failure.
var childRoles = map[string]func(in *bufio.Scanner, out io.Writer){}

func TestHelperProcess(t *testing.T) {
	role := os.Getenv(roleEnv)
	if role == "" {
		t.Skip("only runs as a child of a multi-process test")
	}
	f, ok := childRoles[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown role %q\n", role)
		os.Exit(2)
	}
	f(bufio.NewScanner(os.Stdin), os.Stdout)
	os.Exit(0)
}

// child is a running re-exec'd test binary.
type child struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan string
	cancel context.CancelFunc
	waited bool
}

// testTimeout bounds every multi-process exchange: tests end by timeout
// rather than hang.
func testTimeout(t *testing.T) time.Duration {
	d := 60 * time.Second
	if dl, ok := t.Deadline(); ok {
		if left := time.Until(dl) - 5*time.Second; left < d {
			d = left
		}
	}
	return d
}

// startChild re-execs the test binary in role with extra environment.
func startChild(t *testing.T, role string, env ...string) *child {
	t.Helper()
	return startChildCmd(t, os.Args[0], role, nil, env...)
}

func startChildCmd(t *testing.T, bin, role string, prep func(*exec.Cmd), env ...string) *child {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(t))
	cmd := exec.CommandContext(ctx, bin, "-test.run=^TestHelperProcess$", "-test.v=false")
	cmd.Env = append(append(os.Environ(), roleEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if prep != nil {
		prep(cmd)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &child{t: t, cmd: cmd, in: in, lines: make(chan string, 16), cancel: cancel}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		if !c.waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		cancel()
	})
	return c
}

// expect returns the next line, which must start with prefix; the rest of
// the line (after prefix and one space) is returned.
func (c *child) expect(prefix string) string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("child exited before %q", prefix)
		}
		if !strings.HasPrefix(l, prefix) {
			c.t.Fatalf("child said %q, want prefix %q", l, prefix)
		}
		return strings.TrimSpace(strings.TrimPrefix(l, prefix))
	case <-time.After(testTimeout(c.t)):
		c.t.Fatalf("timed out waiting for %q from child", prefix)
	}
	return ""
}

func (c *child) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("write to child: %v", err)
	}
}

// wait closes the child's stdin (children exit on EOF), waits for it to
// exit and returns its state.
func (c *child) wait() *os.ProcessState {
	c.t.Helper()
	_ = c.in.Close()
	return c.waitExit()
}

// waitExit waits for the child to exit by itself (or by a signal sent to
// it) without closing its stdin.
func (c *child) waitExit() *os.ProcessState {
	c.t.Helper()
	err := c.cmd.Wait()
	c.waited = true
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		c.t.Fatalf("wait child: %v", err)
	}
	return c.cmd.ProcessState
}

// testDir points DirEnv at a fresh directory under /dev/shm for this test
// (children inherit it) and removes it afterwards.
func testDir(t *testing.T) string {
	t.Helper()
	base := DefaultDir
	if _, err := os.Stat(base); err != nil {
		t.Skipf("no %s: %v", base, err)
	}
	d, err := os.MkdirTemp(base, "gofi-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	t.Setenv(DirEnv, d)
	return d
}

// must fails the child on error.
func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
}

// readLine reads one command line in a child; a closed stdin exits.
func readLine(in *bufio.Scanner) string {
	if !in.Scan() {
		os.Exit(0)
	}
	return in.Text()
}
