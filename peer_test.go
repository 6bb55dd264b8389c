package fi

// Multi-process test machinery: a parent test re-executes the test binary
// as a peer process (TestPeerChild) that plays a named role, and the two
// talk over the child's stdin/stdout in "@@gofi word args" lines. The
// child leaves on its own when the parent goes away (stdin reaches EOF)
// or when its deadline passes, so a crashed parent never leaves a peer
// spinning.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	peerRoleEnv     = "GOFI_TEST_PEER"          // role the child plays
	peerArgEnv      = "GOFI_TEST_PEER_ARG"      // role argument (case name ...)
	peerDeadlineEnv = "GOFI_TEST_PEER_DEADLINE" // unix nanoseconds
	ctlPrefix       = "@@gofi "
)

// peerWrap is a command that startPeer runs the peer under (it must exec
// its arguments, as unshare does); nil runs the peer directly.
var peerWrap []string

// peerRoles maps a role name to the child's body. Files register theirs
// in init.
var peerRoles = map[string]func(t *testing.T, l *link, arg string){}

// TestPeerChild is the entry point of peer processes; run directly it
// skips.
func TestPeerChild(t *testing.T) {
	role := os.Getenv(peerRoleEnv)
	if role == "" {
		t.Skip("peer process role: started by the multi-process tests")
	}
	body, ok := peerRoles[role]
	if !ok {
		t.Fatalf("unknown peer role %q", role)
	}
	deadline := time.Now().Add(2 * time.Minute)
	if ns, err := strconv.ParseInt(os.Getenv(peerDeadlineEnv), 10, 64); err == nil {
		deadline = time.Unix(0, ns)
	}
	// Watchdog: leave when the deadline passes, whatever the body does.
	go func() {
		time.Sleep(time.Until(deadline))
		fmt.Fprintf(os.Stderr, "peer %s: deadline passed, exiting\n", role)
		os.Exit(4)
	}()
	l := newLink(t, os.Stdin, os.Stdout, deadline, nil, true)
	body(t, l, os.Getenv(peerArgEnv))
	l.send("done")
}

// link is one end of the control channel. Not safe for concurrent use
// except that its reader runs on its own goroutine.
type link struct {
	t          *testing.T
	w          io.Writer
	lines      chan []string
	deadline   time.Time
	orphanExit bool // child: exit when the parent's end closes
	log        *syncBuf
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newLink(t *testing.T, r io.Reader, w io.Writer, deadline time.Time, log *syncBuf, orphanExit bool) *link {
	l := &link{t: t, w: w, lines: make(chan []string, 64), deadline: deadline, log: log, orphanExit: orphanExit}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if s, ok := strings.CutPrefix(line, ctlPrefix); ok {
				l.lines <- strings.Fields(s)
			} else if log != nil {
				log.Write([]byte(line + "\n"))
			}
		}
		if l.orphanExit {
			fmt.Fprintln(os.Stderr, "peer: parent went away, exiting")
			os.Exit(3)
		}
		close(l.lines)
	}()
	return l
}

// send writes one control line.
func (l *link) send(word string, args ...any) {
	l.t.Helper()
	var b strings.Builder
	b.WriteString(ctlPrefix)
	b.WriteString(word)
	for _, a := range args {
		fmt.Fprintf(&b, " %v", a)
	}
	b.WriteByte('\n')
	if _, err := io.WriteString(l.w, b.String()); err != nil {
		l.t.Fatalf("link: send %s: %v", word, err)
	}
}

// expect waits for the next control line, which must be word, and returns
// its arguments.
func (l *link) expect(word string) []string {
	l.t.Helper()
	timer := time.NewTimer(time.Until(l.deadline))
	defer timer.Stop()
	select {
	case f, ok := <-l.lines:
		if !ok {
			l.t.Fatalf("link: peer exited while we waited for %q%s", word, l.peerLog())
		}
		if len(f) == 0 || f[0] != word {
			if len(f) > 0 && f[0] == "fail" {
				l.t.Fatalf("link: peer failed: %s%s", strings.Join(f[1:], " "), l.peerLog())
			}
			l.t.Fatalf("link: got %q, want %q%s", f, word, l.peerLog())
		}
		return f[1:]
	case <-timer.C:
		l.t.Fatalf("link: deadline passed waiting for %q%s", word, l.peerLog())
	}
	return nil
}

// expectInt is expect for a line with one integer argument.
func (l *link) expectInt(word string) int {
	l.t.Helper()
	a := l.expect(word)
	if len(a) != 1 {
		l.t.Fatalf("link: %s: want one argument, got %q", word, a)
	}
	v, err := strconv.Atoi(a[0])
	if err != nil {
		l.t.Fatalf("link: %s: %v", word, err)
	}
	return v
}

func (l *link) peerLog() string {
	if l.log == nil {
		return ""
	}
	return "\n--- peer output ---\n" + l.log.String()
}

// peerProc is a running peer process seen from the parent.
type peerProc struct {
	*link
	cmd  *exec.Cmd
	done chan struct{}
	err  error // exit status, valid once done is closed
}

// startPeer starts the test binary as a peer playing role. The child
// inherits the environment (GOFI_SHM_DIR included) plus extra. It is killed
// at the end of the test if still running.
func startPeer(t *testing.T, role, arg string, timeout time.Duration, extra ...string) *peerProc {
	t.Helper()
	deadline := time.Now().Add(timeout)
	if d, ok := t.Deadline(); ok && d.Add(-5*time.Second).Before(deadline) {
		deadline = d.Add(-5 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(5*time.Second))
	args := []string{os.Args[0], "-test.run=^TestPeerChild$", "-test.count=1",
		"-test.timeout=" + time.Until(deadline).Round(time.Second).String()}
	args = append(append([]string(nil), peerWrap...), args...) // e.g. another user namespace
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), peerRoleEnv+"="+role, peerArgEnv+"="+arg,
		peerDeadlineEnv+"="+strconv.FormatInt(deadline.UnixNano(), 10))
	// The race detector sleeps a second at exit by default; peers are many.
	cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Env = append(cmd.Env, extra...)
	log := &syncBuf{}
	cmd.Stderr = log
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Our own pipe, not cmd.StdoutPipe: Wait (on its own goroutine below)
	// closes a StdoutPipe as soon as the child exits, which could cut the
	// reader off before it read the child's last lines ("done"). With an
	// os.Pipe the reader sees EOF only after everything written was read.
	out, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = outW
	if err := cmd.Start(); err != nil {
		t.Fatalf("start peer: %v", err)
	}
	outW.Close()
	t.Cleanup(func() { out.Close() })
	p := &peerProc{cmd: cmd, done: make(chan struct{})}
	p.link = newLink(t, out, in, deadline, log, false)
	go func() {
		p.err = cmd.Wait()
		close(p.done)
		cancel()
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("peer %s/%s exit: %v%s", role, arg, p.err, p.peerLog())
		}
	})
	return p
}

// wait waits for the peer to say done and exit successfully.
func (p *peerProc) wait(t *testing.T) {
	t.Helper()
	p.expect("done")
	select {
	case <-p.done:
	case <-time.After(time.Until(p.deadline)):
		t.Fatalf("peer did not exit%s", p.peerLog())
	}
	if p.err != nil {
		t.Fatalf("peer exited with %v%s", p.err, p.peerLog())
	}
}

// exited waits for the peer process to end (any status) and returns it.
func (p *peerProc) exited(t *testing.T) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(time.Until(p.deadline)):
		t.Fatalf("peer did not exit%s", p.peerLog())
	}
	return nil
}

// ---------------------------------------------------------------------------
// nodes: a fabric, domain, AV, CQs and endpoints opened through the public API

type nodeCfg struct {
	caps       Flags // 0: Msg|Tagged|Source|DirectedRecv|MultiRecv|RemoteCQData
	threadSafe bool
	rxFormat   CQFormat // 0: Tagged
	txFormat   CQFormat
	txSel      bool
	rxSel      bool
	cqSize     int // 0: default
	txSize     int // 0: default
	rxSize     int
	eps        int  // endpoints (0: 1)
	userIDs    bool // insert peers with user ids (1000 + index)
	minMulti   int
}

type node struct {
	t          testing.TB
	prov       string
	fab        *Fabric
	dom        *Domain
	av         *AV
	txcq, rxcq *CQ
	eps        []*Endpoint
	ep         *Endpoint
	peers      []Addr // AV addresses of the peer's endpoints

	txq, rxq []got // entries read but not yet consumed
}

// got is one completion: a success entry or an error entry.
type got struct {
	CQEntry
	err *CQErrEntry
}

const defaultCaps = Msg | Tagged | Source | DirectedRecv | MultiRecv | RemoteCQData

func nodeInfo(t testing.TB, prov string, cfg nodeCfg) *Info {
	t.Helper()
	hints := AllocInfo()
	hints.Caps = cfg.caps
	if hints.Caps == 0 {
		hints.Caps = defaultCaps
	}
	hints.EpAttr.Type = EpRDM
	hints.FabricAttr.ProvName = prov
	if cfg.threadSafe {
		hints.DomainAttr.Threading = ThreadSafe
	}
	infos, err := GetInfo(Version(2, 0), "", "", 0, hints)
	if err != nil {
		t.Fatalf("GetInfo(%s): %v", prov, err)
	}
	info := infos[0]
	if cfg.txSize > 0 {
		info.TxAttr.Size = cfg.txSize
	}
	if cfg.rxSize > 0 {
		info.RxAttr.Size = cfg.rxSize
	}
	return info
}

func openNode(t testing.TB, prov string, cfg nodeCfg) *node {
	t.Helper()
	info := nodeInfo(t, prov, cfg)
	n := &node{t: t, prov: prov}
	var err error
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	n.fab, err = OpenFabric(info.FabricAttr)
	must(err)
	n.dom, err = n.fab.OpenDomain(info)
	must(err)
	n.av, err = n.dom.OpenAV(&AVAttr{Type: AVTable})
	must(err)
	n.txcq, err = n.dom.OpenCQ(&CQAttr{Size: cfg.cqSize, Format: cfg.txFormat, WaitObj: WaitUnspec})
	must(err)
	n.rxcq, err = n.dom.OpenCQ(&CQAttr{Size: cfg.cqSize, Format: cfg.rxFormat, WaitObj: WaitUnspec})
	must(err)
	neps := max(cfg.eps, 1)
	for range neps {
		ep, err := n.dom.OpenEndpoint(info)
		must(err)
		n.eps = append(n.eps, ep)
		must(ep.BindAV(n.av))
		txf, rxf := Transmit, Recv
		if cfg.txSel {
			txf |= SelectiveCompletion
		}
		if cfg.rxSel {
			rxf |= SelectiveCompletion
		}
		must(ep.BindCQ(n.txcq, txf))
		must(ep.BindCQ(n.rxcq, rxf))
		if cfg.minMulti > 0 {
			must(ep.SetMinMultiRecv(cfg.minMulti))
		}
		must(ep.Enable())
	}
	n.ep = n.eps[0]
	t.Cleanup(n.close)
	return n
}

func (n *node) close() {
	for _, ep := range n.eps {
		_ = ep.Close()
	}
	n.eps = nil
	_ = n.txcq.Close()
	_ = n.rxcq.Close()
	_ = n.av.Close()
	_ = n.dom.Close()
	_ = n.fab.Close()
}

// names returns the endpoints' addresses, hex encoded and comma separated.
func (n *node) names() string {
	var s []string
	for _, ep := range n.eps {
		b, err := ep.Name()
		if err != nil {
			n.t.Fatal(err)
		}
		s = append(s, hex.EncodeToString(b))
	}
	return strings.Join(s, ",")
}

// insertNames inserts the peer addresses names() produced.
func (n *node) insertNames(s string, userIDs bool) []Addr {
	n.t.Helper()
	var addrs [][]byte
	for _, h := range strings.Split(s, ",") {
		b, err := hex.DecodeString(h)
		if err != nil {
			n.t.Fatal(err)
		}
		addrs = append(addrs, b)
	}
	var out []Addr
	var err error
	if userIDs {
		uids := make([]Addr, len(addrs))
		for i := range uids {
			uids[i] = Addr(1000 + i)
		}
		out, err = n.av.InsertUserIDs(addrs, uids, 0)
	} else {
		out, err = n.av.Insert(addrs, 0)
	}
	if err != nil {
		n.t.Fatalf("AV insert: %v", err)
	}
	return out
}

// exchange swaps endpoint addresses with the peer over l and inserts the
// peer's into the AV.
func (n *node) exchange(l *link, userIDs bool) {
	n.t.Helper()
	l.send("addr", n.names())
	a := l.expect("addr")
	if len(a) != 1 {
		n.t.Fatalf("addr line %q", a)
	}
	n.peers = n.insertNames(a[0], userIDs)
}

// pump reads everything available on cq into q without blocking.
func pump(t testing.TB, cq *CQ, q *[]got) bool {
	var buf [16]CQEntry
	did := false
	for {
		k, err := cq.Read(buf[:])
		for i := range k {
			*q = append(*q, got{CQEntry: buf[i]})
		}
		did = did || k > 0
		switch {
		case err == nil:
			if k < len(buf) {
				return did
			}
		case errors.Is(err, ErrAgain):
			return did
		case errors.Is(err, ErrAvail):
			e, err := cq.ReadErr()
			if err != nil {
				t.Fatalf("ReadErr after ErrAvail: %v", err)
			}
			*q = append(*q, got{CQEntry: e.CQEntry, err: &e})
			did = true
		default:
			t.Fatalf("CQ.Read: %v", err)
		}
	}
}

// progress drives both CQs once, keeping what they return.
func (n *node) progress() bool {
	a := pump(n.t, n.txcq, &n.txq)
	b := pump(n.t, n.rxcq, &n.rxq)
	return a || b
}

const waitLimit = 20 * time.Second

// next returns the next completion of the transmit (tx true) or receive
// queue, progressing both, failing the test after waitLimit.
func (n *node) next(tx bool) got {
	n.t.Helper()
	q := &n.rxq
	if tx {
		q = &n.txq
	}
	deadline := time.Now().Add(waitLimit)
	for len(*q) == 0 {
		if !n.progress() && len(*q) == 0 {
			if time.Now().After(deadline) {
				n.t.Fatalf("no %s completion within %v", map[bool]string{true: "transmit", false: "receive"}[tx], waitLimit)
			}
			cq := n.rxcq
			if tx {
				cq = n.txcq
			}
			// Sleep briefly on the CQ we want; the other is pumped next round.
			var one [1]CQEntry
			k, err := cq.Sread(one[:], time.Millisecond)
			if k == 1 {
				*q = append(*q, got{CQEntry: one[0]})
			} else if errors.Is(err, ErrAvail) {
				continue
			}
		}
	}
	g := (*q)[0]
	*q = (*q)[1:]
	return g
}

// tx returns the next transmit completion, which must be a success.
func (n *node) tx() CQEntry {
	n.t.Helper()
	g := n.next(true)
	if g.err != nil {
		n.t.Fatalf("transmit error completion: %v (ctx %v olen %d)", g.err.Err, g.Context, g.err.OLen)
	}
	return g.CQEntry
}

// rx returns the next receive completion, which must be a success.
func (n *node) rx() CQEntry {
	n.t.Helper()
	g := n.next(false)
	if g.err != nil {
		n.t.Fatalf("receive error completion: %v (ctx %v len %d olen %d)", g.err.Err, g.Context, g.Len, g.err.OLen)
	}
	return g.CQEntry
}

// txErr and rxErr return the next completion, which must be an error.
func (n *node) txErr() CQErrEntry {
	n.t.Helper()
	g := n.next(true)
	if g.err == nil {
		n.t.Fatalf("want a transmit error completion, got success %+v", g.CQEntry)
	}
	return *g.err
}

func (n *node) rxErr() CQErrEntry {
	n.t.Helper()
	g := n.next(false)
	if g.err == nil {
		n.t.Fatalf("want a receive error completion, got success %+v", g.CQEntry)
	}
	return *g.err
}

// retry calls op until it does not return ErrAgain, progressing in
// between; it fails the test after waitLimit.
func (n *node) retry(op func() error) error {
	n.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		err := op()
		if !errors.Is(err, ErrAgain) {
			return err
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("still ErrAgain after %v", waitLimit)
		}
		if !n.progress() {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// fill writes a pattern depending on seed into b.
func fill(b []byte, seed int) []byte {
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func pattern(n, seed int) []byte { return fill(make([]byte, n), seed) }
