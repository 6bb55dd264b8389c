package benchmarks

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"testing"
	"time"
)

// envSmokeChild marks the re-executed binary of TestEveryBenchmarkRuns, so
// that it does not start itself again.
const envSmokeChild = "GOFI_BENCH_SMOKE_CHILD"

// TestEveryBenchmarkRuns runs every benchmark of this package once
// (-test.benchtime=1x) in a child process and fails if any of them fails:
// the benchmarks guard the hot paths, and a benchmark that no longer runs
// (a protocol change it did not follow, a peer that hangs) guards nothing.
// It measures nothing; the figures belong to compare.sh and the scripts.
func TestEveryBenchmarkRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every benchmark once (about 15 s)")
	}
	if os.Getenv(envSmokeChild) != "" {
		t.Skip("already the child")
	}
	limit := 10 * time.Minute
	if d, ok := t.Deadline(); ok {
		limit = min(limit, time.Until(d)-10*time.Second)
	}
	// Several benchmarks ping-pong between two goroutines that spin
	// (BenchmarkCopyPingPongSlots): with one P each exchange waits for
	// the runtime to preempt the spinner, and at GOMAXPROCS=1 the run
	// did not finish in 10 minutes. So the child has two Ps (-test.cpu),
	// and with one CPU allowed (taskset, a 1-CPU cgroup) there is nothing
	// to smoke-test: two spinners on one CPU take turns at the kernel's
	// time slices.
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU allowed: the benchmarks' ping-pongs spin on two")
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	args := []string{"-test.run=^$", "-test.bench=.", "-test.benchtime=1x"}
	if runtime.GOMAXPROCS(0) < 2 {
		args = append(args, "-test.cpu=2")
	}
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), envSmokeChild+"=1", "GOFI_BENCH_ROUNDS=1")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("benchmarks did not finish within %v:\n%s", limit, out)
	}
	if err != nil || regexp.MustCompile(`(?m)^(--- FAIL|FAIL|panic:)`).Match(out) {
		t.Fatalf("a benchmark failed (%v):\n%s", err, out)
	}
	if n := len(regexp.MustCompile(`(?m)^Benchmark\S+\s+\d+`).FindAll(out, -1)); n == 0 {
		t.Fatalf("no benchmark ran:\n%s", out)
	}
}
