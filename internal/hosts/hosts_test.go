package hosts

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// run runs cmd and returns its trimmed stdout, failing the test on error.
func run(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v: %s", cmd.Args, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestHosts_ShmPerHost: processes of one host share its /dev/shm; another
// host and the machine itself do not see it; each host's /dev/shm is a
// file system of its own (its own st_dev).
func TestHosts_ShmPerHost(t *testing.T) {
	nt := New(t, 2, nil)
	ctx := ctxFor(t)
	h1, h2 := nt.Hosts[0], nt.Hosts[1]
	name := fmt.Sprintf("hosts-test-%d", os.Getpid())
	run(t, h1.Command(ctx, "sh", "-c", "echo one > /dev/shm/"+name))
	if got := run(t, h1.Command(ctx, "cat", "/dev/shm/"+name)); got != "one" {
		t.Fatalf("second process on h1 read %q, want one", got)
	}
	if b, err := os.ReadFile(filepath.Join(h1.Shm, name)); err != nil || string(b) != "one\n" {
		t.Fatalf("h1.Shm holds %q, %v", b, err)
	}
	if got := run(t, h2.Command(ctx, "sh", "-c", "test -e /dev/shm/"+name+" && echo seen || echo absent")); got != "absent" {
		t.Fatalf("h2 sees h1's /dev/shm file: %s", got)
	}
	if _, err := os.Stat("/dev/shm/" + name); err == nil {
		t.Fatal("the machine's /dev/shm sees h1's file")
	}
	dev := func(h *Host) string { return run(t, h.Command(ctx, "stat", "-c", "%d", "/dev/shm")) }
	d1, d1b, d2 := dev(h1), dev(h1), dev(h2)
	own := run(t, exec.Command("stat", "-c", "%d", "/dev/shm"))
	if d1 != d1b || d1 == d2 || d1 == own || d2 == own {
		t.Fatalf("st_dev of /dev/shm: h1 %s and %s, h2 %s, machine %s", d1, d1b, d2, own)
	}
}

// TestHosts_Network: a process on h2 accepts a TCP connection from a
// process on h1 at h2's address; Here names each side's host.
func TestHosts_Network(t *testing.T) {
	nt := New(t, 2, nil)
	ctx := ctxFor(t)
	h1, h2 := nt.Hosts[0], nt.Hosts[1]
	srv := h2.TestCommand(ctx, "TestHostsPeer", "GOFI_HOSTS_PEER=listen")
	srv.Stderr = os.Stderr
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			_ = srv.Process.Kill()
		}
		_ = srv.Wait()
	}()
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatalf("server ended: %v", sc.Err())
	}
	addr := sc.Text()
	if want := h2.Name + " " + h2.IP.String(); !strings.HasPrefix(addr, want) {
		t.Fatalf("server says %q, want it to start with %q", addr, want)
	}
	hp := strings.TrimPrefix(addr, h2.Name+" ")
	got := run(t, h1.TestCommand(ctx, "TestHostsPeer", "GOFI_HOSTS_PEER=dial "+hp))
	if !strings.Contains(got, "h1 got h2") {
		t.Fatalf("client says %q", got)
	}
	if _, _, ok := Here(); ok {
		t.Fatal("Here says the test process is on a host")
	}
}

// TestHostsPeer is the peer process of TestHosts_Network.
func TestHostsPeer(t *testing.T) {
	mode := os.Getenv("GOFI_HOSTS_PEER")
	if mode == "" {
		t.Skip("peer process of TestHosts_Network only")
	}
	name, ip, ok := Here()
	if !ok {
		t.Fatal("not on a host")
	}
	if mode == "listen" {
		l, err := net.Listen("tcp4", ip.String()+":0")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("%s %s\n", name, l.Addr())
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "%s\n", name)
		c.Close()
		return
	}
	target, _ := strings.CutPrefix(mode, "dial ")
	c, err := net.DialTimeout("tcp4", target, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := bufio.NewReader(c).ReadString('\n')
	fmt.Printf("%s got %s\n", name, strings.TrimSpace(b))
}

// TestHosts_SSH: the ssh stand-in drops ssh's options, runs the command
// through sh on the host named by address or name, with that host's
// /dev/shm, and refuses an unknown host with ssh's status 255.
func TestHosts_SSH(t *testing.T) {
	nt := New(t, 2, nil)
	ctx := ctxFor(t)
	h2 := nt.Hosts[1]
	if err := os.WriteFile(filepath.Join(h2.Shm, "mark"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	netns := run(t, h2.Command(ctx, "readlink", "/proc/self/ns/net"))
	for _, target := range []string{h2.IP.String(), "user@" + h2.Name} {
		got := run(t, exec.CommandContext(ctx, nt.SSH(), "-x", "-p", "22", "-oBatchMode=yes", "-o", "StrictHostKeyChecking=no",
			target, "readlink", "/proc/self/ns/net", "&&", "ls", "/dev/shm"))
		if want := netns + "\nmark"; got != want {
			t.Fatalf("ssh %s: %q, want %q", target, got, want)
		}
	}
	err := exec.CommandContext(ctx, nt.SSH(), "-x", "10.9.9.9", "true").Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 255 {
		t.Fatalf("unknown host: %v, want exit status 255", err)
	}
}

// TestHosts_Hydra: MPICH's mpiexec.hydra, itself run on h1 and told to
// launch through the ssh stand-in, starts one process on each host.
func TestHosts_Hydra(t *testing.T) {
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		t.Skip("needs MPICH's mpiexec.hydra")
	}
	nt := New(t, 2, nil)
	ctx := ctxFor(t)
	h1, h2 := nt.Hosts[0], nt.Hosts[1]
	cmd := h1.Command(ctx, hydra, "-launcher", "ssh", "-launcher-exec", nt.SSH(), "-iface", "eth0",
		"-hosts", h1.IP.String()+","+h2.IP.String(), "-n", "2", "-ppn", "1",
		os.Args[0], "-test.run=^TestHostsHydraRank$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GOFI_HOSTS_RANK=1")
	got := run(t, cmd)
	var lines []string
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(l, "rank ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 || !strings.Contains(got, "rank 0 on h1") || !strings.Contains(got, "rank 1 on h2") {
		t.Fatalf("mpiexec.hydra output:\n%s", got)
	}
}

// TestHostsHydraRank is a rank of TestHosts_Hydra's job.
func TestHostsHydraRank(t *testing.T) {
	if os.Getenv("GOFI_HOSTS_RANK") == "" {
		t.Skip("rank of TestHosts_Hydra only")
	}
	name, _, ok := Here()
	if !ok {
		t.Fatal("not on a host")
	}
	fmt.Printf("rank %s on %s\n", os.Getenv("PMI_RANK"), name)
}

// TestStart_Errors: bad arguments are refused before anything is made.
func TestStart_Errors(t *testing.T) {
	for _, n := range []int{0, -1, MaxHosts + 1} {
		if _, err := Start(n, nil); err == nil || errors.Is(err, ErrUnsupported) {
			t.Errorf("Start(%d): %v", n, err)
		}
	}
	if _, err := Start(1, &Options{ShmSize: -1}); err == nil {
		t.Error("negative ShmSize accepted")
	}
}

// TestClose_RemovesEverything: Close kills processes left inside and
// removes namespaces, mounts and files.
func TestClose_RemovesEverything(t *testing.T) {
	nt, err := Start(2, nil)
	if errors.Is(err, ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	sleeper := nt.Hosts[0].Command(context.Background(), "sleep", "600")
	if err := sleeper.Start(); err != nil {
		nt.Close()
		t.Fatal(err)
	}
	if err := nt.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sleeper.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = sleeper.Process.Kill()
		t.Fatal("Close left a process running inside a host")
	}
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), nt.id) {
			t.Errorf("namespace %s left", e.Name())
		}
	}
	if _, err := os.Stat(nt.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left: %v", nt.dir, err)
	}
	mounts, _ := os.ReadFile("/proc/self/mounts")
	if strings.Contains(string(mounts), nt.dir) {
		t.Errorf("mount under %s left", nt.dir)
	}
	if err := nt.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
