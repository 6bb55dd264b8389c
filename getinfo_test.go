package fi

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestMain(m *testing.M) {
	// the tests choose providers themselves
	os.Unsetenv("FI_PROVIDER")
	os.Exit(m.Run())
}

var v117 = Version(1, 17)

// rmaProvs are the providers that carry RMA.
var rmaProvs = []string{"shm", "tcp"}

// provs returns the provider names of infos, in order, deduplicated
// consecutively ("shm", "tcp").
func provs(infos []*Info) []string {
	var out []string
	for _, i := range infos {
		n := i.FabricAttr.ProvName
		if len(out) == 0 || out[len(out)-1] != n {
			out = append(out, n)
		}
	}
	return out
}

func mustGetInfo(t *testing.T, node, service string, flags Flags, hints *Info) []*Info {
	t.Helper()
	infos, err := GetInfo(v117, node, service, flags, hints)
	if err != nil {
		t.Fatalf("GetInfo(%q, %q, %v): %v", node, service, flags, err)
	}
	if len(infos) == 0 {
		t.Fatal("GetInfo returned no infos and no error")
	}
	return infos
}

func wantNoData(t *testing.T, infos []*Info, err error) {
	t.Helper()
	if !errors.Is(err, ErrNoData) {
		t.Fatalf("err = %v, want ErrNoData", err)
	}
	if infos != nil {
		t.Fatalf("infos = %v, want nil with ErrNoData", infos)
	}
}

func hintsWith(f func(h *Info)) *Info {
	h := AllocInfo()
	f(h)
	return h
}

func TestGetInfo_NilHintsReportEverythingShmFirst(t *testing.T) {
	infos := mustGetInfo(t, "", "", 0, nil)
	if got := provs(infos); !reflect.DeepEqual(got, []string{"shm", "tcp"}) {
		t.Fatalf("providers = %v, want [shm tcp]", got)
	}
	for _, i := range infos {
		want := shmCaps
		if i.FabricAttr.ProvName == "tcp" {
			want = tcpCaps
		}
		if i.Caps != want {
			t.Errorf("%s: caps %v, want everything supported %v", i.FabricAttr.ProvName, i.Caps, want)
		}
		if i.FabricAttr.APIVersion != v117 {
			t.Errorf("api_version %v, want the requested 1.17", versionStr(i.FabricAttr.APIVersion))
		}
		if i.EpAttr.Type != EpRDM {
			t.Errorf("ep type %v", i.EpAttr.Type)
		}
	}
}

func TestGetInfo_ZeroHintsAreWildcards(t *testing.T) {
	a := mustGetInfo(t, "", "", 0, nil)
	b := mustGetInfo(t, "", "", 0, AllocInfo())
	c := mustGetInfo(t, "", "", 0, &Info{}) // attribute structs nil
	if len(a) != len(b) || len(a) != len(c) {
		t.Fatalf("nil hints %d infos, zero hints %d, bare Info %d", len(a), len(b), len(c))
	}
	for k := range a {
		if a[k].Caps != b[k].Caps || a[k].FabricAttr.Name != b[k].FabricAttr.Name || a[k].Caps != c[k].Caps {
			t.Fatalf("info %d differs between nil and zero hints", k)
		}
	}
}

func TestGetInfo_UnsupportedHintLeavesProviderOut(t *testing.T) {
	cases := []struct {
		name  string
		hints *Info
		want  []string // providers left; nil means ErrNoData
	}{
		{"ep type MSG", hintsWith(func(h *Info) { h.EpAttr.Type = EpMsg }), nil},
		{"ep type DGRAM", hintsWith(func(h *Info) { h.EpAttr.Type = EpDgram }), nil},
		{"ep type RDM", hintsWith(func(h *Info) { h.EpAttr.Type = EpRDM }), []string{"shm", "tcp"}},
		{"caps RMA", hintsWith(func(h *Info) { h.Caps = Msg | RMA }), rmaProvs},
		{"caps RMA events and fence", hintsWith(func(h *Info) { h.Caps = RMA | RMAEvent | Fence }), rmaProvs},
		{"caps atomic", hintsWith(func(h *Info) { h.Caps = Atomic }), rmaProvs},
		{"caps HMEM not provided", hintsWith(func(h *Info) { h.Caps = Msg | HMEM }), nil},
		{"secondary shared AV not provided", hintsWith(func(h *Info) { h.Caps = Msg | SharedAV }), nil},
		{"secondary trigger not provided", hintsWith(func(h *Info) { h.Caps = Msg | Trigger }), nil},
		{"secondary multi recv provided", hintsWith(func(h *Info) { h.Caps = Msg | MultiRecv }), []string{"shm", "tcp"}},
		{"unknown cap bit", hintsWith(func(h *Info) { h.Caps = Msg | 1<<63 }), nil},
		{"read modifier", hintsWith(func(h *Info) { h.Caps = Msg | Read }), rmaProvs},
		{"remote comm drops shm", hintsWith(func(h *Info) { h.Caps = Msg | RemoteComm }), []string{"tcp"}},
		{"addr format IB", hintsWith(func(h *Info) { h.AddrFormat = SockaddrIB }), nil},
		{"addr format in drops shm", hintsWith(func(h *Info) { h.AddrFormat = SockaddrIn }), []string{"tcp"}},
		{"addr format str keeps both", hintsWith(func(h *Info) { h.AddrFormat = AddrStr }), []string{"shm", "tcp"}},
		{"data progress auto", hintsWith(func(h *Info) { h.DomainAttr.DataProgress = ProgressAuto }), nil},
		{"data progress manual", hintsWith(func(h *Info) { h.DomainAttr.DataProgress = ProgressManual }), []string{"shm", "tcp"}},
		{"tx queue too deep", hintsWith(func(h *Info) { h.TxAttr.Size = 1 << 20 }), nil},
		{"inject too large", hintsWith(func(h *Info) { h.TxAttr.InjectSize = shmInjectSize + 1 }), nil},
		{"inject at limit", hintsWith(func(h *Info) { h.TxAttr.InjectSize = shmInjectSize }), []string{"shm", "tcp"}},
		{"iov limit too large", hintsWith(func(h *Info) { h.RxAttr.IOVLimit = 64 }), nil},
		{"cq data too large", hintsWith(func(h *Info) { h.DomainAttr.CQDataSize = 16 }), nil},
		{"counters provided", hintsWith(func(h *Info) { h.DomainAttr.CntrCnt = cntrSlots }), []string{"shm", "tcp"}},
		{"too many counters", hintsWith(func(h *Info) { h.DomainAttr.CntrCnt = cntrSlots + 1 }), nil},
		{"8-byte MR keys", hintsWith(func(h *Info) { h.DomainAttr.MRKeySize = 8 }), []string{"shm", "tcp"}},
		{"MR keys above 8 bytes", hintsWith(func(h *Info) { h.DomainAttr.MRKeySize = 16 }), nil},
		{"MR iov limit above 1", hintsWith(func(h *Info) { h.DomainAttr.MRIOVLimit = 2 }), nil},
		{"MR count at the limit", hintsWith(func(h *Info) { h.DomainAttr.MRCnt = mrSlots }), []string{"shm", "tcp"}},
		{"MR mode basic (virtual addresses)", hintsWith(func(h *Info) { h.DomainAttr.MRMode = MRBasic }), nil},
		{"MR mode scalable", hintsWith(func(h *Info) { h.DomainAttr.MRMode = MRScalable }), []string{"shm", "tcp"}},
		{"MR mode scalable mixed with bits", hintsWith(func(h *Info) { h.DomainAttr.MRMode = MRScalable | MRLocal }), nil},
		{"shared contexts not provided", hintsWith(func(h *Info) { h.EpAttr.TxCtxCnt = SharedContext }), nil},
		{"auth key not provided", hintsWith(func(h *Info) { h.EpAttr.AuthKey = []byte{1} }), nil},
		{"msg order RAW", hintsWith(func(h *Info) { h.TxAttr.MsgOrder = OrderRAW | OrderRMAWAW }), rmaProvs},
		{"msg order WAS not provided", hintsWith(func(h *Info) { h.TxAttr.MsgOrder = OrderWAS }), nil},
		{"msg order SAS", hintsWith(func(h *Info) { h.TxAttr.MsgOrder = OrderSAS }), []string{"shm", "tcp"}},
		{"comp order strict", hintsWith(func(h *Info) { h.RxAttr.CompOrder = CompOrderStrict }), nil},
		{"protocol udp", hintsWith(func(h *Info) { h.EpAttr.Protocol = ProtoUDP }), nil},
		{"protocol shm", hintsWith(func(h *Info) { h.EpAttr.Protocol = ProtoShm }), []string{"shm"}},
		{"tclass", hintsWith(func(h *Info) { h.TxAttr.TClass = TCLowLatency }), nil},
		{"tx op flag delivery complete", hintsWith(func(h *Info) { h.TxAttr.OpFlags = DeliveryComplete }), nil},
		{"tx op flag inject", hintsWith(func(h *Info) { h.TxAttr.OpFlags = Inject }), []string{"shm", "tcp"}},
		{"fabric name shm", hintsWith(func(h *Info) { h.FabricAttr.Name = "shm" }), []string{"shm"}},
		{"fabric name unknown", hintsWith(func(h *Info) { h.FabricAttr.Name = "ib0" }), nil},
		{"domain name lo", hintsWith(func(h *Info) { h.DomainAttr.Name = "lo" }), []string{"tcp"}},
		{"provider version too new", hintsWith(func(h *Info) { h.FabricAttr.ProvVersion = Version(999, 0) }), nil},
		{"tx caps RMA", hintsWith(func(h *Info) { h.TxAttr.Caps = RMA }), rmaProvs},
		{"tx caps unsupported", hintsWith(func(h *Info) { h.TxAttr.Caps = Trigger }), nil},
		{"domain caps remote", hintsWith(func(h *Info) { h.DomainAttr.Caps = RemoteComm }), []string{"tcp"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			infos, err := GetInfo(v117, "", "", 0, c.hints)
			if c.want == nil {
				wantNoData(t, infos, err)
				return
			}
			if err != nil {
				t.Fatalf("GetInfo: %v", err)
			}
			if got := provs(infos); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("providers = %v, want %v", got, c.want)
			}
		})
	}
}

func TestGetInfo_NegativeHintIsInvalid(t *testing.T) {
	for _, h := range []*Info{
		hintsWith(func(h *Info) { h.TxAttr.Size = -1 }),
		hintsWith(func(h *Info) { h.DomainAttr.EpCnt = -5 }),
		hintsWith(func(h *Info) { h.EpAttr.RxCtxCnt = -2 }),
	} {
		if infos, err := GetInfo(v117, "", "", 0, h); !errors.Is(err, ErrInval) || infos != nil {
			t.Errorf("GetInfo = %v, %v; want ErrInval", infos, err)
		}
	}
}

func TestGetInfo_CapsPrimaryAskedModifiersNarrowSecondaryHarmless(t *testing.T) {
	cases := []struct {
		name    string
		caps    Flags
		prov    string
		want    Flags
		wantTx  Flags
		wantRx  Flags
		comment string
	}{
		{"msg implies send and recv", Msg, "shm", Msg | Send | Recv | MultiRecv | LocalComm,
			Msg | Send, Msg | Recv | MultiRecv, "modifiers assumed; only harmless secondaries"},
		{"send modifier narrows", Msg | Send, "shm", Msg | Send | MultiRecv | LocalComm, Msg | Send, Msg | MultiRecv, ""},
		{"recv modifier narrows", Tagged | Recv, "tcp", Tagged | Recv | MultiRecv | LocalComm | RemoteComm,
			Tagged, Tagged | Recv | MultiRecv, ""},
		{"tagged does not add msg", Tagged, "shm", Tagged | Send | Recv | MultiRecv | LocalComm, Tagged | Send, Tagged | Recv | MultiRecv, ""},
		{"source only when asked", Msg | Source, "shm", Msg | Send | Recv | MultiRecv | LocalComm | Source,
			Msg | Send, Msg | Recv | MultiRecv | Source, ""},
		{"directed recv only when asked", Tagged | DirectedRecv, "tcp",
			Tagged | DirectedRecv | Send | Recv | MultiRecv | LocalComm | RemoteComm,
			Tagged | Send, Tagged | DirectedRecv | Recv | MultiRecv, ""},
		{"remote cq data when asked", Msg | RemoteCQData, "shm", Msg | RemoteCQData | Send | Recv | MultiRecv | LocalComm,
			Msg | Send | RemoteCQData, Msg | Recv | MultiRecv | RemoteCQData, ""},
		{"av user id when asked", Msg | AVUserID, "tcp", Msg | AVUserID | Send | Recv | MultiRecv | LocalComm | RemoteComm,
			Msg | Send, Msg | Recv | MultiRecv | AVUserID, ""},
		{"local comm only reported when chosen", Msg | LocalComm, "tcp", Msg | Send | Recv | MultiRecv | LocalComm,
			Msg | Send, Msg | Recv | MultiRecv, "tcp must not add RemoteComm"},
		{"secondary only gets default primaries", LocalComm, "shm",
			Msg | Tagged | Collective | RMA | Atomic | Send | Recv | Read | Write | RemoteRead | RemoteWrite | MultiRecv | LocalComm,
			Msg | Tagged | Collective | RMA | Atomic | Send | Read | Write, Msg | Tagged | Collective | RMA | Atomic | Recv | RemoteRead | RemoteWrite | MultiRecv, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := AllocInfo()
			h.Caps = c.caps
			h.FabricAttr.ProvName = c.prov
			infos := mustGetInfo(t, "", "", 0, h)
			for _, i := range infos {
				if i.Caps != c.want {
					t.Fatalf("caps = %v, want %v (%s)", i.Caps, c.want, c.comment)
				}
				if i.Caps&c.caps != c.caps {
					t.Fatalf("caps %v lost requested %v", i.Caps, c.caps)
				}
				if i.TxAttr.Caps != c.wantTx || i.RxAttr.Caps != c.wantRx {
					t.Fatalf("tx caps %v rx caps %v, want %v / %v", i.TxAttr.Caps, i.RxAttr.Caps, c.wantTx, c.wantRx)
				}
				extra := i.Caps &^ c.caps &^ PrimaryModifiers &^ harmlessCaps &^ (LocalComm | RemoteComm)
				if c.caps&PrimaryCaps != 0 && extra != 0 {
					t.Fatalf("unrequested, harmful caps reported: %v", extra)
				}
			}
		})
	}
}

// modeProv is a test provider that needs FI_CONTEXT, to exercise the mode
// rules gofi's real providers never trigger (they need no modes).
type modeProv struct{ shmProv }

func (modeProv) name() string { return "modetest" }
func (p modeProv) getInfo(req *infoReq) ([]*provInfo, error) {
	cs, err := p.shmProv.getInfo(req)
	for _, c := range cs {
		c.info.Mode = Context
		c.info.FabricAttr.ProvName = "modetest"
	}
	return cs, err
}

func withProviders(t *testing.T, ps ...provider) {
	t.Helper()
	old := allProviders
	allProviders = ps
	t.Cleanup(func() { allProviders = old })
}

func TestGetInfo_ModeRules(t *testing.T) {
	withProviders(t, modeProv{}, tcpProv{})
	cases := []struct {
		name     string
		hints    *Info
		want     []string
		wantMode Mode
	}{
		{"app supports no modes: provider needing one left out", AllocInfo(), []string{"tcp"}, 0},
		{"app supports the mode: provider kept, extra modes cleared",
			hintsWith(func(h *Info) { h.Mode = Context | MsgPrefix | Context2 }), []string{"modetest", "tcp"}, Context},
		{"nil hints: provider reports what it needs", nil, []string{"modetest", "tcp"}, Context},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			infos := mustGetInfo(t, "", "", 0, c.hints)
			if got := provs(infos); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("providers = %v, want %v", got, c.want)
			}
			for _, i := range infos {
				want := Mode(0)
				if i.FabricAttr.ProvName == "modetest" {
					want = c.wantMode
				}
				if i.Mode != want {
					t.Fatalf("%s: mode = %v, want %v", i.FabricAttr.ProvName, i.Mode, want)
				}
			}
		})
	}
}

func TestGetInfo_LocalRemoteCommSelection(t *testing.T) {
	cases := []struct {
		name string
		caps Flags
		want []string
	}{
		{"neither: both, shm first", Msg, []string{"shm", "tcp"}},
		{"local: both, shm first", Msg | LocalComm, []string{"shm", "tcp"}},
		{"remote: no shm", Msg | RemoteComm, []string{"tcp"}},
		{"local and remote: no shm, linked first", Msg | LocalComm | RemoteComm, []string{"shm+tcp", "tcp"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			infos := mustGetInfo(t, "", "", 0, hintsWith(func(h *Info) { h.Caps = c.caps }))
			if got := provs(infos); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("providers = %v, want %v", got, c.want)
			}
		})
	}
}

func TestGetInfo_NumericHostRefusesNames(t *testing.T) {
	infos, err := GetInfo(v117, "localhost", "7471", NumericHost, nil)
	wantNoData(t, infos, err)
	infos = mustGetInfo(t, "127.0.0.1", "7471", NumericHost, nil)
	for _, i := range infos {
		if i.FabricAttr.ProvName == "tcp" {
			ap, err := AddrPortFromSockaddr(i.DestAddr)
			if err != nil || ap != netip.MustParseAddrPort("127.0.0.1:7471") {
				t.Fatalf("dest = %v, %v", ap, err)
			}
		}
	}
	// without the flag, a name resolves
	infos = mustGetInfo(t, "localhost", "7471", 0, hintsWith(func(h *Info) { h.FabricAttr.ProvName = "tcp" }))
	if len(infos[0].DestAddr) == 0 {
		t.Fatal("resolved localhost has no DestAddr")
	}
}

func TestGetInfo_SourceNamesLocalAddress(t *testing.T) {
	if _, err := GetInfo(v117, "", "", Source, nil); !errors.Is(err, ErrInval) {
		t.Fatalf("FI_SOURCE without node or service = %v, want ErrInval", err)
	}
	tcpOnly := hintsWith(func(h *Info) { h.FabricAttr.ProvName = "tcp" })
	infos := mustGetInfo(t, "127.0.0.1", "7471", Source, tcpOnly)
	if len(infos) != 1 || infos[0].DomainAttr.Name != loName(t) {
		t.Fatalf("FI_SOURCE 127.0.0.1: %d infos, first domain %q", len(infos), infos[0].DomainAttr.Name)
	}
	ap, err := AddrPortFromSockaddr(infos[0].SrcAddr)
	if err != nil || ap != netip.MustParseAddrPort("127.0.0.1:7471") || infos[0].DestAddr != nil {
		t.Fatalf("src %v (%v), dest %v", ap, err, infos[0].DestAddr)
	}
	// a service alone binds that port on every interface
	all := mustGetInfo(t, "", "", 0, tcpOnly)
	svc := mustGetInfo(t, "", "7471", Source, tcpOnly)
	if len(svc) != len(all) {
		t.Fatalf("FI_SOURCE service only: %d infos, want one per interface (%d)", len(svc), len(all))
	}
	for _, i := range svc {
		if ap, _ := AddrPortFromSockaddr(i.SrcAddr); ap.Port() != 7471 {
			t.Fatalf("src %v lacks the port", ap)
		}
	}
	// an address that is not local cannot be a source
	infos, err = GetInfo(v117, "203.0.113.9", "1", Source, tcpOnly)
	wantNoData(t, infos, err)
	// shm: the service names the local endpoint
	shm := mustGetInfo(t, "", "ep0", Source, hintsWith(func(h *Info) { h.FabricAttr.ProvName = "shm" }))
	if string(shm[0].SrcAddr) != "fi_shm://ep0" || shm[0].DestAddr != nil {
		t.Fatalf("shm FI_SOURCE: src %q dest %q", shm[0].SrcAddr, shm[0].DestAddr)
	}
	shm = mustGetInfo(t, "", "ep0", 0, hintsWith(func(h *Info) { h.FabricAttr.ProvName = "shm" }))
	if string(shm[0].DestAddr) != "fi_shm://ep0" || shm[0].SrcAddr != nil {
		t.Fatalf("shm without FI_SOURCE: src %q dest %q", shm[0].SrcAddr, shm[0].DestAddr)
	}
}

func loName(t *testing.T) string {
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			return i.Name
		}
	}
	t.Skip("no loopback interface")
	return ""
}

func TestGetInfo_ProvAttrOnlyOneInfoPerProvider(t *testing.T) {
	infos := mustGetInfo(t, "", "", ProvAttrOnly, nil)
	if got := provs(infos); len(infos) != 3 || !reflect.DeepEqual(got, []string{"shm", "tcp", "shm+tcp"}) {
		t.Fatalf("FI_PROV_ATTR_ONLY: %d infos %v, want exactly one per provider", len(infos), got)
	}
	for _, i := range infos {
		fa := i.FabricAttr
		if fa.ProvName == "" || fa.ProvVersion != provVersion || fa.Name != "" {
			t.Fatalf("fabric attr = %+v: want only prov name and version", fa)
		}
		if i.TxAttr == nil || i.TxAttr.Size == 0 || i.EpAttr.Type != EpRDM {
			t.Fatalf("defaults missing: %v", i)
		}
	}
	// hints other than the provider name do not filter
	infos = mustGetInfo(t, "", "", ProvAttrOnly, hintsWith(func(h *Info) { h.EpAttr.Type = EpMsg; h.FabricAttr.ProvName = "tcp" }))
	if len(infos) != 1 || infos[0].FabricAttr.ProvName != "tcp" {
		t.Fatalf("FI_PROV_ATTR_ONLY with prov name tcp: %v", provs(infos))
	}
}

func TestGetInfo_AddrStrNode(t *testing.T) {
	cases := []struct {
		name    string
		node    string
		service string
		want    []string
		err     Errno
		dest    string // dest rendered, when checked
	}{
		{"sockaddr_in", "fi_sockaddr_in://127.0.0.1:7471", "", []string{"tcp"}, 0, "fi_sockaddr_in://127.0.0.1:7471"},
		{"sockaddr_in6 with qos", "fi_sockaddr_in6://[::1]:7471?qos=3", "", []string{"tcp"}, 0, "fi_sockaddr_in6://[::1]:7471"},
		{"sockaddr", "fi_sockaddr://127.0.0.1:7471", "", []string{"tcp"}, 0, "fi_sockaddr_in://127.0.0.1:7471"},
		{"shm", "fi_shm://peer", "", []string{"shm"}, 0, "fi_shm://peer"},
		{"service must be empty", "fi_sockaddr_in://10.31.6.12:7471", "7471", nil, ErrInval, ""},
		{"unknown format", "fi_bogus://x", "", nil, ErrInval, ""},
		{"malformed", "fi_sockaddr_in6://[fe80::1:7471", "", nil, ErrInval, ""},
		{"hostname in sockaddr string", "fi_sockaddr_in://localhost:1", "", nil, ErrNoData, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			infos, err := GetInfo(v117, c.node, c.service, 0, nil)
			if c.err != 0 {
				if !errors.Is(err, c.err) || infos != nil {
					t.Fatalf("GetInfo = %v, %v; want nil, %v", infos, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := provs(infos); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("providers = %v, want %v", got, c.want)
			}
			if got := straddr(infos[0].AddrFormat, infos[0].DestAddr); got != c.dest {
				t.Fatalf("dest = %q, want %q", got, c.dest)
			}
		})
	}
	// the FI_ADDR_STR hint format keeps addresses as strings
	infos := mustGetInfo(t, "fi_sockaddr_in://127.0.0.1:7471", "", 0, hintsWith(func(h *Info) { h.AddrFormat = AddrStr }))
	if string(infos[0].DestAddr) != "fi_sockaddr_in://127.0.0.1:7471" || infos[0].AddrFormat != AddrStr {
		t.Fatalf("AddrStr dest = %q (%v)", infos[0].DestAddr, infos[0].AddrFormat)
	}
}

func TestGetInfo_BadFlags(t *testing.T) {
	for _, f := range []Flags{Inject, Msg, 1 << 63, Source | More} {
		if infos, err := GetInfo(v117, "", "", f, nil); !errors.Is(err, ErrBadFlags) || infos != nil {
			t.Errorf("flags %v: %v, %v; want ErrBadFlags", f, infos, err)
		}
	}
}

func TestGetInfo_NewerVersionIsNoSys(t *testing.T) {
	for _, v := range []uint32{Version(2, 1), Version(3, 0)} {
		if infos, err := GetInfo(v, "", "", 0, nil); !errors.Is(err, ErrNoSys) || infos != nil {
			t.Errorf("version %s: %v, %v; want ErrNoSys", versionStr(v), infos, err)
		}
	}
	mustGetInfo(t, "", "", 0, nil)
	if _, err := GetInfo(Version(2, 0), "", "", 0, nil); err != nil {
		t.Errorf("the library's own version: %v", err)
	}
	if _, err := GetInfo(0, "", "", 0, nil); !errors.Is(err, ErrInval) {
		t.Errorf("version 0: %v, want ErrInval", err)
	}
}

func TestGetInfo_FI_PROVIDER(t *testing.T) {
	cases := []struct {
		env  string
		want []string
	}{
		{"shm,tcp", []string{"shm", "tcp"}},
		{"tcp", []string{"tcp"}},
		{"^tcp", []string{"shm"}},
		{"^shm", []string{"tcp"}},
		{" shm , tcp ", []string{"shm", "tcp"}},
		{"tcp;ofi_rxm", []string{"tcp"}},
		{"verbs", nil},
		{"^shm,tcp", nil},
	}
	for _, c := range cases {
		t.Run(c.env, func(t *testing.T) {
			t.Setenv("FI_PROVIDER", c.env)
			infos, err := GetInfo(v117, "", "", 0, nil)
			if c.want == nil {
				wantNoData(t, infos, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := provs(infos); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("providers = %v, want %v", got, c.want)
			}
		})
	}
}

func TestGetInfo_LayeredProvName(t *testing.T) {
	cases := []struct {
		name string
		want []string
	}{
		{"ofi_rxm;tcp", []string{"tcp"}},
		{"tcp;ofi_rxm", []string{"tcp"}},
		{"ofi_rxm", []string{"tcp"}},
		{"TCP", []string{"tcp"}},
		{"shm", []string{"shm"}},
		{"verbs;ofi_rxm", nil},
		{"tcp;shm", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			infos, err := GetInfo(v117, "", "", 0, hintsWith(func(h *Info) { h.FabricAttr.ProvName = c.name }))
			if c.want == nil {
				wantNoData(t, infos, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := provs(infos); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("providers = %v, want %v", got, c.want)
			}
		})
	}
}

// usableAddrs lists the interface addresses tcp must report.
func usableAddrs(t *testing.T) map[string]string {
	out := map[string]string{}
	ifs, err := net.Interfaces()
	if err != nil {
		t.Skip(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ones, _ := n.Mask.Size()
			ip, _ := netip.AddrFromSlice(n.IP)
			ip = ip.Unmap()
			p := netip.PrefixFrom(ip, ones).Masked()
			if i.Flags&net.FlagLoopback != 0 {
				p = netip.PrefixFrom(ip, ip.BitLen())
			}
			out[p.String()] = i.Name
		}
	}
	return out
}

func TestGetInfo_TcpOneInfoPerInterfaceAddress(t *testing.T) {
	want := usableAddrs(t)
	infos := mustGetInfo(t, "", "", 0, hintsWith(func(h *Info) { h.FabricAttr.ProvName = "tcp" }))
	got := map[string]string{}
	for _, i := range infos {
		got[i.FabricAttr.Name] = i.DomainAttr.Name
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("tcp fabrics/domains = %v, want %v", got, want)
	}
	if len(infos) != len(want) {
		t.Fatalf("%d infos for %d addresses", len(infos), len(want))
	}
	if d, ok := got["127.0.0.1/32"]; ok && d != loName(t) {
		t.Fatalf("127.0.0.1/32 domain = %q", d)
	}
	// loopback comes last, like libfabric
	if n := len(infos); n > 1 && !strings.HasPrefix(infos[0].DomainAttr.Name, "lo") && strings.HasPrefix(infos[0].FabricAttr.Name, "127.") {
		t.Fatal("loopback listed before other interfaces")
	}
}

func TestGetInfo_DestinationSubnetFirst(t *testing.T) {
	infos := mustGetInfo(t, "127.0.0.1", "1", 0, hintsWith(func(h *Info) { h.FabricAttr.ProvName = "tcp" }))
	if infos[0].FabricAttr.Name != "127.0.0.1/32" {
		t.Fatalf("first fabric for 127.0.0.1 = %q", infos[0].FabricAttr.Name)
	}
	for _, i := range infos {
		if i.AddrFormat != SockaddrIn {
			t.Fatalf("IPv4 destination with %v interface", i.AddrFormat)
		}
	}
}

func TestGetInfo_DomainLevels(t *testing.T) {
	cases := []struct {
		name  string
		set   func(h *Info)
		check func(i *Info) bool
	}{
		{"threading default domain", func(h *Info) {}, func(i *Info) bool { return i.DomainAttr.Threading == ThreadDomain }},
		{"threading safe supported", func(h *Info) { h.DomainAttr.Threading = ThreadSafe },
			func(i *Info) bool { return i.DomainAttr.Threading == ThreadSafe }},
		{"threading endpoint supported", func(h *Info) { h.DomainAttr.Threading = ThreadEndpoint },
			func(i *Info) bool { return i.DomainAttr.Threading == ThreadEndpoint }},
		{"control progress manual served by auto", func(h *Info) { h.DomainAttr.ControlProgress = ProgressManual },
			func(i *Info) bool { return i.DomainAttr.ControlProgress == ProgressAuto }},
		{"av type table", func(h *Info) { h.DomainAttr.AVType = AVTable }, func(i *Info) bool { return i.DomainAttr.AVType == AVTable }},
		{"av type map", func(h *Info) { h.DomainAttr.AVType = AVMap }, func(i *Info) bool { return i.DomainAttr.AVType == AVMap }},
		{"rm disabled", func(h *Info) { h.DomainAttr.ResourceMgmt = RMDisabled },
			func(i *Info) bool { return i.DomainAttr.ResourceMgmt == RMDisabled }},
		{"mem tag format kept", func(h *Info) { h.EpAttr.MemTagFormat = 0xffff },
			func(i *Info) bool { return i.EpAttr.MemTagFormat == 0xffff }},
		{"MR modes offered, none needed", func(h *Info) { h.DomainAttr.MRMode = MRLocal | MRVirtAddr },
			func(i *Info) bool { return i.DomainAttr.MRMode == 0 }},
		{"MR provider keys used when offered", func(h *Info) { h.DomainAttr.MRMode = MRLocal | MRProvKey | MRVirtAddr },
			func(i *Info) bool { return i.DomainAttr.MRMode == MRProvKey }},
		{"MR limits reported", func(h *Info) {},
			func(i *Info) bool {
				d := i.DomainAttr
				return d.MRKeySize == 8 && d.MRIOVLimit == 1 && d.MRCnt == mrSlots && d.CntrCnt == cntrSlots
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, i := range mustGetInfo(t, "", "", 0, hintsWith(c.set)) {
				if !c.check(i) {
					t.Fatalf("%s: got %v", i.FabricAttr.ProvName, i.DomainAttr)
				}
			}
		})
	}
	for _, bad := range []func(h *Info){
		func(h *Info) { h.DomainAttr.Threading = Threading(9) },
		func(h *Info) { h.DomainAttr.AVType = AVType(7) },
		func(h *Info) { h.DomainAttr.ControlProgress = Progress(5) },
	} {
		infos, err := GetInfo(v117, "", "", 0, hintsWith(bad))
		wantNoData(t, infos, err)
	}
}

// threadProv is a test provider that supports at most FI_THREAD_DOMAIN.
type threadProv struct{ shmProv }

func (p threadProv) getInfo(req *infoReq) ([]*provInfo, error) {
	cs, err := p.shmProv.getInfo(req)
	for _, c := range cs {
		c.threadMax = ThreadDomain
	}
	return cs, err
}

func TestGetInfo_ThreadingStrongerThanSupportedLeavesProviderOut(t *testing.T) {
	withProviders(t, threadProv{})
	cases := []struct {
		th Threading
		ok bool
	}{
		{ThreadSafe, false}, {ThreadFID, false}, {ThreadDomain, true}, {ThreadCompletion, true}, {ThreadEndpoint, true},
	}
	for _, c := range cases {
		t.Run(c.th.String(), func(t *testing.T) {
			infos, err := GetInfo(v117, "", "", 0, hintsWith(func(h *Info) { h.DomainAttr.Threading = c.th }))
			if !c.ok {
				wantNoData(t, infos, err)
				return
			}
			if err != nil || infos[0].DomainAttr.Threading != c.th {
				t.Fatalf("GetInfo = %v, %v", infos, err)
			}
		})
	}
}

// TestGetInfo_CheckOrder: with two failing hints, the reported reason is
// the one libfabric checks first.
func TestGetInfo_CheckOrder(t *testing.T) {
	withProviders(t, modeProv{})
	cases := []struct {
		name string
		set  func(h *Info)
		want string
	}{
		{"ep type before caps", func(h *Info) { h.EpAttr.Type = EpMsg; h.Caps = RMA }, "endpoint type"},
		{"caps before mode", func(h *Info) { h.Caps = Trigger }, "capabilities"},
		{"mode before address format", func(h *Info) { h.AddrFormat = SockaddrIB }, "needs mode"},
		{"address format before threading", func(h *Info) {
			h.Mode = Context
			h.AddrFormat = SockaddrIB
			h.DomainAttr.Threading = Threading(9)
		}, "address format"},
		{"threading before sizes", func(h *Info) {
			h.Mode = Context
			h.DomainAttr.Threading = Threading(9)
			h.TxAttr.Size = 1 << 30
		}, "threading"},
		{"progress before sizes", func(h *Info) {
			h.Mode = Context
			h.DomainAttr.DataProgress = ProgressAuto
			h.TxAttr.Size = 1 << 30
		}, "data progress"},
		{"sizes last", func(h *Info) { h.Mode = Context; h.TxAttr.Size = 1 << 30 }, "TxAttr.Size"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := GetInfo(v117, "", "", 0, hintsWith(c.set))
			if !errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrNoData naming %q", err, c.want)
			}
		})
	}
}

func TestGetInfo_HintsNameOpenObjects(t *testing.T) {
	info, fab, dom := openFirst(t, "tcp")
	defer fab.Close()
	defer dom.Close()
	infos := mustGetInfo(t, "", "", 0, hintsWith(func(h *Info) { h.FabricAttr.Fabric = fab }))
	for _, i := range infos {
		if i.FabricAttr.Name != info.FabricAttr.Name || i.FabricAttr.Fabric != fab {
			t.Fatalf("hint fabric %q returned %q", info.FabricAttr.Name, i.FabricAttr.Name)
		}
	}
	infos = mustGetInfo(t, "", "", 0, hintsWith(func(h *Info) { h.DomainAttr.Domain = dom }))
	for _, i := range infos {
		if i.DomainAttr.Name != info.DomainAttr.Name || i.DomainAttr.Domain != dom {
			t.Fatalf("hint domain %q returned %q", info.DomainAttr.Name, i.DomainAttr.Name)
		}
	}
}

func TestGetInfo_ResultsAreIndependentCopies(t *testing.T) {
	a := mustGetInfo(t, "", "", 0, nil)
	a[0].TxAttr.Size = 1
	a[0].Caps = 0
	b := mustGetInfo(t, "", "", 0, nil)
	if b[0].TxAttr.Size == 1 || b[0].Caps == 0 {
		t.Fatal("GetInfo results share state across calls")
	}
}

func TestGetInfo_ConcurrentCallsAreSafe(t *testing.T) {
	hs := []*Info{nil, AllocInfo(), hintsWith(func(h *Info) { h.Caps = Msg | Tagged }),
		hintsWith(func(h *Info) { h.FabricAttr.ProvName = "tcp"; h.AddrFormat = AddrStr })}
	want := make([]string, len(hs))
	for k, h := range hs {
		want[k] = fmt.Sprint(mustGetInfo(t, "127.0.0.1", "9", 0, h))
	}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				k := (g + i) % len(hs)
				got, err := GetInfo(v117, "127.0.0.1", "9", 0, hs[k])
				if err != nil {
					t.Error(err)
					return
				}
				if s := fmt.Sprint(got); s != want[k] {
					t.Errorf("concurrent result differs for hints %d", k)
					return
				}
				got[0].Caps = 0 // results are the caller's to change
			}
		}(g)
	}
	wg.Wait()
}

func FuzzGetInfoHints(f *testing.F) {
	f.Add(uint64(Msg|Tagged), uint64(0), uint32(0), 0, 0, 0, 0, 0, uint64(0), "", "", "")
	f.Add(uint64(RMA), uint64(Context), uint32(AddrStr), int(EpRDM), int(ThreadSafe), int(ProgressAuto), 4096, -1, uint64(Source), "127.0.0.1", "7471", "tcp")
	f.Add(uint64(0), uint64(0), uint32(SockaddrIn6), int(EpMsg), 9, 3, 1<<40, 2, uint64(ProvAttrOnly), "fi_shm://x", "", "ofi_rxm;tcp")
	f.Add(uint64(LocalComm), uint64(0), uint32(99), 7, 0, 0, 0, 0, uint64(NumericHost), "localhost", "x", "^shm")
	f.Fuzz(func(t *testing.T, caps, mode uint64, format uint32, epType, threading, progress, size, ctx int, flags uint64,
		node, service, prov string) {
		h := AllocInfo()
		h.Caps = Flags(caps)
		h.Mode = Mode(mode)
		h.AddrFormat = AddrFormat(format)
		h.EpAttr.Type = EpType(epType)
		h.DomainAttr.Threading = Threading(threading)
		h.DomainAttr.DataProgress = Progress(progress)
		h.TxAttr.Size = size
		h.EpAttr.TxCtxCnt = ctx
		h.FabricAttr.ProvName = prov
		if strings.Contains(node, "://") || node == "" || netip.MustParseAddr("127.0.0.1").String() == node {
			// keep name resolution out of the fuzz loop
		} else {
			flags |= uint64(NumericHost)
		}
		infos, err := GetInfo(v117, node, service, Flags(flags), h)
		if err != nil {
			var e Errno
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an Errno", err)
			}
			if infos != nil {
				t.Fatal("infos with an error")
			}
			return
		}
		for _, i := range infos {
			_ = i.String()
			if h.Caps != 0 && Flags(flags)&ProvAttrOnly == 0 && i.Caps&h.Caps != h.Caps {
				t.Fatalf("returned caps %v lack requested %v", i.Caps, h.Caps)
			}
		}
	})
}

func TestGetInfo_HintAddresses(t *testing.T) {
	shm := func(h *Info) { h.FabricAttr.ProvName = "shm" }
	// src_addr hint names the local shm endpoint
	infos := mustGetInfo(t, "", "", 0, hintsWith(func(h *Info) { shm(h); h.SrcAddr = []byte("fi_shm://me") }))
	if string(infos[0].SrcAddr) != "fi_shm://me" {
		t.Fatalf("src = %q", infos[0].SrcAddr)
	}
	// ignored with FI_SOURCE, where node/service name the source
	infos = mustGetInfo(t, "", "ep1", Source, hintsWith(func(h *Info) { shm(h); h.SrcAddr = []byte("fi_shm://me") }))
	if string(infos[0].SrcAddr) != "fi_shm://ep1" {
		t.Fatalf("FI_SOURCE src = %q", infos[0].SrcAddr)
	}
	// dest_addr hint used when node and service are empty
	infos = mustGetInfo(t, "", "", 0, hintsWith(func(h *Info) { shm(h); h.DestAddr = []byte("fi_shm://peer") }))
	if string(infos[0].DestAddr) != "fi_shm://peer" {
		t.Fatalf("dest = %q", infos[0].DestAddr)
	}
	// a tcp src_addr hint selects the interface holding it
	lo, _ := SockaddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:5000"))
	infos = mustGetInfo(t, "", "", 0, hintsWith(func(h *Info) { h.FabricAttr.ProvName = "tcp"; h.SrcAddr = lo }))
	if len(infos) != 1 || infos[0].FabricAttr.Name != "127.0.0.1/32" {
		t.Fatalf("src hint 127.0.0.1: %d infos, first %q", len(infos), infos[0].FabricAttr.Name)
	}
	if ap, _ := AddrPortFromSockaddr(infos[0].SrcAddr); ap.Port() != 5000 {
		t.Fatalf("src port lost: %v", ap)
	}
	// an unknown local address matches no interface
	far, _ := SockaddrFromAddrPort(netip.MustParseAddrPort("203.0.113.7:1"))
	infos, err := GetInfo(v117, "", "", 0, hintsWith(func(h *Info) { h.FabricAttr.ProvName = "tcp"; h.SrcAddr = far }))
	wantNoData(t, infos, err)
	// shm cannot reach another host
	infos, err = GetInfo(v117, "203.0.113.7", "ep", NumericHost, hintsWith(shm))
	wantNoData(t, infos, err)
	infos = mustGetInfo(t, "localhost", "ep", 0, hintsWith(shm))
	if string(infos[0].DestAddr) != "fi_shm://ep" {
		t.Fatalf("shm localhost dest = %q", infos[0].DestAddr)
	}
}
