package fi

import (
	"net"
	"net/netip"
	"os"
	"strings"
)

// The shm provider: reliable-datagram endpoints between processes on one
// host over lock-free rings in /dev/shm (internal package shm, a later
// issue). This file describes what it supports; GetInfo reports exactly
// this, and the data path must honour it.

const (
	shmName       = "shm" // provider, fabric and domain name
	shmInjectSize = 4096  // bytes Inject carries inline in a ring record
	shmQueueSize  = 1024  // tx and rx queue depth per endpoint
	shmIOVLimit   = 4     // buffers per vectored send/receive
	shmEpCnt      = 256   // endpoints per domain
	shmCQCnt      = 1024  // CQs per domain
	shmCQDataSize = 8     // bytes of remote CQ data
	shmAddrPrefix = "fi_shm"
)

// shmCaps is everything the shm provider supports.
const shmCaps = Msg | Tagged | Collective | Send | Recv | DirectedRecv | MultiRecv | Source |
	RemoteCQData | AVUserID | LocalComm | shmRMACaps

type shmProv struct{}

func (shmProv) name() string    { return shmName }
func (shmProv) version() uint32 { return provVersion }

func (p shmProv) template() *Info {
	info := rdmTemplate(shmCaps, LocalComm, rdmLimits{
		injectSize: shmInjectSize, queueSize: shmQueueSize, iovLimit: shmIOVLimit,
		epCnt: shmEpCnt, cqCnt: shmCQCnt, cqDataSize: shmCQDataSize,
	})
	info.AddrFormat = AddrStr
	info.EpAttr.Protocol = ProtoShm
	info.DomainAttr.Name = shmName
	info.FabricAttr.Name = shmName
	info.FabricAttr.ProvName = shmName
	info.FabricAttr.ProvVersion = provVersion
	shmRMATemplate(info)
	return info
}

func (p shmProv) defaults() *Info { return p.template() }

// getInfo offers the single shm fabric/domain. Node and service name shm
// endpoints: an fi_shm:// node is the address itself; otherwise the
// service is the endpoint name (fi_shm://<service>) and a node, if given,
// must name this host (localhost, the host name, or a local IP address).
func (p shmProv) getInfo(req *infoReq) ([]*provInfo, error) {
	const op = "GetInfo"
	var addr string // the fi_shm:// address node/service name, if any
	switch {
	case req.nodeStr != nil:
		if req.nodeStr.Format != shmAddrPrefix {
			return nil, opErr(op, ErrNoData, "shm: %q is not an fi_shm:// address", req.node)
		}
		addr = FormatAddrStr(*req.nodeStr)
	default:
		if req.node != "" {
			if err := shmLocalNode(req.node, req.flags&NumericHost != 0); err != nil {
				return nil, err
			}
		}
		if req.service != "" {
			if !validPart(req.service) {
				return nil, opErr(op, ErrNoData, "shm: service %q is not a valid endpoint name", req.service)
			}
			addr = FormatAddrStr(StrAddr{Format: shmAddrPrefix, Node: req.service})
		}
	}
	var src, dest []byte
	if addr != "" {
		if req.flags&Source != 0 {
			src = []byte(addr)
		} else {
			dest = []byte(addr)
		}
	}
	h := req.hints
	if src == nil && req.flags&Source == 0 && h.SrcAddr != nil {
		a, err := shmParseAddr(h.SrcAddr)
		if err != nil {
			return nil, err
		}
		src = []byte(a)
	}
	if dest == nil && h.DestAddr != nil && (req.node == "" && req.service == "" || req.flags&Source != 0) {
		a, err := shmParseAddr(h.DestAddr)
		if err != nil {
			return nil, err
		}
		dest = []byte(a)
	}
	pi := &provInfo{
		info:      p.template(),
		formats:   []AddrFormat{AddrStr},
		threadMax: ThreadSafe,
		txOpFlags: rdmTxOpFlags,
		rxOpFlags: rdmRxOpFlags,
		addrs: func(AddrFormat) ([]byte, []byte, error) {
			return cloneBytes(src), cloneBytes(dest), nil
		},
	}
	return []*provInfo{pi}, nil
}

// shmParseAddr checks that b is an fi_shm:// FI_ADDR_STR and returns it.
func shmParseAddr(b []byte) (string, error) {
	a, err := ParseAddrStr(string(b))
	if err != nil {
		return "", err
	}
	if a.Format != shmAddrPrefix {
		return "", opErr("GetInfo", ErrNoData, "shm: address %q is not fi_shm://", string(b))
	}
	return FormatAddrStr(a), nil
}

// shmLocalNode checks that node names this host: shm cannot reach others.
// With numericOnly, only IP literals are accepted (FI_NUMERICHOST).
func shmLocalNode(node string, numericOnly bool) error {
	const op = "GetInfo"
	if ip, err := netip.ParseAddr(node); err == nil {
		if isLocalIP(ip) {
			return nil
		}
		return opErr(op, ErrNoData, "shm: %s is not an address of this host", node)
	}
	if numericOnly {
		return opErr(op, ErrNoData, "shm: node %q is not numeric and FI_NUMERICHOST was given", node)
	}
	if strings.EqualFold(node, "localhost") {
		return nil
	}
	if h, err := os.Hostname(); err == nil && strings.EqualFold(node, h) {
		return nil
	}
	return opErr(op, ErrNoData, "shm: node %q is not this host", node)
}

// isLocalIP reports whether ip is a loopback address or assigned to one of
// this host's interfaces.
func isLocalIP(ip netip.Addr) bool {
	ip = ip.WithZone("").Unmap()
	if ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if x, ok := netip.AddrFromSlice(n.IP); ok && x.Unmap() == ip {
				return true
			}
		}
	}
	return false
}

func (p shmProv) openFabric(attr *FabricAttr) (provFabric, error) {
	if attr.Name != "" && attr.Name != shmName {
		return nil, opErr("OpenFabric", ErrNoDev, "shm has no fabric %q (only %q)", attr.Name, shmName)
	}
	return &shmFabric{}, nil
}

// shmFabric is the open shm fabric. It holds no resources yet; regions are
// per domain and endpoint.
type shmFabric struct{}

func (*shmFabric) openDomain(info *Info) (provDomain, error) {
	if info.DomainAttr.Name != "" && info.DomainAttr.Name != shmName {
		return nil, opErr("Fabric.OpenDomain", ErrNoDev, "shm has no domain %q (only %q)", info.DomainAttr.Name, shmName)
	}
	return &shmDomain{info: info}, nil
}

func (*shmFabric) close() error { return nil }

// shmDomain is an open shm domain.
type shmDomain struct {
	info *Info
}

func (*shmDomain) close() error { return nil }
