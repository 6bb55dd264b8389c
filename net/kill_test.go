package net

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/dtype"
	"github.com/gofi-dev/fi/transport"
)

const childEnv = "GOFI_NET_TEST_CHILD"

// TestPeerKilled_PendingOpsFail runs a peer in another process, leaves a
// rendezvous send pending on it, kills it with SIGKILL and expects the
// send to fail and PeerDown to follow; a later send is refused.
func TestPeerKilled_PendingOpsFail(t *testing.T) {
	if os.Getenv(childEnv) == "peer" {
		runChildPeer()
		return
	}
	if testing.Short() {
		t.Skip("multi-process test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestPeerKilled_PendingOpsFail$")
	cmd.Env = append(os.Environ(), childEnv+"=peer")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child address: %v", err)
	}
	addr, err := hex.DecodeString(strings.TrimSpace(strings.TrimPrefix(line, "ADDR ")))
	if err != nil {
		t.Fatal(err)
	}

	a := listen(t, Config{})
	as := newSink()
	p, c := a.Resolve(addr)
	if c != transport.OK {
		t.Fatalf("Resolve: %d", c)
	}
	small := &transport.Header{Kind: transport.KindMsg, Len: 4}
	if done, c := a.Send(p, small, [][]byte{[]byte("ping")}, 1); c != transport.OK {
		t.Fatalf("Send: %d", c)
	} else if !done {
		pollUntil(t, "eager send", func() bool { _, ok := as.sendDone[1]; return ok }, a, as)
		if as.sendDone[1] != transport.OK {
			t.Fatalf("eager SendDone %d", as.sendDone[1])
		}
	}
	big := &transport.Header{Kind: transport.KindMsg, Len: 2 << 20} // above PushMax: rendezvous
	if done, c := a.Send(p, big, [][]byte{make([]byte, 2<<20)}, 2); done || c != transport.OK {
		t.Fatalf("rendezvous Send: %v %d", done, c)
	}
	start := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "failure of the pending send", func() bool { _, ok := as.sendDone[2]; return ok && len(as.downs) > 0 }, a, as)
	if code := as.sendDone[2]; code == transport.OK {
		t.Fatal("pending rendezvous send completed OK after its peer was killed")
	}
	t.Logf("pending send failed %v after SIGKILL (code %d, PeerDown %v)", time.Since(start), as.sendDone[2], as.downs)
	if _, c := a.Send(p, small, [][]byte{[]byte("ping")}, 3); c != transport.OK {
		t.Fatalf("Send after the peer died: %d", c)
	}
	pollUntil(t, "reconnect refused", func() bool { _, ok := as.sendDone[3]; return ok }, a, as)
	// Refused when the reconnect reached the dead port; reset when the send
	// raced the kernel tearing down the old connection. Either way an error
	// completion, never success or a hang.
	if c := as.sendDone[3]; c != transport.EConnRefuse && c != transport.EConnReset {
		t.Fatalf("Send to a dead peer: code %d, want ECONNREFUSED or ECONNRESET", c)
	}
	_ = cmd.Wait()
}

// runChildPeer listens, prints its address and accepts messages without
// fetching rendezvous payloads until it is killed (or 30 s pass).
func runChildPeer() {
	tr, err := Listen(Config{Addr: "127.0.0.1:0"})
	if err != nil {
		os.Exit(3)
	}
	os.Stdout.WriteString("ADDR " + hex.EncodeToString(tr.Name()) + "\n")
	s := newSink()
	end := time.Now().Add(30 * time.Second)
	for time.Now().Before(end) {
		if !tr.Poll(s) {
			tr.Wait(10 * time.Millisecond)
		}
	}
	os.Exit(0)
}

// TestPeerVanished_PendingOpsFail: a peer that vanishes without a FIN or
// a RST (its host down, the link cut) while a rendezvous send, an RMA read
// and a fetching atomic wait for its answers: with Config.UserTimeout set
// each fails and PeerDown follows after about that long, not the kernel's
// ~15 minutes of retransmissions (keepalive probes do not go out while
// data is unacknowledged). The two endpoints run in a child process in a
// network namespace of its own, whose loopback the test takes down.
func TestPeerVanished_PendingOpsFail(t *testing.T) {
	if os.Getenv(childEnv) == "vanish" {
		vanishChild(t)
		return
	}
	if testing.Short() {
		t.Skip("multi-process test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []byte
	var err error
	for _, attr := range []*syscall.SysProcAttr{
		{Cloneflags: syscall.CLONE_NEWNET},
		{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}},
	} {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestPeerVanished_PendingOpsFail$", "-test.v")
		cmd.Env = append(os.Environ(), childEnv+"=vanish")
		cmd.SysProcAttr = attr
		out, err = cmd.CombinedOutput()
		var ee *exec.ExitError
		if err == nil || errors.As(err, &ee) {
			break // it ran
		}
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Skipf("cannot start a process in a network namespace of its own: %v", err)
	}
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
}

// vanishChild is TestPeerVanished_PendingOpsFail's process in its own
// network namespace.
func vanishChild(t *testing.T) {
	setLoopback(t, true)
	cfg := Config{KeepAlive: time.Second, UserTimeout: 2 * time.Second}
	a, b := listen(t, cfg), listen(t, cfg)
	as, bs := newSink(), newSink()
	rmaTarget(t, b)
	p, c := a.Resolve(b.Name())
	if c != transport.OK {
		t.Fatalf("Resolve: %d", c)
	}
	if _, c := a.Send(p, &transport.Header{Kind: transport.KindMsg, Len: 4}, [][]byte{[]byte("ping")}, 1); c != transport.OK {
		t.Fatalf("Send: %d", c)
	}
	pollUntil(t, "the first message", func() bool { return len(bs.arrivals) == 1 }, a, as, b, bs)
	setLoopback(t, false) // b vanishes: nothing more goes either way, no FIN, no RST
	start := time.Now()
	if done, c := a.Send(p, &transport.Header{Kind: transport.KindMsg, Len: 2 << 20}, [][]byte{make([]byte, 2<<20)}, 2); done || c != transport.OK {
		t.Fatalf("rendezvous Send: %v %d", done, c)
	}
	var rd, res, add [8]byte
	add[0] = 1
	reqs := []*transport.RMAReq{
		{Kind: transport.RMARead, Local: [][]byte{rd[:]}, Remote: []transport.RMAIOV{{Addr: 0, Len: 8, Key: 7}}},
		{Kind: transport.RMAFetch, Datatype: uint8(dtype.Uint64), Op: uint8(dtype.Sum),
			Local: [][]byte{add[:]}, Result: [][]byte{res[:]}, Remote: []transport.RMAIOV{{Addr: 8, Len: 8, Key: 7}}},
	}
	for i, req := range reqs {
		if done, c := a.RMA(p, req, transport.Op(3+i)); done || c != transport.OK {
			t.Fatalf("RMA %d: %v %d", i, done, c)
		}
	}
	pollUntil(t, "the pending operations' failures", func() bool { return len(as.sendDone) == 4 && len(as.downs) > 0 }, a, as)
	for op := transport.Op(2); op <= 4; op++ {
		if as.sendDone[op] == transport.OK {
			t.Fatalf("operation %d completed OK to a vanished peer", op)
		}
	}
	if len(as.downs) != 1 {
		t.Fatalf("PeerDown %v, want one", as.downs)
	}
	t.Logf("failed %v after the peer vanished: codes %v, PeerDown %v", time.Since(start), as.sendDone, as.downs)
}

// setLoopback brings the loopback interface of the process's network
// namespace up or down.
func setLoopback(t *testing.T, up bool) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		t.Fatal(err)
	}
	flags := ifr.Uint16()
	if up {
		flags |= unix.IFF_UP
	} else {
		flags &^= unix.IFF_UP
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		t.Fatal(err)
	}
}

// Config.UserTimeout reaches every connection's socket (TCP_USER_TIMEOUT),
// from GOFI_TCP_USER_TIMEOUT too, and is off by default: the kernel gives
// up on a peer that is alive but reads nothing (stopped in a debugger,
// its receive window full) after the user timeout as well.
func TestUserTimeout_OffByDefault(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		env  string
		want int
	}{
		{Config{}, "", 0},
		{Config{UserTimeout: 2 * time.Second}, "", 2000},
		{Config{}, "3s", 3000},
		{Config{UserTimeout: -1}, "3s", 0},
	} {
		t.Setenv(UserTimeoutEnv, c.env)
		a, b := listen(t, c.cfg), listen(t, c.cfg)
		as, bs := newSink(), newSink()
		p, _ := a.Resolve(b.Name())
		if _, code := a.Send(p, &transport.Header{Kind: transport.KindMsg, Len: 4}, [][]byte{[]byte("ping")}, 1); code != transport.OK {
			t.Fatalf("Send: %d", code)
		}
		pollUntil(t, "the message", func() bool { return len(bs.arrivals) == 1 }, a, as, b, bs)
		for _, tr := range []*Transport{a, b} {
			tr.mu.Lock()
			if len(tr.fds) == 0 {
				t.Errorf("%+v: no connection to look at", c.cfg)
			}
			for fd := range tr.fds {
				if got, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT); err != nil || got != c.want {
					t.Errorf("%+v, env %q: TCP_USER_TIMEOUT %d (%v), want %d", c.cfg, c.env, got, err, c.want)
				}
			}
			tr.mu.Unlock()
		}
		a.Close()
		b.Close()
	}
	t.Setenv(UserTimeoutEnv, "soon")
	if _, err := Listen(Config{Addr: "127.0.0.1:0"}); err == nil {
		t.Fatalf("Listen with %s=soon succeeded", UserTimeoutEnv)
	}
}
