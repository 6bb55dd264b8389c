package fi

import (
	"errors"
	"net/netip"
	"syscall"

	fnet "github.com/gofi-dev/fi/net"
	"github.com/gofi-dev/fi/transport"
)

// openTransport starts the endpoint's listener: on the info's source
// address when it names one (port 0 picks a free port), otherwise on the
// domain's interface address. Name then reports the real address.
func (d *tcpDomain) openTransport(info *Info) (transport.Transport, error) {
	const op = "Domain.OpenEndpoint"
	var ap netip.AddrPort
	if len(info.SrcAddr) > 0 {
		a, err := tcpDecodeAddr(info.AddrFormat, info.SrcAddr)
		if err != nil {
			return nil, opErr(op, ErrInval, "source address: %v", err)
		}
		ap = a
	}
	if !ap.Addr().IsValid() || ap.Addr().IsUnspecified() {
		ip, err := d.ifaceIP(info.AddrFormat)
		if err != nil {
			return nil, err
		}
		ap = netip.AddrPortFrom(ip, ap.Port())
	}
	cfg := fnet.Config{Addr: ap.String()}
	switch {
	case len(info.EpAttr.AuthKey) > 0:
		cfg.AuthKey = info.EpAttr.AuthKey
	case len(info.DomainAttr.AuthKey) > 0:
		cfg.AuthKey = info.DomainAttr.AuthKey
	}
	if inj := info.TxAttr.InjectSize; inj > 16<<10 {
		cfg.MaxEager = min(inj, 64<<10)
	}
	tr, err := fnet.Listen(cfg)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, opErr(op, ErrAddrInUse, "tcp: %v", err)
		}
		return nil, opErr(op, ErrIO, "tcp: %v", err)
	}
	if info.AddrFormat == AddrStr {
		return &tcpStrTransport{Transport: tr}, nil
	}
	return tr, nil
}

// ifaceIP returns the domain interface's address of the format's family.
func (d *tcpDomain) ifaceIP(f AddrFormat) (netip.Addr, error) {
	ifaces, err := tcpIfaces()
	if err != nil {
		return netip.Addr{}, err
	}
	want6 := f == SockaddrIn6
	for _, ifc := range ifaces {
		if ifc.name == d.iface && ifc.ip.Is6() == want6 {
			return ifc.ip, nil
		}
	}
	for _, ifc := range ifaces {
		if ifc.name == d.iface {
			return ifc.ip, nil
		}
	}
	return netip.Addr{}, opErr("Domain.OpenEndpoint", ErrNoDev, "tcp: interface %q has no address", d.iface)
}

// tcpStrTransport presents a tcp transport's sockaddr addresses as
// FI_ADDR_STR strings (fi_sockaddr_in://a.b.c.d:port) for endpoints whose
// info asks for FI_ADDR_STR. Only the address calls differ.
type tcpStrTransport struct {
	*fnet.Transport
}

func (t *tcpStrTransport) Name() []byte { return toAddrStr(t.Transport.Name()) }

func (t *tcpStrTransport) PeerAddr(p transport.Peer) []byte {
	return toAddrStr(t.Transport.PeerAddr(p))
}

func (t *tcpStrTransport) Resolve(addr []byte) (transport.Peer, transport.Code) {
	ap, err := tcpDecodeAddr(AddrStr, addr)
	if err != nil {
		return 0, transport.EInval
	}
	sa, err := SockaddrFromAddrPort(ap)
	if err != nil {
		return 0, transport.EInval
	}
	return t.Transport.Resolve(sa)
}

func toAddrStr(sa []byte) []byte {
	ap, err := AddrPortFromSockaddr(sa)
	if err != nil {
		return nil
	}
	return []byte(SockaddrStr(ap))
}
