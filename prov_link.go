package fi

import (
	"errors"
	"net/netip"
	"strings"

	flink "github.com/gofi-dev/fi/link"
	fnet "github.com/gofi-dev/fi/net"
	"github.com/gofi-dev/fi/rma"
	"github.com/gofi-dev/fi/shm"
	"github.com/gofi-dev/fi/transport"
)

// The linked shm+tcp provider: one endpoint reaching peers on this host
// over shared memory and the others over tcp (package link). Fabrics and
// domains are the tcp provider's (a subnet, an interface): the tcp member
// listens there. Addresses are FI_ADDR_STR fi_link:// strings carrying
// both members' addresses; AV entries add the route (via=shm|tcp).

const linkName = "shm+tcp"

// linkCaps is what works over both members: the intersection of the
// providers' capabilities (one-sided operations are forwarded to the
// member reaching the peer), local and remote communication.
const linkCaps = shmCaps&tcpCaps | LocalComm | RemoteComm

type linkProv struct{}

func (linkProv) name() string    { return linkName }
func (linkProv) version() uint32 { return provVersion }

func (linkProv) template() *Info {
	info := rdmTemplate(linkCaps, LocalComm|RemoteComm, rdmLimits{
		injectSize: min(shmInjectSize, tcpInjectSize), queueSize: min(shmQueueSize, tcpQueueSize),
		iovLimit: min(shmIOVLimit, tcpIOVLimit), epCnt: min(shmEpCnt, tcpEpCnt),
		cqCnt: min(shmCQCnt, tcpCQCnt), cqDataSize: min(shmCQDataSize, tcpCQDataSize),
	})
	info.AddrFormat = AddrStr
	info.EpAttr.Protocol = ProtoSockTCP
	info.FabricAttr.ProvName = linkName
	info.FabricAttr.ProvVersion = provVersion
	// Each peer is served by one member: orderings and limits are those
	// both keep.
	s, t := shmProv{}.template(), tcpProv{}.template()
	info.TxAttr.MsgOrder = s.TxAttr.MsgOrder & t.TxAttr.MsgOrder
	info.RxAttr.MsgOrder = s.RxAttr.MsgOrder & t.RxAttr.MsgOrder
	info.TxAttr.RMAIOVLimit = min(s.TxAttr.RMAIOVLimit, t.TxAttr.RMAIOVLimit)
	info.EpAttr.MaxOrderRAWSize = min(s.EpAttr.MaxOrderRAWSize, t.EpAttr.MaxOrderRAWSize)
	info.EpAttr.MaxOrderWARSize = min(s.EpAttr.MaxOrderWARSize, t.EpAttr.MaxOrderWARSize)
	info.EpAttr.MaxOrderWAWSize = min(s.EpAttr.MaxOrderWAWSize, t.EpAttr.MaxOrderWAWSize)
	return info
}

func (p linkProv) defaults() *Info { return p.template() }

// getInfo offers one candidate per tcp candidate (interface address):
// node, service and addresses are the tcp member's, given as fi_link://
// or any form tcp reads.
func (p linkProv) getInfo(req *infoReq) ([]*provInfo, error) {
	r := *req
	if req.nodeStr != nil && req.nodeStr.Format == linkAddrPrefix {
		a := *req.nodeStr
		a.Format, a.Params = "fi_sockaddr", nil
		r.nodeStr = &a
	}
	h := req.hints.Dup()
	for _, b := range []*[]byte{&h.SrcAddr, &h.DestAddr} {
		if *b == nil {
			continue
		}
		ap, err := linkTCPAddr(*b)
		if err != nil {
			return nil, opErr("GetInfo", ErrNoData, "shm+tcp: %v", err)
		}
		*b = []byte(SockaddrStr(ap))
	}
	if h.SrcAddr != nil || h.DestAddr != nil {
		h.AddrFormat = AddrStr
	} else {
		h.AddrFormat = FormatUnspec
	}
	r.hints = h
	cands, err := tcpProv{}.getInfo(&r)
	if err != nil {
		return nil, opErr("GetInfo", ErrNoData, "shm+tcp: %s", detailOf(err))
	}
	out := make([]*provInfo, 0, len(cands))
	for _, c := range cands {
		info := p.template()
		info.FabricAttr.Name = c.info.FabricAttr.Name
		info.DomainAttr.Name = c.info.DomainAttr.Name
		addrs := c.addrs
		out = append(out, &provInfo{
			info: info, formats: []AddrFormat{AddrStr}, threadMax: ThreadSafe,
			txOpFlags: rdmTxOpFlags, rxOpFlags: rdmRxOpFlags,
			addrs: func(AddrFormat) ([]byte, []byte, error) {
				s, d, err := addrs(AddrStr)
				return linkFromTCPStr(s), linkFromTCPStr(d), err
			},
		})
	}
	return out, nil
}

// linkAddrPrefix is the FI_ADDR_STR format of linked addresses.
const linkAddrPrefix = "fi_link"

// linkFromTCPStr turns an fi_sockaddr_in[6]:// string into fi_link://.
func linkFromTCPStr(b []byte) []byte {
	if b == nil {
		return nil
	}
	_, rest, _ := strings.Cut(string(b), "://")
	return []byte(flink.Scheme + rest)
}

// linkTCPAddr reads the tcp address of a linked address (port 0 allowed:
// a source address to listen on), or of any address tcp reads.
func linkTCPAddr(b []byte) (netip.AddrPort, error) {
	if IsAddrStr(string(b)) {
		a, err := ParseAddrStr(string(b))
		if err != nil {
			return netip.AddrPort{}, err
		}
		if a.Format == linkAddrPrefix {
			if a.Node == "" {
				return netip.AddrPort{}, opErr("GetInfo", ErrInval, "%q names no tcp address", b)
			}
			a.Format, a.Params = "fi_sockaddr", nil
		}
		return a.AddrPort()
	}
	return AddrPortFromSockaddr(b)
}

func (linkProv) openFabric(attr *FabricAttr) (provFabric, error) {
	f, err := tcpProv{}.openFabric(attr)
	if err != nil {
		return nil, err
	}
	return &linkFabric{tcp: f.(*tcpFabric)}, nil
}

// linkFabric is an open shm+tcp fabric: the tcp member's subnet.
type linkFabric struct{ tcp *tcpFabric }

func (f *linkFabric) openDomain(info *Info) (provDomain, error) {
	d, err := f.tcp.openDomain(info)
	if err != nil {
		return nil, err
	}
	return &linkDomain{tcpDomain: d.(*tcpDomain), shm: &shmDomain{info: info}}, nil
}

func (f *linkFabric) close() error { return f.tcp.close() }

// linkDomain is an open shm+tcp domain: the tcp member's interface and a
// shm domain. Memory registration is the shm domain's (the key table and
// AllocMR memory in shared segments, which local peers map and the tcp
// member's loop reads like any memory).
type linkDomain struct {
	*tcpDomain
	shm *shmDomain
}

func (d *linkDomain) makeKeyTable(slots, counters int) (*rma.Table, func() error, error) {
	return d.shm.makeKeyTable(slots, counters)
}

func (d *linkDomain) allocMem(t *rma.Table, slot int, gen uint32, size int) ([]byte, func() error, error) {
	return d.shm.allocMem(t, slot, gen, size)
}

func (d *linkDomain) holderAlive(pid int) bool { return d.shm.holderAlive(pid) }

// openTransport opens both members and links them: the shm member with a
// fresh region, the tcp member on the info's source address (or the
// domain's interface).
func (d *linkDomain) openTransport(info *Info) (transport.Transport, error) {
	const op = "Domain.OpenEndpoint"
	dom, err := flink.LocalDomain()
	if err != nil {
		return nil, opErr(op, ErrIO, "%v", err)
	}
	si := info.Dup()
	si.SrcAddr = nil
	st, err := d.shm.openTransport(si)
	if err != nil {
		return nil, err
	}
	ti := info.Dup()
	ti.AddrFormat = FormatUnspec
	if len(info.SrcAddr) > 0 {
		ap, err := linkTCPAddr(info.SrcAddr)
		if err != nil {
			_ = st.Close()
			return nil, opErr(op, ErrInval, "source address %q: %v", info.SrcAddr, err)
		}
		if ti.SrcAddr, err = SockaddrFromAddrPort(ap); err != nil {
			_ = st.Close()
			return nil, err
		}
		ti.AddrFormat = Sockaddr
	}
	tt, err := d.tcpDomain.openTransport(ti)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	l, err := flink.New(st.(*shm.Transport), tt.(*fnet.Transport), dom)
	if err != nil {
		_ = st.Close()
		_ = tt.Close()
		return nil, opErr(op, ErrIO, "%v", err)
	}
	return l, nil
}

// linkCanon is canonAddr for the linked provider: the stored form with
// the route decided (flink.Canon). Sockaddrs and FI_ADDR_STR strings of
// either member are accepted and routed.
func linkCanon(raw []byte) ([]byte, error) {
	const op = "AV.Insert"
	dom, err := flink.LocalDomain()
	if err != nil {
		return nil, opErr(op, ErrIO, "%v", err)
	}
	s, err := flink.Canon(raw, dom)
	switch {
	case err == nil:
		return []byte(s), nil
	case errors.Is(err, flink.ErrUnreachable):
		return nil, opErr(op, ErrHostUnreach, "%v", err)
	}
	return nil, opErr(op, ErrInval, "%v", err)
}
