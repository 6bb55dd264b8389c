package fi

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"regexp"
	"strings"
	"testing"
	"time"

	flink "github.com/gofi-dev/fi/link"
)

// Tests of the linked shm+tcp provider in one process. Real processes:
// TestConformance_link and _link_remote (conformance_test.go), and
// across hosts linkhosts_test.go.

func TestSreadDrivenPeers_link(t *testing.T) {
	shmTestDir(t)
	sreadDrivenPeers(t, linkName)
}

// otherDomain rewrites a linked name's shared-memory identity, so that the
// AV routes it over tcp as it would a peer on another host.
func otherDomain(t testing.TB, name []byte) []byte {
	t.Helper()
	re := regexp.MustCompile(`dom=[0-9a-f]{16}`)
	if !re.Match(name) {
		t.Fatalf("name %q carries no dom=", name)
	}
	return re.ReplaceAll(name, []byte("dom=00000000000000ff"))
}

func linkTr(t *testing.T, ep *Endpoint) *flink.Transport {
	t.Helper()
	l, ok := ep.tr.(*flink.Transport)
	if !ok {
		t.Fatalf("endpoint transport is %T", ep.tr)
	}
	return l
}

// linkMsg is message i of sender who: a size alternating eager and
// rendezvous on both routes, with a CRC of the payload in its last 4 bytes.
func linkMsg(who byte, i int) []byte {
	size := 64
	if i%3 == 2 {
		size = 100000
	}
	m := make([]byte, size)
	for k := range m[:size-4] {
		m[k] = who + byte(i) + byte(k%253)
	}
	c := crc32.ChecksumIEEE(m[:size-4])
	m[size-4], m[size-3], m[size-2], m[size-1] = byte(c), byte(c>>8), byte(c>>16), byte(c>>24)
	return m
}

func linkMsgOK(m []byte) bool {
	n := len(m)
	if n < 4 {
		return false
	}
	c := crc32.ChecksumIEEE(m[:n-4])
	return m[n-4] == byte(c) && m[n-3] == byte(c>>8) && m[n-2] == byte(c>>16) && m[n-1] == byte(c>>24)
}

// linkSend sends msgs to dest with tags base+i, progressing until every
// send completed successfully.
func linkSend(n *node, dest Addr, base uint64, msgs [][]byte, deadline time.Time) error {
	for i, m := range msgs {
		for {
			err := n.ep.TSend(m, dest, base+uint64(i), i)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrAgain) {
				return fmt.Errorf("TSend %d: %w", i, err)
			}
			n.progress()
			if time.Now().After(deadline) {
				return errors.New("send queue never drained")
			}
		}
	}
	for done := 0; done < len(msgs); {
		n.progress()
		for len(n.txq) > 0 {
			g := n.txq[0]
			n.txq = n.txq[1:]
			if g.err != nil {
				return fmt.Errorf("send %v failed: %v", g.Context, g.err.Err)
			}
			done++
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d sends completed", done, len(msgs))
		}
	}
	return nil
}

// TestLinkedRoutes: A reaches B over shm and C over tcp through one
// endpoint (C's name carries another shared-memory identity); AV entries
// say which; any-source tagged receives take both senders' messages as
// they come, each sender's in order, with FI_SOURCE naming it; a directed
// receive takes only its peer's; closing C fails A's operations to C
// while A and B go on.
func TestLinkedRoutes(t *testing.T) {
	shmTestDir(t)
	a, b, c, aB, aC, bA, cA := linkTrio(t, nodeCfg{})
	for ad, via := range map[Addr]string{aB: "via=shm", aC: "via=tcp"} {
		got, err := a.av.Lookup(ad)
		if err != nil || !strings.HasSuffix(string(got), via) || !strings.HasSuffix(a.av.Straddr(got), via) {
			t.Errorf("Lookup(%d) = %q, %v; want %s", ad, got, err, via)
		}
	}

	const per = 30
	var fromB, fromC [][]byte
	for i := range per {
		fromB = append(fromB, linkMsg('B', i))
		fromC = append(fromC, linkMsg('C', i))
	}
	deadline := time.Now().Add(60 * time.Second)
	bufs := make([][]byte, 2*per)
	for i := range bufs {
		bufs[i] = make([]byte, 100000)
		if err := a.ep.TRecv(bufs[i], AddrUnspec, 0, ^uint64(0), i); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 2)
	go func() { errs <- linkSend(b, bA, 1000, fromB, deadline) }()
	go func() { errs <- linkSend(c, cA, 2000, fromC, deadline) }()
	// Receives match in the order they were posted: each sender's
	// messages must land in increasing receives, whatever order the
	// completions (eager before rendezvous) come in.
	slot := map[Addr]map[uint64]int{aB: {}, aC: {}}
	for got := 0; got < 2*per; {
		if !a.progress() && time.Now().After(deadline) {
			t.Fatalf("received %d of %d", got, 2*per)
		}
		for len(a.rxq) > 0 {
			g := a.rxq[0]
			a.rxq = a.rxq[1:]
			got++
			if g.err != nil {
				t.Fatalf("receive error %v", g.err.Err)
			}
			m, ok := slot[g.Src]
			if !ok {
				t.Fatalf("completion from %d (not B %d or C %d)", g.Src, aB, aC)
			}
			m[g.Tag] = g.Context.(int)
			if !linkMsgOK(bufs[g.Context.(int)][:g.Len]) {
				t.Errorf("message tag %d corrupt", g.Tag)
			}
		}
	}
	for src, base := range map[Addr]uint64{aB: 1000, aC: 2000} {
		last := -1
		for i := range uint64(per) {
			k, ok := slot[src][base+i]
			if !ok || k <= last {
				t.Errorf("from %d: tag %d in receive %d (present %v) after %d: order broken", src, base+i, k, ok, last)
			}
			last = k
		}
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	routes := func(n *node) string {
		s, p := linkTr(t, n.ep).Routes()
		return fmt.Sprintf("shm=%d tcp=%d", s, p)
	}
	for n, want := range map[*node]string{a: "shm=1 tcp=1", b: "shm=1 tcp=0", c: "shm=0 tcp=1"} {
		if got := routes(n); got != want {
			t.Errorf("routes %s, want %s", got, want)
		}
	}

	// A directed receive for C takes C's message, not B's sent before it.
	one := make([]byte, 100000)
	if err := linkSend(b, bA, 7, [][]byte{linkMsg('B', 0)}, deadline); err != nil {
		t.Fatal(err)
	}
	if err := a.ep.TRecv(one, aC, 7, 0, "fromC"); err != nil {
		t.Fatal(err)
	}
	if err := linkSend(c, cA, 7, [][]byte{linkMsg('C', 0)}, deadline); err != nil {
		t.Fatal(err)
	}
	if g := a.next(false); g.err != nil || g.Context != "fromC" || g.Src != aC || !bytes.Equal(one[:g.Len], linkMsg('C', 0)) {
		t.Fatalf("directed receive: %+v", g)
	}
	if err := a.ep.TRecv(one, aB, 7, 0, "fromB"); err != nil {
		t.Fatal(err)
	}
	if g := a.next(false); g.err != nil || g.Context != "fromB" || g.Src != aB {
		t.Fatalf("directed receive from B: %+v", g)
	}

	// C goes away: A's sends to C fail, A and B go on.
	c.close()
	failed := false
	for i := 0; !failed && time.Now().Before(deadline); i++ {
		err := a.ep.TSend(linkMsg('A', i), aC, 9, "toC")
		if err != nil && !errors.Is(err, ErrAgain) {
			failed = true // refused at once: the peer is known dead
			break
		}
		for k := 0; k < 50 && !failed; k++ {
			a.progress()
			for len(a.txq) > 0 {
				g := a.txq[0]
				a.txq = a.txq[1:]
				if g.err != nil {
					failed = true
				}
			}
			time.Sleep(time.Millisecond)
		}
	}
	if !failed {
		t.Fatal("sends to a closed tcp peer never failed")
	}
	if err := a.ep.TRecv(one, AddrUnspec, 0, ^uint64(0), "after"); err != nil {
		t.Fatal(err)
	}
	if err := linkSend(b, bA, 11, [][]byte{linkMsg('B', 1)}, deadline); err != nil {
		t.Fatal(err)
	}
	for {
		g := a.next(false)
		if g.Context == "after" {
			if g.err != nil || g.Src != aB || g.Tag != 11 {
				t.Fatalf("after C died: %+v", g)
			}
			break
		}
	}
}

// TestLinkedGetInfo: the linked info comes first for LocalComm|RemoteComm,
// for its name and for FI_PROVIDER; LocalComm alone gives shm first,
// RemoteComm alone tcp; its caps are what both members support.
func TestLinkedGetInfo(t *testing.T) {
	first := func(caps Flags, prov string) string {
		t.Helper()
		h := AllocInfo()
		h.Caps = caps
		h.FabricAttr.ProvName = prov
		infos, err := GetInfo(Version(2, 0), "", "", 0, h)
		if err != nil {
			t.Fatalf("GetInfo(%v, %q): %v", caps, prov, err)
		}
		return infos[0].FabricAttr.ProvName
	}
	for _, c := range []struct {
		caps Flags
		prov string
		want string
	}{
		{Msg | Tagged | LocalComm | RemoteComm, "", linkName},
		{Msg | Tagged, linkName, linkName},
		{Msg | Tagged | LocalComm, "", shmName},
		{Msg | Tagged | RemoteComm, "", tcpName},
		{Msg | Tagged, "", shmName},
	} {
		if got := first(c.caps, c.prov); got != c.want {
			t.Errorf("caps %v prov %q: first %s, want %s", c.caps, c.prov, got, c.want)
		}
	}
	t.Setenv("FI_PROVIDER", linkName)
	if got := first(Msg, ""); got != linkName {
		t.Errorf("FI_PROVIDER=%s: first %s", linkName, got)
	}
	h := AllocInfo()
	h.FabricAttr.ProvName = linkName
	infos, err := GetInfo(Version(2, 0), "", "", 0, h)
	if err != nil {
		t.Fatal(err)
	}
	// RMA goes over both members; atomics only once shm has them.
	if c := infos[0].Caps; c != linkCaps || c&RMA == 0 || c&Atomic != shmCaps&Atomic || c&(LocalComm|RemoteComm) != LocalComm|RemoteComm {
		t.Errorf("caps %v, want %v", c, linkCaps)
	}
	if infos[0].AddrFormat != AddrStr {
		t.Errorf("address format %v", infos[0].AddrFormat)
	}
}

// TestLinkedAVForms: plain member addresses are routed (fi_shm:// over
// shm when the region is here, a sockaddr or fi_sockaddr_in:// over tcp),
// and unreachable or malformed ones are refused with a clear errno.
func TestLinkedAVForms(t *testing.T) {
	shmTestDir(t)
	a := openNode(t, linkName, nodeCfg{})
	b := openNode(t, shmName, nodeCfg{})
	tc := openNode(t, tcpName, nodeCfg{})
	bn, _ := b.ep.Name()
	tn, _ := tc.ep.Name()
	ad, err := a.av.Insert([][]byte{bn, tn}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, via := range []string{"via=shm", "via=tcp"} {
		got, _ := a.av.Lookup(ad[i])
		if !strings.HasSuffix(string(got), via) {
			t.Errorf("entry %d = %q, want %s", i, got, via)
		}
	}
	// The plain endpoints speak their member's protocol: messages flow.
	for i, peer := range []*node{b, tc} {
		an, _ := a.ep.Name()
		if peer == b {
			an = []byte(strings.Replace(regexp.MustCompile(`shm=[^&]+`).FindString(string(an)), "shm=", "fi_shm://", 1))
		} else {
			// the linked name's tcp part as the tcp peer's format
			l := linkTr(t, a.ep)
			an = l.TCP().Name()
		}
		back, err := peer.av.Insert([][]byte{an}, 0)
		if err != nil {
			t.Fatalf("peer %d Insert(%q): %v", i, an, err)
		}
		buf := make([]byte, 100)
		if err := a.ep.TRecv(buf, ad[i], 5, 0, i); err != nil {
			t.Fatal(err)
		}
		if err := linkSend(peer, back[0], 5, [][]byte{linkMsg('P', i)}, time.Now().Add(30*time.Second)); err != nil {
			t.Fatal(err)
		}
		if g := a.next(false); g.err != nil || g.Context != i || g.Src != ad[i] {
			t.Fatalf("from plain %s peer: %+v", peer.prov, g)
		}
	}
	for _, c := range []struct {
		addr string
		want Errno
	}{
		{"fi_shm://gofi-0-nosuchregion", ErrHostUnreach},
		{"fi_link://?shm=gofi-0-x&dom=00000000000000ff", ErrHostUnreach},
		{"fi_link://10.0.0.1:0", ErrInval},
		{"garbage", ErrInval},
	} {
		_, err := a.av.Insert([][]byte{[]byte(c.addr)}, 0)
		if !errors.Is(err, c.want) {
			t.Errorf("Insert(%q): %v, want %v", c.addr, err, c.want)
		}
	}
}

// linkTrio opens A, B and C, A reaching B over shm and C over tcp; it
// returns the nodes and the addresses A -> B, A -> C, B -> A, C -> A.
func linkTrio(t *testing.T, cfg nodeCfg) (a, b, c *node, aB, aC, bA, cA Addr) {
	t.Helper()
	a, b, c = openNode(t, linkName, cfg), openNode(t, linkName, cfg), openNode(t, linkName, cfg)
	insert := func(n *node, nm []byte) Addr {
		t.Helper()
		ad, err := n.av.Insert([][]byte{nm}, 0)
		if err != nil {
			t.Fatalf("Insert(%q): %v", nm, err)
		}
		return ad[0]
	}
	na, _ := a.ep.Name()
	nb, _ := b.ep.Name()
	nc, _ := c.ep.Name()
	return a, b, c, insert(a, nb), insert(a, otherDomain(t, nc)), insert(b, na), insert(c, otherDomain(t, na))
}

// TestLinkedMultiRecvAndPeek: one multi-receive buffer fills with
// messages of both routes; a peek finds an unexpected message of either
// route and a claim takes it.
func TestLinkedMultiRecvAndPeek(t *testing.T) {
	shmTestDir(t)
	a, b, c, aB, aC, bA, cA := linkTrio(t, nodeCfg{minMulti: 101})
	deadline := time.Now().Add(30 * time.Second)
	big := make([]byte, 1000)
	if err := a.ep.RecvMsg(&Message{IOV: [][]byte{big}, Addr: AddrUnspec, Context: "multi"}, MultiRecv); err != nil {
		t.Fatal(err)
	}
	// 9 messages of 100 bytes, alternating B and C: the ninth fills the
	// buffer past its minimum and releases it.
	for i := range 9 {
		n, to := b, bA
		if i%2 == 1 {
			n, to = c, cA
		}
		m := bytes.Repeat([]byte{byte('0' + i)}, 100)
		for {
			err := n.ep.Send(m, to, i)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrAgain) {
				t.Fatal(err)
			}
			n.progress()
		}
		// wait for A to take it, so the order in the buffer is known
		g := a.next(false)
		wantSrc := aB
		if i%2 == 1 {
			wantSrc = aC
		}
		if g.err != nil || g.Context != "multi" || g.Src != wantSrc || g.Len != 100 || !bytes.Equal(g.Buf, m) || &g.Buf[0] != &big[100*i] {
			t.Fatalf("message %d: %+v", i, g)
		}
		if released := g.Flags&MultiRecv != 0; released != (i == 8) {
			t.Fatalf("message %d: FI_MULTI_RECV %v", i, released)
		}
		if err := linkSend(n, to, 0, nil, deadline); err != nil {
			t.Fatal(err)
		}
		n.progress()
		n.txq = n.txq[:0]
	}
	// Peek and claim across routes (tagged, unexpected messages).
	if err := linkSend(c, cA, 42, [][]byte{linkMsg('C', 1)}, deadline); err != nil {
		t.Fatal(err)
	}
	if err := linkSend(b, bA, 43, [][]byte{linkMsg('B', 1)}, deadline); err != nil {
		t.Fatal(err)
	}
	for tag, src := range map[uint64]Addr{42: aC, 43: aB} {
		var e got
		for until := time.Now().Add(20 * time.Second); ; {
			if err := a.ep.TRecvMsg(&TaggedMsg{Addr: AddrUnspec, Tag: tag, Context: tag}, Peek|Claim); err != nil {
				t.Fatal(err)
			}
			e = a.next(false)
			if e.err == nil || time.Now().After(until) {
				break
			}
			time.Sleep(time.Millisecond) // not arrived yet (ErrNoMsg)
		}
		if e.err != nil || e.Src != src || e.Tag != tag {
			t.Fatalf("peek tag %d: %+v", tag, e)
		}
		buf := make([]byte, 100000)
		if err := a.ep.TRecvMsg(&TaggedMsg{IOV: [][]byte{buf}, Addr: AddrUnspec, Tag: tag, Context: tag}, Claim); err != nil {
			t.Fatal(err)
		}
		if e = a.next(false); e.err != nil || e.Src != src || !linkMsgOK(buf[:e.Len]) {
			t.Fatalf("claim tag %d: %+v", tag, e)
		}
	}
}

// TestLinkedNamedAV: a named (shared) AV holds linked names, routed, and
// FI_SOURCE finds a sender through it; a second process-local opening of
// the same name sees the same entries.
func TestLinkedNamedAV(t *testing.T) {
	shmTestDir(t)
	b := openNode(t, linkName, nodeCfg{})
	hints := AllocInfo()
	hints.Caps = Msg | Tagged | Source
	hints.FabricAttr.ProvName = linkName
	infos, err := GetInfo(Version(2, 0), "127.0.0.1", "", 0, hints)
	if err != nil {
		t.Fatal(err)
	}
	fab, err := OpenFabric(infos[0].FabricAttr)
	if err != nil {
		t.Fatal(err)
	}
	defer fab.Close()
	dom, err := fab.OpenDomain(infos[0])
	if err != nil {
		t.Fatal(err)
	}
	defer dom.Close()
	name := fmt.Sprintf("gofi-link-test-%d", time.Now().UnixNano())
	av, err := dom.OpenAV(&AVAttr{Type: AVTable, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	defer av.Close()
	cq, err := dom.OpenCQ(&CQAttr{Format: CQFormatTagged, WaitObj: WaitUnspec})
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	ep, err := dom.OpenEndpoint(infos[0])
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	if err := ep.BindAV(av); err != nil {
		t.Fatal(err)
	}
	if err := ep.BindCQ(cq, Transmit|Recv); err != nil {
		t.Fatal(err)
	}
	if err := ep.Enable(); err != nil {
		t.Fatal(err)
	}
	nb, _ := b.ep.Name()
	other := otherDomain(t, nb) // the same peer as if on another host: a second entry, via tcp
	ad, err := av.Insert([][]byte{nb}, 0)
	if err != nil {
		t.Fatal(err)
	}
	av2, err := dom.OpenAV(&AVAttr{Type: AVTable, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	defer av2.Close()
	if got, err := av2.Lookup(ad[0]); err != nil || !strings.HasSuffix(string(got), "via=shm") {
		t.Fatalf("second opening: Lookup = %q, %v", got, err)
	}
	if _, err := av.Insert([][]byte{other}, 0); err != nil {
		t.Fatal(err)
	}
	na, _ := ep.Name()
	back, err := b.av.Insert([][]byte{na}, 0)
	if err != nil {
		t.Fatal(err)
	}
	rx := make([]byte, 100)
	if err := ep.TRecv(rx, AddrUnspec, 3, 0, "rx"); err != nil {
		t.Fatal(err)
	}
	if err := linkSend(b, back[0], 3, [][]byte{linkMsg('B', 0)}, time.Now().Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	var e [1]CQEntry
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := cq.Read(e[:])
		if n == 1 {
			break
		}
		if err != nil && !errors.Is(err, ErrAgain) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no receive completion")
		}
	}
	if e[0].Context != "rx" || e[0].Src != ad[0] {
		t.Fatalf("completion %+v, want the source %d (the via=shm entry)", e[0], ad[0])
	}
}
