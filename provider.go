package fi

import (
	"os"
	"strings"
)

// The provider boundary, shaped like libfabric's struct fi_provider:
// getinfo, fabric open, and (through the objects it opens) close. Each
// provider is described by root files (prov_shm.go, prov_tcp.go) and its
// transport lives in an internal package. Public handles (Fabric, Domain,
// ...) are thin and forward to the provider objects below.
//
// Concurrency: provider methods are called from many goroutines at once
// (GetInfo is safe for concurrent use); implementations keep no mutable
// shared state outside their opened objects.
type provider interface {
	// name is the provider name as reported in FabricAttr.ProvName.
	name() string
	// version is the provider version, packed like Version.
	version() uint32
	// defaults returns a fresh info holding everything the provider
	// supports with default attributes, the answer to FI_PROV_ATTR_ONLY.
	defaults() *Info
	// getInfo returns the provider's candidates for req, best first: the
	// fabrics and domains it can serve with addresses resolvable for the
	// request's node, service and flags. The common matcher (getinfo.go)
	// then applies the hints. An error (wrapping ErrNoData) says why the
	// provider cannot serve the request at all.
	getInfo(req *infoReq) ([]*provInfo, error)
	// openFabric opens the fabric attr.Name (fi_fabric).
	openFabric(attr *FabricAttr) (provFabric, error)
}

// provFabric is a provider's open fabric.
type provFabric interface {
	// openDomain opens the domain info.DomainAttr.Name (fi_domain). info
	// is the caller's private copy; the provider may keep it.
	openDomain(info *Info) (provDomain, error)
	// close releases the fabric; the root checks that no domain is open.
	close() error
}

// provDomain is a provider's open domain. Later issues add the per-object
// openers (AV, CQ, endpoint) here as small per-feature interfaces.
type provDomain interface {
	// close releases the domain; the root checks that no child is open.
	close() error
}

// provInfo is one candidate a provider offers to the matcher.
type provInfo struct {
	// info is the template: Caps holds every capability the candidate
	// supports, Mode the modes it needs, attributes their defaults and
	// limits (sizes are maxima), FabricAttr/DomainAttr their names.
	info *Info
	// formats lists the address formats supported; formats[0] is the
	// default.
	formats []AddrFormat
	// threadMax is the strongest threading model supported (ThreadSafe
	// supports every model); info.DomainAttr.Threading is the default.
	threadMax Threading
	// txOpFlags and rxOpFlags are the default operation flags the
	// candidate accepts in TxAttr.OpFlags / RxAttr.OpFlags hints.
	txOpFlags, rxOpFlags Flags
	// addrs returns the source and destination addresses encoded in
	// format f (one of formats); an error rejects the candidate.
	addrs func(f AddrFormat) (src, dest []byte, err error)
}

// infoReq is one GetInfo request as providers see it.
type infoReq struct {
	version uint32
	node    string
	service string
	flags   Flags
	hints   *Info    // never nil; every attribute struct allocated
	nodeStr *StrAddr // node parsed when it is an FI_ADDR_STR
}

// allProviders lists the providers, fastest first. Tests may swap it (never
// while GetInfo runs).
var allProviders = []provider{shmProv{}, tcpProv{}, linkProv{}}

// utilityProviders are libfabric utility-provider names a layered ProvName
// may carry ("ofi_rxm;tcp"); gofi's providers build those layers in, so
// they are ignored when matching. Alone, ofi_rxm names the RDM-over-stream
// layering that gofi's tcp provider implements.
var utilityProviders = map[string]string{
	"ofi_rxm":   "tcp",
	"ofi_rxd":   "",
	"ofi_mrail": "",
}

// provNameMatches reports whether the (possibly layered) provider name req
// names provider p. Core names compare case-insensitively, as libfabric
// does; "ofi_rxm;tcp" and "tcp;ofi_rxm" both name tcp.
func provNameMatches(req string, p string) bool {
	var core []string
	var utils []string
	for part := range strings.SplitSeq(req, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		l := strings.ToLower(part)
		if _, ok := utilityProviders[l]; ok || strings.HasPrefix(l, "ofi_hook_") {
			utils = append(utils, l)
			continue
		}
		core = append(core, part)
	}
	switch len(core) {
	case 0:
		for _, u := range utils {
			if utilityProviders[u] == p {
				return true
			}
		}
		return false
	case 1:
		return strings.EqualFold(core[0], p)
	default:
		return false
	}
}

// providerFilter is the parsed FI_PROVIDER environment variable: a comma
// list of provider names to use, or with a leading '^' to exclude.
type providerFilter struct {
	names   []string
	exclude bool
}

func parseProviderFilter(v string) providerFilter {
	var f providerFilter
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "^") {
		f.exclude = true
		v = v[1:]
	}
	for n := range strings.SplitSeq(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			f.names = append(f.names, n)
		}
	}
	return f
}

// allows reports whether provider p passes the filter. An empty filter
// allows everything.
func (f providerFilter) allows(p string) bool {
	if len(f.names) == 0 {
		return true
	}
	hit := false
	for _, n := range f.names {
		if provNameMatches(n, p) {
			hit = true
			break
		}
	}
	return hit != f.exclude
}

// selectProviders returns the providers allowed by FI_PROVIDER and by the
// hints' ProvName, in preference order. listAll (FI_PROV_ATTR_ONLY, a
// listing of providers) includes the linked provider without its being
// asked for.
func selectProviders(hints *Info, listAll bool) []provider {
	env := parseProviderFilter(os.Getenv("FI_PROVIDER"))
	var out []provider
	for _, p := range allProviders {
		if !env.allows(p.name()) {
			continue
		}
		if p.name() == linkName && !linkAsked(hints, env, listAll) {
			continue
		}
		if hints != nil && hints.FabricAttr != nil && hints.FabricAttr.ProvName != "" &&
			!provNameMatches(hints.FabricAttr.ProvName, p.name()) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// linkAsked reports whether the linked shm+tcp provider is wanted: it is
// offered only when asked for, by the hints' ProvName, by FI_PROVIDER
// naming it, or by hints asking for both LocalComm and RemoteComm (then
// first, see linkedFirst), and never while FI_PROVIDER excludes one of
// its members.
func linkAsked(hints *Info, env providerFilter, listAll bool) bool {
	if env.exclude && (!env.allows(shmName) || !env.allows(tcpName)) {
		return false
	}
	if listAll || !env.exclude && len(env.names) > 0 {
		return true // named: allows() passed
	}
	if hints == nil {
		return false
	}
	if hints.FabricAttr != nil && hints.FabricAttr.ProvName != "" {
		return true // named: selectProviders checked the name
	}
	return hints.Caps&(LocalComm|RemoteComm) == LocalComm|RemoteComm
}

// findProvider returns the provider a (possibly layered) name denotes.
func findProvider(name string) provider {
	for _, p := range allProviders {
		if provNameMatches(name, p.name()) {
			return p
		}
	}
	return nil
}

// provVersion is the version gofi's providers report: like libfabric's
// providers, major = 100*API major + API minor, minor = revision*10
// (printed "200.0").
var provVersion = Version(MajorVersion*100+MinorVersion, RevisionVersion*10)
