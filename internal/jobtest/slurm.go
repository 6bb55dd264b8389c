package jobtest

// A one-node Slurm the tests start themselves (as root): munged,
// slurmctld and slurmd with every file under one directory, ports picked
// free, the node and partition as issue 16's recipe has them
// (CPUs=nproc, OverSubscribe=FORCE, auth/munge, proctrack/linuxproc).

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Cluster is a running one-node cluster.
type Cluster struct {
	dir   string
	conf  string
	procs []*exec.Cmd
}

var (
	slurmOnce sync.Once
	slurm     *Cluster
	slurmErr  error
	slurmSkip string
)

const slurmDirPrefix = "gofi-slurm-"

// Slurm returns the process's one-node cluster, starting it on first use
// (a few seconds), or skips when Slurm is not installed or the test is not
// root (outside CI; in CI a missing Slurm fails). Call StopSlurm from
// TestMain.
func Slurm(t testing.TB) *Cluster {
	t.Helper()
	slurmOnce.Do(func() {
		for _, p := range []string{"srun", "slurmctld", "slurmd", "munged", "sinfo"} {
			if _, err := exec.LookPath(p); err != nil {
				slurmSkip = fmt.Sprintf("%s not installed (apt-get install slurm-wlm munge)", p)
				return
			}
		}
		if os.Geteuid() != 0 {
			slurmSkip = "a one-node Slurm needs root"
			return
		}
		slurm, slurmErr = startSlurm()
	})
	if slurmSkip != "" {
		need(t, slurmSkip)
	}
	if slurmErr != nil {
		t.Fatalf("starting a one-node Slurm: %v", slurmErr)
	}
	return slurm
}

// StopSlurm stops the cluster Slurm started, if any (call it from
// TestMain after m.Run).
func StopSlurm() {
	if slurm != nil {
		slurm.stop()
	}
}

// spawner starts daemons from one locked OS thread that never exits, so
// their Pdeathsig fires when the test process dies, not when some thread
// of the runtime ends.
var spawner = sync.OnceValue(func() chan func() {
	c := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the process
		for f := range c {
			f()
		}
	}()
	return c
})

func startDaemon(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	done := make(chan error)
	spawner() <- func() { done <- cmd.Start() }
	return <-done
}

// reapStaleSlurm kills the daemons of clusters whose test process died
// and removes their directories.
func reapStaleSlurm() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), slurmDirPrefix+"*"))
	for _, d := range dirs {
		owner, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), slurmDirPrefix))
		if err != nil || syscall.Kill(owner, 0) == nil {
			continue // a live test's cluster
		}
		for _, pf := range []string{"slurmctld.pid", "slurmd.pid", "munge/pid"} {
			b, _ := os.ReadFile(filepath.Join(d, pf))
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		os.RemoveAll(d)
	}
}

func startSlurm() (c *Cluster, err error) {
	reapStaleSlurm()
	dir := filepath.Join(os.TempDir(), slurmDirPrefix+strconv.Itoa(os.Getpid()))
	os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Join(dir, "munge"), 0o700); err != nil {
		return nil, err
	}
	for _, d := range []string{"state", "spool", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	c = &Cluster{dir: dir, conf: filepath.Join(dir, "slurm.conf")}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()

	// munge: our own key and socket, nothing outside dir.
	key := make([]byte, 1024)
	f, err := os.Open("/dev/urandom")
	if err != nil {
		return c, err
	}
	_, err = f.Read(key)
	f.Close()
	if err != nil {
		return c, err
	}
	m := filepath.Join(dir, "munge")
	if err := os.WriteFile(filepath.Join(m, "munge.key"), key, 0o600); err != nil {
		return c, err
	}
	sock := filepath.Join(m, "sock")
	munged := exec.Command("munged", "-F", "--force", "-S", sock,
		"--key-file="+filepath.Join(m, "munge.key"), "--log-file="+filepath.Join(m, "log"),
		"--pid-file="+filepath.Join(m, "pid"), "--seed-file="+filepath.Join(m, "seed"))
	if err := c.start(munged, "munged"); err != nil {
		return c, err
	}
	if err := WaitFor(10*time.Second, func() bool { _, err := os.Stat(sock); return err == nil }); err != nil {
		return c, fmt.Errorf("munged did not create its socket: %v\n%s", err, c.Logs())
	}

	ctldPort, err1 := FreePort()
	dPort, err2 := FreePort()
	if err := errors.Join(err1, err2); err != nil {
		return c, err
	}
	conf := fmt.Sprintf(`ClusterName=gofitest
SlurmctldHost=localhost
SlurmctldPort=%d
SlurmdPort=%d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=%s
CredType=cred/munge
StateSaveLocation=%s/state
SlurmdSpoolDir=%s/spool
SlurmctldPidFile=%s/slurmctld.pid
SlurmdPidFile=%s/slurmd.pid
SlurmctldLogFile=%s/log/slurmctld.log
SlurmdLogFile=%s/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
NodeName=gofinode NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=%d State=UNKNOWN
PartitionName=gofi Nodes=gofinode Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
`, ctldPort, dPort, sock, dir, dir, dir, dir, dir, dir, runtime.NumCPU())
	if err := os.WriteFile(c.conf, []byte(conf), 0o644); err != nil {
		return c, err
	}
	if err := c.start(exec.Command("slurmctld", "-D", "-f", c.conf), "slurmctld"); err != nil {
		return c, err
	}
	if err := c.start(exec.Command("slurmd", "-D", "-f", c.conf, "-N", "gofinode"), "slurmd"); err != nil {
		return c, err
	}
	err = WaitFor(30*time.Second, func() bool {
		out, _ := c.Command("sinfo", "-h", "-o", "%T").Output()
		s := strings.TrimSpace(string(out))
		return s == "idle" || s == "mixed" || s == "allocated"
	})
	if err != nil {
		return c, fmt.Errorf("the node did not come up: %v\n%s", err, c.Logs())
	}
	return c, nil
}

func (c *Cluster) start(cmd *exec.Cmd, name string) error {
	out, err := os.Create(filepath.Join(c.dir, "log", name+".out"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = c.Env()
	if err := startDaemon(cmd); err != nil {
		out.Close()
		return fmt.Errorf("starting %s: %v", name, err)
	}
	out.Close()
	c.procs = append(c.procs, cmd)
	go cmd.Wait() // reap
	return nil
}

// Env is the environment of Slurm commands against this cluster:
// os.Environ() with SLURM_CONF, then extra.
func (c *Cluster) Env(extra ...string) []string {
	return append(append(os.Environ(), "SLURM_CONF="+c.conf), extra...)
}

// Command is a Slurm command (sinfo, squeue, ...) against this cluster.
func (c *Cluster) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = c.Env()
	return cmd
}

// Logs returns the tails of the daemons' logs.
func (c *Cluster) Logs() string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(c.dir, "log", "*"))
	files = append(files, filepath.Join(c.dir, "munge", "log"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "--- %s\n%s", f, Tail(string(data)))
	}
	return b.String()
}

// stop kills the daemons (slurmd first: it owns the job steps) and
// removes the directory.
func (c *Cluster) stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i].Process
		syscall.Kill(-p.Pid, syscall.SIGTERM)
	}
	time.Sleep(200 * time.Millisecond)
	for _, cmd := range c.procs {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	c.procs = nil
	os.RemoveAll(c.dir)
}

// WaitFor polls ok every 100 ms until it holds or d passes.
func WaitFor(d time.Duration, ok func() bool) error {
	end := time.Now().Add(d)
	for !ok() {
		if time.Now().After(end) {
			return fmt.Errorf("not within %v", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// RunSrun runs argv as n tasks with srun -n N --overcommit --mpi=pmi2
// --kill-on-bad-exit=1 against c; env is the tasks' environment (SLURM_CONF
// is added).
func (c *Cluster) RunSrun(t testing.TB, timeout time.Duration, env []string, n int, argv ...string) Result {
	t.Helper()
	args := append([]string{"-n", strconv.Itoa(n), "--overcommit", "--mpi=pmi2", "--kill-on-bad-exit=1"}, argv...)
	return Run(t, timeout, append(append([]string(nil), env...), "SLURM_CONF="+c.conf), "srun", args...)
}
