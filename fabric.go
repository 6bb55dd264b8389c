package fi

import "sync"

// Fabric is an open fabric (fi_fabric(3)): the root of the object tree, one
// provider's view of one network. Open domains with OpenDomain. Safe for
// concurrent use.
type Fabric struct {
	prov provider
	pf   provFabric
	attr FabricAttr // copy of the opening attributes, Fabric set to itself

	mu      sync.Mutex
	domains int  // open domains
	closed  bool // Close succeeded
}

// OpenFabric opens the fabric attr describes, as returned by GetInfo in
// Info.FabricAttr: ProvName picks the provider (layered names such as
// "ofi_rxm;tcp" are accepted) and Name the fabric. A nil attr gives
// ErrInval; an unknown provider or fabric name gives ErrNoDev.
func OpenFabric(attr *FabricAttr) (*Fabric, error) {
	const op = "OpenFabric"
	if attr == nil {
		return nil, opErr(op, ErrInval, "nil FabricAttr")
	}
	if attr.ProvName == "" {
		return nil, opErr(op, ErrInval, "FabricAttr.ProvName is empty")
	}
	p := findProvider(attr.ProvName)
	if p == nil {
		return nil, opErr(op, ErrNoDev, "no provider named %q", attr.ProvName)
	}
	if attr.APIVersion > Version(MajorVersion, MinorVersion) {
		return nil, opErr(op, ErrNoSys, "API version %d.%d is newer than the library's %d.%d",
			Major(attr.APIVersion), Minor(attr.APIVersion), MajorVersion, MinorVersion)
	}
	pf, err := p.openFabric(attr)
	if err != nil {
		return nil, err
	}
	f := &Fabric{prov: p, pf: pf, attr: *attr}
	f.attr.ProvName = p.name()
	f.attr.ProvVersion = p.version()
	if f.attr.APIVersion == 0 {
		f.attr.APIVersion = Version(MajorVersion, MinorVersion)
	}
	f.attr.Fabric = f
	return f, nil
}

// Attr returns a copy of the fabric's attributes (Fabric points back at f);
// zero for a nil or unopened Fabric.
func (f *Fabric) Attr() FabricAttr {
	if f == nil {
		return FabricAttr{}
	}
	return f.attr
}

// open reports whether f came from OpenFabric.
func (f *Fabric) open() bool { return f != nil && f.pf != nil }

// notOpen is the error for methods called on a nil or zero Fabric.
func notOpenFabric(op string) error {
	return opErr(op, ErrInval, "not a fabric from OpenFabric (nil or zero value)")
}

// Close closes the fabric. It fails with ErrBusy while any domain opened on
// it is still open, and with ErrOpBadState when already closed.
func (f *Fabric) Close() error {
	const op = "Fabric.Close"
	if !f.open() {
		return notOpenFabric(op)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return opErr(op, ErrOpBadState, "fabric %q already closed", f.attr.Name)
	}
	if f.domains > 0 {
		return opErr(op, ErrBusy, "fabric %q has %d open domain(s)", f.attr.Name, f.domains)
	}
	if err := f.pf.close(); err != nil {
		return err
	}
	f.closed = true
	return nil
}

// addDomain counts a domain being opened; it fails once the fabric is
// closed. Every successful addDomain is paired with one dropDomain.
func (f *Fabric) addDomain() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return opErr("Fabric.OpenDomain", ErrOpBadState, "fabric %q is closed", f.attr.Name)
	}
	f.domains++
	return nil
}

func (f *Fabric) dropDomain() {
	f.mu.Lock()
	f.domains--
	f.mu.Unlock()
}
