package fi

import (
	"fmt"
	"strings"

	"github.com/gofi-dev/fi/internal/tostr"
)

// Strings in libfabric's fi_tostr(3) spelling. Bit sets list their names
// in fi_tostr's order; String joins them with " | " (FI_MSG | FI_TAGGED),
// while the fi_info -v layout of (*Info).String lists them as
// [ FI_MSG, FI_TAGGED ], as fi_info does. Bits without a name print in
// hex, so nothing is lost. Enumerations outside libfabric's values print
// "Unknown", as fi_tostr does.

// The tables and the fi_info -v writer live in internal/tostr.

// String spells the set like fi_tostr: "FI_MSG | FI_TAGGED"; "" for none.
func (f Flags) String() string { return tostr.Join(uint64(f), tostr.Caps) }

// String spells the set like fi_tostr: "FI_CONTEXT | FI_MSG_PREFIX".
func (m Mode) String() string { return tostr.Join(uint64(m), tostr.Modes) }

// String spells the set like fi_tostr: "FI_ORDER_SAS".
func (o MsgOrder) String() string { return tostr.Join(uint64(o), tostr.Orders) }

// String spells the set like fi_tostr: "FI_MR_LOCAL | FI_MR_VIRT_ADDR".
func (m MRMode) String() string { return tostr.Join(uint64(uint32(m)), tostr.MRModes) }

// String spells the completion order: FI_ORDER_NONE, FI_ORDER_STRICT,
// FI_ORDER_DATA.
func (c CompOrder) String() string { return strings.Join(tostr.CompOrder(uint64(c)), " | ") }

// String spells the format like fi_tostr: "FI_SOCKADDR_IN".
func (a AddrFormat) String() string { return tostr.Enum(int64(a), tostr.AddrFormats) }

// String spells the type like fi_tostr: "FI_EP_RDM".
func (e EpType) String() string { return tostr.Enum(int64(e), tostr.EpTypes) }

// String spells the protocol like fi_tostr: "FI_PROTO_SHM".
func (p Protocol) String() string { return tostr.Enum(int64(p), tostr.Protocols) }

// String spells the model like fi_tostr: "FI_THREAD_DOMAIN".
func (t Threading) String() string { return tostr.Enum(int64(t), tostr.Threadings) }

// String spells the model like fi_tostr: "FI_PROGRESS_MANUAL".
func (p Progress) String() string { return tostr.Enum(int64(p), tostr.Progresses) }

// String spells the mode like fi_tostr: "FI_RM_ENABLED".
func (r ResourceMgmt) String() string { return tostr.Enum(int64(r), tostr.ResourceMgmts) }

// String spells the type like fi_tostr: "FI_AV_TABLE".
func (a AVType) String() string { return tostr.Enum(int64(a), tostr.AVTypes) }

// String spells the bus type: "FI_BUS_PCI".
func (b BusType) String() string { return tostr.Enum(int64(b), tostr.BusTypes) }

// String spells the link state: "FI_LINK_UP".
func (l LinkState) String() string { return tostr.Enum(int64(l), tostr.LinkStates) }

// String spells the traffic class: FI_TC_UNSPEC, FI_TC_BEST_EFFORT, ...,
// a DSCP value as FI_TC_DSCP(n), anything else in hex.
func (t TrafficClass) String() string { return tostr.TrafficClass(uint32(t)) }

// infoWriter writes the fi_info -v blocks of the attribute structs.
type infoWriter struct{ tostr.Writer }

func (w *infoWriter) txAttr(a *TxAttr) {
	if !w.Section("fi_tx_attr", a == nil) {
		return
	}
	w.Depth++
	w.Line("caps", tostr.List(tostr.Bits(uint64(a.Caps), tostr.Caps)))
	w.Line("mode", tostr.List(tostr.Bits(uint64(a.Mode), tostr.Modes)))
	w.Line("op_flags", tostr.List(tostr.Bits(uint64(a.OpFlags), tostr.OpFlags)))
	w.Line("msg_order", tostr.List(tostr.Bits(uint64(a.MsgOrder), tostr.Orders)))
	w.Line("comp_order", tostr.List(tostr.CompOrder(uint64(a.CompOrder))))
	w.Line("inject_size", a.InjectSize)
	w.Line("size", a.Size)
	w.Line("iov_limit", a.IOVLimit)
	w.Line("rma_iov_limit", a.RMAIOVLimit)
	w.Line("tclass", fmt.Sprintf("0x%x", uint32(a.TClass)))
	w.Depth--
}

func (w *infoWriter) rxAttr(a *RxAttr) {
	if !w.Section("fi_rx_attr", a == nil) {
		return
	}
	w.Depth++
	w.Line("caps", tostr.List(tostr.Bits(uint64(a.Caps), tostr.Caps)))
	w.Line("mode", tostr.List(tostr.Bits(uint64(a.Mode), tostr.Modes)))
	w.Line("op_flags", tostr.List(tostr.Bits(uint64(a.OpFlags), tostr.OpFlags)))
	w.Line("msg_order", tostr.List(tostr.Bits(uint64(a.MsgOrder), tostr.Orders)))
	w.Line("comp_order", tostr.List(tostr.CompOrder(uint64(a.CompOrder))))
	w.Line("total_buffered_recv", a.TotalBufferedRecv)
	w.Line("size", a.Size)
	w.Line("iov_limit", a.IOVLimit)
	w.Depth--
}

func (w *infoWriter) epAttr(a *EpAttr) {
	if !w.Section("fi_ep_attr", a == nil) {
		return
	}
	w.Depth++
	w.Line("type", a.Type)
	w.Line("protocol", a.Protocol)
	w.Line("protocol_version", a.ProtocolVersion)
	w.Line("max_msg_size", a.MaxMsgSize)
	w.Line("msg_prefix_size", a.MsgPrefixSize)
	w.Line("max_order_raw_size", a.MaxOrderRAWSize)
	w.Line("max_order_war_size", a.MaxOrderWARSize)
	w.Line("max_order_waw_size", a.MaxOrderWAWSize)
	w.Line("mem_tag_format", fmt.Sprintf("0x%016x", a.MemTagFormat))
	w.Line("tx_ctx_cnt", a.TxCtxCnt)
	w.Line("rx_ctx_cnt", a.RxCtxCnt)
	w.Line("auth_key_size", max(a.AuthKeySize, len(a.AuthKey)))
	w.Depth--
}

func (w *infoWriter) domainAttr(a *DomainAttr) {
	if !w.Section("fi_domain_attr", a == nil) {
		return
	}
	w.Depth++
	w.Line("domain", tostr.Ptr(a.Domain, a.Domain == nil))
	w.Line("name", tostr.Null(a.Name))
	w.Line("threading", a.Threading)
	w.Line("control_progress", a.ControlProgress)
	w.Line("data_progress", a.DataProgress)
	w.Line("resource_mgmt", a.ResourceMgmt)
	w.Line("av_type", a.AVType)
	w.Line("mr_mode", tostr.List(tostr.Bits(uint64(uint32(a.MRMode)), tostr.MRModes)))
	w.Line("mr_key_size", a.MRKeySize)
	w.Line("cq_data_size", a.CQDataSize)
	w.Line("cq_cnt", a.CQCnt)
	w.Line("ep_cnt", a.EpCnt)
	w.Line("tx_ctx_cnt", a.TxCtxCnt)
	w.Line("rx_ctx_cnt", a.RxCtxCnt)
	w.Line("max_ep_tx_ctx", a.MaxEpTxCtx)
	w.Line("max_ep_rx_ctx", a.MaxEpRxCtx)
	w.Line("max_ep_stx_ctx", a.MaxEpStxCtx)
	w.Line("max_ep_srx_ctx", a.MaxEpSrxCtx)
	w.Line("cntr_cnt", a.CntrCnt)
	w.Line("mr_iov_limit", a.MRIOVLimit)
	w.Line("caps", tostr.List(tostr.Bits(uint64(a.Caps), tostr.Caps)))
	w.Line("mode", tostr.List(tostr.Bits(uint64(a.Mode), tostr.Modes)))
	w.Line("auth_key_size", max(a.AuthKeySize, len(a.AuthKey)))
	w.Line("max_err_data", a.MaxErrData)
	w.Line("mr_cnt", a.MRCnt)
	w.Line("tclass", fmt.Sprintf("0x%x", uint32(a.TClass)))
	w.Depth--
}

func (w *infoWriter) fabricAttr(a *FabricAttr) {
	if !w.Section("fi_fabric_attr", a == nil) {
		return
	}
	w.Depth++
	w.Line("name", tostr.Null(a.Name))
	w.Line("prov_name", tostr.Null(a.ProvName))
	w.Line("prov_version", versionStr(a.ProvVersion))
	w.Line("api_version", versionStr(a.APIVersion))
	w.Depth--
}

func (w *infoWriter) nic(n *Nic) {
	if n == nil {
		w.Line("nic", "(nil)")
		return
	}
	w.Line("nic", "")
	w.Depth++
	if w.Section("fi_device_attr", n.DeviceAttr == nil) {
		d := n.DeviceAttr
		w.Depth++
		w.Line("name", tostr.Null(d.Name))
		w.Line("device_id", tostr.Null(d.DeviceID))
		w.Line("device_version", tostr.Null(d.DeviceVersion))
		w.Line("vendor_id", tostr.Null(d.VendorID))
		w.Line("driver", tostr.Null(d.Driver))
		w.Line("firmware", tostr.Null(d.Firmware))
		w.Depth--
	}
	if w.Section("fi_bus_attr", n.BusAttr == nil) {
		b := n.BusAttr
		w.Depth++
		w.Line("bus_type", b.BusType)
		if b.BusType == BusPCI {
			w.Line("fi_pci_attr", "")
			w.Depth++
			w.Line("domain_id", b.PCI.DomainID)
			w.Line("bus_id", b.PCI.BusID)
			w.Line("device_id", b.PCI.DeviceID)
			w.Line("function_id", b.PCI.FunctionID)
			w.Depth--
		}
		w.Depth--
	}
	if w.Section("fi_link_attr", n.LinkAttr == nil) {
		l := n.LinkAttr
		w.Depth++
		w.Line("address", tostr.Null(l.Address))
		w.Line("mtu", l.MTU)
		w.Line("speed", l.Speed)
		w.Line("state", l.State)
		w.Line("network_type", tostr.Null(l.NetworkType))
		w.Depth--
	}
	w.Depth--
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
	w.Line("fi_info", "")
	w.Depth++
	w.Line("caps", tostr.List(tostr.Bits(uint64(info.Caps), tostr.Caps)))
	w.Line("mode", tostr.List(tostr.Bits(uint64(info.Mode), tostr.Modes)))
	w.Line("addr_format", info.AddrFormat)
	w.Line("src_addrlen", len(info.SrcAddr))
	w.Line("dest_addrlen", len(info.DestAddr))
	w.Line("src_addr", straddr(info.AddrFormat, info.SrcAddr))
	w.Line("dest_addr", straddr(info.AddrFormat, info.DestAddr))
	if info.Handle == nil {
		w.Line("handle", "(nil)")
	} else {
		w.Line("handle", fmt.Sprintf("%T", info.Handle))
	}
	w.txAttr(info.TxAttr)
	w.rxAttr(info.RxAttr)
	w.epAttr(info.EpAttr)
	w.domainAttr(info.DomainAttr)
	w.fabricAttr(info.FabricAttr)
	w.nic(info.Nic)
	return w.String()
}

// String renders the attributes like fi_tostr(FI_TYPE_TX_ATTR).
func (a *TxAttr) String() string { w := &infoWriter{}; w.txAttr(a); return w.String() }

// String renders the attributes like fi_tostr(FI_TYPE_RX_ATTR).
func (a *RxAttr) String() string { w := &infoWriter{}; w.rxAttr(a); return w.String() }

// String renders the attributes like fi_tostr(FI_TYPE_EP_ATTR).
func (a *EpAttr) String() string { w := &infoWriter{}; w.epAttr(a); return w.String() }

// String renders the attributes like fi_tostr(FI_TYPE_DOMAIN_ATTR).
func (a *DomainAttr) String() string { w := &infoWriter{}; w.domainAttr(a); return w.String() }

// String renders the attributes like fi_tostr(FI_TYPE_FABRIC_ATTR).
func (a *FabricAttr) String() string { w := &infoWriter{}; w.fabricAttr(a); return w.String() }

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

// ParseFlags parses capability and operation-flag names as String and
// fi_info print them ("FI_MSG|FI_TAGGED", "FI_MSG | FI_TAGGED",
// "[ FI_MSG, FI_TAGGED ]"), case-insensitively, plus libfabric's aliases
// (FI_TRANSMIT, FI_SELECTIVE_COMPLETION, ...) and 0x hex values. An
// unknown name gives ErrInval; "" gives 0.
func ParseFlags(s string) (Flags, error) {
	v, bad, ok := tostr.ParseFlags(s)
	if !ok {
		return 0, opErr("ParseFlags", ErrInval, "unrecognized name %q", bad)
	}
	return Flags(v), nil
}

// ParseMode parses mode names ("FI_CONTEXT|FI_MSG_PREFIX") like ParseFlags.
func ParseMode(s string) (Mode, error) {
	v, bad, ok := tostr.ParseModes(s)
	if !ok {
		return 0, opErr("ParseMode", ErrInval, "unrecognized name %q", bad)
	}
	return Mode(v), nil
}

func parseEnum(op, s string, names []string) (int, error) {
	if v, ok := tostr.ParseEnum(s, names); ok {
		return v, nil
	}
	return 0, opErr(op, ErrInval, "unrecognized name %q", s)
}

// ParseEpType parses an endpoint type name such as "FI_EP_RDM"; an
// unknown name gives ErrInval.
func ParseEpType(s string) (EpType, error) {
	v, err := parseEnum("ParseEpType", s, tostr.EpTypes)
	return EpType(v), err
}

// ParseAddrFormat parses an address format name such as "FI_SOCKADDR_IN";
// an unknown name gives ErrInval.
func ParseAddrFormat(s string) (AddrFormat, error) {
	v, err := parseEnum("ParseAddrFormat", s, tostr.AddrFormats)
	return AddrFormat(v), err
}
