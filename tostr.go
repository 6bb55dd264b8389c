package fi

import (
	"fmt"
	"strconv"
	"strings"
)

// Strings in libfabric's fi_tostr(3) spelling. Bit sets list their names
// in fi_tostr's order; String joins them with " | " (FI_MSG | FI_TAGGED),
// while the fi_info -v layout of (*Info).String lists them as
// [ FI_MSG, FI_TAGGED ], as fi_info does. Bits without a name print in
// hex, so nothing is lost. Enumerations outside libfabric's values print
// "Unknown", as fi_tostr does.

type bitName struct {
	bit  uint64
	name string
}

// capNames: fi_tostr's FI_TYPE_CAPS order, then the capability bits
// libfabric 1.x leaves out of it, then the operation and GetInfo flags.
var capNames = []bitName{
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
}

// opFlagNames: fi_tostr's FI_TYPE_OP_FLAGS order (bit 59 is FI_CLAIM, 58
// FI_DISCARD here).
var opFlagNames = []bitName{
	{uint64(Multicast), "FI_MULTICAST"}, {uint64(MultiRecv), "FI_MULTI_RECV"},
	{uint64(RemoteCQData), "FI_REMOTE_CQ_DATA"}, {uint64(More), "FI_MORE"}, {uint64(Peek), "FI_PEEK"},
	{uint64(Trigger), "FI_TRIGGER"}, {uint64(Fence), "FI_FENCE"}, {uint64(Completion), "FI_COMPLETION"},
	{uint64(Inject), "FI_INJECT"}, {uint64(InjectComplete), "FI_INJECT_COMPLETE"},
	{uint64(TransmitComplete), "FI_TRANSMIT_COMPLETE"}, {uint64(DeliveryComplete), "FI_DELIVERY_COMPLETE"},
	{uint64(MatchComplete), "FI_MATCH_COMPLETE"}, {uint64(Affinity), "FI_AFFINITY"},
	{uint64(Claim), "FI_CLAIM"}, {uint64(Discard), "FI_DISCARD"},
}

var modeNames = []bitName{
	{uint64(Context), "FI_CONTEXT"}, {uint64(MsgPrefix), "FI_MSG_PREFIX"}, {uint64(AsyncIOV), "FI_ASYNC_IOV"},
	{uint64(RxCQData), "FI_RX_CQ_DATA"}, {uint64(LocalMR), "FI_LOCAL_MR"},
	{uint64(NotifyFlagsOnly), "FI_NOTIFY_FLAGS_ONLY"}, {uint64(RestrictedComp), "FI_RESTRICTED_COMP"},
	{uint64(Context2), "FI_CONTEXT2"}, {uint64(BufferedRecv), "FI_BUFFERED_RECV"},
}

var orderNames = []bitName{
	{uint64(OrderRAR), "FI_ORDER_RAR"}, {uint64(OrderRAW), "FI_ORDER_RAW"}, {uint64(OrderRAS), "FI_ORDER_RAS"},
	{uint64(OrderWAR), "FI_ORDER_WAR"}, {uint64(OrderWAW), "FI_ORDER_WAW"}, {uint64(OrderWAS), "FI_ORDER_WAS"},
	{uint64(OrderSAR), "FI_ORDER_SAR"}, {uint64(OrderSAW), "FI_ORDER_SAW"}, {uint64(OrderSAS), "FI_ORDER_SAS"},
	{uint64(OrderData), "FI_ORDER_DATA"},
	{uint64(OrderRMARAR), "FI_ORDER_RMA_RAR"}, {uint64(OrderRMARAW), "FI_ORDER_RMA_RAW"},
	{uint64(OrderRMAWAR), "FI_ORDER_RMA_WAR"}, {uint64(OrderRMAWAW), "FI_ORDER_RMA_WAW"},
	{uint64(OrderAtomicRAR), "FI_ORDER_ATOMIC_RAR"}, {uint64(OrderAtomicRAW), "FI_ORDER_ATOMIC_RAW"},
	{uint64(OrderAtomicWAR), "FI_ORDER_ATOMIC_WAR"}, {uint64(OrderAtomicWAW), "FI_ORDER_ATOMIC_WAW"},
}

var mrModeNames = []bitName{
	{uint64(MRBasic), "FI_MR_BASIC"}, {uint64(MRScalable), "FI_MR_SCALABLE"}, {uint64(MRLocal), "FI_MR_LOCAL"},
	{uint64(MRRaw), "FI_MR_RAW"}, {uint64(MRVirtAddr), "FI_MR_VIRT_ADDR"}, {uint64(MRAllocated), "FI_MR_ALLOCATED"},
	{uint64(MRProvKey), "FI_MR_PROV_KEY"}, {uint64(MRMMUNotify), "FI_MR_MMU_NOTIFY"},
	{uint64(MRRMAEvent), "FI_MR_RMA_EVENT"}, {uint64(MREndpoint), "FI_MR_ENDPOINT"},
	{uint64(MRHMEM), "FI_MR_HMEM"}, {uint64(MRCollective), "FI_MR_COLLECTIVE"},
}

// bitNames lists the names of v's bits in table order, then any bit the
// table does not name in hex.
func bitNames(v uint64, table []bitName) []string {
	var out []string
	rest := v
	for _, b := range table {
		if v&b.bit != 0 && rest&b.bit != 0 {
			out = append(out, b.name)
			rest &^= b.bit
		}
	}
	for rest != 0 {
		low := rest & -rest
		out = append(out, "0x"+strconv.FormatUint(low, 16))
		rest &^= low
	}
	return out
}

// String spells the set like fi_tostr: "FI_MSG | FI_TAGGED"; "" for none.
func (f Flags) String() string { return strings.Join(bitNames(uint64(f), capNames), " | ") }

// String spells the set like fi_tostr: "FI_CONTEXT | FI_MSG_PREFIX".
func (m Mode) String() string { return strings.Join(bitNames(uint64(m), modeNames), " | ") }

// String spells the set like fi_tostr: "FI_ORDER_SAS".
func (o MsgOrder) String() string { return strings.Join(bitNames(uint64(o), orderNames), " | ") }

// String spells the set like fi_tostr: "FI_MR_LOCAL | FI_MR_VIRT_ADDR".
func (m MRMode) String() string { return strings.Join(bitNames(uint64(uint32(m)), mrModeNames), " | ") }

// String spells the completion order: FI_ORDER_NONE, FI_ORDER_STRICT,
// FI_ORDER_DATA.
func (c CompOrder) String() string { return strings.Join(compOrderNames(c), " | ") }

func compOrderNames(c CompOrder) []string {
	if c == CompOrderNone {
		return []string{"FI_ORDER_NONE"}
	}
	var out []string
	rest := uint64(c)
	if c&CompOrderStrict == CompOrderStrict {
		out = append(out, "FI_ORDER_STRICT")
		rest &^= uint64(CompOrderStrict)
	}
	if c&CompOrderData != 0 {
		out = append(out, "FI_ORDER_DATA")
		rest &^= uint64(CompOrderData)
	}
	return append(out, bitNames(rest, orderNames)...)
}

func enumName(v int, names []string) string {
	if v >= 0 && v < len(names) && names[v] != "" {
		return names[v]
	}
	return "Unknown"
}

var addrFormatNames = []string{
	"FI_FORMAT_UNSPEC", "FI_SOCKADDR", "FI_SOCKADDR_IN", "FI_SOCKADDR_IN6", "FI_SOCKADDR_IB",
	"FI_ADDR_PSMX", "FI_ADDR_GNI", "FI_ADDR_BGQ", "FI_ADDR_MLX", "FI_ADDR_STR", "FI_ADDR_PSMX2",
	"FI_ADDR_IB_UD", "FI_ADDR_EFA", "FI_ADDR_PSMX3", "FI_ADDR_OPX", "FI_ADDR_CXI",
}

// String spells the format like fi_tostr: "FI_SOCKADDR_IN".
func (a AddrFormat) String() string {
	if int64(a) >= int64(len(addrFormatNames)) {
		return "Unknown"
	}
	return addrFormatNames[a]
}

var epTypeNames = []string{"FI_EP_UNSPEC", "FI_EP_MSG", "FI_EP_DGRAM", "FI_EP_RDM", "FI_EP_SOCK_STREAM", "FI_EP_SOCK_DGRAM"}

// String spells the type like fi_tostr: "FI_EP_RDM".
func (e EpType) String() string { return enumName(int(e), epTypeNames) }

var protocolNames = []string{
	"FI_PROTO_UNSPEC", "FI_PROTO_RDMA_CM_IB_RC", "FI_PROTO_IWARP", "FI_PROTO_IB_UD", "FI_PROTO_PSMX",
	"FI_PROTO_UDP", "FI_PROTO_SOCK_TCP", "FI_PROTO_MXM", "FI_PROTO_IWARP_RDM", "FI_PROTO_IB_RDM",
	"FI_PROTO_GNI", "FI_PROTO_RXM", "FI_PROTO_RXD", "FI_PROTO_MLX", "FI_PROTO_NETWORKDIRECT",
	"FI_PROTO_PSMX2", "FI_PROTO_SHM", "FI_PROTO_MRAIL", "FI_PROTO_RSTREAM", "FI_PROTO_RDMA_CM_IB_XRC",
	"FI_PROTO_EFA", "FI_PROTO_PSMX3", "FI_PROTO_RXM_TCP", "FI_PROTO_OPX", "FI_PROTO_CXI", "FI_PROTO_XNET",
}

// String spells the protocol like fi_tostr: "FI_PROTO_SHM".
func (p Protocol) String() string {
	if int64(p) >= int64(len(protocolNames)) {
		return "Unknown"
	}
	return protocolNames[p]
}

var threadingNames = []string{"FI_THREAD_UNSPEC", "FI_THREAD_SAFE", "FI_THREAD_FID", "FI_THREAD_DOMAIN",
	"FI_THREAD_COMPLETION", "FI_THREAD_ENDPOINT"}

// String spells the model like fi_tostr: "FI_THREAD_DOMAIN".
func (t Threading) String() string { return enumName(int(t), threadingNames) }

var progressNames = []string{"FI_PROGRESS_UNSPEC", "FI_PROGRESS_AUTO", "FI_PROGRESS_MANUAL"}

// String spells the model like fi_tostr: "FI_PROGRESS_MANUAL".
func (p Progress) String() string { return enumName(int(p), progressNames) }

var rmNames = []string{"FI_RM_UNSPEC", "FI_RM_DISABLED", "FI_RM_ENABLED"}

// String spells the mode like fi_tostr: "FI_RM_ENABLED".
func (r ResourceMgmt) String() string { return enumName(int(r), rmNames) }

var avTypeNames = []string{"FI_AV_UNSPEC", "FI_AV_MAP", "FI_AV_TABLE"}

// String spells the type like fi_tostr: "FI_AV_TABLE".
func (a AVType) String() string { return enumName(int(a), avTypeNames) }

var busTypeNames = []string{"FI_BUS_UNSPEC", "FI_BUS_PCI"}

// String spells the bus type: "FI_BUS_PCI".
func (b BusType) String() string { return enumName(int(b), busTypeNames) }

var linkStateNames = []string{"FI_LINK_UNKNOWN", "FI_LINK_DOWN", "FI_LINK_UP"}

// String spells the link state: "FI_LINK_UP".
func (l LinkState) String() string { return enumName(int(l), linkStateNames) }

// String spells the traffic class: FI_TC_UNSPEC, FI_TC_BEST_EFFORT, ...,
// a DSCP value as FI_TC_DSCP(n), anything else in hex.
func (t TrafficClass) String() string {
	switch t {
	case TCUnspec:
		return "FI_TC_UNSPEC"
	case TCBestEffort:
		return "FI_TC_BEST_EFFORT"
	case TCLowLatency:
		return "FI_TC_LOW_LATENCY"
	case TCDedicatedAccess:
		return "FI_TC_DEDICATED_ACCESS"
	case TCBulkData:
		return "FI_TC_BULK_DATA"
	case TCScavenger:
		return "FI_TC_SCAVENGER"
	case TCNetworkCtrl:
		return "FI_TC_NETWORK_CTRL"
	}
	if t&^0xff == TCDSCP {
		return fmt.Sprintf("FI_TC_DSCP(%d)", uint8(t))
	}
	return fmt.Sprintf("0x%x", uint32(t))
}

// list renders names as fi_info does: "[ A, B ]", "[  ]" when empty.
func list(names []string) string {
	return "[ " + strings.Join(names, ", ") + " ]"
}

// infoWriter writes the fi_info -v layout: "key: value" lines indented by
// four spaces per level.
type infoWriter struct {
	b     strings.Builder
	depth int
}

func (w *infoWriter) line(key string, value any) {
	w.b.WriteString(strings.Repeat("    ", w.depth))
	w.b.WriteString(key)
	w.b.WriteString(":")
	if s := fmt.Sprint(value); s != "" {
		w.b.WriteString(" ")
		w.b.WriteString(s)
	}
	w.b.WriteString("\n")
}

// section opens a nested block, or prints "(null)" for a nil one.
func (w *infoWriter) section(key string, isNil bool) bool {
	if isNil {
		w.line(key, "(null)")
		return false
	}
	w.line(key, "")
	return true
}

func ptrStr(p any, isNil bool) string {
	if isNil {
		return "0x0"
	}
	return fmt.Sprintf("%p", p)
}

func (w *infoWriter) txAttr(a *TxAttr) {
	if !w.section("fi_tx_attr", a == nil) {
		return
	}
	w.depth++
	w.line("caps", list(bitNames(uint64(a.Caps), capNames)))
	w.line("mode", list(bitNames(uint64(a.Mode), modeNames)))
	w.line("op_flags", list(bitNames(uint64(a.OpFlags), opFlagNames)))
	w.line("msg_order", list(bitNames(uint64(a.MsgOrder), orderNames)))
	w.line("comp_order", list(compOrderNames(a.CompOrder)))
	w.line("inject_size", a.InjectSize)
	w.line("size", a.Size)
	w.line("iov_limit", a.IOVLimit)
	w.line("rma_iov_limit", a.RMAIOVLimit)
	w.line("tclass", fmt.Sprintf("0x%x", uint32(a.TClass)))
	w.depth--
}

func (w *infoWriter) rxAttr(a *RxAttr) {
	if !w.section("fi_rx_attr", a == nil) {
		return
	}
	w.depth++
	w.line("caps", list(bitNames(uint64(a.Caps), capNames)))
	w.line("mode", list(bitNames(uint64(a.Mode), modeNames)))
	w.line("op_flags", list(bitNames(uint64(a.OpFlags), opFlagNames)))
	w.line("msg_order", list(bitNames(uint64(a.MsgOrder), orderNames)))
	w.line("comp_order", list(compOrderNames(a.CompOrder)))
	w.line("total_buffered_recv", a.TotalBufferedRecv)
	w.line("size", a.Size)
	w.line("iov_limit", a.IOVLimit)
	w.depth--
}

func (w *infoWriter) epAttr(a *EpAttr) {
	if !w.section("fi_ep_attr", a == nil) {
		return
	}
	w.depth++
	w.line("type", a.Type)
	w.line("protocol", a.Protocol)
	w.line("protocol_version", a.ProtocolVersion)
	w.line("max_msg_size", a.MaxMsgSize)
	w.line("msg_prefix_size", a.MsgPrefixSize)
	w.line("max_order_raw_size", a.MaxOrderRAWSize)
	w.line("max_order_war_size", a.MaxOrderWARSize)
	w.line("max_order_waw_size", a.MaxOrderWAWSize)
	w.line("mem_tag_format", fmt.Sprintf("0x%016x", a.MemTagFormat))
	w.line("tx_ctx_cnt", a.TxCtxCnt)
	w.line("rx_ctx_cnt", a.RxCtxCnt)
	w.line("auth_key_size", max(a.AuthKeySize, len(a.AuthKey)))
	w.depth--
}

func (w *infoWriter) domainAttr(a *DomainAttr) {
	if !w.section("fi_domain_attr", a == nil) {
		return
	}
	w.depth++
	w.line("domain", ptrStr(a.Domain, a.Domain == nil))
	w.line("name", nullStr(a.Name))
	w.line("threading", a.Threading)
	w.line("control_progress", a.ControlProgress)
	w.line("data_progress", a.DataProgress)
	w.line("resource_mgmt", a.ResourceMgmt)
	w.line("av_type", a.AVType)
	w.line("mr_mode", list(bitNames(uint64(uint32(a.MRMode)), mrModeNames)))
	w.line("mr_key_size", a.MRKeySize)
	w.line("cq_data_size", a.CQDataSize)
	w.line("cq_cnt", a.CQCnt)
	w.line("ep_cnt", a.EpCnt)
	w.line("tx_ctx_cnt", a.TxCtxCnt)
	w.line("rx_ctx_cnt", a.RxCtxCnt)
	w.line("max_ep_tx_ctx", a.MaxEpTxCtx)
	w.line("max_ep_rx_ctx", a.MaxEpRxCtx)
	w.line("max_ep_stx_ctx", a.MaxEpStxCtx)
	w.line("max_ep_srx_ctx", a.MaxEpSrxCtx)
	w.line("cntr_cnt", a.CntrCnt)
	w.line("mr_iov_limit", a.MRIOVLimit)
	w.line("caps", list(bitNames(uint64(a.Caps), capNames)))
	w.line("mode", list(bitNames(uint64(a.Mode), modeNames)))
	w.line("auth_key_size", max(a.AuthKeySize, len(a.AuthKey)))
	w.line("max_err_data", a.MaxErrData)
	w.line("mr_cnt", a.MRCnt)
	w.line("tclass", fmt.Sprintf("0x%x", uint32(a.TClass)))
	w.depth--
}

func (w *infoWriter) fabricAttr(a *FabricAttr) {
	if !w.section("fi_fabric_attr", a == nil) {
		return
	}
	w.depth++
	w.line("name", nullStr(a.Name))
	w.line("prov_name", nullStr(a.ProvName))
	w.line("prov_version", versionStr(a.ProvVersion))
	w.line("api_version", versionStr(a.APIVersion))
	w.depth--
}

func (w *infoWriter) nic(n *Nic) {
	if n == nil {
		w.line("nic", "(nil)")
		return
	}
	w.line("nic", "")
	w.depth++
	if w.section("fi_device_attr", n.DeviceAttr == nil) {
		d := n.DeviceAttr
		w.depth++
		w.line("name", nullStr(d.Name))
		w.line("device_id", nullStr(d.DeviceID))
		w.line("device_version", nullStr(d.DeviceVersion))
		w.line("vendor_id", nullStr(d.VendorID))
		w.line("driver", nullStr(d.Driver))
		w.line("firmware", nullStr(d.Firmware))
		w.depth--
	}
	if w.section("fi_bus_attr", n.BusAttr == nil) {
		b := n.BusAttr
		w.depth++
		w.line("bus_type", b.BusType)
		if b.BusType == BusPCI {
			w.line("fi_pci_attr", "")
			w.depth++
			w.line("domain_id", b.PCI.DomainID)
			w.line("bus_id", b.PCI.BusID)
			w.line("device_id", b.PCI.DeviceID)
			w.line("function_id", b.PCI.FunctionID)
			w.depth--
		}
		w.depth--
	}
	if w.section("fi_link_attr", n.LinkAttr == nil) {
		l := n.LinkAttr
		w.depth++
		w.line("address", nullStr(l.Address))
		w.line("mtu", l.MTU)
		w.line("speed", l.Speed)
		w.line("state", l.State)
		w.line("network_type", nullStr(l.NetworkType))
		w.depth--
	}
	w.depth--
}

func nullStr(s string) string {
	if s == "" {
		return "(null)"
	}
	return s
}

func versionStr(v uint32) string { return fmt.Sprintf("%d.%d", Major(v), Minor(v)) }

// String renders info in the YAML-like layout of fi_info -v (fi_tostr
// FI_TYPE_INFO): "fi_info:" then its fields and attribute blocks indented
// by four spaces. A nil info reads "(null)".
func (info *Info) String() string {
	if info == nil {
		return "(null)"
	}
	w := &infoWriter{}
	w.line("fi_info", "")
	w.depth++
	w.line("caps", list(bitNames(uint64(info.Caps), capNames)))
	w.line("mode", list(bitNames(uint64(info.Mode), modeNames)))
	w.line("addr_format", info.AddrFormat)
	w.line("src_addrlen", len(info.SrcAddr))
	w.line("dest_addrlen", len(info.DestAddr))
	w.line("src_addr", straddr(info.AddrFormat, info.SrcAddr))
	w.line("dest_addr", straddr(info.AddrFormat, info.DestAddr))
	if info.Handle == nil {
		w.line("handle", "(nil)")
	} else {
		w.line("handle", fmt.Sprintf("%T", info.Handle))
	}
	w.txAttr(info.TxAttr)
	w.rxAttr(info.RxAttr)
	w.epAttr(info.EpAttr)
	w.domainAttr(info.DomainAttr)
	w.fabricAttr(info.FabricAttr)
	w.nic(info.Nic)
	return w.b.String()
}

// String renders the attributes like fi_tostr(FI_TYPE_TX_ATTR).
func (a *TxAttr) String() string { w := &infoWriter{}; w.txAttr(a); return w.b.String() }

// String renders the attributes like fi_tostr(FI_TYPE_RX_ATTR).
func (a *RxAttr) String() string { w := &infoWriter{}; w.rxAttr(a); return w.b.String() }

// String renders the attributes like fi_tostr(FI_TYPE_EP_ATTR).
func (a *EpAttr) String() string { w := &infoWriter{}; w.epAttr(a); return w.b.String() }

// String renders the attributes like fi_tostr(FI_TYPE_DOMAIN_ATTR).
func (a *DomainAttr) String() string { w := &infoWriter{}; w.domainAttr(a); return w.b.String() }

// String renders the attributes like fi_tostr(FI_TYPE_FABRIC_ATTR).
func (a *FabricAttr) String() string { w := &infoWriter{}; w.fabricAttr(a); return w.b.String() }

// ToStr returns v in libfabric's fi_tostr spelling, dispatching on its
// type: every enum and bit-set type of the package, *Info and the
// attribute structs (fi_info -v layout), and Errno (its text). Other
// values print with fmt's %v. Safe for concurrent use.
func ToStr(v any) string {
	switch x := v.(type) {
	case Info:
		return x.String()
	case TxAttr:
		return x.String()
	case RxAttr:
		return x.String()
	case EpAttr:
		return x.String()
	case DomainAttr:
		return x.String()
	case FabricAttr:
		return x.String()
	case fmt.Stringer:
		return x.String()
	case error:
		return x.Error()
	}
	return fmt.Sprint(v)
}

// VersionString returns the library version, "major.minor.revision"
// (like fi_tostr of FI_TYPE_VERSION).
func VersionString() string {
	return fmt.Sprintf("%d.%d.%d", MajorVersion, MinorVersion, RevisionVersion)
}

// flagNames maps every spelling ParseFlags accepts to its bits: the names
// String prints plus libfabric's aliases.
var flagNames = func() map[string]Flags {
	m := map[string]Flags{}
	for _, tab := range [][]bitName{capNames, opFlagNames} {
		for _, b := range tab {
			m[b.name] = Flags(b.bit)
		}
	}
	for n, f := range map[string]Flags{
		"FI_ATOMICS": Atomic, "FI_TRANSMIT": Transmit, "FI_EVENT": Completion,
		"FI_SELECTIVE_COMPLETION": SelectiveCompletion, "FI_SYMMETRIC": Symmetric, "FI_SYNC_ERR": SyncErr,
		"FI_UNIVERSE": Universe, "FI_XPU_TRIGGER": XPU,
	} {
		m[n] = f
	}
	return m
}()

// splitNames splits "A|B", "A | B", "A, B" or "[ A, B ]" into names.
func splitNames(s string) []string {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	return strings.FieldsFunc(s, func(r rune) bool { return r == '|' || r == ',' || r == ' ' || r == '\t' })
}

// parseBits parses a set of names (or 0x hex values) against names.
func parseBits(op, s string, lookup func(string) (uint64, bool)) (uint64, error) {
	var v uint64
	for _, n := range splitNames(s) {
		if b, ok := lookup(strings.ToUpper(n)); ok {
			v |= b
			continue
		}
		if strings.HasPrefix(n, "0x") {
			if b, err := strconv.ParseUint(n[2:], 16, 64); err == nil {
				v |= b
				continue
			}
		}
		return 0, opErr(op, ErrInval, "unrecognized name %q", n)
	}
	return v, nil
}

// ParseFlags parses capability and operation-flag names as String and
// fi_info print them ("FI_MSG|FI_TAGGED", "FI_MSG | FI_TAGGED",
// "[ FI_MSG, FI_TAGGED ]"), case-insensitively, plus libfabric's aliases
// (FI_TRANSMIT, FI_SELECTIVE_COMPLETION, ...) and 0x hex values. An
// unknown name gives ErrInval; "" gives 0.
func ParseFlags(s string) (Flags, error) {
	v, err := parseBits("ParseFlags", s, func(n string) (uint64, bool) {
		f, ok := flagNames[n]
		return uint64(f), ok
	})
	return Flags(v), err
}

// ParseMode parses mode names ("FI_CONTEXT|FI_MSG_PREFIX") like ParseFlags.
func ParseMode(s string) (Mode, error) {
	v, err := parseBits("ParseMode", s, func(n string) (uint64, bool) {
		for _, b := range modeNames {
			if b.name == n {
				return b.bit, true
			}
		}
		return 0, false
	})
	return Mode(v), err
}

func parseEnum(op, s string, names []string) (int, error) {
	n := strings.ToUpper(strings.TrimSpace(s))
	for i, name := range names {
		if name == n {
			return i, nil
		}
	}
	return 0, opErr(op, ErrInval, "unrecognized name %q", s)
}

// ParseEpType parses an endpoint type name such as "FI_EP_RDM"; an
// unknown name gives ErrInval.
func ParseEpType(s string) (EpType, error) {
	v, err := parseEnum("ParseEpType", s, epTypeNames)
	return EpType(v), err
}

// ParseAddrFormat parses an address format name such as "FI_SOCKADDR_IN";
// an unknown name gives ErrInval.
func ParseAddrFormat(s string) (AddrFormat, error) {
	v, err := parseEnum("ParseAddrFormat", s, addrFormatNames)
	return AddrFormat(v), err
}
