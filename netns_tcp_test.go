package fi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTCPAcrossNetworkNamespaces runs two processes in two Linux network
// namespaces joined by a veth pair, so tcp endpoints talk over a real link
// (not loopback), addressed with InsertSvc by IPv4 and by IPv6 address
// (issue 7: works across hosts). It needs root and iproute2; otherwise it
// skips and says why. The namespaces, links and addresses are private to
// the test and removed at the end.
func TestTCPAcrossNetworkNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	ipCmd, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("needs iproute2's ip command")
	}
	ns1 := fmt.Sprintf("gofi-a-%d", os.Getpid())
	ns2 := fmt.Sprintf("gofi-b-%d", os.Getpid())
	vethA := fmt.Sprintf("gfa%d", os.Getpid()%100000)
	vethB := fmt.Sprintf("gfb%d", os.Getpid()%100000)
	run := func(args ...string) error {
		out, err := exec.Command(ipCmd, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run("netns", "add", ns1); err != nil {
		t.Skipf("cannot create a network namespace here: %v", err)
	}
	t.Cleanup(func() { _ = run("netns", "del", ns1) })
	if err := run("netns", "add", ns2); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run("netns", "del", ns2) })
	steps := [][]string{
		{"link", "add", vethA, "type", "veth", "peer", "name", vethB},
		{"link", "set", vethA, "netns", ns1},
		{"link", "set", vethB, "netns", ns2},
		{"-n", ns1, "addr", "add", "10.231.7.1/24", "dev", vethA},
		{"-n", ns2, "addr", "add", "10.231.7.2/24", "dev", vethB},
		{"-n", ns1, "-6", "addr", "add", "fd00:231:7::1/64", "dev", vethA, "nodad"},
		{"-n", ns2, "-6", "addr", "add", "fd00:231:7::2/64", "dev", vethB, "nodad"},
		{"-n", ns1, "link", "set", vethA, "up"},
		{"-n", ns2, "link", "set", vethB, "up"},
		{"-n", ns1, "link", "set", "lo", "up"},
		{"-n", ns2, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ name, a, b string }{
		{"IPv4", "10.231.7.1", "10.231.7.2"},
		{"IPv6", "fd00:231:7::1", "fd00:231:7::2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pa := startNSPeer(t, ctx, ipCmd, ns1, tc.a)
			pb := startNSPeer(t, ctx, ipCmd, ns2, tc.b)
			// Each learns the other's host and port and sends to it.
			fmt.Fprintf(pa.in, "%s\n", pb.addr)
			fmt.Fprintf(pb.in, "%s\n", pa.addr)
			for _, p := range []*nsPeer{pa, pb} {
				if line := p.line(t); line != "OK" {
					t.Fatalf("peer %s: %s", p.host, line)
				}
			}
		})
	}
}

type nsPeer struct {
	host string
	addr string // "host port" the peer listens on
	in   *os.File
	sc   *bufio.Scanner
}

func (p *nsPeer) line(t *testing.T) string {
	t.Helper()
	if !p.sc.Scan() {
		t.Fatalf("peer %s ended: %v", p.host, p.sc.Err())
	}
	return p.sc.Text()
}

// startNSPeer runs this test binary as TestTCPNetnsPeer inside namespace ns.
func startNSPeer(t *testing.T, ctx context.Context, ipCmd, ns, host string) *nsPeer {
	t.Helper()
	cmd := exec.CommandContext(ctx, ipCmd, "netns", "exec", ns, os.Args[0], "-test.run=^TestTCPNetnsPeer$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GOFI_NETNS_PEER="+host)
	cmd.Stderr = os.Stderr
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = inR
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	t.Cleanup(func() { inW.Close(); _ = cmd.Wait() })
	p := &nsPeer{host: host, in: inW, sc: bufio.NewScanner(out)}
	for {
		l := p.line(t)
		if a, ok := strings.CutPrefix(l, "ADDR "); ok {
			p.addr = a
			return p
		}
		if strings.HasPrefix(l, "ERR ") {
			t.Fatalf("peer %s: %s", host, l)
		}
	}
}

// TestTCPNetnsPeer is the peer of TestTCPAcrossNetworkNamespaces: it opens
// a tcp endpoint on its namespace's address, prints "ADDR host port", reads
// the other peer's "host port", inserts it with InsertSvc, sends a tagged
// message to it, receives the other's, checks data and source, and prints
// "OK" (or "ERR ...").
func TestTCPNetnsPeer(t *testing.T) {
	host := os.Getenv("GOFI_NETNS_PEER")
	if host == "" {
		t.Skip("peer process of TestTCPAcrossNetworkNamespaces only")
	}
	if err := netnsPeer(host); err != nil {
		fmt.Printf("ERR %v\n", err)
		t.Fatal(err)
	}
	fmt.Println("OK")
}

func netnsPeer(host string) error {
	hints := AllocInfo()
	hints.Caps = Msg | Tagged | Source | RemoteComm
	hints.EpAttr.Type = EpRDM
	hints.FabricAttr.ProvName = "tcp"
	infos, err := GetInfo(Version(2, 0), host, "0", Source|NumericHost, hints)
	if err != nil {
		return fmt.Errorf("GetInfo(%s): %w", host, err)
	}
	info := infos[0]
	fab, err := OpenFabric(info.FabricAttr)
	if err != nil {
		return err
	}
	defer fab.Close()
	dom, err := fab.OpenDomain(info)
	if err != nil {
		return err
	}
	defer dom.Close()
	av, err := dom.OpenAV(&AVAttr{Type: AVTable})
	if err != nil {
		return err
	}
	defer av.Close()
	// WaitUnspec: the zero WaitObj is WaitNone, a CQ Sread refuses.
	cq, err := dom.OpenCQ(&CQAttr{Format: CQFormatTagged, WaitObj: WaitUnspec})
	if err != nil {
		return err
	}
	defer cq.Close()
	ep, err := dom.OpenEndpoint(info)
	if err != nil {
		return err
	}
	defer ep.Close()
	if err := ep.BindAV(av); err != nil {
		return err
	}
	if err := ep.BindCQ(cq, Transmit|Recv); err != nil {
		return err
	}
	if err := ep.Enable(); err != nil {
		return err
	}
	name, err := ep.Name()
	if err != nil {
		return err
	}
	ap, err := AddrPortFromSockaddr(name)
	if err != nil {
		return fmt.Errorf("endpoint name %x: %w", name, err)
	}
	if ap.Addr() != netip.MustParseAddr(host) {
		return fmt.Errorf("endpoint listens on %v, not %s", ap, host)
	}
	fmt.Printf("ADDR %s %d\n", host, ap.Port())
	sc := bufio.NewScanner(os.Stdin)
	if !sc.Scan() {
		return errors.New("no peer address")
	}
	peerHost, peerPort, _ := strings.Cut(sc.Text(), " ")
	if _, err := strconv.Atoi(peerPort); err != nil {
		return fmt.Errorf("bad peer address %q", sc.Text())
	}
	peer, err := av.InsertSvc(peerHost, peerPort, NumericHost)
	if err != nil {
		return fmt.Errorf("InsertSvc(%s, %s): %w", peerHost, peerPort, err)
	}
	msg := bytes.Repeat([]byte(host), 1000) // large enough for a rendezvous
	buf := make([]byte, 64<<10)
	if err := ep.TRecv(buf, AddrUnspec, 7, 0, "rx"); err != nil {
		return err
	}
	if err := ep.TSend(msg, peer, 7, "tx"); err != nil {
		return err
	}
	var e [1]CQEntry
	gotTx, gotRx := false, false
	deadline := time.Now().Add(30 * time.Second)
	for !(gotTx && gotRx) {
		n, err := cq.Sread(e[:], time.Second)
		if errors.Is(err, ErrAvail) {
			ee, _ := cq.ReadErr()
			return fmt.Errorf("error completion %v", ee.Err)
		}
		if err != nil && !errors.Is(err, ErrAgain) {
			return fmt.Errorf("Sread: %w", err)
		}
		if n == 1 {
			switch e[0].Context {
			case "tx":
				gotTx = true
			case "rx":
				want := bytes.Repeat([]byte(peerHost), 1000)
				if !bytes.Equal(buf[:e[0].Len], want) {
					return errors.New("received data corrupt")
				}
				if e[0].Src != peer {
					return fmt.Errorf("completion source %d, want %d", e[0].Src, peer)
				}
				gotRx = true
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out (sent %v, received %v)", gotTx, gotRx)
		}
	}
	return nil
}
