package fi

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// rdmLimits are the per-provider numbers of an RDM template.
type rdmLimits struct {
	injectSize, queueSize, iovLimit int
	epCnt, cqCnt, cqDataSize        int
}

// Default operation flags gofi's providers accept in hints.
const (
	rdmTxOpFlags = Completion | Inject | InjectComplete | TransmitComplete
	rdmRxOpFlags = Completion | MultiRecv
)

// Capability bits that belong on the transmit and receive sides.
const (
	txSideCaps = Msg | Tagged | Collective | Send | RemoteCQData | RMA | Atomic | Read | Write | Fence
	rxSideCaps = Msg | Tagged | Collective | Recv | DirectedRecv | MultiRecv | Source | RemoteCQData | AVUserID |
		RMA | Atomic | RemoteRead | RemoteWrite | RMAEvent
)

// optionalModes are modes a provider honours when the application offers
// them, and otherwise does without: FI_RX_CQ_DATA makes remote CQ data of
// RMA writes consume posted receives.
const optionalModes = RxCQData

// genericTagFormat is FI_TAG_GENERIC: all 64 tag bits are the
// application's.
const genericTagFormat = 0xaaaaaaaaaaaaaaaa

// rdmTemplate builds the info both providers start from: an RDM endpoint
// with message and tagged queues, send-after-send ordering, manual data
// progress (matching happens in the application's CQ calls), automatic
// control progress, FI_THREAD_DOMAIN by default, no memory registration.
func rdmTemplate(caps, domCaps Flags, l rdmLimits) *Info {
	return &Info{
		Caps: caps,
		TxAttr: &TxAttr{
			Caps:       caps & txSideCaps,
			MsgOrder:   OrderSAS,
			CompOrder:  CompOrderNone,
			InjectSize: l.injectSize,
			Size:       l.queueSize,
			IOVLimit:   l.iovLimit,
		},
		RxAttr: &RxAttr{
			Caps:      caps & rxSideCaps,
			MsgOrder:  OrderSAS,
			CompOrder: CompOrderNone,
			Size:      l.queueSize,
			IOVLimit:  l.iovLimit,
		},
		EpAttr: &EpAttr{
			Type:            EpRDM,
			ProtocolVersion: 1,
			MaxMsgSize:      math.MaxInt,
			MemTagFormat:    genericTagFormat,
			TxCtxCnt:        1,
			RxCtxCnt:        1,
		},
		DomainAttr: &DomainAttr{
			Threading:       ThreadDomain,
			ControlProgress: ProgressAuto,
			DataProgress:    ProgressManual,
			ResourceMgmt:    RMEnabled,
			AVType:          AVUnspec,
			CQDataSize:      l.cqDataSize,
			CQCnt:           l.cqCnt,
			EpCnt:           l.epCnt,
			TxCtxCnt:        l.epCnt,
			RxCtxCnt:        l.epCnt,
			MaxEpTxCtx:      1,
			MaxEpRxCtx:      1,
			Caps:            domCaps,
			MRKeySize:       8, // any 64-bit key (mr.go)
			MRIOVLimit:      mrIOVLimit,
			MRCnt:           mrSlots,
			CntrCnt:         cntrSlots,
		},
		FabricAttr: &FabricAttr{},
	}
}

// getInfoFlags are the flags GetInfo accepts.
const getInfoFlags = NumericHost | Source | ProvAttrOnly

// GetInfo returns the ways this machine can reach node/service that
// satisfy hints (fi_getinfo(3)), best first: shm before tcp when both can
// serve. It is safe to call from many goroutines at once.
//
//   - version: the API version the application is written to; newer than
//     Version(MajorVersion, MinorVersion) gives ErrNoSys.
//   - node, service: the address to reach (or, with Source, the local
//     address). node may be an FI_ADDR_STR such as
//     "fi_sockaddr_in://10.31.6.12:7471"; service must then be empty
//     (ErrInval otherwise).
//   - flags: NumericHost (node is an address; no name resolution), Source
//     (node/service name the local address; one of them is required), and
//     ProvAttrOnly (one info per provider with its defaults). Other bits
//     give ErrBadFlags.
//   - hints: nil or zero fields are wildcards, except Mode, which lists the
//     modes the application supports. A non-zero hint must be supported
//     or the candidate is left out. Primary capabilities must be asked
//     for; with zero Caps a provider reports everything it supports.
//
// The environment variable FI_PROVIDER ("shm,tcp", "^tcp") and
// hints.FabricAttr.ProvName (layered names such as "ofi_rxm;tcp" accepted)
// restrict the providers. The linked provider "shm+tcp" (one endpoint: shm
// to peers on this host, tcp to the others) is offered when asked for: by
// either of those naming it, or by hints.Caps holding both LocalComm and
// RemoteComm, which puts it first. Candidates are checked in libfabric's order:
// fabric and domain names, endpoint type, capabilities, required modes,
// address format, domain levels (threading, progress, ...), then size
// limits. When nothing matches, the result is nil and the error wraps
// ErrNoData, its detail naming each provider's first failed check.
func GetInfo(version uint32, node, service string, flags Flags, hints *Info) ([]*Info, error) {
	const op = "GetInfo"
	if version > Version(MajorVersion, MinorVersion) {
		return nil, opErr(op, ErrNoSys, "version %d.%d is newer than the library's %d.%d",
			Major(version), Minor(version), MajorVersion, MinorVersion)
	}
	if Major(version) < 1 {
		return nil, opErr(op, ErrInval, "version %d.%d is not a libfabric API version", Major(version), Minor(version))
	}
	if bad := flags &^ getInfoFlags; bad != 0 {
		return nil, opErr(op, ErrBadFlags, "flags %s are not GetInfo flags", bad)
	}
	req := &infoReq{version: version, node: node, service: service, flags: flags}
	if flags&Source != 0 && node == "" && service == "" && flags&ProvAttrOnly == 0 {
		return nil, opErr(op, ErrInval, "FI_SOURCE needs a node or a service")
	}
	if strings.Contains(node, "://") {
		a, err := ParseAddrStr(node)
		if err != nil {
			return nil, err
		}
		if !IsAddrStr(node) {
			return nil, opErr(op, ErrInval, "node %q has an unknown address format %q", node, a.Format)
		}
		if service != "" {
			return nil, opErr(op, ErrInval, "service %q given with FI_ADDR_STR node %q: must be empty", service, node)
		}
		req.nodeStr = &a
	}
	h, err := normalizeHints(hints)
	if err != nil {
		return nil, err
	}
	req.hints = h
	provs := selectProviders(hints, flags&ProvAttrOnly != 0)
	if flags&ProvAttrOnly != 0 {
		if len(provs) == 0 {
			return nil, opErr(op, ErrNoData, "no provider selected (FI_PROVIDER or ProvName)")
		}
		out := make([]*Info, 0, len(provs))
		for _, p := range provs {
			d := p.defaults()
			d.FabricAttr = &FabricAttr{ProvName: p.name(), ProvVersion: p.version(), APIVersion: version}
			out = append(out, d)
		}
		return out, nil
	}
	var out []*Info
	var reasons []string
	for _, p := range provs {
		cands, err := p.getInfo(req)
		if err != nil {
			reasons = append(reasons, detailOf(err))
			continue
		}
		var first string
		for _, c := range cands {
			info, why := matchInfo(c, req, hints != nil)
			if info == nil {
				if first == "" {
					first = fmt.Sprintf("%s: %s", p.name(), why)
				}
				continue
			}
			info.FabricAttr.APIVersion = version
			out = append(out, info)
		}
		if first != "" {
			reasons = append(reasons, first)
		}
	}
	if len(out) == 0 {
		if len(provs) == 0 {
			reasons = append(reasons, "no provider selected (FI_PROVIDER or ProvName)")
		}
		return nil, opErr(op, ErrNoData, "no match: %s", strings.Join(reasons, "; "))
	}
	if hints != nil && hints.Caps&(LocalComm|RemoteComm) == LocalComm|RemoteComm {
		linkedFirst(out)
	}
	return out, nil
}

// linkedFirst moves the linked shm+tcp infos to the front, in order: they
// serve hints asking for local and remote communication best (one
// endpoint, shm to local peers). Otherwise they follow shm and tcp.
func linkedFirst(out []*Info) {
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].FabricAttr.ProvName == linkName && out[j].FabricAttr.ProvName != linkName
	})
}

// detailOf returns the detail of an *OpError, or its text.
func detailOf(err error) string {
	if oe, ok := err.(*OpError); ok && oe.Detail != "" {
		return oe.Detail
	}
	return err.Error()
}

// normalizeHints returns a copy of hints with every attribute struct
// allocated (zero means wildcard), after checking the values make sense:
// negative sizes give ErrInval.
func normalizeHints(hints *Info) (*Info, error) {
	h := AllocInfo()
	if hints != nil {
		h = hints.Dup()
		if h.TxAttr == nil {
			h.TxAttr = &TxAttr{}
		}
		if h.RxAttr == nil {
			h.RxAttr = &RxAttr{}
		}
		if h.EpAttr == nil {
			h.EpAttr = &EpAttr{}
		}
		if h.DomainAttr == nil {
			h.DomainAttr = &DomainAttr{}
		}
		if h.FabricAttr == nil {
			h.FabricAttr = &FabricAttr{}
		}
	}
	t, r, e, d := h.TxAttr, h.RxAttr, h.EpAttr, h.DomainAttr
	for _, f := range []struct {
		name string
		v    int
	}{
		{"TxAttr.InjectSize", t.InjectSize}, {"TxAttr.Size", t.Size}, {"TxAttr.IOVLimit", t.IOVLimit},
		{"TxAttr.RMAIOVLimit", t.RMAIOVLimit}, {"RxAttr.TotalBufferedRecv", r.TotalBufferedRecv},
		{"RxAttr.Size", r.Size}, {"RxAttr.IOVLimit", r.IOVLimit}, {"EpAttr.MaxMsgSize", e.MaxMsgSize},
		{"EpAttr.MsgPrefixSize", e.MsgPrefixSize}, {"EpAttr.MaxOrderRAWSize", e.MaxOrderRAWSize},
		{"EpAttr.MaxOrderWARSize", e.MaxOrderWARSize}, {"EpAttr.MaxOrderWAWSize", e.MaxOrderWAWSize},
		{"EpAttr.AuthKeySize", e.AuthKeySize}, {"DomainAttr.MRKeySize", d.MRKeySize},
		{"DomainAttr.CQDataSize", d.CQDataSize}, {"DomainAttr.CQCnt", d.CQCnt}, {"DomainAttr.EpCnt", d.EpCnt},
		{"DomainAttr.TxCtxCnt", d.TxCtxCnt}, {"DomainAttr.RxCtxCnt", d.RxCtxCnt},
		{"DomainAttr.MaxEpTxCtx", d.MaxEpTxCtx}, {"DomainAttr.MaxEpRxCtx", d.MaxEpRxCtx},
		{"DomainAttr.MaxEpStxCtx", d.MaxEpStxCtx}, {"DomainAttr.MaxEpSrxCtx", d.MaxEpSrxCtx},
		{"DomainAttr.CntrCnt", d.CntrCnt}, {"DomainAttr.MRIOVLimit", d.MRIOVLimit},
		{"DomainAttr.AuthKeySize", d.AuthKeySize}, {"DomainAttr.MaxErrData", d.MaxErrData},
		{"DomainAttr.MRCnt", d.MRCnt},
	} {
		if f.v < 0 {
			return nil, opErr("GetInfo", ErrInval, "hints %s is negative (%d)", f.name, f.v)
		}
	}
	if e.TxCtxCnt < 0 && e.TxCtxCnt != SharedContext || e.RxCtxCnt < 0 && e.RxCtxCnt != SharedContext {
		return nil, opErr("GetInfo", ErrInval, "hints EpAttr context counts must be >= 0 or SharedContext")
	}
	return h, nil
}

// matchInfo applies the hints to one candidate, in libfabric's order, and
// returns the info to report, or nil and the first check that failed.
// userHints is false when the application passed nil hints.
func matchInfo(c *provInfo, req *infoReq, userHints bool) (*Info, string) {
	h := req.hints
	t := c.info // template, a fresh copy owned by this request

	// fabric and domain identity
	if n := h.FabricAttr.Name; n != "" && n != t.FabricAttr.Name {
		return nil, fmt.Sprintf("fabric name %q is not %q", n, t.FabricAttr.Name)
	}
	if f := h.FabricAttr.Fabric; f != nil && !f.open() {
		return nil, "hints FabricAttr.Fabric is not an open fabric"
	}
	if d := h.DomainAttr.Domain; d != nil && !d.open() {
		return nil, "hints DomainAttr.Domain is not an open domain"
	}
	if f := h.FabricAttr.Fabric; f != nil && (f.prov.name() != t.FabricAttr.ProvName || f.attr.Name != t.FabricAttr.Name) {
		return nil, fmt.Sprintf("hints name open fabric %q, not %q", f.attr.Name, t.FabricAttr.Name)
	}
	if v := h.FabricAttr.ProvVersion; v != 0 && v > t.FabricAttr.ProvVersion {
		return nil, fmt.Sprintf("provider version %d.%d is newer than %d.%d", Major(v), Minor(v),
			Major(t.FabricAttr.ProvVersion), Minor(t.FabricAttr.ProvVersion))
	}
	if v := h.FabricAttr.APIVersion; v != 0 && v > Version(MajorVersion, MinorVersion) {
		return nil, fmt.Sprintf("API version %d.%d is newer than the library's", Major(v), Minor(v))
	}
	if n := h.DomainAttr.Name; n != "" && n != t.DomainAttr.Name {
		return nil, fmt.Sprintf("domain name %q is not %q", n, t.DomainAttr.Name)
	}
	if d := h.DomainAttr.Domain; d != nil && (d.fabric.prov.name() != t.FabricAttr.ProvName ||
		d.info.DomainAttr.Name != t.DomainAttr.Name || d.fabric.attr.Name != t.FabricAttr.Name) {
		return nil, fmt.Sprintf("hints name open domain %q, not %q", d.info.DomainAttr.Name, t.DomainAttr.Name)
	}

	// endpoint type
	if ty := h.EpAttr.Type; ty != EpUnspec && ty != t.EpAttr.Type {
		return nil, fmt.Sprintf("endpoint type %s not supported (only %s)", ty, t.EpAttr.Type)
	}

	// capabilities
	caps, why := matchCaps(t.Caps, h.Caps)
	if why != "" {
		return nil, why
	}
	if bad := h.TxAttr.Caps &^ t.TxAttr.Caps; bad != 0 {
		return nil, fmt.Sprintf("transmit capabilities %s not supported", bad)
	}
	if bad := h.RxAttr.Caps &^ t.RxAttr.Caps; bad != 0 {
		return nil, fmt.Sprintf("receive capabilities %s not supported", bad)
	}
	if bad := h.DomainAttr.Caps &^ t.DomainAttr.Caps; bad != 0 {
		return nil, fmt.Sprintf("domain capabilities %s not supported", bad)
	}

	// required modes: the app lists what it supports; nil hints take the
	// provider's needs as they are
	mode := t.Mode
	if t.Caps&RMA != 0 {
		mode |= h.Mode & optionalModes
	}
	if userHints {
		if need := t.Mode &^ h.Mode; need != 0 {
			return nil, fmt.Sprintf("provider needs mode %s the application does not support", need)
		}
		if need := t.DomainAttr.MRMode &^ h.DomainAttr.MRMode; need != 0 && h.DomainAttr.MRMode != MRUnspec {
			return nil, fmt.Sprintf("provider needs MR mode %s", need)
		}
		if why := mrModeRefused(h.DomainAttr.MRMode); why != "" {
			return nil, why
		}
	}

	// address format
	format := c.formats[0]
	if f := h.AddrFormat; f != FormatUnspec {
		ok := false
		for _, g := range c.formats {
			ok = ok || g == f
		}
		if !ok {
			return nil, fmt.Sprintf("address format %s not supported", f)
		}
		format = f
	}
	src, dest, err := c.addrs(format)
	if err != nil {
		return nil, fmt.Sprintf("address: %s", detailOf(err))
	}

	// domain levels
	threading := t.DomainAttr.Threading
	if th := h.DomainAttr.Threading; th != ThreadUnspec {
		if th < c.threadMax || th > ThreadEndpoint {
			return nil, fmt.Sprintf("threading %s not supported", th)
		}
		threading = th
	}
	if p := h.DomainAttr.ControlProgress; p != ProgressUnspec && !progressOK(p, t.DomainAttr.ControlProgress) {
		return nil, fmt.Sprintf("control progress %s not supported (provider is %s)", p, t.DomainAttr.ControlProgress)
	}
	if p := h.DomainAttr.DataProgress; p != ProgressUnspec && !progressOK(p, t.DomainAttr.DataProgress) {
		return nil, fmt.Sprintf("data progress %s not supported (provider is %s)", p, t.DomainAttr.DataProgress)
	}
	if rm := h.DomainAttr.ResourceMgmt; rm != RMUnspec && rm != RMEnabled && rm != RMDisabled {
		return nil, fmt.Sprintf("resource management %s not supported", rm)
	}
	avType := t.DomainAttr.AVType
	if av := h.DomainAttr.AVType; av != AVUnspec {
		if av != AVMap && av != AVTable {
			return nil, fmt.Sprintf("AV type %s not supported", av)
		}
		avType = av
	}
	if tc := h.DomainAttr.TClass; tc != TCUnspec && tc != t.DomainAttr.TClass {
		return nil, fmt.Sprintf("domain traffic class %s not supported", tc)
	}
	if tc := h.TxAttr.TClass; tc != TCUnspec && tc != t.TxAttr.TClass {
		return nil, fmt.Sprintf("transmit traffic class %s not supported", tc)
	}
	if h.EpAttr.AuthKeySize > 0 || len(h.EpAttr.AuthKey) > 0 || h.DomainAttr.AuthKeySize > 0 || len(h.DomainAttr.AuthKey) > 0 {
		return nil, "authorization keys not supported"
	}
	if p := h.EpAttr.Protocol; p != ProtoUnspec && p != t.EpAttr.Protocol {
		return nil, fmt.Sprintf("protocol %s not supported (provider speaks %s)", p, t.EpAttr.Protocol)
	}
	if v := h.EpAttr.ProtocolVersion; v != 0 && v > t.EpAttr.ProtocolVersion {
		return nil, fmt.Sprintf("protocol version %d not supported", v)
	}
	if bad := h.TxAttr.MsgOrder &^ t.TxAttr.MsgOrder; bad != 0 {
		return nil, fmt.Sprintf("transmit message order %s not supported", bad)
	}
	if bad := h.RxAttr.MsgOrder &^ t.RxAttr.MsgOrder; bad != 0 {
		return nil, fmt.Sprintf("receive message order %s not supported", bad)
	}
	if co := h.TxAttr.CompOrder; co != CompOrderNone && co&^t.TxAttr.CompOrder != 0 {
		return nil, fmt.Sprintf("transmit completion order %s not supported", co)
	}
	if co := h.RxAttr.CompOrder; co != CompOrderNone && co&^t.RxAttr.CompOrder != 0 {
		return nil, fmt.Sprintf("receive completion order %s not supported", co)
	}
	if bad := h.TxAttr.OpFlags &^ c.txOpFlags; bad != 0 {
		return nil, fmt.Sprintf("transmit op flags %s not supported", bad)
	}
	if bad := h.RxAttr.OpFlags &^ c.rxOpFlags; bad != 0 {
		return nil, fmt.Sprintf("receive op flags %s not supported", bad)
	}

	// size limits
	for _, l := range []struct {
		name      string
		want, max int
	}{
		{"TxAttr.InjectSize", h.TxAttr.InjectSize, t.TxAttr.InjectSize},
		{"TxAttr.Size", h.TxAttr.Size, t.TxAttr.Size},
		{"TxAttr.IOVLimit", h.TxAttr.IOVLimit, t.TxAttr.IOVLimit},
		{"TxAttr.RMAIOVLimit", h.TxAttr.RMAIOVLimit, t.TxAttr.RMAIOVLimit},
		{"RxAttr.Size", h.RxAttr.Size, t.RxAttr.Size},
		{"RxAttr.IOVLimit", h.RxAttr.IOVLimit, t.RxAttr.IOVLimit},
		{"RxAttr.TotalBufferedRecv", h.RxAttr.TotalBufferedRecv, t.RxAttr.TotalBufferedRecv},
		{"EpAttr.MaxMsgSize", h.EpAttr.MaxMsgSize, t.EpAttr.MaxMsgSize},
		{"EpAttr.MsgPrefixSize", h.EpAttr.MsgPrefixSize, t.EpAttr.MsgPrefixSize},
		{"EpAttr.MaxOrderRAWSize", h.EpAttr.MaxOrderRAWSize, t.EpAttr.MaxOrderRAWSize},
		{"EpAttr.MaxOrderWARSize", h.EpAttr.MaxOrderWARSize, t.EpAttr.MaxOrderWARSize},
		{"EpAttr.MaxOrderWAWSize", h.EpAttr.MaxOrderWAWSize, t.EpAttr.MaxOrderWAWSize},
		{"EpAttr.TxCtxCnt", ctxCnt(h.EpAttr.TxCtxCnt), t.EpAttr.TxCtxCnt},
		{"EpAttr.RxCtxCnt", ctxCnt(h.EpAttr.RxCtxCnt), t.EpAttr.RxCtxCnt},
		{"DomainAttr.MRKeySize", h.DomainAttr.MRKeySize, t.DomainAttr.MRKeySize},
		{"DomainAttr.CQDataSize", h.DomainAttr.CQDataSize, t.DomainAttr.CQDataSize},
		{"DomainAttr.CQCnt", h.DomainAttr.CQCnt, t.DomainAttr.CQCnt},
		{"DomainAttr.EpCnt", h.DomainAttr.EpCnt, t.DomainAttr.EpCnt},
		{"DomainAttr.TxCtxCnt", h.DomainAttr.TxCtxCnt, t.DomainAttr.TxCtxCnt},
		{"DomainAttr.RxCtxCnt", h.DomainAttr.RxCtxCnt, t.DomainAttr.RxCtxCnt},
		{"DomainAttr.MaxEpTxCtx", h.DomainAttr.MaxEpTxCtx, t.DomainAttr.MaxEpTxCtx},
		{"DomainAttr.MaxEpRxCtx", h.DomainAttr.MaxEpRxCtx, t.DomainAttr.MaxEpRxCtx},
		{"DomainAttr.MaxEpStxCtx", h.DomainAttr.MaxEpStxCtx, t.DomainAttr.MaxEpStxCtx},
		{"DomainAttr.MaxEpSrxCtx", h.DomainAttr.MaxEpSrxCtx, t.DomainAttr.MaxEpSrxCtx},
		{"DomainAttr.CntrCnt", h.DomainAttr.CntrCnt, t.DomainAttr.CntrCnt},
		{"DomainAttr.MRIOVLimit", h.DomainAttr.MRIOVLimit, t.DomainAttr.MRIOVLimit},
		{"DomainAttr.MaxErrData", h.DomainAttr.MaxErrData, t.DomainAttr.MaxErrData},
		{"DomainAttr.MRCnt", h.DomainAttr.MRCnt, t.DomainAttr.MRCnt},
	} {
		if l.want > l.max {
			return nil, fmt.Sprintf("%s %d exceeds the provider's %d", l.name, l.want, l.max)
		}
	}

	// build the answer from the template
	info := t
	info.Caps = caps
	info.Mode = mode
	info.AddrFormat = format
	info.SrcAddr, info.DestAddr = src, dest
	info.TxAttr.Caps = caps & t.TxAttr.Caps
	info.RxAttr.Caps = caps & t.RxAttr.Caps
	info.TxAttr.OpFlags = h.TxAttr.OpFlags
	info.RxAttr.OpFlags = h.RxAttr.OpFlags
	if h.TxAttr.MsgOrder != 0 {
		info.TxAttr.MsgOrder = h.TxAttr.MsgOrder
	}
	if h.RxAttr.MsgOrder != 0 {
		info.RxAttr.MsgOrder = h.RxAttr.MsgOrder
	}
	info.DomainAttr.Caps = caps & t.DomainAttr.Caps
	info.DomainAttr.MRMode = t.DomainAttr.MRMode | h.DomainAttr.MRMode&MRProvKey
	info.DomainAttr.Threading = threading
	info.DomainAttr.AVType = avType
	if h.DomainAttr.ResourceMgmt != RMUnspec {
		info.DomainAttr.ResourceMgmt = h.DomainAttr.ResourceMgmt
	}
	if h.EpAttr.MemTagFormat != 0 {
		info.EpAttr.MemTagFormat = h.EpAttr.MemTagFormat
	}
	if h.FabricAttr.Fabric != nil {
		info.FabricAttr.Fabric = h.FabricAttr.Fabric
	}
	if h.DomainAttr.Domain != nil {
		info.DomainAttr.Domain = h.DomainAttr.Domain
	}
	return info, ""
}

// mrModeRefused says why an application's MR mode hint cannot be served,
// or "". The modes list what the application can work with; gofi's
// providers need none of them (offset addressing, any 64-bit key, no
// local registration) and use MRProvKey when offered (the provider then
// chooses keys). Only the pre-1.5 modes constrain: MRBasic means virtual
// addresses and provider keys (gofi addresses by offset), and neither
// MRBasic nor MRScalable may be combined with other bits.
func mrModeRefused(m MRMode) string {
	switch {
	case m&MRBasic != 0 && m != MRBasic, m&MRScalable != 0 && m != MRScalable:
		return fmt.Sprintf("MR mode %s: FI_MR_BASIC and FI_MR_SCALABLE stand alone", m)
	case m == MRBasic:
		return "MR mode FI_MR_BASIC (virtual addressing) not supported: regions are addressed by offset (FI_MR_SCALABLE)"
	}
	return ""
}

// ctxCnt maps SharedContext to a count no provider offers (gofi has no
// shared contexts).
func ctxCnt(n int) int {
	if n == SharedContext {
		return math.MaxInt
	}
	return n
}

// progressOK reports whether a provider with progress model have satisfies
// an application asking for want: automatic progress also serves an
// application that will drive progress itself, not the other way round.
func progressOK(want, have Progress) bool {
	switch want {
	case ProgressAuto:
		return have == ProgressAuto
	case ProgressManual:
		return have == ProgressManual || have == ProgressAuto
	}
	return false
}

// harmlessCaps are the secondary capabilities a provider reports even when
// not asked: multi-receive buffers only act when a receive asks for them.
const harmlessCaps = MultiRecv

// matchCaps applies fi_getinfo(3)'s capability rules: every requested bit
// must be supported; primary capabilities are enabled only when asked for
// (with none asked, the provider's primaries are the wildcard); without
// modifiers all relevant ones are assumed, with them they narrow;
// unrequested secondaries are added only when harmless; LocalComm and
// RemoteComm are reported as supported unless the application chose.
func matchCaps(have, want Flags) (Flags, string) {
	if want == 0 {
		return have, ""
	}
	if bad := want &^ have; bad != 0 {
		return 0, fmt.Sprintf("capabilities %s not supported", bad)
	}
	caps := want
	if want&PrimaryCaps == 0 {
		caps |= have & PrimaryCaps &^ (DirectedRecv | AVUserID)
	}
	if caps&PrimaryModifiers == 0 {
		var rel Flags
		if caps&(Msg|Tagged|Multicast|Collective) != 0 {
			rel |= Send | Recv
		}
		if caps&(RMA|Atomic) != 0 {
			rel |= Read | Write | RemoteRead | RemoteWrite
		}
		caps |= have & rel
	}
	caps |= have & harmlessCaps
	if want&(LocalComm|RemoteComm) == 0 {
		caps |= have & (LocalComm | RemoteComm)
	}
	return caps, ""
}
