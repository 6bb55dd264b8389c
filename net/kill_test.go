package net

import (
	"bufio"
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

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
