package fi

import (
	"context"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"time"
)

// The tcp provider: reliable-datagram endpoints over TCP (internal package
// net on gnet v2, a later issue), for remote peers and for local ones over
// loopback. Like libfabric's tcp provider it reports one fabric per usable
// IP interface address: the fabric is the subnet ("192.0.2.0/24", and for
// loopback the host address, "127.0.0.1/32"), the domain the interface
// ("eth0", "lo"). This file describes what it supports; GetInfo reports
// exactly this, and the data path must honour it.

const (
	tcpName        = "tcp"
	tcpInjectSize  = 4096 // bytes Inject copies into the connection's send buffer
	tcpQueueSize   = 1024 // tx and rx queue depth per endpoint
	tcpIOVLimit    = 4
	tcpEpCnt       = 1024
	tcpCQCnt       = 1024
	tcpCQDataSize  = 8
	resolveTimeout = 10 * time.Second // bound on host-name resolution in GetInfo
)

// tcpCaps is everything the tcp provider supports.
const tcpCaps = Msg | Tagged | Collective | Send | Recv | DirectedRecv | MultiRecv | Source |
	RemoteCQData | AVUserID | LocalComm | RemoteComm | tcpRMACaps

type tcpProv struct{}

func (tcpProv) name() string    { return tcpName }
func (tcpProv) version() uint32 { return provVersion }

func (tcpProv) template() *Info {
	info := rdmTemplate(tcpCaps, LocalComm|RemoteComm, rdmLimits{
		injectSize: tcpInjectSize, queueSize: tcpQueueSize, iovLimit: tcpIOVLimit,
		epCnt: tcpEpCnt, cqCnt: tcpCQCnt, cqDataSize: tcpCQDataSize,
	})
	info.AddrFormat = SockaddrIn
	info.EpAttr.Protocol = ProtoSockTCP
	info.FabricAttr.ProvName = tcpName
	info.FabricAttr.ProvVersion = provVersion
	tcpRMATemplate(info)
	return info
}

func (p tcpProv) defaults() *Info { return p.template() }

// tcpIface is one usable interface address: a tcp fabric and domain.
type tcpIface struct {
	name     string       // interface name: the domain
	index    int          // interface index (IPv6 scope)
	ip       netip.Addr   // the interface's address
	fabric   netip.Prefix // the subnet: the fabric
	loopback bool
}

// tcpIfaces lists the usable interface addresses, non-loopback interfaces
// first (as libfabric orders them), each interface's addresses in the
// order the system reports them.
func tcpIfaces() ([]tcpIface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, opErr("GetInfo", ErrNoData, "tcp: listing interfaces: %v", err)
	}
	var out []tcpIface
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(n.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			ones, _ := n.Mask.Size()
			lo := ifc.Flags&net.FlagLoopback != 0
			var pfx netip.Prefix
			if lo {
				pfx = netip.PrefixFrom(ip, ip.BitLen())
			} else {
				pfx = netip.PrefixFrom(ip, ones).Masked()
			}
			if ip.Is6() && ip.IsLinkLocalUnicast() {
				ip = ip.WithZone(strconv.Itoa(ifc.Index))
			}
			out = append(out, tcpIface{name: ifc.Name, index: ifc.Index, ip: ip, fabric: pfx, loopback: lo})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return !out[i].loopback && out[j].loopback })
	return out, nil
}

// tcpResolve turns node and service into addresses: the node an IP literal
// or (without FI_NUMERICHOST) a host name, the service a port number or
// service name.
func tcpResolve(node, service string, numeric bool) ([]netip.Addr, uint16, error) {
	const op = "GetInfo"
	var port uint16
	if service != "" {
		if n, err := strconv.ParseUint(service, 10, 16); err == nil {
			port = uint16(n)
		} else if n, err := net.LookupPort("tcp", service); err == nil {
			port = uint16(n)
		} else {
			return nil, 0, opErr(op, ErrNoData, "tcp: unknown service %q", service)
		}
	}
	if node == "" {
		return nil, port, nil
	}
	if ip, err := netip.ParseAddr(node); err == nil {
		return []netip.Addr{ip.Unmap()}, port, nil
	}
	if numeric {
		return nil, 0, opErr(op, ErrNoData, "tcp: node %q is not a numeric address and FI_NUMERICHOST was given", node)
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", node)
	if err != nil || len(ips) == 0 {
		return nil, 0, opErr(op, ErrNoData, "tcp: cannot resolve %q: %v", node, err)
	}
	for i := range ips {
		ips[i] = ips[i].Unmap()
	}
	return ips, port, nil
}

// tcpDecodeAddr decodes an address given in hints: a sockaddr or an
// fi_sockaddr FI_ADDR_STR.
func tcpDecodeAddr(format AddrFormat, b []byte) (netip.AddrPort, error) {
	if format == AddrStr || (format == FormatUnspec && IsAddrStr(string(b))) {
		a, err := ParseAddrStr(string(b))
		if err != nil {
			return netip.AddrPort{}, err
		}
		return a.AddrPort()
	}
	return AddrPortFromSockaddr(b)
}

// getInfo offers one candidate per usable interface address.
//
// With FI_SOURCE, node/service name the local address: only interfaces
// holding that address (all of its family for a wildcard address) remain,
// and SrcAddr is it. Without, node/service name the destination: DestAddr
// is the first address node resolves to (loopback when only a service is
// given), interfaces of its family remain, the one whose subnet contains
// it first, and SrcAddr is the interface address with port 0.
func (p tcpProv) getInfo(req *infoReq) ([]*provInfo, error) {
	const op = "GetInfo"
	ifaces, err := tcpIfaces()
	if err != nil {
		return nil, err
	}
	h := req.hints
	var (
		ips     []netip.Addr
		port    uint16
		haveLoc bool // a local address was named
		local   netip.AddrPort
		dest    netip.AddrPort
		hasDest bool
	)
	if req.nodeStr != nil {
		ap, err := req.nodeStr.AddrPort()
		if err != nil {
			return nil, opErr(op, ErrNoData, "tcp: %q is not a socket address: %v", req.node, err)
		}
		ips, port = []netip.Addr{ap.Addr()}, ap.Port()
	} else if req.node != "" || req.service != "" {
		ips, port, err = tcpResolve(req.node, req.service, req.flags&NumericHost != 0)
		if err != nil {
			return nil, err
		}
	}
	named := req.node != "" || req.service != ""
	if req.flags&Source != 0 {
		if named {
			haveLoc = true
			if len(ips) > 0 {
				local = netip.AddrPortFrom(ips[0], port)
			} else {
				local = netip.AddrPortFrom(netip.IPv4Unspecified(), port) // service only: any interface
			}
		}
		if h.DestAddr != nil {
			ap, err := tcpDecodeAddr(h.AddrFormat, h.DestAddr)
			if err != nil {
				return nil, err
			}
			dest, hasDest = ap, true
		}
	} else {
		if named {
			if len(ips) > 0 {
				dest = netip.AddrPortFrom(ips[0], port)
			} else {
				dest = netip.AddrPortFrom(netip.IPv4Unspecified(), port) // replaced per interface below
			}
			hasDest = true
		} else if h.DestAddr != nil {
			ap, err := tcpDecodeAddr(h.AddrFormat, h.DestAddr)
			if err != nil {
				return nil, err
			}
			dest, hasDest = ap, true
		}
		if h.SrcAddr != nil {
			ap, err := tcpDecodeAddr(h.AddrFormat, h.SrcAddr)
			if err != nil {
				return nil, err
			}
			local, haveLoc = ap, true
		}
	}
	serviceOnlyDest := hasDest && req.flags&Source == 0 && named && len(ips) == 0

	var out []*provInfo
	for _, ifc := range ifaces {
		is4 := ifc.ip.Is4()
		src := netip.AddrPortFrom(ifc.ip, 0)
		if haveLoc {
			la := local.Addr()
			if !la.IsUnspecified() && la.WithZone("") != ifc.ip.WithZone("") {
				continue
			}
			if la.IsUnspecified() && !(serviceOnlySource(req) || la.Is4() == is4) {
				continue
			}
			src = netip.AddrPortFrom(ifc.ip, local.Port())
		}
		d := dest
		if serviceOnlyDest {
			if is4 {
				d = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
			} else {
				d = netip.AddrPortFrom(netip.IPv6Loopback(), port)
			}
		}
		if hasDest && d.Addr().Is4() != is4 {
			continue
		}
		info := p.template()
		info.FabricAttr.Name = ifc.fabric.String()
		info.DomainAttr.Name = ifc.name
		formats := []AddrFormat{SockaddrIn, Sockaddr, AddrStr}
		if !is4 {
			formats[0] = SockaddrIn6
			info.AddrFormat = SockaddrIn6
		}
		hd := hasDest
		out = append(out, &provInfo{
			info:      info,
			formats:   formats,
			threadMax: ThreadSafe,
			txOpFlags: rdmTxOpFlags,
			rxOpFlags: rdmRxOpFlags,
			addrs: func(f AddrFormat) ([]byte, []byte, error) {
				s, err := tcpEncode(f, src)
				if err != nil || !hd {
					return s, nil, err
				}
				dd, err := tcpEncode(f, d)
				return s, dd, err
			},
		})
		if hasDest && ifc.fabric.Contains(d.Addr().WithZone("")) {
			// the interface on the destination's subnet goes first
			last := out[len(out)-1]
			copy(out[1:], out[:len(out)-1])
			out[0] = last
		}
	}
	if len(out) == 0 {
		switch {
		case haveLoc:
			return nil, opErr(op, ErrNoData, "tcp: %v is not an address of a usable interface", local.Addr())
		case hasDest:
			return nil, opErr(op, ErrNoData, "tcp: no usable interface of %v's family", dest.Addr())
		default:
			return nil, opErr(op, ErrNoData, "tcp: no usable IP interface")
		}
	}
	return out, nil
}

// serviceOnlySource reports a FI_SOURCE request naming only a service: the
// port applies to every interface of every family.
func serviceOnlySource(req *infoReq) bool {
	return req.flags&Source != 0 && req.node == "" && req.nodeStr == nil
}

// tcpEncode encodes ap in format f.
func tcpEncode(f AddrFormat, ap netip.AddrPort) ([]byte, error) {
	if f == AddrStr {
		return []byte(SockaddrStr(ap)), nil
	}
	return SockaddrFromAddrPort(ap)
}

func (p tcpProv) openFabric(attr *FabricAttr) (provFabric, error) {
	ifaces, err := tcpIfaces()
	if err != nil {
		return nil, err
	}
	for _, ifc := range ifaces {
		if attr.Name == "" || ifc.fabric.String() == attr.Name {
			return &tcpFabric{name: ifc.fabric.String()}, nil
		}
	}
	return nil, opErr("OpenFabric", ErrNoDev, "tcp has no fabric %q (no usable interface on that subnet)", attr.Name)
}

// tcpFabric is an open tcp fabric: one subnet.
type tcpFabric struct {
	name string
}

func (f *tcpFabric) openDomain(info *Info) (provDomain, error) {
	ifaces, err := tcpIfaces()
	if err != nil {
		return nil, err
	}
	for _, ifc := range ifaces {
		if ifc.fabric.String() == f.name && (info.DomainAttr.Name == "" || info.DomainAttr.Name == ifc.name) {
			return &tcpDomain{iface: ifc.name, info: info}, nil
		}
	}
	return nil, opErr("Fabric.OpenDomain", ErrNoDev, "tcp fabric %q has no domain (interface) %q", f.name, info.DomainAttr.Name)
}

func (*tcpFabric) close() error { return nil }

// tcpDomain is an open tcp domain: one interface.
type tcpDomain struct {
	iface string
	info  *Info
}

func (*tcpDomain) close() error { return nil }
