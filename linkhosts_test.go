package fi

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gofi-dev/fi/internal/hosts"
)

// TestLinkedHosts: three processes, A and B on host h1 and C on host h2
// (internal/hosts: network namespaces with their own /dev/shm). A's one
// linked endpoint reaches B over shm and C over tcp (each process reports
// its routes); A's any-source tagged receives take B's and C's messages
// interleaved, every one checked by sequence and CRC; then C is killed
// with SIGKILL while A has a rendezvous send to C in flight: that send
// fails, and A and B go on. Needs root (skips otherwise).
func TestLinkedHosts(t *testing.T) {
	nt := hosts.New(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	h1, h2 := nt.Host("h1"), nt.Host("h2")
	a := startLinkPeer(t, ctx, h1, "A")
	b := startLinkPeer(t, ctx, h1, "B")
	c := startLinkPeer(t, ctx, h2, "C")
	all := []*linkPeer{a, b, c}
	for _, p := range all {
		p.name = p.expect(t, "NAME")
	}
	for _, p := range all {
		p.say("PEERS %s %s %s", a.name, b.name, c.name)
	}
	for _, p := range all {
		p.expect(t, "READY")
	}
	if got := a.expect(t, "P1"); got != fmt.Sprintf("ok %d", 2*linkHostMsgs()) {
		t.Fatalf("A: phase 1: %s", got)
	}
	for p, want := range map[*linkPeer]string{a: "shm=1 tcp=1", b: "shm=1 tcp=0", c: "shm=0 tcp=1"} {
		if got := p.expect(t, "ROUTES"); got != want {
			t.Errorf("%s routes %s, want %s", p.role, got, want)
		}
	}
	a.say("P2")
	a.expect(t, "P2READY")
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	b.say("P2")
	if got := a.expect(t, "P2"); got != "ok" {
		t.Fatalf("A: phase 2: %s", got)
	}
	b.expect(t, "DONE")
	for _, p := range []*linkPeer{a, b} {
		p.say("BYE")
	}
}

// linkHostMsgs is the number of messages each of B and C sends A: a
// million in all, fewer under the race detector.
func linkHostMsgs() int {
	if raceBuild {
		return 20000
	}
	return 500000
}

type linkPeer struct {
	role string
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser
	sc   *bufio.Scanner
}

func startLinkPeer(t *testing.T, ctx context.Context, h *hosts.Host, role string) *linkPeer {
	t.Helper()
	cmd := h.TestCommand(ctx, "TestLinkedHostsPeer", "GOFI_LINK_PEER="+role)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &linkPeer{role: role, cmd: cmd, in: in, sc: bufio.NewScanner(out)}
}

func (p *linkPeer) say(f string, args ...any) { fmt.Fprintf(p.in, f+"\n", args...) }

// expect reads lines until one starting with word and returns the rest;
// an "ERR" line or the end of output fails the test.
func (p *linkPeer) expect(t *testing.T, word string) string {
	t.Helper()
	for p.sc.Scan() {
		l := p.sc.Text()
		if rest, ok := strings.CutPrefix(l, word); ok && (rest == "" || rest[0] == ' ') {
			return strings.TrimSpace(rest)
		}
		if strings.HasPrefix(l, "ERR") {
			t.Fatalf("%s: %s", p.role, l)
		}
	}
	t.Fatalf("%s ended before %s: %v", p.role, word, p.sc.Err())
	return ""
}

// TestLinkedHostsPeer is a process of TestLinkedHosts.
func TestLinkedHostsPeer(t *testing.T) {
	role := os.Getenv("GOFI_LINK_PEER")
	if role == "" {
		t.Skip("a process of TestLinkedHosts only")
	}
	if err := linkHostPeer(t, role); err != nil {
		fmt.Printf("ERR %v\n", err)
		t.Fatal(err)
	}
}

func linkHostPeer(t *testing.T, role string) error {
	n := openNode(t, linkName, nodeCfg{})
	nm, err := n.ep.Name()
	if err != nil {
		return err
	}
	fmt.Printf("NAME %s\n", hex.EncodeToString(nm))
	in := bufio.NewScanner(os.Stdin)
	line := func() string {
		if !in.Scan() {
			return ""
		}
		return in.Text()
	}
	f := strings.Fields(line())
	if len(f) != 4 || f[0] != "PEERS" {
		return fmt.Errorf("bad peers line %q", f)
	}
	var names [][]byte
	for _, h := range f[1:] {
		b, err := hex.DecodeString(h)
		if err != nil {
			return err
		}
		names = append(names, b)
	}
	addrs, err := n.av.Insert(names, 0)
	if err != nil {
		return err
	}
	fmt.Println("READY")
	deadline := time.Now().Add(3 * time.Minute)
	routes := func() {
		s, p := linkTr(t, n.ep).Routes()
		fmt.Printf("ROUTES shm=%d tcp=%d\n", s, p)
	}
	total := linkHostMsgs()
	switch role {
	case "A":
		got, err := linkHostRecv(n, map[Addr]bool{addrs[1]: true, addrs[2]: true}, total, deadline)
		if err != nil {
			return err
		}
		fmt.Printf("P1 ok %d\n", got)
		routes()
		if line() != "P2" {
			return errors.New("no P2")
		}
		// Larger than the tcp transport's PushMax (1 MiB), so it goes
		// by rendezvous: C, which posts no receive for it, never takes
		// it, and the send can only end in an error once C dies. (A
		// pushed message may complete before the kill: C's provider
		// received it, which is all a transmit completion says.)
		big := make([]byte, 4<<20)
		if err := n.ep.TSend(big, addrs[2], 99, "toC"); err != nil {
			return err
		}
		fmt.Println("P2READY")
		failed := false
		for !failed {
			n.progress()
			for _, g := range n.txq {
				if g.Context == "toC" {
					if g.err == nil {
						return errors.New("the send to killed C completed")
					}
					failed = true
				}
			}
			n.txq = n.txq[:0]
			if time.Now().After(deadline) {
				return errors.New("the send to killed C never failed")
			}
			time.Sleep(100 * time.Microsecond)
		}
		if _, err := linkHostRecv(n, map[Addr]bool{addrs[1]: true}, 1000, deadline); err != nil {
			return fmt.Errorf("from B after C died: %w", err)
		}
		fmt.Println("P2 ok")
	case "B", "C":
		if err := linkHostSend(n, addrs[0], total, role[0], deadline); err != nil {
			return err
		}
		routes()
		if role == "B" {
			if line() != "P2" {
				return errors.New("no P2")
			}
			if err := linkHostSend(n, addrs[0], 1000, 'b', deadline); err != nil {
				return err
			}
			fmt.Println("DONE")
		}
	}
	line() // BYE (or the end of input)
	return nil
}

// linkHostMsg fills m with message seq of sender who and a CRC; sizes
// vary from 8 B to 64 KiB (one in 1024 rendezvous on both routes).
func linkHostSize(seq int) int {
	if seq%1024 == 1023 {
		return 64 << 10
	}
	return 8 + seq%57
}

// linkHostSend sends count tagged messages (tag = seq) to dest.
func linkHostSend(n *node, dest Addr, count int, who byte, deadline time.Time) error {
	buf := make([]byte, 4096)
	const window = 256
	inflight := 0
	for seq := 0; seq < count || inflight > 0; {
		if seq < count && inflight < window {
			var m []byte
			if sz := linkHostSize(seq); sz <= len(buf) {
				m = buf[:sz]
			} else { // a rendezvous: the buffer stays the sender's until it completes
				m = make([]byte, sz)
			}
			for i := range m[:len(m)-4] {
				m[i] = who + byte(seq) + byte(i)
			}
			putCRC(m)
			err := n.ep.TSend(m, dest, uint64(seq), nil)
			if err == nil {
				seq++
				inflight++
				continue
			}
			if !errors.Is(err, ErrAgain) {
				return fmt.Errorf("TSend %d: %w", seq, err)
			}
		}
		n.progress()
		for _, g := range n.txq {
			if g.err != nil {
				return fmt.Errorf("send failed: %v", g.err.Err)
			}
			inflight--
		}
		n.txq = n.txq[:0]
		if time.Now().After(deadline) {
			return fmt.Errorf("sent %d of %d", seq, count)
		}
	}
	return nil
}

// linkHostRecv receives count messages from each source in srcs with
// any-source tagged receives, checking each source's sequence and CRCs.
func linkHostRecv(n *node, srcs map[Addr]bool, count int, deadline time.Time) (int, error) {
	const posted = 64
	bufs := make([][]byte, posted)
	for i := range bufs {
		bufs[i] = make([]byte, 64<<10)
		if err := n.ep.TRecv(bufs[i], AddrUnspec, 0, ^uint64(0), i); err != nil {
			return 0, err
		}
	}
	// Receives match in order, but a rendezvous completes after eager
	// messages sent behind it: a tag may pass only rendezvous tags still
	// outstanding.
	seen := map[Addr][]bool{}
	next := map[Addr]int{}
	for a := range srcs {
		seen[a] = make([]bool, count)
	}
	got, want := 0, count*len(srcs)
	for got < want {
		n.progress()
		for _, g := range n.rxq {
			if g.err != nil {
				return got, fmt.Errorf("receive error %v", g.err.Err)
			}
			s, ok := seen[g.Src]
			if !ok {
				return got, fmt.Errorf("message from %d", g.Src)
			}
			tag := int(g.Tag)
			if tag >= count || s[tag] || g.Len != linkHostSize(tag) {
				return got, fmt.Errorf("from %d: tag %d len %d (duplicate or unknown)", g.Src, tag, g.Len)
			}
			s[tag] = true
			for k := next[g.Src]; k < tag; k++ {
				if !s[k] && linkHostSize(k) != 64<<10 {
					return got, fmt.Errorf("from %d: tag %d before eager tag %d", g.Src, tag, k)
				}
			}
			for next[g.Src] < count && s[next[g.Src]] {
				next[g.Src]++
			}
			k := g.Context.(int)
			if !crcOK(bufs[k][:g.Len]) {
				return got, fmt.Errorf("from %d: message %d corrupt", g.Src, g.Tag)
			}
			got++
			if got+posted <= want {
				if err := n.ep.TRecv(bufs[k], AddrUnspec, 0, ^uint64(0), k); err != nil {
					return got, err
				}
			}
		}
		n.rxq = n.rxq[:0]
		if time.Now().After(deadline) {
			return got, fmt.Errorf("received %d of %d", got, want)
		}
	}
	return got, nil
}

func putCRC(m []byte) {
	c := crc32.ChecksumIEEE(m[:len(m)-4])
	m[len(m)-4], m[len(m)-3], m[len(m)-2], m[len(m)-1] = byte(c), byte(c>>8), byte(c>>16), byte(c>>24)
}

func crcOK(m []byte) bool {
	if len(m) < 4 {
		return false
	}
	c := crc32.ChecksumIEEE(m[:len(m)-4])
	return m[len(m)-4] == byte(c) && m[len(m)-3] == byte(c>>8) && m[len(m)-2] == byte(c>>16) && m[len(m)-1] == byte(c>>24)
}
