package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gofi-dev/fi/shm"
	"golang.org/x/sys/unix"
)

// buildRanks builds this command without the race detector (a race-built
// rank costs about four times the CPU, and the test starts 130 of them)
// and returns its path. After `go vet ./...` (as CI runs it first) the
// packages are compiled already and this is a link.
func buildRanks(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build the ranks")
	}
	bin := filepath.Join(t.TempDir(), "alltoall")
	out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// job is a set of ranks of this binary started by a test.
type job struct {
	t     *testing.T
	bin   string
	n     int
	dir   string // rendezvous directory
	cmds  []*exec.Cmd
	out   strings.Builder
	mu    sync.Mutex
	errs  chan error
	start time.Time
}

// startJob starts n ranks of bin with args (see main) in the shm
// directory shmDir, their rendezvous in a fresh directory.
func startJob(t *testing.T, ctx context.Context, bin string, n int, shmDir string, args string) *job {
	t.Helper()
	j := &job{t: t, bin: bin, n: n, dir: t.TempDir(), errs: make(chan error, n), start: time.Now()}
	for r := range n {
		cmd := exec.CommandContext(ctx, bin, strings.Fields(args)...)
		cmd.Env = append(os.Environ(), "A2A_RANK="+strconv.Itoa(r), "A2A_SIZE="+strconv.Itoa(n),
			"A2A_DIR="+j.dir, shm.DirEnv+"="+shmDir)
		cmd.Stdout, cmd.Stderr = &lockedWriter{j: j}, &lockedWriter{j: j}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start rank %d: %v", r, err)
		}
		j.cmds = append(j.cmds, cmd)
		go func() { j.errs <- cmd.Wait() }()
	}
	t.Cleanup(func() {
		for _, c := range j.cmds {
			_ = c.Process.Kill()
		}
	})
	return j
}

type lockedWriter struct{ j *job }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.j.mu.Lock()
	defer w.j.mu.Unlock()
	return w.j.out.Write(p)
}

func (j *job) output() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.out.String()
}

// wait waits for every rank to exit and fails on any failure.
func (j *job) wait() {
	j.t.Helper()
	for range j.n {
		if err := <-j.errs; err != nil {
			j.t.Fatalf("a rank failed: %v\n%s", err, j.output())
		}
	}
	j.t.Logf("%d ranks done in %v", j.n, time.Since(j.start).Round(time.Millisecond))
}

// ready waits until every rank of a -hold job has written its ready file.
func (j *job) ready(ctx context.Context) {
	j.t.Helper()
	for r := range j.n {
		for {
			if _, err := os.Stat(filepath.Join(j.dir, "ready."+strconv.Itoa(r))); err == nil {
				break
			}
			select {
			case err := <-j.errs:
				j.t.Fatalf("a rank exited before it was ready: %v\n%s", err, j.output())
			case <-ctx.Done():
				j.t.Fatalf("rank %d never got ready\n%s", r, j.output())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	j.t.Logf("%d ranks ready in %v", j.n, time.Since(j.start).Round(time.Millisecond))
}

// killAll kills every rank with SIGKILL and waits for them.
func (j *job) killAll() {
	for _, c := range j.cmds {
		_ = c.Process.Signal(syscall.SIGKILL)
	}
	for range j.n {
		<-j.errs
	}
}

// gofiFiles returns the names of this user's gofi files in dir.
func gofiFiles(t *testing.T, dir string) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), shm.Prefix()) {
			m[e.Name()] = true
		}
	}
	return m
}

// mount64 mounts a private 64 MB tmpfs, as a container's /dev/shm, and
// returns it. Root only (CI).
func mount64(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// TestAllToAll_64RanksIn64MB runs a job the size the issue asks for in a
// container's 64 MB /dev/shm, and the clean-up around it:
//   - job A (64 ranks) connects all-to-all and is killed with SIGKILL,
//     leaving its files;
//   - job B (2 ranks) is alive in the same directory;
//   - job C (64 ranks) starts there (its ranks reap A's files), runs the
//     all-to-all untagged and tagged, eager (64 B) and rendezvous (64 KiB),
//     and exits cleanly: afterwards exactly B's files are left;
//   - B ends with SIGTERM: the directory is empty.
func TestAllToAll_64RanksIn64MB(t *testing.T) {
	if testing.Short() {
		t.Skip("64 processes")
	}
	dir := mount64(t)
	bin := buildRanks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()

	a := startJob(t, ctx, bin, 64, dir, "-size 64 -rounds 0 -hold -timeout 100s")
	a.ready(ctx)
	dead := gofiFiles(t, dir)
	if len(dead) < 64+64*63 {
		t.Fatalf("job A left %d files, want its 64 regions and 4032 rings", len(dead))
	}
	a.killAll()

	b := startJob(t, ctx, bin, 2, dir, "-size 64 -rounds 0 -hold -timeout 100s")
	b.ready(ctx)
	live := map[string]bool{}
	for name := range gofiFiles(t, dir) {
		if !dead[name] {
			live[name] = true
		}
	}

	c := startJob(t, ctx, bin, 64, dir, "-size 64,64k -kind msg,tagged -rounds 0 -timeout 100s")
	c.wait()
	for _, want := range []string{"size 64 rounds 0 tagged false", "size 65536 rounds 0 tagged false",
		"size 64 rounds 0 tagged true", "size 65536 rounds 0 tagged true"} {
		if !strings.Contains(c.output(), want) {
			t.Errorf("job C printed no line with %q:\n%s", want, c.output())
		}
	}
	t.Logf("job C:\n%s", c.output())
	left := gofiFiles(t, dir)
	for name := range left {
		if !live[name] {
			t.Errorf("file %s left after job C (dead job A's, or C's own)", name)
		}
	}
	for name := range live {
		if !left[name] {
			t.Errorf("live job B's file %s was removed", name)
		}
	}

	for _, cmd := range b.cmds {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	for range b.n {
		<-b.errs
	}
	if left := gofiFiles(t, dir); len(left) != 0 {
		t.Errorf("%d files left after job B ended by SIGTERM", len(left))
	}
}
