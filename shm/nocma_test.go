package shm

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// bigMsg is the payload both sides of the user-namespace test send: big
// enough for a rendezvous.
func bigMsg(seed int) []byte { return seqMsg(seed, 1<<20) }

func init() {
	// A peer in another user namespace: it may not read our memory.
	childRoles["userns-peer"] = func(in *bufio.Scanner, out io.Writer) {
		tr, err := NewTransport(TransportConfig{CMAMin: 1})
		must(err)
		defer tr.Close()
		fmt.Fprintf(out, "addr %s\n", tr.Name())
		peerAddr := readLine(in)
		p, c := tr.Resolve([]byte(peerAddr))
		if c != 0 {
			must(fmt.Errorf("resolve: %d", c))
		}
		s := &tsink{tr: tr, bufs: map[transport.Op]int{}}
		deadline := time.Now().Add(time.Minute)
		for s.n == 0 && time.Now().Before(deadline) {
			tr.Poll(s)
		}
		if s.n != 1 || len(s.errs) > 0 || !bytes.Equal(s.got[0], bigMsg(1)) {
			must(fmt.Errorf("receive: %d messages, errors %v", s.n, s.errs))
		}
		// Now the other way.
		h := transport.Header{Kind: transport.KindMsg, Len: 1 << 20}
		if _, c := tr.Send(p, &h, [][]byte{bigMsg(2)}, 1); c != 0 {
			must(fmt.Errorf("send: %d", c))
		}
		for s.sent == 0 && time.Now().Before(deadline) {
			tr.Poll(s)
		}
		fmt.Fprintf(out, "singlecopy %v sent %d errors %v\n", tr.SingleCopy(p), s.sent, s.errs)
		readLine(in) // stay until the parent is done
	}
}

// A peer in another user namespace may not read our memory (the kernel
// refuses process_vm_readv into a parent namespace): its first rendezvous
// from us falls back to streaming through the ring, for us only, and the
// payload arrives intact; we still read its memory with single copy.
func TestTransport_PeerInAnotherUserNamespaceFallsBack(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the peer's segment names carry its euid")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil || exec.Command(unshare, "--user", "--map-root-user", "true").Run() != nil {
		t.Skip("cannot create a user namespace")
	}
	if !ProbeCMA().Available {
		t.Skip("no process_vm_readv here at all")
	}
	testDir(t)
	tr, err := NewTransport(TransportConfig{CMAMin: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	c := startChildCmd(t, os.Args[0], "userns-peer", func(cmd *exec.Cmd) {
		cmd.Args = append([]string{unshare, "--user", "--map-root-user"}, cmd.Args...)
		cmd.Path = unshare
	})
	peerAddr := c.expect("addr")
	c.send(string(tr.Name()))
	p, code := tr.Resolve([]byte(peerAddr))
	if code != 0 {
		t.Fatal(code)
	}
	s := newSink(t, tr)
	h := transport.Header{Kind: transport.KindMsg, Len: 1 << 20}
	if _, code := tr.Send(p, &h, [][]byte{bigMsg(1)}, 1); code != 0 {
		t.Fatal(code)
	}
	deadline := time.Now().Add(time.Minute)
	for (s.sent == 0 || s.n == 0) && time.Now().Before(deadline) {
		tr.Poll(s)
	}
	if s.sent != 1 || s.n != 1 || len(s.errs) > 0 {
		t.Fatalf("sent %d, received %d, errors %v", s.sent, s.n, s.errs)
	}
	if !bytes.Equal(s.got[0], bigMsg(2)) {
		t.Fatal("the peer's payload arrived garbled")
	}
	if !tr.SingleCopy(p) {
		t.Error("we lost single copy with the peer, though we may read its memory")
	}
	if got := c.expect("singlecopy"); got != "false sent 1 errors []" {
		t.Errorf("peer reports %q, want single copy off for us, its send done, no errors", got)
	}
	c.send("bye")
	if st := c.wait(); !st.Success() {
		t.Fatalf("peer exited with %v", st)
	}
}

// A sender in another pid namespace announces its pid namespace; a
// receiver never uses single copy with it (the pid would name some other
// process here).
func TestTransport_OtherPidNamespaceNeverSingleCopy(t *testing.T) {
	testDir(t)
	p := newTPair(t, TransportConfig{CMAMin: 1})
	if !ProbeCMA().Available {
		t.Skip("no process_vm_readv here at all")
	}
	p.send(transport.KindMsg, seqMsg(1, 8)) // connect a -> b
	p.until("accept", func() bool { return p.sb.n == 1 })
	if !p.b.SingleCopy(p.ba) {
		t.Fatal("same pid namespace: single copy off")
	}
	// A request claiming another namespace (what a sender in a container
	// with its own pid namespace writes).
	q := p.b.region.ConnQueue()
	other := NewName()
	rs, err := createRingSeg(DefaultMinRingSize)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.seg.Close()
	slot, err := q.Post(ConnRequest{SenderName: other, RingName: rs.seg.Name(), RingSize: rs.seg.Size()})
	if err != nil {
		t.Fatal(err)
	}
	ne.PutUint64(q.slot(slot)[cPidNS:], PidNS()+1)
	p.b.Poll(p.sb)
	pi, _ := p.b.Resolve([]byte(Addr(other)))
	if p.b.SingleCopy(pi) {
		t.Error("a sender from another pid namespace got single copy")
	}
	_ = q.Release(slot)
}
