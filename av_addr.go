package fi

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/gofi-dev/fi/internal/addrstr"
)

// Address validation and the node/service forms of AV insertion
// (fi_av_insertsvc, fi_av_insertsym).

// avLookupHost resolves a host name for InsertSvc and InsertSym. Tests
// replace it (never while an AV call runs).
var avLookupHost = func(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// canonAddr validates raw as an address of format f and returns its
// canonical form: sockaddrs cut to their size (a longer buffer such as a
// sockaddr_storage is accepted) with sin_zero cleared, written to scratch
// (cap >= maxSockaddrLen, no allocation); FI_ADDR_STR strings parsed and
// re-formatted (one trailing NUL accepted). prov tells which FI_ADDR_STR
// forms are usable: fi_shm:// for shm, fi_sockaddr* for tcp. Errors are
// ErrInval.
func canonAddr(f AddrFormat, prov string, raw []byte, scratch []byte) ([]byte, error) {
	const op = "AV.Insert"
	switch f {
	case SockaddrIn, SockaddrIn6, Sockaddr:
		if len(raw) < 2 {
			return nil, opErr(op, ErrInval, "%d bytes is too short for a sockaddr", len(raw))
		}
		fam := binary.LittleEndian.Uint16(raw)
		switch {
		case fam == afInet && f != SockaddrIn6:
			if len(raw) < sizeofSockIn {
				return nil, opErr(op, ErrInval, "%d bytes is too short for a sockaddr_in", len(raw))
			}
			b := append(scratch[:0], raw[:sizeofSockIn]...)
			clear(b[8:])
			return b, nil
		case fam == afInet6 && f != SockaddrIn:
			if len(raw) < sizeofSockI6 {
				return nil, opErr(op, ErrInval, "%d bytes is too short for a sockaddr_in6", len(raw))
			}
			return append(scratch[:0], raw[:sizeofSockI6]...), nil
		}
		return nil, opErr(op, ErrInval, "address family %d does not fit the AV's format %v", fam, f)
	case AddrStr:
		if prov == linkName {
			return linkCanon(raw)
		}
		if len(raw) > maxAddrStrLen {
			return nil, opErr(op, ErrInval, "address longer than %d bytes", maxAddrStrLen)
		}
		a, err := ParseAddrStr(string(raw))
		if err != nil {
			return nil, err
		}
		if prov == shmName {
			if a.Format != shmAddrPrefix || a.Node == "" {
				return nil, opErr(op, ErrInval, "%q is not an fi_shm://name address", a)
			}
		} else if _, err := a.AddrPort(); err != nil {
			return nil, err
		}
		return []byte(FormatAddrStr(a)), nil
	}
	return nil, opErr(op, ErrInval, "AV format %v is not supported", f)
}

// InsertSvc inserts the address node and service name (fi_av_insertsvc),
// defined as for GetInfo: for tcp, node an IP literal or host name (the
// loopback address when empty; with fi.NumericHost only literals) and
// service a port number or name; for shm, node empty or this host and
// service the endpoint name. node may instead be an FI_ADDR_STR address
// (fi_sockaddr_in://..., fi_shm://...) with an empty service. Flags as
// Insert; a failure returns AddrNotAvail and the error. AVUserID does not
// apply (set user ids with SetUserID).
func (av *AV) InsertSvc(node, service string, flags Flags) (Addr, error) {
	const op = "AV.InsertSvc"
	if flags&AVUserID != 0 {
		return AddrNotAvail, opErr(op, ErrInval, "FI_AV_USER_ID needs user ids: insert, then SetUserID")
	}
	if flags&^insertFlags != 0 {
		return AddrNotAvail, opErr(op, ErrBadFlags, "flags %v do not apply to AV insertion", flags&^insertFlags)
	}
	sym, err := av.expandSym(op, node, 1, service, 1, flags)
	if err != nil {
		return AddrNotAvail, err
	}
	out, err := av.insert(op, sym.encode(av.format), nil, flags)
	if err != nil {
		return AddrNotAvail, err
	}
	return out[0], nil
}

// InsertSym inserts nodecnt x svccnt addresses (fi_av_insertsym): nodes
// node .. node+nodecnt-1, each with services service .. service+svccnt-1,
// all services of a node before the next node. Numeric IPv4 and IPv6
// nodes count as numbers (10.1.1.255 is followed by 10.1.2.0); a host
// name needs a numeric suffix when nodecnt > 1 (host10, host11; ErrInval
// otherwise), as does a shm endpoint name. Services are port numbers (shm:
// names with a numeric suffix). node and service are as for InsertSvc.
//
// On an AV opened with fi.Symmetric whose unused indices all lie past its
// last entry, sockaddr ranges are stored compactly: a range record instead
// of per-address storage (a named AV holds up to 16 such records; later
// ranges are stored per address). Flags as InsertSvc.
func (av *AV) InsertSym(node string, nodecnt int, service string, svccnt int, flags Flags) ([]Addr, error) {
	const op = "AV.InsertSym"
	if flags&AVUserID != 0 {
		return nil, opErr(op, ErrInval, "FI_AV_USER_ID needs user ids: insert, then SetUserID")
	}
	if flags&^insertFlags != 0 {
		return nil, opErr(op, ErrBadFlags, "flags %v do not apply to AV insertion", flags&^insertFlags)
	}
	if nodecnt < 1 || svccnt < 1 {
		return nil, opErr(op, ErrInval, "nodecnt %d and svccnt %d must be at least 1", nodecnt, svccnt)
	}
	if uint64(nodecnt)*uint64(svccnt) > avIndexLimit || uint64(nodecnt) > avIndexLimit || uint64(svccnt) > 65536 {
		return nil, opErr(op, ErrInval, "%d x %d addresses do not fit an AV", nodecnt, svccnt)
	}
	sym, err := av.expandSym(op, node, nodecnt, service, svccnt, flags)
	if err != nil {
		return nil, err
	}
	if av.attr.Flags&Symmetric != 0 && sym.ips != nil && sym.names == nil && av.format != AddrStr {
		if out, ok := av.insertRange(sym); ok {
			return out, nil
		}
	}
	return av.insert(op, sym.encode(av.format), nil, flags)
}

// insertRange stores sym as one compact range; ok is false when the AV
// cannot (holes below its end, a closed or read-only AV: the caller's
// per-address path reports those).
func (av *AV) insertRange(sym *symAddrs) ([]Addr, bool) {
	av.mu.Lock()
	if av.usable("", true) != nil {
		av.mu.Unlock()
		return nil, false
	}
	base := netip.AddrPortFrom(sym.ips[0], sym.port)
	var start uint64
	var ok bool
	if av.named != nil {
		if av.named.Lock() != nil {
			av.mu.Unlock()
			return nil, false
		}
		start, ok = av.named.InsertRange(base, uint64(sym.nodes), uint64(sym.svcs))
		av.named.Unlock()
	} else {
		start, ok = av.tab.InsertRange(base, uint64(sym.nodes), uint64(sym.svcs))
	}
	if ok {
		n := uint64(sym.nodes * sym.svcs)
		for i := start; i < start+n && i < uint64(len(av.userIDs)); i++ {
			av.clearUIDLocked(i)
		}
	}
	av.mu.Unlock()
	if !ok {
		return nil, false
	}
	out := make([]Addr, sym.nodes*sym.svcs)
	for i := range out {
		out[i] = Addr(start + uint64(i))
	}
	av.notify()
	return out, true
}

// symAddrs is an expanded node/service range: either IP nodes (ips, the
// first followed by nodes-1 successors computed on encode) with ports, or
// shm endpoint names.
type symAddrs struct {
	nodes, svcs int
	ips         []netip.Addr // one per node (tcp)
	port        uint16       // first port (tcp)
	names       []string     // every fi_shm:// address, in order (shm)
}

// encode renders every address in the AV's format, in insertion order.
func (s *symAddrs) encode(f AddrFormat) [][]byte {
	if s.names != nil {
		out := make([][]byte, len(s.names))
		for i, n := range s.names {
			out[i] = []byte(n)
		}
		return out
	}
	out := make([][]byte, 0, s.nodes*s.svcs)
	for _, ip := range s.ips {
		for k := 0; k < s.svcs; k++ {
			ap := netip.AddrPortFrom(ip, s.port+uint16(k))
			var b []byte
			if f == AddrStr {
				b = []byte(SockaddrStr(ap))
			} else {
				b, _ = SockaddrFromAddrPort(ap) // ips were validated
			}
			out = append(out, b)
		}
	}
	return out
}

// expandSym turns node/service ranges into addresses (see InsertSym).
func (av *AV) expandSym(op, node string, nodecnt int, service string, svccnt int, flags Flags) (*symAddrs, error) {
	s := &symAddrs{nodes: nodecnt, svcs: svccnt}
	var nodeStr *StrAddr
	if IsAddrStr(node) {
		a, err := ParseAddrStr(node)
		if err != nil {
			return nil, err
		}
		if service != "" {
			return nil, opErr(op, ErrInval, "service %q given with the FI_ADDR_STR node %q", service, node)
		}
		nodeStr = &a
	}
	if av.prov == shmName {
		return s, av.expandShm(op, s, node, nodeStr, service)
	}
	if nodeStr != nil {
		ap, err := nodeStr.AddrPort()
		if err != nil {
			return nil, err
		}
		if ap.Port() == 0 && nodeStr.Service == "" {
			return nil, opErr(op, ErrInval, "%q names no port", node)
		}
		if int(ap.Port())+svccnt-1 > 65535 {
			return nil, opErr(op, ErrInval, "ports %d+%d run past 65535", ap.Port(), svccnt)
		}
		s.port = ap.Port()
		ips, err := addrstr.IPRange(ap.Addr(), nodecnt)
		if err != nil {
			return nil, inval(op, err)
		}
		s.ips = ips
		return s, av.checkFamily(op, s.ips[0])
	}
	port, err := addrstr.Port(service, svccnt)
	if err != nil {
		return nil, inval(op, err)
	}
	s.port = port
	switch ip, perr := netip.ParseAddr(node); {
	case node == "":
		lo := netip.AddrFrom4([4]byte{127, 0, 0, 1})
		if av.format == SockaddrIn6 {
			lo = netip.IPv6Loopback()
		}
		s.ips, err = addrstr.IPRange(lo, nodecnt)
	case perr == nil:
		s.ips, err = addrstr.IPRange(ip.Unmap(), nodecnt)
	default:
		names, nerr := addrstr.SuffixRange(node, nodecnt)
		if nerr != nil {
			return nil, inval(op, nerr)
		}
		if flags&NumericHost != 0 {
			return nil, opErr(op, ErrInval, "node %q is not numeric and FI_NUMERICHOST was given", node)
		}
		for _, n := range names {
			ip, rerr := av.resolve(op, n)
			if rerr != nil {
				return nil, rerr
			}
			s.ips = append(s.ips, ip)
		}
	}
	if err != nil {
		return nil, inval(op, err)
	}
	return s, av.checkFamily(op, s.ips[0])
}

// checkFamily checks ip fits the AV's format.
func (av *AV) checkFamily(op string, ip netip.Addr) error {
	if av.format == SockaddrIn && !ip.Is4() || av.format == SockaddrIn6 && ip.Is4() {
		return opErr(op, ErrInval, "%v does not fit the AV's format %v", ip, av.format)
	}
	return nil
}

// resolve looks up host and picks the first address of the AV's family.
func (av *AV) resolve(op, host string) (netip.Addr, error) {
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	ips, err := avLookupHost(ctx, host)
	if err != nil {
		return netip.Addr{}, opErr(op, ErrAddrNotAvail, "cannot resolve %q: %v", host, err)
	}
	for _, ip := range ips {
		ip = ip.Unmap()
		if av.checkFamily(op, ip) == nil {
			return ip, nil
		}
	}
	return netip.Addr{}, opErr(op, ErrAddrNotAvail, "%q has no address of the AV's format %v", host, av.format)
}

// expandShm fills s.names for the shm provider: an fi_shm:// node with
// nodecnt names, or this host with svccnt endpoint names.
func (av *AV) expandShm(op string, s *symAddrs, node string, nodeStr *StrAddr, service string) error {
	var names []string
	var err error
	switch {
	case nodeStr != nil:
		if nodeStr.Format != shmAddrPrefix || nodeStr.Node == "" {
			return opErr(op, ErrInval, "%q is not an fi_shm://name address", node)
		}
		if s.svcs != 1 {
			return opErr(op, ErrInval, "svccnt %d with an fi_shm:// node (it carries no service)", s.svcs)
		}
		names, err = addrstr.SuffixRange(nodeStr.Node, s.nodes)
	default:
		if node != "" {
			if err := shmLocalNode(node, false); err != nil {
				return opErr(op, ErrInval, "shm reaches only this host: %v", err)
			}
		}
		if s.nodes != 1 {
			return opErr(op, ErrInval, "nodecnt %d: shm reaches only this host", s.nodes)
		}
		if service == "" {
			return opErr(op, ErrInval, "shm needs an endpoint name as service (or an fi_shm:// node)")
		}
		names, err = addrstr.SuffixRange(service, s.svcs)
	}
	if err != nil {
		return inval(op, err)
	}
	for _, n := range names {
		if !validPart(n) || n == "" {
			return opErr(op, ErrInval, "%q is not a valid shm endpoint name", n)
		}
		s.names = append(s.names, FormatAddrStr(StrAddr{Format: shmAddrPrefix, Node: n}))
	}
	return nil
}
