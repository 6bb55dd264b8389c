package net

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// Environment of the "restart" child role (see runRestartPeer).
const (
	childAddrEnv  = "GOFI_NET_TEST_ADDR"  // address to listen at
	childDrainEnv = "GOFI_NET_TEST_DRAIN" // "1": accept messages from the start
)

// restartChild is a peer process started by a test: it listens at a given
// address and reports what its engine sees on stdout.
type restartChild struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	addr  []byte
}

// startRestartChild runs the test binary as a runRestartPeer child of test
// name listening at addr ("127.0.0.1:0" for any port).
func startRestartChild(t *testing.T, ctx context.Context, name, addr string, drain bool) *restartChild {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+name+"$")
	cmd.Env = append(os.Environ(), childEnv+"=restart", childAddrEnv+"="+addr)
	if drain {
		cmd.Env = append(cmd.Env, childDrainEnv+"=1")
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &restartChild{t: t, cmd: cmd, in: in, lines: make(chan string, 1024)}
	t.Cleanup(func() { c.kill() })
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	line := c.next(ctx)
	if !strings.HasPrefix(line, "ADDR ") {
		t.Fatalf("child listening at %s: got %q instead of its address (exit: %v)", addr, line, cmd.Wait())
	}
	if c.addr, err = hex.DecodeString(strings.TrimPrefix(line, "ADDR ")); err != nil {
		t.Fatal(err)
	}
	return c
}

// next returns the child's next stdout line ("" once it exited).
func (c *restartChild) next(ctx context.Context) string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			return ""
		}
		return l
	case <-ctx.Done():
		c.t.Fatal("timed out waiting for the child")
		return ""
	}
}

func (c *restartChild) command(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, s+"\n"); err != nil {
		c.t.Fatalf("child command %q: %v", s, err)
	}
}

func (c *restartChild) kill() {
	if c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	}
}

// runRestartPeer listens at $GOFI_NET_TEST_ADDR with the smallest window
// and prints "ADDR <hex sockaddr>". Its engine takes no message (so it
// returns no credit) until it reads "DRAIN" on stdin (or from the start
// with $GOFI_NET_TEST_DRAIN=1); then it prints "GOT <tag>" for every
// message and "DOWN <code>" for every PeerDown, in order. It exits when
// stdin closes, or after 60 s.
func runRestartPeer() {
	tr, err := Listen(Config{Addr: os.Getenv(childAddrEnv), Window: minWindow})
	if err != nil {
		fmt.Fprintln(os.Stderr, "restart child:", err)
		os.Exit(3)
	}
	os.Stdout.WriteString("ADDR " + hex.EncodeToString(tr.Name()) + "\n")
	cmds := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			cmds <- sc.Text()
		}
		close(cmds)
	}()
	draining := os.Getenv(childDrainEnv) == "1"
	s := newSink()
	w := bufio.NewWriter(os.Stdout)
	end := time.Now().Add(60 * time.Second)
	for time.Now().Before(end) {
		select {
		case c, ok := <-cmds:
			if !ok {
				os.Exit(0)
			}
			if c == "DRAIN" {
				draining = true
			}
		default:
		}
		if !draining {
			time.Sleep(time.Millisecond)
			continue
		}
		work := tr.Poll(s)
		for _, a := range s.arrivals {
			fmt.Fprintf(w, "GOT %d\n", a.hdr.Tag)
		}
		for _, d := range s.downs {
			fmt.Fprintf(w, "DOWN %d\n", d)
		}
		s.arrivals, s.downs = s.arrivals[:0], s.downs[:0]
		w.Flush()
		if !work {
			tr.Wait(time.Millisecond)
		}
	}
	os.Exit(0)
}

// expectGot reads the child's report until it has printed "GOT <tag>" for
// every tag of want, in that order. Any other line fails the test.
func expectGot(t *testing.T, ctx context.Context, c *restartChild, want []uint64) {
	t.Helper()
	for i := 0; i < len(want); {
		line := c.next(ctx)
		tag, err := strconv.ParseUint(strings.TrimPrefix(line, "GOT "), 10, 64)
		if !strings.HasPrefix(line, "GOT ") || err != nil {
			t.Fatalf("peer reported %q after %d of %d expected messages", line, i, len(want))
		}
		if tag != want[i] {
			t.Fatalf("peer got message tag %#x, want %#x (message %d of %d)", tag, want[i], i, len(want))
		}
		i++
	}
}

// A peer killed and restarted at the same address can listen there again
// at once (the killed process's side of the connections it had accepted
// sits in TIME_WAIT on that port), and messages sent afterwards reach the
// new process.
func TestPeerRestart_SameAddressAfterKill(t *testing.T) {
	if os.Getenv(childEnv) == "restart" {
		runRestartPeer()
		return
	}
	if testing.Short() {
		t.Skip("multi-process test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b1 := startRestartChild(t, ctx, t.Name(), "127.0.0.1:0", true)
	a := listen(t, Config{})
	as := newSink()
	p, c := a.Resolve(b1.addr)
	if c != transport.OK {
		t.Fatalf("Resolve: %d", c)
	}
	h := &transport.Header{Kind: transport.KindMsg, Tag: 1, Len: 4}
	if _, c := a.Send(p, h, [][]byte{[]byte("ping")}, 1); c != transport.OK {
		t.Fatalf("Send: %d", c)
	}
	expectGot(t, ctx, b1, []uint64{1})
	b1.kill()
	pollUntil(t, "PeerDown of the killed peer", func() bool { return len(as.downs) > 0 }, a, as)

	ap, err := parseSockaddr(b1.addr)
	if err != nil {
		t.Fatal(err)
	}
	b2 := startRestartChild(t, ctx, t.Name(), ap.String(), true)
	h.Tag = 2
	if _, c := a.Send(p, h, [][]byte{[]byte("pong")}, 2); c != transport.OK {
		t.Fatalf("Send to the restarted peer: %d", c)
	}
	expectGot(t, ctx, b2, []uint64{2})
	pollUntil(t, "SendDone", func() bool { _, ok := as.sendDone[2]; return ok }, a, as)
	if as.sendDone[2] != transport.OK {
		t.Fatalf("send to the restarted peer completed with %d", as.sendDone[2])
	}
}

func tcpAddr(t *testing.T, sockaddr []byte) string {
	t.Helper()
	ap, err := parseSockaddr(sockaddr)
	if err != nil {
		t.Fatal(err)
	}
	return ap.String()
}

// Reusing addresses (for restarts) still refuses a second endpoint at the
// address of a live one.
func TestListen_LiveAddressRefused(t *testing.T) {
	a := listen(t, Config{})
	b, err := Listen(Config{Addr: tcpAddr(t, a.Name())})
	if err == nil {
		b.Close()
		t.Fatal("a second endpoint listened at the address of a live one")
	}
}
