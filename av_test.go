package fi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"testing"

	"github.com/gofi-dev/fi/internal/addrstr"
)

// openAVFmt opens an AV on a domain of provider prov whose info uses
// address format f (FormatUnspec keeps the provider's). The AV, domain
// and fabric are closed at the end of the test.
func openAVFmt(t *testing.T, prov string, f AddrFormat, attr *AVAttr) *AV {
	t.Helper()
	h := AllocInfo()
	h.FabricAttr.ProvName = prov
	infos, err := GetInfo(Version(2, 0), "", "", 0, h)
	if err != nil {
		t.Fatalf("GetInfo(%s): %v", prov, err)
	}
	info := infos[0]
	if f != FormatUnspec {
		info.AddrFormat = f
	}
	fab, err := OpenFabric(info.FabricAttr)
	if err != nil {
		t.Fatalf("OpenFabric: %v", err)
	}
	dom, err := fab.OpenDomain(info)
	if err != nil {
		t.Fatalf("OpenDomain: %v", err)
	}
	av, err := dom.OpenAV(attr)
	if err != nil {
		t.Fatalf("OpenAV: %v", err)
	}
	t.Cleanup(func() {
		av.Close()
		dom.Close()
		fab.Close()
	})
	return av
}

func openTCPAV(t *testing.T, attr *AVAttr) *AV { return openAVFmt(t, "tcp", SockaddrIn, attr) }

// sa encodes "ip:port" as a Linux sockaddr.
func sa(t testing.TB, s string) []byte {
	t.Helper()
	b, err := SockaddrFromAddrPort(netip.MustParseAddrPort(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sas(t testing.TB, ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = sa(t, s)
	}
	return out
}

// lookupStr returns Straddr(Lookup(a)).
func lookupStr(t *testing.T, av *AV, a Addr) string {
	t.Helper()
	b, err := av.Lookup(a)
	if err != nil {
		t.Fatalf("Lookup(%d): %v", a, err)
	}
	return av.Straddr(b)
}

func wantAddrs(t *testing.T, got []Addr, want ...Addr) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("indices %v, want %v", got, want)
	}
}

// fi_av_open: FI_AV_UNSPEC lets the provider choose; the type is returned
// through the attributes.
func TestOpenAV_UnspecReportsChosenType(t *testing.T) {
	attr := &AVAttr{Type: AVUnspec}
	av := openTCPAV(t, attr)
	if attr.Type != AVTable || av.Attr().Type != AVTable {
		t.Fatalf("type %v / %v, want FI_AV_TABLE", attr.Type, av.Attr().Type)
	}
}

// By default, all AVs act as FI_AV_TABLE (nil attributes too).
func TestOpenAV_DefaultActsAsTable(t *testing.T) {
	av := openTCPAV(t, nil)
	got, err := av.Insert(sas(t, "10.0.0.1:1", "10.0.0.2:1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	wantAddrs(t, got, 0, 1)
}

// FI_AV_MAP in version 2: indices by insertion order, like a table.
func TestOpenAV_MapBehavesAsTable(t *testing.T) {
	attr := &AVAttr{Type: AVMap}
	av := openTCPAV(t, attr)
	if attr.Type != AVMap {
		t.Fatalf("type %v, want FI_AV_MAP kept", attr.Type)
	}
	got, _ := av.Insert(sas(t, "10.0.0.1:1", "10.0.0.2:1"), 0)
	got2, _ := av.Insert(sas(t, "10.0.0.3:1"), 0)
	wantAddrs(t, append(got, got2...), 0, 1, 2)
}

func TestOpenAV_BadAttributes(t *testing.T) {
	for _, c := range []struct {
		name string
		attr AVAttr
		want Errno
	}{
		{"unknown flag", AVAttr{Flags: Tagged}, ErrBadFlags},
		{"unknown type", AVAttr{Type: 7}, ErrInval},
		{"negative rx_ctx_bits", AVAttr{RxCtxBits: -1}, ErrInval},
		{"rx_ctx_bits over 32", AVAttr{RxCtxBits: 33}, ErrInval},
		{"negative count", AVAttr{Count: -1}, ErrInval},
		{"FI_READ without name", AVAttr{Flags: Read}, ErrInval},
		{"bad name", AVAttr{Name: "../x"}, ErrInval},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, dom := openFirst(t, "tcp")
			defer dom.Fabric().Close()
			defer dom.Close()
			a := c.attr
			if av, err := dom.OpenAV(&a); !errors.Is(err, c.want) {
				t.Fatalf("OpenAV(%+v) = %v, %v; want %v", c.attr, av, err, c.want)
			}
		})
	}
}

// count and ep_per_node size the AV; both are hints, more addresses fit.
func TestOpenAV_CountIsAHint(t *testing.T) {
	av := openTCPAV(t, &AVAttr{Count: 2, EpPerNode: 4})
	var addrs [][]byte
	for i := range 100 {
		addrs = append(addrs, sa(t, fmt.Sprintf("10.0.0.%d:7", i+1)))
	}
	if _, err := av.Insert(addrs, 0); err != nil {
		t.Fatal(err)
	}
	if av.Count() != 100 {
		t.Fatalf("Count %d, want 100", av.Count())
	}
}

func TestOpenAV_ClosedDomainRefused(t *testing.T) {
	_, fab, dom := openFirst(t, "tcp")
	defer fab.Close()
	dom.Close()
	if _, err := dom.OpenAV(nil); !errors.Is(err, ErrOpBadState) {
		t.Fatalf("OpenAV on closed domain: %v, want ErrOpBadState", err)
	}
}

// The index of the first address is 0; successive insertions get
// sequential indices, across insertion calls.
func TestAVTable_SequentialIndicesAcrossCalls(t *testing.T) {
	av := openTCPAV(t, nil)
	a, _ := av.Insert(sas(t, "10.0.0.1:1", "10.0.0.2:1"), 0)
	b, _ := av.Insert(sas(t, "10.0.0.3:1"), 0)
	c, _ := av.Insert(nil, 0) // zero addresses is fine
	d, _ := av.Insert(sas(t, "10.0.0.4:1", "10.0.0.5:1"), 0)
	wantAddrs(t, append(append(append(a, b...), c...), d...), 0, 1, 2, 3, 4)
	if s := lookupStr(t, av, 2); s != "fi_sockaddr_in://10.0.0.3:1" {
		t.Fatalf("index 2 holds %s", s)
	}
}

// An address is inserted at the lowest unused index.
func TestAVInsert_LowestUnusedIndexAfterRemove(t *testing.T) {
	av := openTCPAV(t, nil)
	av.Insert(sas(t, "10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1", "10.0.0.4:1"), 0)
	if err := av.Remove([]Addr{2, 0}, 0); err != nil {
		t.Fatal(err)
	}
	got, _ := av.Insert(sas(t, "10.0.0.5:1", "10.0.0.6:1", "10.0.0.7:1"), 0)
	wantAddrs(t, got, 0, 2, 4)
}

// Addresses must be in the domain's addr_format; one that is not gets
// FI_ADDR_NOTAVAIL and the call reports how many were inserted.
func TestAVInsert_WrongFormatGetsNotAvail(t *testing.T) {
	av := openTCPAV(t, nil) // FI_SOCKADDR_IN
	addrs := [][]byte{
		sa(t, "10.0.0.1:1"),
		sa(t, "[fe80::1]:1"),         // sockaddr_in6 in an IPv4 AV
		{2, 0, 1},                    // short
		nil,                          // empty
		[]byte("fi_sockaddr_in://x"), // a string
		sa(t, "10.0.0.2:1"),
	}
	got, err := av.Insert(addrs, 0)
	wantAddrs(t, got, 0, AddrNotAvail, AddrNotAvail, AddrNotAvail, AddrNotAvail, 1)
	var ie *InsertError
	if !errors.As(err, &ie) || ie.Inserted != 2 || ie.Count != 6 || !errors.Is(err, ErrInval) {
		t.Fatalf("err %v, want *InsertError with 2 of 6 inserted wrapping ErrInval", err)
	}
	if ie.Errs != nil {
		t.Fatalf("per-address errors without FI_SYNC_ERR: %v", ie.Errs)
	}
}

// A sockaddr_storage-sized buffer is accepted; sin_zero does not matter.
func TestAVInsert_SockaddrCanonical(t *testing.T) {
	av := openTCPAV(t, nil)
	b := make([]byte, 128)
	copy(b, sa(t, "10.0.0.9:99"))
	b[12] = 0xff // sin_zero garbage
	got, err := av.Insert([][]byte{b}, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := av.Lookup(got[0])
	if !bytes.Equal(st, sa(t, "10.0.0.9:99")) {
		t.Fatalf("stored %x", st)
	}
}

// FI_SYNC_ERR: one status per address, 0 (nil) for successes.
func TestAVInsert_SyncErrStatusPerAddress(t *testing.T) {
	av := openTCPAV(t, nil)
	got, err := av.Insert([][]byte{sa(t, "10.0.0.1:1"), {1}, sa(t, "10.0.0.2:1")}, SyncErr)
	wantAddrs(t, got, 0, AddrNotAvail, 1)
	var ie *InsertError
	if !errors.As(err, &ie) || len(ie.Errs) != 3 {
		t.Fatalf("err %v, want per-address statuses", err)
	}
	if ie.Errs[0] != nil || !errors.Is(ie.Errs[1], ErrInval) || ie.Errs[2] != nil {
		t.Fatalf("statuses %v", ie.Errs)
	}
	if _, err := av.Insert(sas(t, "10.0.0.3:1"), SyncErr); err != nil {
		t.Fatalf("all-good insert with FI_SYNC_ERR: %v", err)
	}
}

// FI_MORE is a hint: insertions with it are complete and usable.
func TestAVInsert_MoreAccepted(t *testing.T) {
	av := openTCPAV(t, nil)
	a, err := av.Insert(sas(t, "10.0.0.1:1"), More)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := av.Insert(sas(t, "10.0.0.2:1"), More)
	c, _ := av.Insert(sas(t, "10.0.0.3:1"), 0)
	wantAddrs(t, append(append(a, b...), c...), 0, 1, 2)
	if s := lookupStr(t, av, 0); s != "fi_sockaddr_in://10.0.0.1:1" {
		t.Fatal(s)
	}
}

func TestAVInsert_BadFlags(t *testing.T) {
	av := openTCPAV(t, nil)
	if _, err := av.Insert(sas(t, "10.0.0.1:1"), Tagged); !errors.Is(err, ErrBadFlags) {
		t.Fatalf("Insert with FI_TAGGED: %v", err)
	}
	if _, err := av.InsertSvc("10.0.0.1", "1", Recv); !errors.Is(err, ErrBadFlags) {
		t.Fatalf("InsertSvc with FI_RECV: %v", err)
	}
}

// FI_AV_USER_ID: the user id replaces the fi_addr in completions (the
// reverse lookup FI_SOURCE uses); insertion output is unchanged.
func TestAVUserID_ReportedAsSource(t *testing.T) {
	av := openTCPAV(t, nil)
	addrs := sas(t, "10.0.0.1:1", "10.0.0.2:1")
	got, err := av.InsertUserIDs(addrs, []Addr{1000, 2000}, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantAddrs(t, got, 0, 1)
	for i, want := range []uint64{1000, 2000} {
		if id, ok := av.reverse(addrs[i]); !ok || id != want {
			t.Fatalf("reverse(%d) = %d, %v; want %d", i, id, ok, want)
		}
	}
	// without user ids the index is the source
	x, _ := av.Insert(sas(t, "10.0.0.3:1"), 0)
	if id, ok := av.reverse(sa(t, "10.0.0.3:1")); !ok || id != uint64(x[0]) {
		t.Fatalf("reverse without user id = %d, %v", id, ok)
	}
	// set one afterwards (entries from InsertSvc)
	if err := av.SetUserID(x[0], 77, 0); err != nil {
		t.Fatal(err)
	}
	if id, _ := av.reverse(sa(t, "10.0.0.3:1")); id != 77 {
		t.Fatalf("after SetUserID: %d", id)
	}
	// a removed and re-inserted address loses its old user id
	av.Remove([]Addr{0}, 0)
	av.Insert(addrs[:1], 0)
	if id, _ := av.reverse(addrs[0]); id != 0 {
		t.Fatalf("re-inserted address reports %d, want index 0", id)
	}
}

func TestAVUserID_NeedsIDs(t *testing.T) {
	av := openTCPAV(t, nil)
	if _, err := av.Insert(sas(t, "10.0.0.1:1"), AVUserID); !errors.Is(err, ErrInval) {
		t.Fatalf("Insert(FI_AV_USER_ID) without ids: %v", err)
	}
	if _, err := av.InsertUserIDs(sas(t, "10.0.0.1:1"), nil, 0); !errors.Is(err, ErrInval) {
		t.Fatalf("InsertUserIDs with too few ids: %v", err)
	}
	if err := av.SetUserID(5, 1, 0); !errors.Is(err, ErrNoEnt) {
		t.Fatalf("SetUserID on unknown index: %v", err)
	}
}

// fi_av_insertsvc: node and service as for fi_getinfo.
func TestInsertSvc_NodeAndService(t *testing.T) {
	av := openTCPAV(t, nil)
	a, err := av.InsertSvc("10.1.2.3", "7471", 0)
	if err != nil {
		t.Fatal(err)
	}
	if s := lookupStr(t, av, a); s != "fi_sockaddr_in://10.1.2.3:7471" {
		t.Fatal(s)
	}
	b, err := av.InsertSvc("", "80", NumericHost) // no node: loopback
	if err != nil || lookupStr(t, av, b) != "fi_sockaddr_in://127.0.0.1:80" {
		t.Fatalf("empty node: %v", err)
	}
	if _, err := av.InsertSvc("some.host", "1", NumericHost); !errors.Is(err, ErrInval) {
		t.Fatalf("host name with FI_NUMERICHOST: %v", err)
	}
	if _, err := av.InsertSvc("10.1.2.3", "", 0); !errors.Is(err, ErrInval) {
		t.Fatalf("no service: %v", err)
	}
	if _, err := av.InsertSvc("fe80::1", "1", 0); !errors.Is(err, ErrInval) {
		t.Fatalf("IPv6 node in an IPv4 AV: %v", err)
	}
}

// Host names resolve (through the resolver) to the AV's family.
func TestInsertSvc_HostName(t *testing.T) {
	fakeResolver(t, map[string]string{"peer1": "10.9.9.9"})
	av := openTCPAV(t, nil)
	a, err := av.InsertSvc("peer1", "5000", 0)
	if err != nil {
		t.Fatal(err)
	}
	if s := lookupStr(t, av, a); s != "fi_sockaddr_in://10.9.9.9:5000" {
		t.Fatal(s)
	}
	if _, err := av.InsertSvc("nohost", "5000", 0); !errors.Is(err, ErrAddrNotAvail) {
		t.Fatalf("unresolvable host: %v", err)
	}
}

// An FI_ADDR_STR node is accepted; the service must then be empty.
func TestInsertSvc_AddrStrNode(t *testing.T) {
	av := openTCPAV(t, nil)
	a, err := av.InsertSvc("fi_sockaddr_in://10.31.6.12:7471", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if s := lookupStr(t, av, a); s != "fi_sockaddr_in://10.31.6.12:7471" {
		t.Fatal(s)
	}
	if _, err := av.InsertSvc("fi_sockaddr_in://10.31.6.12:7471", "1", 0); !errors.Is(err, ErrInval) {
		t.Fatalf("FI_ADDR_STR node with a service: %v", err)
	}
}

// fakeResolver makes host names resolve from m for the test.
func fakeResolver(t *testing.T, m map[string]string) {
	old := avLookupHost
	avLookupHost = func(_ context.Context, host string) ([]netip.Addr, error) {
		if s, ok := m[host]; ok {
			return []netip.Addr{netip.MustParseAddr(s)}, nil
		}
		return nil, fmt.Errorf("no such host %q", host)
	}
	t.Cleanup(func() { avLookupHost = old })
}

func symStrs(t *testing.T, av *AV, got []Addr) []string {
	t.Helper()
	var out []string
	for _, a := range got {
		out = append(out, lookupStr(t, av, a))
	}
	return out
}

// The fi_av_insertsym example: 10.1.1.1, 2 nodes, service 5000, 2
// services, all services of a node before the next node.
func TestInsertSym_ManPageExample(t *testing.T) {
	for _, sym := range []Flags{0, Symmetric} {
		t.Run(sym.String(), func(t *testing.T) {
			av := openTCPAV(t, &AVAttr{Flags: sym})
			got, err := av.InsertSym("10.1.1.1", 2, "5000", 2, 0)
			if err != nil {
				t.Fatal(err)
			}
			wantAddrs(t, got, 0, 1, 2, 3)
			want := "[fi_sockaddr_in://10.1.1.1:5000 fi_sockaddr_in://10.1.1.1:5001 fi_sockaddr_in://10.1.1.2:5000 fi_sockaddr_in://10.1.1.2:5001]"
			if s := fmt.Sprint(symStrs(t, av, got)); s != want {
				t.Fatalf("got %s\nwant %s", s, want)
			}
		})
	}
}

// host10 with nodecnt 2 gives host10:5000, host10:5001, host11:5000,
// host11:5001.
func TestInsertSym_HostNameSuffix(t *testing.T) {
	fakeResolver(t, map[string]string{"host10": "10.2.0.10", "host11": "10.2.0.11"})
	av := openTCPAV(t, nil)
	got, err := av.InsertSym("host10", 2, "5000", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := "[fi_sockaddr_in://10.2.0.10:5000 fi_sockaddr_in://10.2.0.10:5001 fi_sockaddr_in://10.2.0.11:5000 fi_sockaddr_in://10.2.0.11:5001]"
	if s := fmt.Sprint(symStrs(t, av, got)); s != want {
		t.Fatalf("got %s\nwant %s", s, want)
	}
	names, _ := addrstr.SuffixRange("host09", 3)
	if fmt.Sprint(names) != "[host09 host10 host11]" {
		t.Fatalf("suffix width: %v", names)
	}
}

// A non-numeric node needs a numeric suffix when nodecnt > 1.
func TestInsertSym_HostNameWithoutSuffixIsError(t *testing.T) {
	fakeResolver(t, map[string]string{"host": "10.2.0.1"})
	av := openTCPAV(t, nil)
	if _, err := av.InsertSym("host", 2, "5000", 1, 0); !errors.Is(err, ErrInval) {
		t.Fatalf("nodecnt 2 for %q: %v", "host", err)
	}
	if _, err := av.InsertSym("host", 1, "5000", 1, 0); err != nil {
		t.Fatalf("nodecnt 1 for %q: %v", "host", err)
	}
}

// Numeric nodes count across octet boundaries (IPv4 and IPv6).
func TestInsertSym_CrossesOctet(t *testing.T) {
	for _, c := range []struct {
		format AddrFormat
		node   string
		n      int
		want   string
	}{
		{SockaddrIn, "10.1.1.255", 2, "[fi_sockaddr_in://10.1.1.255:1 fi_sockaddr_in://10.1.2.0:1]"},
		{SockaddrIn, "10.255.255.255", 2, "[fi_sockaddr_in://10.255.255.255:1 fi_sockaddr_in://11.0.0.0:1]"},
		{SockaddrIn6, "fe80::ff", 2, "[fi_sockaddr_in6://[fe80::ff]:1 fi_sockaddr_in6://[fe80::100]:1]"},
		{SockaddrIn6, "2001:db8::ffff:ffff:ffff:ffff", 2, "[fi_sockaddr_in6://[2001:db8::ffff:ffff:ffff:ffff]:1 fi_sockaddr_in6://[2001:db8:0:1::]:1]"},
	} {
		t.Run(c.node, func(t *testing.T) {
			for _, sym := range []Flags{0, Symmetric} {
				av := openAVFmt(t, "tcp", c.format, &AVAttr{Flags: sym})
				got, err := av.InsertSym(c.node, c.n, "1", 1, 0)
				if err != nil {
					t.Fatal(err)
				}
				if s := fmt.Sprint(symStrs(t, av, got)); s != c.want {
					t.Fatalf("%v: got %s want %s", sym, s, c.want)
				}
			}
		})
	}
}

func TestInsertSym_RangeErrors(t *testing.T) {
	av := openTCPAV(t, nil)
	for _, c := range []struct {
		node    string
		nodecnt int
		svc     string
		svccnt  int
	}{
		{"255.255.255.255", 2, "1", 1}, // past the last IPv4 address
		{"10.0.0.1", 1, "65535", 2},    // past the last port
		{"10.0.0.1", 0, "1", 1},        // no nodes
		{"10.0.0.1", 1, "1", 0},        // no services
		{"10.0.0.1", 1, "nosuchservice", 1},
	} {
		if _, err := av.InsertSym(c.node, c.nodecnt, c.svc, c.svccnt, 0); !errors.Is(err, ErrInval) {
			t.Errorf("InsertSym%v: %v, want ErrInval", c, err)
		}
	}
	if av.Count() != 0 {
		t.Fatalf("failed calls inserted %d addresses", av.Count())
	}
}

// nodecnt x svccnt addresses are inserted.
func TestInsertSym_TotalIsNodecntTimesSvccnt(t *testing.T) {
	av := openTCPAV(t, nil)
	got, err := av.InsertSym("192.168.0.1", 7, "9000", 5, 0)
	if err != nil || len(got) != 35 || av.Count() != 35 {
		t.Fatalf("%d addresses, Count %d, err %v; want 35", len(got), av.Count(), err)
	}
	if s := lookupStr(t, av, 34); s != "fi_sockaddr_in://192.168.0.7:9004" {
		t.Fatal(s)
	}
}

// FI_SYMMETRIC ranges are stored compactly and behave like the others:
// lookup, reverse lookup, removal, and re-insertion.
func TestInsertSym_SymmetricCompact(t *testing.T) {
	av := openTCPAV(t, &AVAttr{Flags: Symmetric})
	av.Insert(sas(t, "10.0.0.1:1"), 0)
	got, err := av.InsertSym("10.5.0.0", 1000, "6000", 4, 0)
	if err != nil || len(got) != 4000 || got[0] != 1 {
		t.Fatalf("%d addresses from %v, err %v", len(got), got[:1], err)
	}
	if n, dataPages := av.tab.Footprint(); n != 1 || dataPages > 1 {
		t.Fatalf("not compact: %d ranges, %d pages with entry storage", n, dataPages)
	}
	if s := lookupStr(t, av, 1+4*300+3); s != "fi_sockaddr_in://10.5.1.44:6003" {
		t.Fatal(s)
	}
	if i, ok := av.reverse(sa(t, "10.5.1.44:6003")); !ok || i != 1+4*300+3 {
		t.Fatalf("reverse = %d, %v", i, ok)
	}
	if _, ok := av.reverse(sa(t, "10.5.1.44:6004")); ok {
		t.Fatal("reverse found a port outside the range")
	}
	if err := av.Remove([]Addr{5}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := av.Lookup(5); !errors.Is(err, ErrNoEnt) {
		t.Fatalf("removed range entry: %v", err)
	}
	if _, ok := av.reverse(sa(t, "10.5.0.1:6000")); ok {
		t.Fatal("reverse found a removed range entry")
	}
	x, _ := av.Insert(sas(t, "10.7.7.7:7"), 0)
	wantAddrs(t, x, 5)
	if s := lookupStr(t, av, 5); s != "fi_sockaddr_in://10.7.7.7:7" {
		t.Fatal(s)
	}
	// with a hole below the end the next range is stored per address
	av.Remove([]Addr{0}, 0)
	got, _ = av.InsertSym("10.6.0.0", 2, "1", 1, 0)
	wantAddrs(t, got, 0, 4001)
}

// shm: nodes are fi_shm:// strings, services endpoint names.
func TestInsertSym_ShmNames(t *testing.T) {
	av := openAVFmt(t, "shm", FormatUnspec, nil)
	got, err := av.InsertSym("fi_shm://ep10", 2, "", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	got2, err := av.InsertSym("", 1, "rank08", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := fmt.Sprint(symStrs(t, av, append(got, got2...)))
	if s != "[fi_shm://ep10 fi_shm://ep11 fi_shm://rank08 fi_shm://rank09 fi_shm://rank10]" {
		t.Fatal(s)
	}
	if _, err := av.InsertSym("fi_shm://ep", 2, "", 1, 0); !errors.Is(err, ErrInval) {
		t.Fatalf("no suffix: %v", err)
	}
	if _, err := av.InsertSym("localhost", 2, "a1", 1, 0); !errors.Is(err, ErrInval) {
		t.Fatalf("shm nodecnt 2: %v", err)
	}
	a, err := av.InsertSvc("localhost", "peer", 0)
	if err != nil || lookupStr(t, av, a) != "fi_shm://peer" {
		t.Fatalf("InsertSvc(localhost, peer): %v", err)
	}
}

// FI_ADDR_STR AVs: shm stores fi_shm:// strings; other strings are refused.
func TestAVInsert_ShmAddrStr(t *testing.T) {
	av := openAVFmt(t, "shm", FormatUnspec, nil)
	got, err := av.Insert([][]byte{[]byte("fi_shm://a"), []byte("fi_shm://b\x00"), []byte("fi_sockaddr_in://1.2.3.4:5"), sa(t, "1.2.3.4:5")}, SyncErr)
	wantAddrs(t, got, 0, 1, AddrNotAvail, AddrNotAvail)
	if err == nil {
		t.Fatal("non-shm addresses accepted")
	}
	if b, _ := av.Lookup(1); string(b) != "fi_shm://b" {
		t.Fatalf("stored %q", b)
	}
	if i, ok := av.reverse([]byte("fi_shm://b")); !ok || i != 1 {
		t.Fatalf("reverse = %d %v", i, ok)
	}
}

// tcp with FI_ADDR_STR and FI_SOCKADDR (either family) formats.
func TestAVInsert_TCPFormats(t *testing.T) {
	av := openAVFmt(t, "tcp", AddrStr, nil)
	got, _ := av.Insert([][]byte{[]byte("fi_sockaddr_in://10.0.0.1:5"), []byte("fi_shm://x")}, 0)
	wantAddrs(t, got, 0, AddrNotAvail)
	a, err := av.InsertSvc("10.0.0.2", "6", 0)
	if err != nil || lookupStr(t, av, a) != "fi_sockaddr_in://10.0.0.2:6" {
		t.Fatalf("InsertSvc into FI_ADDR_STR AV: %v", err)
	}
	av2 := openAVFmt(t, "tcp", Sockaddr, nil)
	got, err = av2.Insert(sas(t, "10.0.0.1:5", "[fe80::1%3]:6"), 0)
	wantAddrs(t, got, 0, 1)
	if s := lookupStr(t, av2, 1); s != "fi_sockaddr_in6://[fe80::1%3]:6" || err != nil {
		t.Fatal(s, err)
	}
	if b, _ := av2.Lookup(0); len(b) != 16 {
		t.Fatalf("IPv4 entry of an FI_SOCKADDR AV is %d bytes", len(b))
	}
}

// fi_av_remove: flags must be 0; removed indices are invalidated.
func TestAVRemove_FlagsMustBeZero(t *testing.T) {
	av := openTCPAV(t, nil)
	av.Insert(sas(t, "10.0.0.1:1"), 0)
	if err := av.Remove([]Addr{0}, More); !errors.Is(err, ErrBadFlags) {
		t.Fatalf("Remove with flags: %v", err)
	}
	if av.Count() != 1 {
		t.Fatal("Remove with flags removed")
	}
}

func TestAVRemove_InvalidatesAddress(t *testing.T) {
	av := openTCPAV(t, nil)
	av.Insert(sas(t, "10.0.0.1:1", "10.0.0.2:1"), 0)
	if err := av.Remove([]Addr{0}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := av.Lookup(0); !errors.Is(err, ErrNoEnt) {
		t.Fatalf("Lookup of removed: %v", err)
	}
	var scratch [maxSockaddrLen]byte
	if _, ok := av.lookupBytes(0, scratch[:]); ok {
		t.Fatal("send path still finds the removed address")
	}
	if _, ok := av.reverse(sa(t, "10.0.0.1:1")); ok {
		t.Fatal("reverse still finds the removed address")
	}
	if s := lookupStr(t, av, 1); s != "fi_sockaddr_in://10.0.0.2:1" {
		t.Fatal(s)
	}
}

// Unknown indices (or one given twice): nothing is removed.
func TestAVRemove_UnknownIndexRemovesNothing(t *testing.T) {
	av := openTCPAV(t, nil)
	av.Insert(sas(t, "10.0.0.1:1", "10.0.0.2:1"), 0)
	for _, bad := range [][]Addr{{0, 9}, {1, 1}, {AddrNotAvail}} {
		if err := av.Remove(bad, 0); !errors.Is(err, ErrNoEnt) {
			t.Fatalf("Remove(%v) = %v, want ErrNoEnt", bad, err)
		}
	}
	if av.Count() != 2 {
		t.Fatalf("Count %d after failed removes", av.Count())
	}
}

// Providers must support removing, then re-inserting an address.
func TestAVRemove_ThenReinsert(t *testing.T) {
	av := openTCPAV(t, nil)
	addrs := sas(t, "10.0.0.1:1", "10.0.0.2:1")
	av.Insert(addrs, 0)
	for range 3 {
		if err := av.Remove([]Addr{0}, 0); err != nil {
			t.Fatal(err)
		}
		got, err := av.Insert(addrs[:1], 0)
		if err != nil {
			t.Fatal(err)
		}
		wantAddrs(t, got, 0)
		if i, ok := av.reverse(addrs[0]); !ok || i != 0 {
			t.Fatalf("reverse after re-insert = %d %v", i, ok)
		}
	}
}

// Duplicates are not checked: the second copy gets its own index and
// removing one leaves the other reachable.
func TestAVInsert_DuplicatesNotChecked(t *testing.T) {
	av := openTCPAV(t, nil)
	got, err := av.Insert(sas(t, "10.0.0.1:1", "10.0.0.1:1"), 0)
	wantAddrs(t, got, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	av.Remove([]Addr{0}, 0)
	if i, ok := av.reverse(sa(t, "10.0.0.1:1")); !ok || i != 1 {
		t.Fatalf("reverse after removing one duplicate = %d %v", i, ok)
	}
}

// fi_av_lookup returns the stored address, in the AV's format; the copy
// is the caller's.
func TestAVLookup_ReturnsStoredAddress(t *testing.T) {
	av := openAVFmt(t, "tcp", SockaddrIn6, &AVAttr{RxCtxBits: 4})
	in := sa(t, "[2001:db8::5]:4242")
	got, _ := av.Insert([][]byte{in}, 0)
	b, err := av.Lookup(got[0])
	if err != nil || !bytes.Equal(b, in) {
		t.Fatalf("Lookup = %x, %v; want %x", b, err, in)
	}
	b[3] = 0 // the caller's copy
	if b2, _ := av.Lookup(got[0]); !bytes.Equal(b2, in) {
		t.Fatal("Lookup returned AV storage")
	}
	// an rx-context address names the same entry
	if b3, err := av.Lookup(RxAddr(got[0], 3, 4)); err != nil || !bytes.Equal(b3, in) {
		t.Fatalf("Lookup(RxAddr) = %v", err)
	}
	for _, a := range []Addr{1, 1 << 20, AddrNotAvail} {
		if _, err := av.Lookup(a); !errors.Is(err, ErrNoEnt) {
			t.Fatalf("Lookup(%d) = %v, want ErrNoEnt", a, err)
		}
	}
}

// fi_rx_addr and fi_group_addr encodings, as libfabric's.
func TestRxAddr_GroupAddr_Encoding(t *testing.T) {
	if got := RxAddr(5, 3, 4); got != Addr(3<<60|5) {
		t.Fatalf("RxAddr(5,3,4) = %#x", uint64(got))
	}
	if got := RxAddr(5, 3, 0); got != 5 {
		t.Fatalf("RxAddr with 0 bits = %d", got)
	}
	if got := RxAddr(AddrNotAvail, 2, 8); got != AddrNotAvail {
		t.Fatalf("RxAddr(FI_ADDR_NOTAVAIL) = %#x", uint64(got))
	}
	if got := GroupAddr(7, 9); got != Addr(9<<32|7) {
		t.Fatalf("GroupAddr(7,9) = %#x", uint64(got))
	}
	if i, g := splitGroupAddr(GroupAddr(123456, 0xdeadbeef)); i != 123456 || g != 0xdeadbeef {
		t.Fatalf("splitGroupAddr = %d, %#x", i, g)
	}
	if i, rx := splitRxAddr(RxAddr(99, 13, 8), 8); i != 99 || rx != 13 {
		t.Fatalf("splitRxAddr = %d, %d", i, rx)
	}
	if AddrNotAvail != Addr(^uint64(0)) || AddrUnspec != Addr(^uint64(0)) {
		t.Fatal("special addresses differ from libfabric's")
	}
}

// fi_av_straddr: every format the providers use; the address need not
// be in the AV.
func TestAVStraddr_Formats(t *testing.T) {
	tcp := openTCPAV(t, nil)
	shm := openAVFmt(t, "shm", FormatUnspec, nil)
	s6 := openAVFmt(t, "tcp", SockaddrIn6, nil)
	for _, c := range []struct {
		av   *AV
		in   []byte
		want string
	}{
		{tcp, sa(t, "10.31.6.12:7471"), "fi_sockaddr_in://10.31.6.12:7471"},
		{s6, sa(t, "[fe80::6:12]:7471"), "fi_sockaddr_in6://[fe80::6:12]:7471"},
		{shm, []byte("fi_shm://peer7"), "fi_shm://peer7"},
		{tcp, []byte{1, 2, 3}, "0x010203"},
		{tcp, nil, "(null)"},
	} {
		if got := c.av.Straddr(c.in); got != c.want {
			t.Errorf("Straddr(%x) = %q, want %q", c.in, got, c.want)
		}
	}
}

type testEP struct{ changes int }

func (e *testEP) avChanged(*AV) { e.changes++ }

// Close fails with FI_EBUSY while endpoints are associated with the AV.
func TestAVClose_BusyWhileEndpointsBound(t *testing.T) {
	_, fab, dom := openFirst(t, "tcp")
	defer fab.Close()
	defer dom.Close()
	av, err := dom.OpenAV(nil)
	if err != nil {
		t.Fatal(err)
	}
	ep := &testEP{}
	if err := av.bind(ep); err != nil {
		t.Fatal(err)
	}
	if err := av.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Close with a bound endpoint: %v", err)
	}
	if err := dom.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("Domain.Close with an open AV: %v", err)
	}
	av.unbind(ep)
	if err := av.Close(); err != nil {
		t.Fatal(err)
	}
	if err := av.Close(); !errors.Is(err, ErrOpBadState) {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := av.Insert(sas(t, "10.0.0.1:1"), 0); !errors.Is(err, ErrOpBadState) {
		t.Fatalf("Insert after Close: %v", err)
	}
	if err := av.bind(ep); !errors.Is(err, ErrOpBadState) {
		t.Fatalf("bind after Close: %v", err)
	}
	if _, err := av.Lookup(0); !errors.Is(err, ErrOpBadState) {
		t.Fatalf("Lookup after Close: %v", err)
	}
	if _, err := av.LookupTo(0, make([]byte, 16)); !errors.Is(err, ErrOpBadState) {
		t.Fatalf("LookupTo after Close: %v", err)
	}
	var scratch [maxSockaddrLen]byte
	if _, ok := av.lookupBytes(0, scratch[:]); ok {
		t.Fatal("lookupBytes after Close found an entry")
	}
}

// Bound endpoints and callbacks hear about every change.
func TestAV_NotifiesBoundEndpoints(t *testing.T) {
	av := openTCPAV(t, &AVAttr{Flags: Symmetric})
	ep := &testEP{}
	av.bind(ep)
	defer av.unbind(ep)
	calls := 0
	av.addOnChange(func() { calls++ })
	av.Insert(sas(t, "10.0.0.1:1"), 0)
	av.InsertSvc("10.0.0.2", "1", 0)
	av.InsertSym("10.1.0.0", 4, "1", 1, 0)
	av.Remove([]Addr{0}, 0)
	av.Insert([][]byte{{0}}, 0) // nothing inserted: no change
	if ep.changes != 4 || calls != 4 {
		t.Fatalf("endpoint saw %d changes, callback %d; want 4", ep.changes, calls)
	}
}

// The AV may be used from many goroutines at once.
func TestAV_ConcurrentUse(t *testing.T) {
	av := openTCPAV(t, nil)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch [maxSockaddrLen]byte
			for i := range 200 {
				b := sa(t, fmt.Sprintf("10.%d.%d.%d:1", g, i/250, i%250+1))
				got, err := av.Insert([][]byte{b}, 0)
				if err != nil {
					t.Error(err)
					return
				}
				if s, ok := av.lookupBytes(got[0], scratch[:]); !ok || !bytes.Equal(s, b) {
					t.Errorf("lookupBytes(%d) = %x, %v", got[0], s, ok)
				}
				if j, ok := av.reverse(b); !ok || j != uint64(got[0]) {
					t.Errorf("reverse = %d, %v", j, ok)
				}
				if i%3 == 0 {
					av.Remove(got, 0)
				}
			}
		}()
	}
	wg.Wait()
	if want := 4 * (200 - 67); av.Count() != want {
		t.Fatalf("Count %d, want %d", av.Count(), want)
	}
}

// The reverse index survives growth and heavy removal (rehash, tombs).
func TestAV_ReverseIndexThroughChurn(t *testing.T) {
	av := openTCPAV(t, nil)
	for round := range 5 {
		var addrs [][]byte
		for i := range 3000 {
			addrs = append(addrs, sa(t, fmt.Sprintf("10.%d.%d.%d:%d", round, i/250, i%250, 1000+round)))
		}
		got, err := av.Insert(addrs, 0)
		if err != nil {
			t.Fatal(err)
		}
		av.Remove(got[:2000], 0)
	}
	if av.Count() != 5000 {
		t.Fatalf("Count %d", av.Count())
	}
	for round := range 5 {
		for i := 2000; i < 3000; i++ {
			b := sa(t, fmt.Sprintf("10.%d.%d.%d:%d", round, i/250, i%250, 1000+round))
			j, ok := av.reverse(b)
			if !ok {
				t.Fatalf("reverse lost %x", b)
			}
			if got, _ := av.Lookup(Addr(j)); !bytes.Equal(got, b) {
				t.Fatalf("reverse -> %d holds %x", j, got)
			}
		}
	}
	_ = os.Getpid
}

// fi_av_lookup's addrlen: a short buffer truncates, the size needed is
// returned.
func TestAVLookupTo_TruncatesAndReportsSize(t *testing.T) {
	av := openAVFmt(t, "tcp", SockaddrIn6, nil)
	in := sa(t, "[2001:db8::5]:4242")
	av.Insert([][]byte{in}, 0)
	buf := make([]byte, 10)
	n, err := av.LookupTo(0, buf)
	if err != nil || n != 28 || !bytes.Equal(buf, in[:10]) {
		t.Fatalf("LookupTo(short) = %d, %v, %x", n, err, buf)
	}
	big := make([]byte, 64)
	if n, _ := av.LookupTo(0, big); n != 28 || !bytes.Equal(big[:n], in) {
		t.Fatalf("LookupTo(big) = %d", n)
	}
	if _, err := av.LookupTo(3, big); !errors.Is(err, ErrNoEnt) {
		t.Fatalf("LookupTo(unknown) = %v", err)
	}
}

// AV operations are synchronous: an inserted address is usable (looked up,
// found by source) as soon as the call returns, and a removed one is gone.
func TestAV_OperationsAreSynchronous(t *testing.T) {
	av := openTCPAV(t, nil)
	got, err := av.InsertSvc("10.3.3.3", "33", 0)
	if err != nil {
		t.Fatal(err)
	}
	var scratch [maxSockaddrLen]byte
	if b, ok := av.lookupBytes(got, scratch[:]); !ok || av.Straddr(b) != "fi_sockaddr_in://10.3.3.3:33" {
		t.Fatal("inserted address not usable at return")
	}
	if i, ok := av.reverseAddrPort(netip.MustParseAddrPort("10.3.3.3:33")); !ok || i != uint64(got) {
		t.Fatalf("reverseAddrPort = %d, %v", i, ok)
	}
	if i, ok := av.reverseAddrPort(netip.MustParseAddrPort("[::ffff:10.3.3.3]:33")); !ok || i != uint64(got) {
		t.Fatalf("reverseAddrPort(v4-mapped) = %d, %v", i, ok)
	}
	av.Remove([]Addr{got}, 0)
	if _, ok := av.lookupBytes(got, scratch[:]); ok {
		t.Fatal("removed address still usable at return")
	}
}

// reverseAddrPort for IPv6 and FI_ADDR_STR AVs.
func TestAV_ReverseAddrPortFormats(t *testing.T) {
	for _, f := range []AddrFormat{SockaddrIn6, Sockaddr, AddrStr} {
		av := openAVFmt(t, "tcp", f, nil)
		ap := netip.MustParseAddrPort("[fe80::9%4]:99")
		got, err := av.InsertSvc("fe80::9%4", "99", 0)
		if err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		if i, ok := av.reverseAddrPort(ap); !ok || i != uint64(got) {
			t.Fatalf("%v: reverseAddrPort = %d, %v", f, i, ok)
		}
	}
}
