package hosts

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// ErrUnsupported is wrapped by Start's error when this machine or user
// cannot make hosts (not root, a tool missing, namespaces refused).
var ErrUnsupported = errors.New("hosts: not supported here")

// Prefix starts the name of every namespace and directory this package
// makes; the process id and a sequence number follow it.
const Prefix = "gofi-h"

// Options configure Start. The zero value is valid.
type Options struct {
	// ShmSize is the size in bytes of each host's /dev/shm tmpfs;
	// 0 means 64 MiB (a container's default).
	ShmSize int64
}

// Net is a set of hosts joined by one bridge. Its fields are read-only
// after Start; its methods are safe for concurrent use.
type Net struct {
	// Hosts are the hosts, Hosts[i] named "h<i+1>" with address
	// 10.233.0.<i+1>/24.
	Hosts []*Host

	id  string // Prefix-<pid>-<seq>: names everything
	sw  string // the switch namespace holding the bridge
	dir string // holds each host's shm mount point and the ssh wrapper
	ssh string // path of the ssh-replacement script

	mu     sync.Mutex
	closed bool
}

// Host is one host of a Net.
type Host struct {
	Name string     // "h1", "h2", ...
	NS   string     // its network namespace (for ip netns)
	IP   netip.Addr // its address on the bridge (interface eth0)
	// Shm is the directory (a tmpfs of its own) that processes of this
	// host see as /dev/shm. The test process can look into it.
	Shm string

	mu   sync.Mutex
	cmds []*exec.Cmd // made by Command: Close kills those started
}

// Subnet is the private IPv4 subnet of every Net. It exists only inside
// the hosts' namespaces, so concurrent Nets do not collide.
var Subnet = netip.MustParsePrefix("10.233.0.0/24")

// MaxHosts is the largest number of hosts in one Net.
const MaxHosts = 250

var seq atomic.Uint32

// New starts n hosts for a test and removes them in tb's Cleanup. It
// skips the test when hosts are not supported here and fails it on any
// other error.
func New(tb testing.TB, n int, opt *Options) *Net {
	tb.Helper()
	nt, err := Start(n, opt)
	if errors.Is(err, ErrUnsupported) {
		tb.Skip(err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := nt.Close(); err != nil {
			tb.Error(err)
		}
	})
	return nt
}

// Start makes n hosts. The caller must Close the Net.
func Start(n int, opt *Options) (nt *Net, err error) {
	if n < 1 || n > MaxHosts {
		return nil, fmt.Errorf("hosts: %d hosts, want 1..%d", n, MaxHosts)
	}
	var o Options
	if opt != nil {
		o = *opt
	}
	if o.ShmSize == 0 {
		o.ShmSize = 64 << 20
	}
	if o.ShmSize < 0 {
		return nil, fmt.Errorf("hosts: ShmSize %d", o.ShmSize)
	}
	if err := supported(); err != nil {
		return nil, err
	}
	reapStale()

	id := fmt.Sprintf("%s-%d-%d", Prefix, os.Getpid(), seq.Add(1))
	nt = &Net{id: id, sw: id + "-sw"}
	nt.dir = filepath.Join(os.TempDir(), id)
	if err := os.Mkdir(nt.dir, 0o700); err != nil {
		return nil, fmt.Errorf("hosts: %w", err)
	}
	defer func() {
		if err != nil {
			_ = nt.Close()
			nt = nil
		}
	}()
	if err := ip("netns", "add", nt.sw); err != nil {
		return nil, fmt.Errorf("%w: cannot create a network namespace: %v", ErrUnsupported, err)
	}
	for _, args := range [][]string{
		{"-n", nt.sw, "link", "add", "br0", "type", "bridge"},
		{"-n", nt.sw, "link", "set", "br0", "up"},
		{"-n", nt.sw, "link", "set", "lo", "up"},
	} {
		if err := ip(args...); err != nil {
			return nt, err
		}
	}
	base := Subnet.Addr().As4()
	for i := range n {
		h := &Host{Name: "h" + strconv.Itoa(i+1), NS: id + "-h" + strconv.Itoa(i+1)}
		a := base
		a[3] = byte(i + 1)
		h.IP = netip.AddrFrom4(a)
		h.Shm = filepath.Join(nt.dir, h.Name)
		if err := ip("netns", "add", h.NS); err != nil {
			return nil, err
		}
		nt.Hosts = append(nt.Hosts, h) // Close removes it from here on
		port := "p" + strconv.Itoa(i+1)
		prefix := h.IP.String() + "/" + strconv.Itoa(Subnet.Bits())
		for _, args := range [][]string{
			{"link", "add", "eth0", "netns", h.NS, "type", "veth", "peer", "name", port, "netns", nt.sw},
			{"-n", nt.sw, "link", "set", port, "master", "br0"},
			{"-n", nt.sw, "link", "set", port, "up"},
			{"-n", h.NS, "addr", "add", prefix, "dev", "eth0"},
			{"-n", h.NS, "link", "set", "eth0", "up"},
			{"-n", h.NS, "link", "set", "lo", "up"},
		} {
			if err := ip(args...); err != nil {
				return nil, err
			}
		}
		if err := os.Mkdir(h.Shm, 0o755); err != nil {
			return nil, fmt.Errorf("hosts: %w", err)
		}
		opts := "mode=1777,size=" + strconv.FormatInt(o.ShmSize, 10)
		if err := syscall.Mount("tmpfs", h.Shm, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
			_ = os.Remove(h.Shm)
			return nil, fmt.Errorf("hosts: mount tmpfs on %s: %w", h.Shm, err)
		}
	}
	if err := nt.writeSSH(); err != nil {
		return nil, err
	}
	return nt, nil
}

// supported checks for root and the tools.
func supported() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root", ErrUnsupported)
	}
	for _, tool := range []string{"ip", "unshare", "mount", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: needs %s: %v", ErrUnsupported, tool, err)
		}
	}
	return nil
}

// ip runs iproute2's ip with args.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("hosts: ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Host returns the host named name ("h2"), or whose namespace or address
// is name; nil if none is.
func (nt *Net) Host(name string) *Host {
	for _, h := range nt.Hosts {
		if h.Name == name || h.NS == name || h.IP.String() == name {
			return h
		}
	}
	return nil
}

// enter is the command prefix that runs a program inside host h: in its
// network namespace, in a mount namespace of its own where h.Shm is
// mounted on /dev/shm. Every step execs, so the process started is the
// program itself (its pid is the program's, a signal reaches it).
func (h *Host) enter() []string {
	return []string{
		"ip", "netns", "exec", h.NS,
		"unshare", "-m", "--propagation", "private",
		"sh", "-c", `mount --bind "$0" /dev/shm || exit 126; exec "$@"`, h.Shm,
	}
}

// Command returns a command that runs name with args inside h, with this
// process's environment (cmd.Env nil) and working directory. A process
// learns which host it is on with Here. The process is killed when ctx is
// done, and by Close if still running.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	argv := append(h.enter(), name)
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	h.mu.Lock()
	h.cmds = append(h.cmds, cmd)
	h.mu.Unlock()
	return cmd
}

// killStarted kills the processes of h's commands that were started. A
// process started just before Close may not have entered the namespace
// yet (ip netns exec still running), so the namespace's pid list alone
// would miss it; the command's own process is the one that enters
// (ip, unshare and sh each exec the next), so killing it reaches it
// wherever it is.
func (h *Host) killStarted() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.cmds {
		if c.Process != nil {
			_ = c.Process.Kill() // an exited process: ErrProcessDone
		}
	}
	h.cmds = nil
}

// TestCommand returns a command that re-executes the running test binary
// inside h, running only the test named test (an exact name, no regexp),
// with env added to this process's environment.
func (h *Host) TestCommand(ctx context.Context, test string, env ...string) *exec.Cmd {
	cmd := h.Command(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// Here returns the name ("h2") and address of the host this process runs
// on, from the address of its eth0; ok is false outside any host.
func Here() (name string, addr netip.Addr, ok bool) {
	ifc, err := net.InterfaceByName("eth0")
	if err != nil {
		return "", netip.Addr{}, false
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return "", netip.Addr{}, false
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if ip = ip.Unmap(); ok && Subnet.Contains(ip) && ip != Subnet.Addr() {
			return "h" + strconv.Itoa(int(ip.As4()[3])), ip, true
		}
	}
	return "", netip.Addr{}, false
}

// SSH returns the path of an executable that stands in for ssh, for
// launchers that start remote processes with ssh (Hydra's
// `mpiexec.hydra -launcher ssh -launcher-exec PATH`, pdsh, clush):
// `PATH [ssh options] HOST COMMAND...` drops the options and runs COMMAND
// through sh -c inside the host whose name, namespace or address is HOST
// (user@ prefix ignored), with that host's /dev/shm, in the caller's
// working directory and environment. An
// unknown HOST exits 255, as ssh does when it cannot connect.
//
// A launcher that must be reached back by its remote processes (Hydra's
// mpiexec is) has to run inside one of the hosts too, e.g. through
// Command, and be told to use eth0 (mpiexec.hydra -iface eth0).
func (nt *Net) SSH() string { return nt.ssh }

func (nt *Net) writeSSH() error {
	var b strings.Builder
	b.WriteString(`#!/bin/sh
# ssh stand-in written by gofi's internal/hosts for ` + nt.id + `.
while [ $# -gt 0 ]; do
	case "$1" in
	--) shift; break ;;
	-[BbcDEeFIiJLlmOopQRSWw]) shift 2 ;;
	-*) shift ;;
	*) break ;;
	esac
done
if [ $# -lt 1 ]; then
	echo "hosts ssh: no host" >&2
	exit 255
fi
host=${1#*@}
shift
if [ $# -lt 1 ]; then
	echo "hosts ssh: no command for $host" >&2
	exit 255
fi
case "$host" in
`)
	for _, h := range nt.Hosts {
		fmt.Fprintf(&b, "%s|%s|%s) ns=%s shm=%s ;;\n", h.Name, h.NS, h.IP, h.NS, shQuote(h.Shm))
	}
	b.WriteString(`*)
	echo "hosts ssh: unknown host $host" >&2
	exit 255 ;;
esac
exec ip netns exec "$ns" unshare -m --propagation private sh -c 'mount --bind "$0" /dev/shm || exit 126; exec sh -c "$1"' "$shm" "$*"
`)
	nt.ssh = filepath.Join(nt.dir, "ssh")
	if err := os.WriteFile(nt.ssh, []byte(b.String()), 0o755); err != nil {
		return fmt.Errorf("hosts: %w", err)
	}
	return nil
}

// shQuote quotes s for sh.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Close kills the processes still inside the hosts (those in their
// namespaces and those started from Command, wherever they are), then
// removes the namespaces, links, mounts and files. It may be called more
// than once; it must not run while another goroutine starts a command.
func (nt *Net) Close() error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	if nt.closed {
		return nil
	}
	nt.closed = true
	var errs []error
	for _, h := range nt.Hosts {
		h.killStarted()
		killInside(h.NS)
		if err := ip("netns", "del", h.NS); err != nil {
			errs = append(errs, err)
		}
		if err := syscall.Unmount(h.Shm, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("hosts: unmount %s: %w", h.Shm, err))
		}
	}
	if err := ip("netns", "del", nt.sw); err != nil && !strings.Contains(err.Error(), "No such file") {
		errs = append(errs, err)
	}
	if nt.dir != "" {
		if err := os.RemoveAll(nt.dir); err != nil {
			errs = append(errs, fmt.Errorf("hosts: %w", err))
		}
	}
	return errors.Join(errs...)
}

// killInside kills (SIGKILL) the processes in namespace ns: all were
// started inside a host of this Net, by this process or its children.
func killInside(ns string) {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// reapStale removes the namespaces and mounts of Nets whose process died
// without closing them (killed tests). It does not touch processes.
func reapStale() {
	alive := func(name string) bool {
		rest, ok := strings.CutPrefix(name, Prefix+"-")
		if !ok {
			return true
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 {
			return true
		}
		return pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH
	}
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), Prefix+"-") && !alive(e.Name()) {
				_ = ip("netns", "del", e.Name())
			}
		}
	}
	if ents, err := os.ReadDir(os.TempDir()); err == nil {
		for _, e := range ents {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), Prefix+"-") || alive(e.Name()) {
				continue
			}
			dir := filepath.Join(os.TempDir(), e.Name())
			subs, _ := os.ReadDir(dir)
			for _, s := range subs {
				_ = syscall.Unmount(filepath.Join(dir, s.Name()), syscall.MNT_DETACH)
			}
			_ = os.RemoveAll(dir)
		}
	}
}
