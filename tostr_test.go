package fi

import (
	"bufio"
	"errors"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gofi-dev/fi/internal/tostr"
)

func TestString_FiTostrSpelling(t *testing.T) {
	cases := []struct {
		name string
		got  string
		want string
	}{
		{"caps pair", (Msg | Tagged).String(), "FI_MSG | FI_TAGGED"},
		{"caps in fi_tostr order", (DirectedRecv | Msg | LocalComm | Source).String(), "FI_MSG | FI_LOCAL_COMM | FI_SOURCE | FI_DIRECTED_RECV"},
		{"no caps", Flags(0).String(), ""},
		{"unnamed bit in hex", (Msg | 1<<63).String(), "FI_MSG | 0x8000000000000000"},
		{"op flags", (Inject | Completion | DeliveryComplete).String(), "FI_COMPLETION | FI_INJECT | FI_DELIVERY_COMPLETE"},
		{"getinfo flags", (NumericHost | ProvAttrOnly).String(), "FI_PROV_ATTR_ONLY | FI_NUMERICHOST"},
		{"bit 59 spelled as the capability", Claim.String(), "FI_DIRECTED_RECV"},
		{"av user id", AVUserID.String(), "FI_AV_USER_ID"},
		{"mode", (Context | MsgPrefix).String(), "FI_CONTEXT | FI_MSG_PREFIX"},
		{"mode buffered recv", BufferedRecv.String(), "FI_BUFFERED_RECV"},
		{"addr format in", SockaddrIn.String(), "FI_SOCKADDR_IN"},
		{"addr format str", AddrStr.String(), "FI_ADDR_STR"},
		{"addr format psmx3", AddrPSMX3.String(), "FI_ADDR_PSMX3"},
		{"addr format unknown", AddrFormat(99).String(), "Unknown"},
		{"ep rdm", EpRDM.String(), "FI_EP_RDM"},
		{"ep unknown", EpType(-1).String(), "Unknown"},
		{"threading", ThreadDomain.String(), "FI_THREAD_DOMAIN"},
		{"threading safe", ThreadSafe.String(), "FI_THREAD_SAFE"},
		{"progress", ProgressManual.String(), "FI_PROGRESS_MANUAL"},
		{"protocol shm", ProtoShm.String(), "FI_PROTO_SHM"},
		{"protocol xnet", ProtoXNet.String(), "FI_PROTO_XNET"},
		{"protocol unknown", Protocol(1 << 31).String(), "Unknown"},
		{"av table", AVTable.String(), "FI_AV_TABLE"},
		{"rm", RMEnabled.String(), "FI_RM_ENABLED"},
		{"mr mode", (MRLocal | MRVirtAddr).String(), "FI_MR_LOCAL | FI_MR_VIRT_ADDR"},
		{"msg order", (OrderSAS | OrderRAW | OrderRMAWAW).String(), "FI_ORDER_RAW | FI_ORDER_SAS | FI_ORDER_RMA_WAW"},
		{"msg order strict expands", OrderStrict.String(), "FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_RAS | FI_ORDER_WAR | FI_ORDER_WAW | FI_ORDER_WAS | FI_ORDER_SAR | FI_ORDER_SAW | FI_ORDER_SAS"},
		{"comp order none", CompOrderNone.String(), "FI_ORDER_NONE"},
		{"comp order strict", CompOrderStrict.String(), "FI_ORDER_STRICT"},
		{"tclass", TCLowLatency.String(), "FI_TC_LOW_LATENCY"},
		{"tclass dscp", (TCDSCP | 46).String(), "FI_TC_DSCP(46)"},
		{"link", LinkUp.String(), "FI_LINK_UP"},
		{"bus", BusPCI.String(), "FI_BUS_PCI"},
		{"ToStr flags", ToStr(Msg), "FI_MSG"},
		{"ToStr enum", ToStr(EpRDM), "FI_EP_RDM"},
		{"ToStr errno", ToStr(ErrNoData), "No data available"},
		{"ToStr other", ToStr(42), "42"},
		{"ToStr fabric attr", ToStr(FabricAttr{Name: "shm", ProvName: "shm", ProvVersion: Version(200, 0), APIVersion: Version(2, 0)}),
			"fi_fabric_attr:\n    name: shm\n    prov_name: shm\n    prov_version: 200.0\n    api_version: 2.0\n"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
	// every named capability bit has exactly one name in String
	for _, b := range tostr.Caps {
		if s := Flags(b.Bit).String(); !strings.HasPrefix(s, "FI_") || strings.Contains(s, "|") {
			t.Errorf("bit %#x spelled %q", b.Bit, s)
		}
	}
}

// fiInfoKeys is the key sequence of one fi_info -v entry (libfabric 1.17+).
var fiInfoKeys = strings.Fields(`fi_info caps mode addr_format src_addrlen dest_addrlen src_addr dest_addr handle
fi_tx_attr caps mode op_flags msg_order comp_order inject_size size iov_limit rma_iov_limit tclass
fi_rx_attr caps mode op_flags msg_order comp_order total_buffered_recv size iov_limit
fi_ep_attr type protocol protocol_version max_msg_size msg_prefix_size max_order_raw_size max_order_war_size
max_order_waw_size mem_tag_format tx_ctx_cnt rx_ctx_cnt auth_key_size
fi_domain_attr domain name threading control_progress data_progress resource_mgmt av_type mr_mode mr_key_size
cq_data_size cq_cnt ep_cnt tx_ctx_cnt rx_ctx_cnt max_ep_tx_ctx max_ep_rx_ctx max_ep_stx_ctx max_ep_srx_ctx
cntr_cnt mr_iov_limit caps mode auth_key_size max_err_data mr_cnt tclass
fi_fabric_attr name prov_name prov_version api_version nic`)

// keysOf returns the "key:" sequence and indentation of an fi_info -v
// entry (up to the next "---").
func keysOf(text string) (keys []string, indents []int) {
	sc := bufio.NewScanner(strings.NewReader(text))
	started := false
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "---" {
			if started {
				break
			}
			continue
		}
		k, _, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		started = true
		trimmed := strings.TrimLeft(k, " ")
		keys = append(keys, trimmed)
		indents = append(indents, len(k)-len(trimmed))
	}
	return keys, indents
}

func TestInfoString_FiInfoVerboseLayout(t *testing.T) {
	infos := mustGetInfo(t, "", "", 0, nil)
	for _, i := range infos {
		s := i.String()
		keys, indents := keysOf(s)
		if strings.Join(keys, " ") != strings.Join(fiInfoKeys, " ") {
			t.Fatalf("keys:\n%v\nwant:\n%v", keys, fiInfoKeys)
		}
		for k, ind := range indents {
			want := 4
			switch {
			case k == 0:
				want = 0
			case strings.HasPrefix(keys[k], "fi_") || keys[k] == "nic":
				want = 4
			case k > 0:
				want = 8
			}
			if k < 9 && k > 0 {
				want = 4
			}
			if ind != want {
				t.Fatalf("key %q indented %d, want %d:\n%s", keys[k], ind, want, s)
			}
		}
		if !strings.Contains(s, "    caps: [ FI_MSG, ") || !strings.Contains(s, " FI_TAGGED, ") || !strings.Contains(s, "    mode: [  ]\n") ||
			!strings.Contains(s, "        type: FI_EP_RDM\n") || !strings.Contains(s, "    nic: (nil)\n") {
			t.Fatalf("values not in fi_info spelling:\n%s", s)
		}
	}
	if (*Info)(nil).String() != "(null)" {
		t.Fatal("nil info")
	}
	if s := (&Info{}).String(); !strings.Contains(s, "fi_tx_attr: (null)") {
		t.Fatalf("nil attributes:\n%s", s)
	}
}

// knownNames is every FI_* spelling the package produces.
func knownNames() map[string]bool {
	m := map[string]bool{}
	for _, tab := range [][]tostr.Bit{tostr.Caps, tostr.OpFlags, tostr.Modes, tostr.Orders, tostr.MRModes} {
		for _, b := range tab {
			m[b.Name] = true
		}
	}
	for _, tab := range [][]string{tostr.AddrFormats, tostr.EpTypes, tostr.Protocols, tostr.Threadings, tostr.Progresses,
		tostr.ResourceMgmts, tostr.AVTypes, tostr.BusTypes, tostr.LinkStates} {
		for _, n := range tab {
			m[n] = true
		}
	}
	for _, n := range []string{"FI_ORDER_NONE", "FI_ORDER_STRICT"} {
		m[n] = true
	}
	return m
}

// TestDifferential_FiInfoSpelling runs libfabric's fi_info (Debian
// libfabric-bin) and checks that every FI_* name it prints for the shm and
// tcp providers is one of ours, that the enums it prints parse back to our
// values, and that our -v layout has its field names in its order.
func TestDifferential_FiInfoSpelling(t *testing.T) {
	path, err := exec.LookPath("fi_info")
	if err != nil {
		t.Skip("fi_info not on PATH (install libfabric-bin, as .ci/run does): skipping the libfabric differential test")
	}
	known := knownNames()
	tokens := regexp.MustCompile(`FI_[A-Z0-9_]+`)
	enumLine := regexp.MustCompile(`^\s*(addr_format|type|threading|control_progress|data_progress|resource_mgmt|av_type|protocol): (FI_[A-Z0-9_]+)$`)
	enumOf := map[string]map[string]bool{}
	for _, pair := range []struct {
		key   string
		names []string
	}{
		{"addr_format", tostr.AddrFormats}, {"type", tostr.EpTypes}, {"threading", tostr.Threadings},
		{"control_progress", tostr.Progresses}, {"data_progress", tostr.Progresses}, {"resource_mgmt", tostr.ResourceMgmts},
		{"av_type", tostr.AVTypes}, {"protocol", tostr.Protocols},
	} {
		enumOf[pair.key] = map[string]bool{}
		for _, n := range pair.names {
			enumOf[pair.key][n] = true
		}
	}
	ran := 0
	for _, prov := range []string{"tcp", "shm"} {
		out, err := exec.Command(path, "-v", "-p", prov).CombinedOutput()
		if err != nil {
			t.Logf("fi_info -v -p %s: %v (provider unavailable here?)", prov, err)
			continue
		}
		ran++
		text := string(out)
		for _, tok := range tokens.FindAllString(text, -1) {
			if !known[tok] {
				t.Errorf("fi_info -p %s prints %s, which gofi cannot spell", prov, tok)
			}
		}
		sc := bufio.NewScanner(strings.NewReader(text))
		for sc.Scan() {
			if m := enumLine.FindStringSubmatch(sc.Text()); m != nil && !enumOf[m[1]][m[2]] {
				t.Errorf("fi_info prints %s: %s; gofi spells no %s value that way", m[1], m[2], m[1])
			}
		}
		theirs, _ := keysOf(text)
		if strings.Join(theirs, " ") != strings.Join(fiInfoKeys, " ") {
			t.Errorf("fi_info -v key layout changed:\n%v\nours:\n%v", theirs, fiInfoKeys)
		}
	}
	if ran == 0 {
		t.Skip("fi_info ran for no provider")
	}
	// our own names for the same provider kinds appear in fi_info's output
	// spelling: caps, modes, formats and endpoint types
	ours := mustGetInfo(t, "", "", 0, nil)
	for _, i := range ours {
		for _, tok := range tokens.FindAllString(i.String(), -1) {
			if !known[tok] {
				t.Errorf("we print unknown %s", tok)
			}
		}
	}
	// fi_info's own option parser must recognise our spelling of the
	// capabilities our providers report, of modes, address formats and
	// endpoint types (names newer than the installed libfabric are only
	// logged)
	mustKnow := map[string]bool{}
	for _, n := range tostr.Bits(uint64((shmCaps|tcpCaps)&^AVUserID), tostr.Caps) {
		mustKnow[n] = true
	}
	for _, n := range []string{"FI_CONTEXT", "FI_MSG_PREFIX", "FI_SOCKADDR_IN", "FI_SOCKADDR_IN6", "FI_ADDR_STR",
		"FI_EP_RDM", "FI_EP_MSG", "FI_EP_DGRAM"} {
		mustKnow[n] = true
	}
	type probeRes struct {
		opt, name, out string
	}
	var jobs [][2]string
	probe := func(opt string, names []string) {
		for _, n := range names {
			jobs = append(jobs, [2]string{opt, n})
		}
	}
	var capList, modeList []string
	for _, b := range tostr.Caps[:29] { // the capability part of the table
		capList = append(capList, b.Name)
	}
	for _, b := range tostr.Modes {
		modeList = append(modeList, b.Name)
	}
	probe("-c", capList)
	probe("-m", modeList)
	probe("-a", tostr.AddrFormats)
	probe("-t", tostr.EpTypes[:4])
	if testing.Short() {
		t.Log("-short: skipping the fi_info option-parser probes")
		return
	}
	// each fi_info run mostly waits, so run them side by side
	res := make([]probeRes, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for k, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out, _ := exec.Command(path, j[0], j[1], "-p", "tcp").CombinedOutput()
			res[k] = probeRes{j[0], j[1], string(out)}
		}()
	}
	wg.Wait()
	for _, r := range res {
		if strings.Contains(r.out, "Unrecognized") {
			if mustKnow[r.name] {
				t.Errorf("fi_info %s %s: %s", r.opt, r.name, strings.TrimSpace(r.out))
			} else {
				t.Logf("installed fi_info does not know %s (newer than its parser)", r.name)
			}
		}
	}
}

func TestParseNames_RoundTripAndAliases(t *testing.T) {
	cases := []struct {
		in   string
		want Flags
	}{
		{"FI_MSG|FI_TAGGED", Msg | Tagged},
		{"FI_MSG | FI_TAGGED", Msg | Tagged},
		{"[ FI_MSG, FI_TAGGED ]", Msg | Tagged},
		{"fi_msg", Msg},
		{"FI_TRANSMIT|FI_SELECTIVE_COMPLETION", Send | SelectiveCompletion},
		{"FI_CLAIM", Claim},
		{"0x8000000000000000", 1 << 63},
		{"", 0},
	}
	for _, c := range cases {
		got, err := ParseFlags(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseFlags(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"FI_BOGUS", "FI_MSG|X", "0xzz"} {
		if _, err := ParseFlags(bad); !errors.Is(err, ErrInval) {
			t.Errorf("ParseFlags(%q) err = %v, want ErrInval", bad, err)
		}
	}
	for _, b := range tostr.Caps {
		if f, err := ParseFlags(Flags(b.Bit).String()); err != nil || f != Flags(b.Bit) {
			t.Errorf("round trip %s: %v, %v", b.Name, f, err)
		}
	}
	if m, err := ParseMode("FI_CONTEXT|FI_CONTEXT2"); err != nil || m != Context|Context2 {
		t.Errorf("ParseMode = %v, %v", m, err)
	}
	if _, err := ParseMode("FI_MSG"); !errors.Is(err, ErrInval) {
		t.Errorf("ParseMode(FI_MSG) err = %v", err)
	}
	for i := range tostr.EpTypes {
		if e, err := ParseEpType(EpType(i).String()); err != nil || e != EpType(i) {
			t.Errorf("ParseEpType round trip %d: %v %v", i, e, err)
		}
	}
	for i := range tostr.AddrFormats {
		if a, err := ParseAddrFormat(AddrFormat(i).String()); err != nil || a != AddrFormat(i) {
			t.Errorf("ParseAddrFormat round trip %d: %v %v", i, a, err)
		}
	}
	if _, err := ParseEpType("FI_EP_BOGUS"); !errors.Is(err, ErrInval) {
		t.Error("ParseEpType accepted a bogus name")
	}
}

func FuzzParseFlags(f *testing.F) {
	f.Add("FI_MSG|FI_TAGGED")
	f.Add("[ FI_MSG, 0x10 ]")
	f.Add("FI_CLAIM | fi_peek")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseFlags(s)
		if err != nil {
			if !errors.Is(err, ErrInval) {
				t.Fatalf("non-ErrInval error %v", err)
			}
			return
		}
		back, err := ParseFlags(v.String())
		if err != nil || back != v {
			t.Fatalf("%q -> %v -> %q -> %v (%v)", s, uint64(v), v.String(), uint64(back), err)
		}
	})
}

// The numeric tables of internal/tostr name the package's constants: the
// same bits, names and order as written here with the constants.
func TestToStr_TablesMatchConstants(t *testing.T) {
	type bn struct {
		bit  uint64
		name string
	}
	of := func(tab []tostr.Bit) []bn {
		var out []bn
		for _, b := range tab {
			out = append(out, bn{b.Bit, b.Name})
		}
		return out
	}
	for _, c := range []struct {
		got, want []bn
	}{
		{of(tostr.Caps), []bn{
			{uint64(Msg), "FI_MSG"}, {uint64(RMA), "FI_RMA"}, {uint64(Tagged), "FI_TAGGED"},
			{uint64(Atomic), "FI_ATOMIC"}, {uint64(Multicast), "FI_MULTICAST"}, {uint64(Collective), "FI_COLLECTIVE"},
			{uint64(Read), "FI_READ"}, {uint64(Write), "FI_WRITE"}, {uint64(Recv), "FI_RECV"}, {uint64(Send), "FI_SEND"},
			{uint64(RemoteRead), "FI_REMOTE_READ"}, {uint64(RemoteWrite), "FI_REMOTE_WRITE"},
			{uint64(MultiRecv), "FI_MULTI_RECV"}, {uint64(RemoteCQData), "FI_REMOTE_CQ_DATA"},
			{uint64(Trigger), "FI_TRIGGER"}, {uint64(Fence), "FI_FENCE"},
			{uint64(VariableMsg), "FI_VARIABLE_MSG"}, {uint64(RMAPmem), "FI_RMA_PMEM"}, {uint64(SourceErr), "FI_SOURCE_ERR"},
			{uint64(LocalComm), "FI_LOCAL_COMM"}, {uint64(RemoteComm), "FI_REMOTE_COMM"}, {uint64(SharedAV), "FI_SHARED_AV"},
			{uint64(RMAEvent), "FI_RMA_EVENT"}, {uint64(Source), "FI_SOURCE"}, {uint64(NamedRxCtx), "FI_NAMED_RX_CTX"},
			{uint64(DirectedRecv), "FI_DIRECTED_RECV"}, {uint64(HMEM), "FI_HMEM"},
			{uint64(AVUserID), "FI_AV_USER_ID"}, {uint64(XPU), "FI_XPU"},
			{uint64(More), "FI_MORE"}, {uint64(Peek), "FI_PEEK"}, {uint64(Priority), "FI_PRIORITY"},
			{uint64(Completion), "FI_COMPLETION"}, {uint64(Inject), "FI_INJECT"},
			{uint64(InjectComplete), "FI_INJECT_COMPLETE"}, {uint64(TransmitComplete), "FI_TRANSMIT_COMPLETE"},
			{uint64(DeliveryComplete), "FI_DELIVERY_COMPLETE"}, {uint64(CommitComplete), "FI_COMMIT_COMPLETE"},
			{uint64(MatchComplete), "FI_MATCH_COMPLETE"}, {uint64(Affinity), "FI_AFFINITY"},
			{uint64(ProvAttrOnly), "FI_PROV_ATTR_ONLY"}, {uint64(NumericHost), "FI_NUMERICHOST"},
		}},
		{of(tostr.OpFlags), []bn{
			{uint64(Multicast), "FI_MULTICAST"}, {uint64(MultiRecv), "FI_MULTI_RECV"},
			{uint64(RemoteCQData), "FI_REMOTE_CQ_DATA"}, {uint64(More), "FI_MORE"}, {uint64(Peek), "FI_PEEK"},
			{uint64(Trigger), "FI_TRIGGER"}, {uint64(Fence), "FI_FENCE"}, {uint64(Completion), "FI_COMPLETION"},
			{uint64(Inject), "FI_INJECT"}, {uint64(InjectComplete), "FI_INJECT_COMPLETE"},
			{uint64(TransmitComplete), "FI_TRANSMIT_COMPLETE"}, {uint64(DeliveryComplete), "FI_DELIVERY_COMPLETE"},
			{uint64(MatchComplete), "FI_MATCH_COMPLETE"}, {uint64(Affinity), "FI_AFFINITY"},
			{uint64(Claim), "FI_CLAIM"}, {uint64(Discard), "FI_DISCARD"},
		}},
		{of(tostr.Modes), []bn{
			{uint64(Context), "FI_CONTEXT"}, {uint64(MsgPrefix), "FI_MSG_PREFIX"}, {uint64(AsyncIOV), "FI_ASYNC_IOV"},
			{uint64(RxCQData), "FI_RX_CQ_DATA"}, {uint64(LocalMR), "FI_LOCAL_MR"},
			{uint64(NotifyFlagsOnly), "FI_NOTIFY_FLAGS_ONLY"}, {uint64(RestrictedComp), "FI_RESTRICTED_COMP"},
			{uint64(Context2), "FI_CONTEXT2"}, {uint64(BufferedRecv), "FI_BUFFERED_RECV"},
		}},
		{of(tostr.Orders), []bn{
			{uint64(OrderRAR), "FI_ORDER_RAR"}, {uint64(OrderRAW), "FI_ORDER_RAW"}, {uint64(OrderRAS), "FI_ORDER_RAS"},
			{uint64(OrderWAR), "FI_ORDER_WAR"}, {uint64(OrderWAW), "FI_ORDER_WAW"}, {uint64(OrderWAS), "FI_ORDER_WAS"},
			{uint64(OrderSAR), "FI_ORDER_SAR"}, {uint64(OrderSAW), "FI_ORDER_SAW"}, {uint64(OrderSAS), "FI_ORDER_SAS"},
			{uint64(OrderData), "FI_ORDER_DATA"},
			{uint64(OrderRMARAR), "FI_ORDER_RMA_RAR"}, {uint64(OrderRMARAW), "FI_ORDER_RMA_RAW"},
			{uint64(OrderRMAWAR), "FI_ORDER_RMA_WAR"}, {uint64(OrderRMAWAW), "FI_ORDER_RMA_WAW"},
			{uint64(OrderAtomicRAR), "FI_ORDER_ATOMIC_RAR"}, {uint64(OrderAtomicRAW), "FI_ORDER_ATOMIC_RAW"},
			{uint64(OrderAtomicWAR), "FI_ORDER_ATOMIC_WAR"}, {uint64(OrderAtomicWAW), "FI_ORDER_ATOMIC_WAW"},
		}},
		{of(tostr.MRModes), []bn{
			{uint64(MRBasic), "FI_MR_BASIC"}, {uint64(MRScalable), "FI_MR_SCALABLE"}, {uint64(MRLocal), "FI_MR_LOCAL"},
			{uint64(MRRaw), "FI_MR_RAW"}, {uint64(MRVirtAddr), "FI_MR_VIRT_ADDR"}, {uint64(MRAllocated), "FI_MR_ALLOCATED"},
			{uint64(MRProvKey), "FI_MR_PROV_KEY"}, {uint64(MRMMUNotify), "FI_MR_MMU_NOTIFY"},
			{uint64(MRRMAEvent), "FI_MR_RMA_EVENT"}, {uint64(MREndpoint), "FI_MR_ENDPOINT"},
			{uint64(MRHMEM), "FI_MR_HMEM"}, {uint64(MRCollective), "FI_MR_COLLECTIVE"},
		}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("table differs from the constants:\n got %v\nwant %v", c.got, c.want)
		}
	}
	for _, c := range []struct{ got, want string }{
		{SockaddrIn.String(), "FI_SOCKADDR_IN"}, {AddrStr.String(), "FI_ADDR_STR"}, {EpRDM.String(), "FI_EP_RDM"},
		{ProtoShm.String(), "FI_PROTO_SHM"}, {ThreadDomain.String(), "FI_THREAD_DOMAIN"},
		{ProgressManual.String(), "FI_PROGRESS_MANUAL"}, {RMEnabled.String(), "FI_RM_ENABLED"},
		{AVTable.String(), "FI_AV_TABLE"}, {BusPCI.String(), "FI_BUS_PCI"}, {LinkUp.String(), "FI_LINK_UP"},
		{TCBulkData.String(), "FI_TC_BULK_DATA"}, {CompOrderStrict.String(), "FI_ORDER_STRICT"},
		{ErrNoSpc.Error(), "No space left on device"}, {ErrNoRx.Error(), "Receiver not ready, no receive buffers available"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	for n, f := range map[string]Flags{"FI_ATOMICS": Atomic, "FI_TRANSMIT": Transmit, "FI_EVENT": Completion,
		"FI_SELECTIVE_COMPLETION": SelectiveCompletion, "FI_SYMMETRIC": Symmetric, "FI_SYNC_ERR": SyncErr,
		"FI_UNIVERSE": Universe, "FI_XPU_TRIGGER": XPU} {
		if tostr.FlagAliases[n] != uint64(f) {
			t.Errorf("alias %s = %#x, want %#x", n, tostr.FlagAliases[n], uint64(f))
		}
	}
}
