package net

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	stdnet "net"
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
	return startChild(t, ctx, name, "restart", addr, drain)
}

// startChild runs the test binary as a child of test name in role (the
// value of $GOFI_NET_TEST_CHILD) listening at addr; it must print its
// address first.
func startChild(t *testing.T, ctx context.Context, name, role, addr string, drain bool) *restartChild {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+name+"$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, childAddrEnv+"="+addr)
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

// helloFrame builds a HELLO as another endpoint listening at name with
// instance inst would send it.
func helloFrame(name []byte, inst uint64, window uint32) []byte {
	b := make([]byte, hdrSize+helloLen)
	putHeader(b, &frame{op: opHello, length: helloLen})
	h := b[hdrSize:]
	binary.LittleEndian.PutUint64(h[0:], inst)
	binary.LittleEndian.PutUint32(h[16:], 4242)
	binary.LittleEndian.PutUint32(h[20:], window)
	h[25] = protoVersion
	h[26] = byte(len(name))
	copy(h[28:56], name)
	return b
}

func eagerFrame(tag uint64, payload []byte) []byte {
	b := make([]byte, hdrSize+len(payload))
	putHeader(b, &frame{op: opEager, kind: uint8(transport.KindMsg), tag: tag, length: uint64(len(payload))})
	copy(b[hdrSize:], payload)
	return b
}

// relay copies bytes both ways between x and y until either side closes.
func relay(x, y stdnet.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src stdnet.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(x, y)
	go cp(y, x)
	<-done
	x.Close()
	y.Close()
}

// A peer restarts while the dial to it is still queued: the old
// incarnation (announcing the peer's address and instance I1) is still
// connected from this side, as after a host crash that no FIN announced,
// and everything this side sent meanwhile waits in the dial's queue,
// spending the credit of I1. The dial then reaches the new process (I2).
// Every operation of the old incarnation must fail with ECONNRESET (the
// queued frames are never sent to I2), and the credit for I2 must be I2's
// window alone: filling it exactly, with I2 taking nothing, must not
// overrun I2's window (which I2 would report as a protocol error), and I2
// must get exactly the messages sent after the restart, in order.
//
// The dial is held back by a relay: the peer's address first belongs to a
// plain listener of the test, which accepts the dial and forwards its
// bytes only once the new process listens at that address.
func TestPeerRestart_QueuedDialNotCountedAgainstNewIncarnation(t *testing.T) {
	if os.Getenv(childEnv) == "restart" {
		runRestartPeer()
		return
	}
	if testing.Short() {
		t.Skip("multi-process test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rl, err := stdnet.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	peerAP := rl.Addr().(*stdnet.TCPAddr).AddrPort()
	peerName := encodeSockaddr(peerAP)

	a := listen(t, Config{})
	as := newSink()
	p, c := a.Resolve(peerName)
	if c != transport.OK {
		t.Fatalf("Resolve: %d", c)
	}
	const before = 1 << 62 // tag bit of messages sent before the restart
	big := &transport.Header{Kind: transport.KindMsg, Tag: before, Len: 1 << 20}
	if done, c := a.Send(p, big, [][]byte{make([]byte, 1<<20)}, 1); done || c != transport.OK {
		t.Fatalf("rendezvous Send before the restart: %v %d", done, c)
	}
	const size = 1000
	msg := pattern(size, 7)
	ops := 1
	for {
		h := &transport.Header{Kind: transport.KindMsg, Tag: before | uint64(ops), Len: size}
		done, c := a.Send(p, h, [][]byte{msg}, transport.Op(ops+1))
		if c == transport.EAgain {
			break
		}
		if c != transport.OK || done {
			t.Fatalf("eager Send %d before the handshake: %v %d", ops, done, c)
		}
		ops++
	}
	type accepted struct {
		c   stdnet.Conn
		err error
	}
	acc := make(chan accepted, 1)
	go func() {
		c, err := rl.Accept()
		acc <- accepted{c, err}
	}()
	var held stdnet.Conn
	select {
	case r := <-acc:
		if r.err != nil {
			t.Fatal(r.err)
		}
		held = r.c
	case <-ctx.Done():
		t.Fatal("the dial never arrived")
	}
	defer held.Close()

	// The old incarnation I1 connects in and is heard from.
	old, err := stdnet.Dial("tcp4", tcpAddr(t, a.Name()))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	const oldTag = 1 << 61
	if _, err := old.Write(append(helloFrame(peerName, 0x1111, minWindow), eagerFrame(oldTag, []byte("old"))...)); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the old incarnation's message", func() bool { return len(as.arrivals) == 1 }, a, as)
	if as.arrivals[0].peer != p || as.arrivals[0].hdr.Tag != oldTag {
		t.Fatalf("old incarnation's message: peer %d tag %#x", as.arrivals[0].peer, as.arrivals[0].hdr.Tag)
	}

	// The peer restarts at its address; the held dial goes through to it.
	rl.Close()
	b := startRestartChild(t, ctx, t.Name(), peerAP.String(), false)
	fwd, err := stdnet.Dial("tcp4", peerAP.String())
	if err != nil {
		t.Fatal(err)
	}
	go relay(held, fwd)

	pollUntil(t, "the old incarnation's operations to fail", func() bool {
		return len(as.sendDone) == ops && len(as.downs) > 0
	}, a, as)
	wrong := 0
	for op := transport.Op(1); op <= transport.Op(ops); op++ {
		if code := as.sendDone[op]; code != transport.EConnReset {
			if wrong == 0 {
				t.Errorf("send %d, queued for the old incarnation, completed with %d, want ECONNRESET (%d)", op, code, transport.EConnReset)
			}
			wrong++
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d sends queued for the old incarnation did not fail with ECONNRESET", wrong, ops)
	}
	downs := len(as.downs)

	// Fill the new incarnation's window: it takes nothing yet.
	var want []uint64
	send := func(tag uint64) transport.Code {
		h := &transport.Header{Kind: transport.KindMsg, Tag: tag, Len: size}
		_, c := a.Send(p, h, [][]byte{msg}, transport.Op(1000+tag))
		if c == transport.OK {
			want = append(want, tag)
		} else if c != transport.EAgain {
			t.Fatalf("Send %d after the restart: %d", tag, c)
		}
		a.Poll(as)
		return c
	}
	for send(uint64(len(want))) == transport.OK {
	}
	if n := len(want); n != minWindow/(size+hdrSize) {
		t.Errorf("%d messages fitted in the new incarnation's window, want %d", n, minWindow/(size+hdrSize))
	}
	b.command("DRAIN")
	for extra := 0; extra < 50; {
		if send(uint64(len(want))) == transport.OK {
			extra++
		} else {
			a.Wait(time.Millisecond)
		}
		if ctx.Err() != nil {
			t.Fatal("timed out sending after the restart")
		}
	}
	expectGot(t, ctx, b, want)
	pollUntil(t, "completions after the restart", func() bool { return len(as.sendDone) >= ops }, a, as)
	for _, tag := range want {
		if code, ok := as.sendDone[transport.Op(1000+tag)]; ok && code != transport.OK {
			t.Fatalf("send %d after the restart completed with %d", tag, code)
		}
	}
	if len(as.downs) != downs {
		t.Fatalf("PeerDown after the restart: %v", as.downs[downs:])
	}
}

// Frames gnet still delivers from a connection after it was torn down (its
// peer failed or restarted; gnet closes it asynchronously) belong to an
// ended incarnation: a CREDIT must not add to the credit now counted for
// the peer, a CTS or DATA must not touch its pending operations.
func TestTornDownConnection_LateFramesRefused(t *testing.T) {
	a := listen(t, Config{})
	b := listen(t, Config{})
	as, bs := newSink(), newSink()
	p, _ := a.Resolve(b.Name())
	h := &transport.Header{Kind: transport.KindMsg, Len: 4}
	sendAll(t, a, as, b, bs, p, h, []byte("ping"), 1)
	pollUntil(t, "the message", func() bool { return len(bs.arrivals) == 1 }, b, bs, a, as)

	pp := a.peer(p)
	pp.mu.Lock()
	old := pp.tx
	pp.teardownLocked(transport.EConnReset, nil)
	credit := pp.credit
	pp.mu.Unlock()
	for _, f := range []frame{
		{op: opCredit, length: 4096},
		{op: opCTS, length: 8, cookie: 1},
	} {
		if ok, err := old.frame(&f, nil); ok || !errors.Is(err, errDetached) {
			t.Errorf("op %d on a torn-down connection: ok %v, err %v; want errDetached", f.op, ok, err)
		}
	}
	if err := old.dataStart(&frame{op: opData, length: 8, cookie: 1}); !errors.Is(err, errDetached) {
		t.Errorf("DATA on a torn-down connection: %v; want errDetached", err)
	}
	pp.mu.Lock()
	got := pp.credit
	pp.mu.Unlock()
	if got != credit {
		t.Fatalf("credit %d after a late CREDIT of the old incarnation, want %d", got, credit)
	}
}
