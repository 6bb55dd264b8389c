package launch

// Abort ends the whole job through the launcher: one rank aborts, the
// others wait in a barrier that would otherwise last a minute, and the
// launcher must end every rank soon with a failure.

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofi-dev/fi"
	"github.com/gofi-dev/fi/internal/jobtest"
)

func init() {
	roles["abort"] = abortRole
}

// abortRole: the rank named by arg aborts after a first barrier; the
// others wait in a second barrier that never completes.
func abortRole(t *testing.T, arg string) string {
	job, err := Init(Timeout(60 * time.Second))
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	if err := job.Barrier(); err != nil {
		t.Fatalf("rank %d: first Barrier: %v", job.Rank(), err)
	}
	who, _ := strconv.Atoi(arg)
	if job.Rank() == who {
		time.Sleep(200 * time.Millisecond) // the others are in the barrier
		job.Abort(3, "test abort from rank "+arg)
	}
	err = job.Barrier()
	return fmt.Sprintf("%d survived the abort (Barrier: %v)", job.Rank(), err)
}

// checkAborted checks a job whose rank aborted ended soon, failed, and
// left no rank running to the end.
func checkAborted(t *testing.T, r runResult, within time.Duration) {
	t.Helper()
	if r.Err == nil {
		t.Fatalf("the launcher reported success after an abort:\n%s", r.Report())
	}
	if len(r.Ranks) > 0 {
		t.Errorf("ranks outlived the abort: %v\n%s", r.Ranks, r.Report())
	}
	if r.Took > within {
		t.Errorf("the job took %v to end after the abort (want under %v)", r.Took, within)
	}
	if !strings.Contains(r.Stderr, "aborting the job") {
		t.Errorf("stderr does not say why:\n%s", r.Report())
	}
	t.Logf("ended after %v: %v", r.Took.Round(time.Millisecond), r.Err)
}

func TestHydraAbort(t *testing.T) {
	needHydra(t)
	for _, pmi := range []string{"1", "2"} {
		t.Run("pmi"+pmi, func(t *testing.T) {
			r := hydraRun(t, 4, "abort", "1", 60*time.Second, nil, "GOFI_PMI="+pmi)
			checkAborted(t, r, 30*time.Second)
		})
	}
}

func TestSlurmAbort(t *testing.T) {
	c := jobtest.Slurm(t)
	for _, pmi := range []string{"2"} { // Slurm serves both versions' abort alike
		t.Run("pmi"+pmi, func(t *testing.T) {
			r := srunRun(t, c, 4, "abort", "2", 60*time.Second, "GOFI_PMI="+pmi)
			checkAborted(t, r, 30*time.Second)
		})
	}
}

func TestEnvAbortProcesses(t *testing.T) {
	for _, who := range []string{"2"} { // rank 0's abort: TestEnvAbort, in process
		t.Run("rank"+who, func(t *testing.T) {
			r := envRun(t, 3, "abort", who, 60*time.Second)
			checkAborted(t, r, 30*time.Second)
		})
	}
}

func init() {
	roles["late"] = lateRole
}

// lateRole: the rank named by arg never joins (it sleeps, then leaves
// without Init); the others fence with a short timeout and report what
// it said.
func lateRole(t *testing.T, arg string) string {
	who, _ := strconv.Atoi(arg)
	if r, _ := strconv.Atoi(os.Getenv("PMI_RANK")); r == who && os.Getenv("PMI_RANK") != "" {
		time.Sleep(6 * time.Second)
		os.Exit(0)
	}
	job, err := Init(Timeout(2 * time.Second))
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	start := time.Now()
	err = job.Fence()
	return fmt.Sprintf("%d fence after %.1fs: timedout=%v %v", job.Rank(), time.Since(start).Seconds(), errors.Is(err, fi.ErrTimedOut), err)
}

// TestHydraRankNeverArrives: under Hydra (PMI-2, whose fence answers at
// once and holds the next get instead, and PMI-1), a rank that never
// joins makes the others' Fence fail with ErrTimedOut after the timeout.
func TestHydraRankNeverArrives(t *testing.T) {
	needHydra(t)
	for _, pmi := range []string{"2", "1"} {
		t.Run("pmi"+pmi, func(t *testing.T) {
			r := hydraRun(t, 3, "late", "2", 60*time.Second, nil, "GOFI_PMI="+pmi)
			// Hydra ends the job when the first rank leaves without
			// finalizing, so the other may be killed before it reports.
			if len(r.Ranks) == 0 {
				t.Fatalf("no rank reported\n%s", r.Report())
			}
			for i, line := range r.Ranks {
				if !strings.Contains(line, "timedout=true") {
					t.Errorf("rank %d: %q, want a timed-out fence\n%s", i, line, r.Report())
				}
			}
			if r.Took > 30*time.Second {
				t.Errorf("the job took %v", r.Took)
			}
			t.Logf("%v", r.Ranks)
		})
	}
}
