package fi

import (
	"bufio"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
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
	for _, b := range capNames {
		if s := Flags(b.bit).String(); !strings.HasPrefix(s, "FI_") || strings.Contains(s, "|") {
			t.Errorf("bit %#x spelled %q", b.bit, s)
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
	for _, tab := range [][]bitName{capNames, opFlagNames, modeNames, orderNames, mrModeNames} {
		for _, b := range tab {
			m[b.name] = true
		}
	}
	for _, tab := range [][]string{addrFormatNames, epTypeNames, protocolNames, threadingNames, progressNames,
		rmNames, avTypeNames, busTypeNames, linkStateNames} {
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
		{"addr_format", addrFormatNames}, {"type", epTypeNames}, {"threading", threadingNames},
		{"control_progress", progressNames}, {"data_progress", progressNames}, {"resource_mgmt", rmNames},
		{"av_type", avTypeNames}, {"protocol", protocolNames},
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
	for _, n := range bitNames(uint64((shmCaps|tcpCaps)&^AVUserID), capNames) {
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
	for _, b := range capNames[:29] { // the capability part of the table
		capList = append(capList, b.name)
	}
	for _, b := range modeNames {
		modeList = append(modeList, b.name)
	}
	probe("-c", capList)
	probe("-m", modeList)
	probe("-a", addrFormatNames)
	probe("-t", epTypeNames[:4])
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
	for _, b := range capNames {
		if f, err := ParseFlags(Flags(b.bit).String()); err != nil || f != Flags(b.bit) {
			t.Errorf("round trip %s: %v, %v", b.name, f, err)
		}
	}
	if m, err := ParseMode("FI_CONTEXT|FI_CONTEXT2"); err != nil || m != Context|Context2 {
		t.Errorf("ParseMode = %v, %v", m, err)
	}
	if _, err := ParseMode("FI_MSG"); !errors.Is(err, ErrInval) {
		t.Errorf("ParseMode(FI_MSG) err = %v", err)
	}
	for i := range epTypeNames {
		if e, err := ParseEpType(EpType(i).String()); err != nil || e != EpType(i) {
			t.Errorf("ParseEpType round trip %d: %v %v", i, e, err)
		}
	}
	for i := range addrFormatNames {
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
