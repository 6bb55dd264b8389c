package benchmarks

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	fi "github.com/gofi-dev/fi"
)

// Cross-process ping-pong through gofi's public API, the way fi_pingpong
// measures: the peer (this binary re-executed as TestFiPingPongPeer) posts
// a receive, waits for the message by polling its CQ, and sends it back.
// ns/oneway is half a round trip. Run it beside BenchmarkShmPingPong (the
// bare ring and atomic flag) to read the ratio in the same run.

const (
	envFiPeer     = "GOFI_BENCH_FI_PEER"
	envFiPeerSize = "GOFI_BENCH_FI_SIZE"
	fiPeerMax     = 2 * time.Minute
)

var fiPingPongSizes = []int{8, 4 << 10, 64 << 10, 1 << 20}

func BenchmarkFiPingPong(b *testing.B) {
	for _, prov := range []string{"shm", "tcp"} {
		for _, size := range fiPingPongSizes {
			b.Run(fmt.Sprintf("prov=%s/size=%s", prov, sizeName(size)), func(b *testing.B) { fiPingPong(b, prov, size) })
		}
	}
}

// fiNode is one side: fabric, domain, AV, CQ and an enabled endpoint.
type fiNode struct {
	fab *fi.Fabric
	dom *fi.Domain
	av  *fi.AV
	cq  *fi.CQ
	ep  *fi.Endpoint
}

func openFiNode(prov string) (*fiNode, error) {
	hints := fi.AllocInfo()
	hints.Caps = fi.Msg | fi.Tagged
	hints.EpAttr.Type = fi.EpRDM
	hints.FabricAttr.ProvName = prov
	node := ""
	if prov == "tcp" {
		node = "127.0.0.1"
		hints.Caps |= fi.RemoteComm
	}
	infos, err := fi.GetInfo(fi.Version(2, 0), node, "", 0, hints)
	if err != nil {
		return nil, err
	}
	n := &fiNode{}
	if n.fab, err = fi.OpenFabric(infos[0].FabricAttr); err != nil {
		return nil, err
	}
	if n.dom, err = n.fab.OpenDomain(infos[0]); err != nil {
		return nil, err
	}
	if n.av, err = n.dom.OpenAV(&fi.AVAttr{Type: fi.AVTable}); err != nil {
		return nil, err
	}
	if n.cq, err = n.dom.OpenCQ(&fi.CQAttr{Format: fi.CQFormatTagged}); err != nil {
		return nil, err
	}
	if n.ep, err = n.dom.OpenEndpoint(infos[0]); err != nil {
		return nil, err
	}
	if err = n.ep.BindAV(n.av); err != nil {
		return nil, err
	}
	if err = n.ep.BindCQ(n.cq, fi.Transmit|fi.Recv); err != nil {
		return nil, err
	}
	return n, n.ep.Enable()
}

func (n *fiNode) close() {
	n.ep.Close()
	n.cq.Close()
	n.av.Close()
	n.dom.Close()
	n.fab.Close()
}

// isAgain reports whether err is fi.ErrAgain, the empty read of a polling
// loop: a type assertion first (a few instructions), since errors.Is alone
// costs about 50 per empty read (callgrind), an eighth of the loop.
func isAgain(err error) bool {
	if e, ok := err.(fi.Errno); ok && e == fi.ErrAgain {
		return true
	}
	return errors.Is(err, fi.ErrAgain)
}

// wait polls the CQ until want completions arrived (busy, as fi_pingpong).
func (n *fiNode) wait(want int, deadline time.Time) error {
	var e [4]fi.CQEntry
	for got, i := 0, 0; got < want; i++ {
		k, err := n.cq.Read(e[:])
		if err != nil && !isAgain(err) {
			if errors.Is(err, fi.ErrAvail) {
				ee, _ := n.cq.ReadErr()
				return fmt.Errorf("error completion: %v", ee.Err)
			}
			return err
		}
		got += k
		if i&(1<<16-1) == 1<<16-1 && time.Now().After(deadline) {
			return errors.New("timed out waiting for a completion")
		}
	}
	return nil
}

func fiPingPong(b *testing.B, prov string, size int) {
	n, err := openFiNode(prov)
	if err != nil {
		b.Skipf("%s: %v", prov, err)
	}
	defer n.close()
	ctx, cancel := context.WithTimeout(context.Background(), fiPeerMax)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFiPingPongPeer$", "-test.bench=^$", "-test.count=1")
	cmd.Env = append(os.Environ(), envFiPeer+"="+prov, envFiPeerSize+"="+strconv.Itoa(size))
	peer, stop := startFiPeer(b, n, cmd)
	defer stop()
	sbuf := make([]byte, size)
	rbuf := make([]byte, size)
	deadline := time.Now().Add(fiPeerMax)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for i := 0; i < b.N+1; i++ {
		if i == 1 {
			b.ResetTimer() // the first round trip connects and warms up
		}
		if err := n.ep.TRecv(rbuf, fi.AddrUnspec, 1, 0, nil); err != nil {
			b.Fatal(err)
		}
		for {
			err := n.ep.TSend(sbuf, peer, 1, nil)
			if err == nil {
				break
			}
			if !errors.Is(err, fi.ErrAgain) {
				b.Fatal(err)
			}
			n.cq.Read(nil)
		}
		if err := n.wait(2, deadline); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/oneway")
	// Tell the peer to stop: a zero-tag message.
	n.ep.TSend(nil, peer, 0, nil)
	n.wait(1, time.Now().Add(5*time.Second))
}

// TestFiPingPongPeer echoes tag-1 messages until a tag-0 message arrives.
func TestFiPingPongPeer(t *testing.T) {
	prov := os.Getenv(envFiPeer)
	if prov == "" {
		t.Skip("peer process of BenchmarkFiPingPong only")
	}
	size, _ := strconv.Atoi(os.Getenv(envFiPeerSize))
	n, client := openFiPeerSide(t, prov)
	defer n.close()
	// Receive into one buffer and answer from another, as fi_pingpong
	// does: echoing the received bytes would make every transfer read
	// lines the other core just wrote, which in the far vCPU placement is
	// slower than reading a buffer nobody rewrites.
	buf, tx := make([]byte, size), make([]byte, size)
	deadline := time.Now().Add(fiPeerMax)
	var e [1]fi.CQEntry
	for {
		if err := n.ep.TRecv(buf, fi.AddrUnspec, 0, 1, nil); err != nil {
			t.Fatal(err)
		}
		var tag uint64
		for i := 0; ; i++ {
			k, err := n.cq.Read(e[:])
			if k == 1 && e[0].Flags&fi.Recv != 0 {
				tag = e[0].Tag
				break
			}
			if err != nil && !isAgain(err) {
				t.Fatal(err)
			}
			if i&(1<<16-1) == 1<<16-1 && time.Now().After(deadline) {
				t.Fatal("peer timed out")
			}
		}
		if tag == 0 {
			return
		}
		for {
			err := n.ep.TSend(tx[:e[0].Len], client, 1, nil) // echo the size received
			if err == nil {
				break
			}
			if !errors.Is(err, fi.ErrAgain) {
				t.Fatal(err)
			}
			n.cq.Read(nil)
		}
	}
}

// BenchmarkFiRoundInProcess is one tagged message between two shm
// endpoints of this process, driven by one goroutine: post a receive,
// send, read both completions. It measures gofi's software cost per
// message without the cross-core wait (count it with callgrind for a
// figure that does not move with the machine's load). size=8B is the
// latency path, 4KiB the largest inline (eager) size fi_pingpong's
// default run uses; the larger sizes exercise the copy protocols.
func BenchmarkFiRoundInProcess(b *testing.B) {
	for _, size := range []int{8, 4 << 10, 64 << 10, 1 << 20} {
		b.Run("size="+sizeName(size), func(b *testing.B) { fiRoundInProcess(b, size) })
	}
}

// shmPair opens two shm nodes in this process, closed when b ends, and
// returns them with c's address in a's AV (skipping b without shm).
func shmPair(b *testing.B) (a, c *fiNode, to fi.Addr) {
	b.Helper()
	a, err := openFiNode("shm")
	if err != nil {
		b.Skip(err)
	}
	b.Cleanup(a.close)
	c, err = openFiNode("shm")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.close)
	name, _ := c.ep.Name()
	addrs, err := a.av.Insert([][]byte{name}, 0)
	if err != nil {
		b.Fatal(err)
	}
	return a, c, addrs[0]
}

func fiRoundInProcess(b *testing.B, size int) {
	a, c, to := shmPair(b)
	msg, buf := make([]byte, size), make([]byte, size)
	deadline := time.Now().Add(time.Minute)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := c.ep.TRecv(buf, fi.AddrUnspec, 1, 0, nil); err != nil {
			b.Fatal(err)
		}
		if err := a.ep.TSend(msg, to, 1, nil); err != nil {
			b.Fatal(err)
		}
		if err := waitBoth(c, a, deadline); err != nil {
			b.Fatal(err)
		}
	}
}

// waitBoth polls two nodes' CQs until each has one completion: with
// manual progress the sender must be driven too (it streams the segments
// of a large message when the receiver answers).
func waitBoth(x, y *fiNode, deadline time.Time) error {
	var e [1]fi.CQEntry
	gx, gy := 0, 0
	for i := 0; gx < 1 || gy < 1; i++ {
		for _, s := range [2]struct {
			n   *fiNode
			got *int
		}{{x, &gx}, {y, &gy}} {
			if *s.got > 0 {
				continue
			}
			k, err := s.n.cq.Read(e[:])
			if err != nil && !isAgain(err) {
				return err
			}
			*s.got += k
		}
		if i&(1<<16-1) == 1<<16-1 && time.Now().After(deadline) {
			return errors.New("timed out waiting for a completion")
		}
	}
	return nil
}

// startFiPeer starts cmd, a re-executed peer that prints "NAME <hex>" and
// reads this side's name on stdin, tells it n's name, inserts its name in
// n's AV and returns its fi_addr. stop closes the peer's stdin and waits
// for it.
func startFiPeer(b *testing.B, n *fiNode, cmd *exec.Cmd) (peer fi.Addr, stop func()) {
	b.Helper()
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	stop = func() { in.Close(); cmd.Wait() }
	sc := bufio.NewScanner(outp)
	var peerName []byte
	for sc.Scan() {
		if h, ok := strings.CutPrefix(sc.Text(), "NAME "); ok {
			peerName, _ = hex.DecodeString(h)
			break
		}
	}
	if peerName == nil {
		stop()
		b.Fatal("peer did not report its name")
	}
	me, _ := n.ep.Name()
	fmt.Fprintf(in, "%s\n", hex.EncodeToString(me))
	addrs, err := n.av.Insert([][]byte{peerName}, 0)
	if err != nil {
		stop()
		b.Fatal(err)
	}
	return addrs[0], stop
}

// openFiPeerSide is the peer-process half of startFiPeer: it opens a node
// of prov, prints "NAME <hex>", reads the client's name from stdin and
// inserts it, returning the node and the client's fi_addr.
func openFiPeerSide(t *testing.T, prov string) (*fiNode, fi.Addr) {
	t.Helper()
	n, err := openFiNode(prov)
	if err != nil {
		t.Fatal(err)
	}
	me, _ := n.ep.Name()
	fmt.Printf("NAME %s\n", hex.EncodeToString(me))
	sc := bufio.NewScanner(os.Stdin)
	if !sc.Scan() {
		n.close()
		t.Fatal("no client name")
	}
	name, err := hex.DecodeString(sc.Text())
	if err != nil {
		n.close()
		t.Fatal(err)
	}
	addrs, err := n.av.Insert([][]byte{name}, 0)
	if err != nil {
		n.close()
		t.Fatal(err)
	}
	return n, addrs[0]
}

// BenchmarkFiFirstUse: the first messages of a size cost what later ones
// do (issue 12: fi_pingpong's default runs are short). Against a fresh
// peer process, after one 8-byte round trip (first contact: connection,
// peer state), it times the first 100 round trips of the size, then b.N
// more. first100-ns/oneway is their mean half round trip, first/steady
// its ratio to the later ones' (near 1: no first-use penalty).
func BenchmarkFiFirstUse(b *testing.B) {
	for _, prov := range []string{"shm", "tcp"} {
		for _, size := range fiPingPongSizes {
			b.Run(fmt.Sprintf("prov=%s/size=%s", prov, sizeName(size)), func(b *testing.B) { fiFirstUse(b, prov, size) })
		}
	}
}

func fiFirstUse(b *testing.B, prov string, size int) {
	n, err := openFiNode(prov)
	if err != nil {
		b.Skipf("%s: %v", prov, err)
	}
	defer n.close()
	ctx, cancel := context.WithTimeout(context.Background(), fiPeerMax)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFiPingPongPeer$", "-test.bench=^$", "-test.count=1")
	cmd.Env = append(os.Environ(), envFiPeer+"="+prov, envFiPeerSize+"="+strconv.Itoa(size))
	peer, stop := startFiPeer(b, n, cmd)
	defer stop()
	sbuf := make([]byte, size)
	rbuf := make([]byte, size)
	deadline := time.Now().Add(fiPeerMax)
	round := func(m int) {
		if err := n.ep.TRecv(rbuf, fi.AddrUnspec, 1, 0, nil); err != nil {
			b.Fatal(err)
		}
		for {
			err := n.ep.TSend(sbuf[:m], peer, 1, nil)
			if err == nil {
				break
			}
			if !errors.Is(err, fi.ErrAgain) {
				b.Fatal(err)
			}
			n.cq.Read(nil)
		}
		if err := n.wait(2, deadline); err != nil {
			b.Fatal(err)
		}
	}
	round(min(size, 8)) // first contact
	const first = 100
	t0 := time.Now()
	for range first {
		round(size)
	}
	firstNs := float64(time.Since(t0).Nanoseconds()) / first / 2
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		round(size)
	}
	b.StopTimer()
	steady := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / 2
	b.ReportMetric(firstNs, "first100-ns/oneway")
	b.ReportMetric(steady, "ns/oneway")
	b.ReportMetric(firstNs/steady, "first/steady")
	n.ep.TSend(nil, peer, 0, nil)
	n.wait(1, time.Now().Add(5*time.Second))
}

// BenchmarkFiFirstUseInProcess: the first round trips of a size on a
// fresh pair of shm endpoints cost what later ones do (issue 12), measured
// in this process with both endpoints driven by this goroutine, so that no
// scheduling between processes enters the figures. Each iteration opens a
// pair, inserts each one's address into the other's AV (as fi_pingpong
// does before its timed loop), and runs round trips of the size:
// first-us is the first round trip (first contact included),
// first100-ns/round the mean of the first 100, steady-ns/round the mean
// of the next 1000 (100 for 1 MiB), first/steady the ratio of the last
// two, and first100-allocs the allocations of the first 100.
func BenchmarkFiFirstUseInProcess(b *testing.B) {
	for _, size := range fiPingPongSizes {
		b.Run("size="+sizeName(size), func(b *testing.B) {
			var first, first100, steady, allocs float64
			for range b.N {
				f, f100, st, al := firstUseInProcess(b, size)
				first, first100, steady, allocs = first+f, first100+f100, steady+st, allocs+al
			}
			n := float64(b.N)
			b.ReportMetric(first/n/1e3, "first-us")
			b.ReportMetric(first100/n, "first100-ns/round")
			b.ReportMetric(steady/n, "steady-ns/round")
			b.ReportMetric(first100/steady, "first/steady")
			b.ReportMetric(allocs/n, "first100-allocs")
		})
	}
}

// firstUseInProcess is one iteration of BenchmarkFiFirstUseInProcess: the
// first round trip's time, the first 100's and the next ones' mean (ns)
// and the allocations of the first 100.
//
// The whole iteration is timed (ns/op: opening the pair, first contact and
// the 1100 round trips): with the timer stopped through it, b.N would grow
// toward a billion before the benchmark's time was reached.
func firstUseInProcess(b *testing.B, size int) (first, first100, steady, allocs float64) {
	a, err := openFiNode("shm")
	if err != nil {
		b.Skip(err)
	}
	defer a.close()
	c, err := openFiNode("shm")
	if err != nil {
		b.Fatal(err)
	}
	defer c.close()
	nameA, _ := a.ep.Name()
	nameC, _ := c.ep.Name()
	ac, err := a.av.Insert([][]byte{nameC}, 0)
	if err != nil {
		b.Fatal(err)
	}
	ca, err := c.av.Insert([][]byte{nameA}, 0)
	if err != nil {
		b.Fatal(err)
	}
	ma, mc, ra, rc := make([]byte, size), make([]byte, size), make([]byte, size), make([]byte, size)
	for _, b := range [][]byte{ma, mc, ra, rc} { // mapped, as an application's buffers would be
		for i := range b {
			b[i] = 0
		}
	}
	deadline := time.Now().Add(time.Minute)
	one := func(from, to *fiNode, dst fi.Addr, msg, buf []byte) {
		if err := to.ep.TRecv(buf, fi.AddrUnspec, 1, 0, nil); err != nil {
			b.Fatal(err)
		}
		if err := from.ep.TSend(msg, dst, 1, nil); err != nil {
			b.Fatal(err)
		}
		if err := waitBoth(to, from, deadline); err != nil {
			b.Fatal(err)
		}
	}
	round := func() {
		one(a, c, ac[0], ma, rc)
		one(c, a, ca[0], mc, ra)
	}
	later := 1000
	if size >= 1<<20 {
		later = 100
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	round()
	t1 := time.Since(t0)
	for range 99 {
		round()
	}
	t100 := time.Since(t0)
	runtime.ReadMemStats(&m1)
	t0 = time.Now()
	for range later {
		round()
	}
	tl := time.Since(t0)
	return float64(t1.Nanoseconds()), float64(t100.Nanoseconds()) / 100, float64(tl.Nanoseconds()) / float64(later),
		float64(m1.Mallocs - m0.Mallocs)
}

// BenchmarkFiIdleRead is one CQ read that finds nothing on a shm endpoint
// with a connected peer whose ring is empty: the loop a busy-polling
// receiver runs while it waits, whose length bounds how soon it sees a
// message (count it with callgrind for a load-independent figure).
func BenchmarkFiIdleRead(b *testing.B) {
	a, c, to := shmPair(b)
	msg, buf := make([]byte, 8), make([]byte, 8)
	deadline := time.Now().Add(time.Minute)
	for range 3 { // connected, both directions' rings in use
		if err := c.ep.TRecv(buf, fi.AddrUnspec, 1, 0, nil); err != nil {
			b.Fatal(err)
		}
		if err := a.ep.TSend(msg, to, 1, nil); err != nil {
			b.Fatal(err)
		}
		if err := waitBoth(c, a, deadline); err != nil {
			b.Fatal(err)
		}
	}
	var e [1]fi.CQEntry
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.cq.Read(e[:]); !isAgain(err) {
			b.Fatal("a completion or an error:", err)
		}
	}
}
