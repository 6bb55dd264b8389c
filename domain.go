package fi

import (
	"fmt"

	"github.com/gofi-dev/fi/engine"
	"strings"
	"sync"
)

// Domain is an open fabric access domain (fi_domain(3)): one provider
// domain (for tcp an IP interface, for shm the host) within a fabric. AVs,
// CQs and endpoints are opened on it. Safe for concurrent use.
type Domain struct {
	fabric *Fabric
	pd     provDomain
	info   *Info // private copy of the opening info; DomainAttr.Domain is d

	mu       sync.Mutex
	children [numChildKinds]int // open children by kind
	closed   bool

	ser *engine.Serial // serialises the data path when ThreadSafe

	keys mrKeys // the key table of MRs and counters (mr.go), made on first use
}

// childKind names the kinds of objects a domain counts.
type childKind int

const (
	childAV childKind = iota
	childCQ
	childEndpoint
	childMR
	childCntr
	numChildKinds
)

var childKindNames = [numChildKinds]string{"AV", "CQ", "endpoint", "MR", "counter"}

// OpenDomain opens the domain info describes (as GetInfo returned it) on
// fabric f: info.FabricAttr.ProvName must name f's provider and
// info.DomainAttr.Name one of its domains. A nil info or missing
// attributes give ErrInval, a domain f does not have ErrNoDev, a closed
// fabric ErrOpBadState. The domain keeps its own copy of info.
func (f *Fabric) OpenDomain(info *Info) (*Domain, error) {
	const op = "Fabric.OpenDomain"
	if !f.open() {
		return nil, notOpenFabric(op)
	}
	if info == nil || info.DomainAttr == nil {
		return nil, opErr(op, ErrInval, "nil info or DomainAttr")
	}
	if info.FabricAttr != nil && info.FabricAttr.ProvName != "" && !provNameMatches(info.FabricAttr.ProvName, f.prov.name()) {
		return nil, opErr(op, ErrInval, "info is for provider %q, fabric is %q", info.FabricAttr.ProvName, f.prov.name())
	}
	if info.FabricAttr != nil && info.FabricAttr.Name != "" && info.FabricAttr.Name != f.attr.Name {
		return nil, opErr(op, ErrInval, "info is for fabric %q, not %q", info.FabricAttr.Name, f.attr.Name)
	}
	if err := f.addDomain(); err != nil {
		return nil, err
	}
	own := info.Dup()
	if own.FabricAttr == nil {
		own.FabricAttr = &FabricAttr{}
	}
	fa := f.attr
	own.FabricAttr = &fa
	pd, err := f.pf.openDomain(own)
	if err != nil {
		f.dropDomain()
		return nil, err
	}
	d := &Domain{fabric: f, pd: pd, info: own, ser: engine.NewSerial(own.DomainAttr.Threading == ThreadSafe)}
	own.DomainAttr.Domain = d
	return d, nil
}

// open reports whether d came from OpenDomain.
func (d *Domain) open() bool { return d != nil && d.pd != nil }

func notOpenDomain(op string) error {
	return opErr(op, ErrInval, "not a domain from OpenDomain (nil or zero value)")
}

// Fabric returns the fabric the domain was opened on (nil for a nil or
// unopened Domain).
func (d *Domain) Fabric() *Fabric {
	if d == nil {
		return nil
	}
	return d.fabric
}

// Info returns a copy of the info the domain was opened with (nil for a
// nil or unopened Domain).
func (d *Domain) Info() *Info {
	if !d.open() {
		return nil
	}
	return d.info.Dup()
}

// Close closes the domain. It fails with ErrBusy while AVs, CQs,
// endpoints, MRs or counters opened on it are still open, and with ErrOpBadState when
// already closed.
func (d *Domain) Close() error {
	const op = "Domain.Close"
	if !d.open() {
		return notOpenDomain(op)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return opErr(op, ErrOpBadState, "domain %q already closed", d.info.DomainAttr.Name)
	}
	var open []string
	for k, n := range d.children {
		if n > 0 {
			open = append(open, fmt.Sprintf("%d %s(s)", n, childKindNames[k]))
		}
	}
	if len(open) > 0 {
		return opErr(op, ErrBusy, "domain %q still has %s open", d.info.DomainAttr.Name, strings.Join(open, ", "))
	}
	if err := d.keys.close(); err != nil {
		return opErr(op, ErrIO, "key table: %v", err)
	}
	if err := d.pd.close(); err != nil {
		return err
	}
	d.closed = true
	d.fabric.dropDomain()
	return nil
}

// addChild counts an AV, CQ or endpoint being opened on d. Openers call it
// before creating the object and must call dropChild(kind) if creation then
// fails, and once when the object closes. It fails with ErrOpBadState once
// the domain is closed.
func (d *Domain) addChild(kind childKind) error {
	if !d.open() {
		return notOpenDomain("Domain.Open" + childKindNames[kind])
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return opErr("Domain.Open"+childKindNames[kind], ErrOpBadState, "domain %q is closed", d.info.DomainAttr.Name)
	}
	d.children[kind]++
	return nil
}

// dropChild uncounts a child added with addChild.
func (d *Domain) dropChild(kind childKind) {
	d.mu.Lock()
	if d.children[kind] <= 0 {
		d.mu.Unlock()
		panic("fi: Domain.dropChild without addChild")
	}
	d.children[kind]--
	d.mu.Unlock()
}

// serial returns the domain's data-path serialisation (a mutex in
// ThreadSafe domains, nothing otherwise), shared by its CQs and endpoints.
func (d *Domain) serial() *engine.Serial { return d.ser }
