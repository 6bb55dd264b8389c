package fi

import (
	"errors"
	"reflect"
	"sync"
	"testing"
)

// openFirst opens the fabric and domain of the first info GetInfo gives
// for provider prov.
func openFirst(t *testing.T, prov string) (*Info, *Fabric, *Domain) {
	t.Helper()
	h := AllocInfo()
	h.FabricAttr.ProvName = prov
	infos, err := GetInfo(Version(1, 17), "", "", 0, h)
	if err != nil {
		t.Fatalf("GetInfo(%s): %v", prov, err)
	}
	fab, err := OpenFabric(infos[0].FabricAttr)
	if err != nil {
		t.Fatalf("OpenFabric: %v", err)
	}
	dom, err := fab.OpenDomain(infos[0])
	if err != nil {
		t.Fatalf("OpenDomain: %v", err)
	}
	return infos[0], fab, dom
}

func TestFabricClose_BusyWhileDomainOpen(t *testing.T) {
	for _, prov := range []string{"shm", "tcp"} {
		t.Run(prov, func(t *testing.T) {
			_, fab, dom := openFirst(t, prov)
			if err := fab.Close(); !errors.Is(err, ErrBusy) {
				t.Fatalf("Fabric.Close with open domain = %v, want ErrBusy", err)
			}
			if err := dom.Close(); err != nil {
				t.Fatalf("Domain.Close: %v", err)
			}
			if err := fab.Close(); err != nil {
				t.Fatalf("Fabric.Close after domain closed: %v", err)
			}
			if err := fab.Close(); !errors.Is(err, ErrOpBadState) {
				t.Fatalf("second Fabric.Close = %v, want ErrOpBadState", err)
			}
			if err := dom.Close(); !errors.Is(err, ErrOpBadState) {
				t.Fatalf("second Domain.Close = %v, want ErrOpBadState", err)
			}
		})
	}
}

func TestDomainClose_BusyWhileChildrenOpen(t *testing.T) {
	for _, kind := range []childKind{childAV, childCQ, childEndpoint} {
		t.Run(childKindNames[kind], func(t *testing.T) {
			_, fab, dom := openFirst(t, "shm")
			defer fab.Close()
			if err := dom.addChild(kind); err != nil {
				t.Fatal(err)
			}
			if err := dom.Close(); !errors.Is(err, ErrBusy) {
				t.Fatalf("Domain.Close with open %s = %v, want ErrBusy", childKindNames[kind], err)
			}
			dom.dropChild(kind)
			if err := dom.Close(); err != nil {
				t.Fatalf("Domain.Close after child closed: %v", err)
			}
			if err := dom.addChild(kind); !errors.Is(err, ErrOpBadState) {
				t.Fatalf("addChild on closed domain = %v, want ErrOpBadState", err)
			}
		})
	}
}

func TestOpenDomain_ClosedFabricRefused(t *testing.T) {
	info, fab, dom := openFirst(t, "tcp")
	dom.Close()
	fab.Close()
	if _, err := fab.OpenDomain(info); !errors.Is(err, ErrOpBadState) {
		t.Fatalf("OpenDomain on closed fabric = %v, want ErrOpBadState", err)
	}
}

func TestOpenFabric_BadAttributes(t *testing.T) {
	cases := []struct {
		name string
		attr *FabricAttr
		want Errno
	}{
		{"nil attr", nil, ErrInval},
		{"no provider name", &FabricAttr{Name: "shm"}, ErrInval},
		{"unknown provider", &FabricAttr{ProvName: "verbs"}, ErrNoDev},
		{"unknown shm fabric", &FabricAttr{ProvName: "shm", Name: "other"}, ErrNoDev},
		{"tcp subnet not present", &FabricAttr{ProvName: "tcp", Name: "203.0.113.0/24"}, ErrNoDev},
		{"api version too new", &FabricAttr{ProvName: "shm", APIVersion: Version(9, 0)}, ErrNoSys},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := OpenFabric(c.attr)
			if !errors.Is(err, c.want) || f != nil {
				t.Fatalf("OpenFabric = %v, %v; want nil, %v", f, err, c.want)
			}
		})
	}
}

func TestOpenFabric_LayeredProviderName(t *testing.T) {
	for _, name := range []string{"ofi_rxm;tcp", "tcp;ofi_rxm", "TCP"} {
		f, err := OpenFabric(&FabricAttr{ProvName: name, Name: "127.0.0.1/32"})
		if err != nil {
			t.Fatalf("OpenFabric(%q): %v", name, err)
		}
		if a := f.Attr(); a.ProvName != "tcp" || a.Fabric != f {
			t.Errorf("Attr = %+v", a)
		}
		f.Close()
	}
}

func TestOpenDomain_BadInfo(t *testing.T) {
	info, fab, dom := openFirst(t, "tcp")
	defer fab.Close()
	defer dom.Close()
	noDom := info.Dup()
	noDom.DomainAttr.Name = "nosuchif0"
	wrongProv := info.Dup()
	wrongProv.FabricAttr.ProvName = "shm"
	cases := []struct {
		name string
		info *Info
		want Errno
	}{
		{"nil info", nil, ErrInval},
		{"nil domain attr", &Info{}, ErrInval},
		{"unknown domain", noDom, ErrNoDev},
		{"other provider's info", wrongProv, ErrInval},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := fab.OpenDomain(c.info)
			if !errors.Is(err, c.want) || d != nil {
				t.Fatalf("OpenDomain = %v, %v; want nil, %v", d, err, c.want)
			}
		})
	}
	// failed opens do not count as open domains
	dom.Close()
	if err := fab.Close(); err != nil {
		t.Fatalf("Fabric.Close after failed OpenDomains: %v", err)
	}
}

func TestDomain_KeepsPrivateInfo(t *testing.T) {
	info, fab, dom := openFirst(t, "shm")
	defer fab.Close()
	defer dom.Close()
	info.DomainAttr.Name = "changed"
	got := dom.Info()
	if got.DomainAttr.Name != "shm" || got.DomainAttr.Domain != dom || got.FabricAttr.Fabric != fab {
		t.Fatalf("domain info = %+v / %+v", got.DomainAttr, got.FabricAttr)
	}
	if dom.Fabric() != fab {
		t.Fatal("Domain.Fabric mismatch")
	}
}

func TestDomain_ConcurrentChildCounting(t *testing.T) {
	_, fab, dom := openFirst(t, "shm")
	defer fab.Close()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if err := dom.addChild(childEndpoint); err != nil {
					t.Error(err)
					return
				}
				dom.dropChild(childEndpoint)
			}
		}()
	}
	wg.Wait()
	if err := dom.Close(); err != nil {
		t.Fatalf("Close after balanced add/drop: %v", err)
	}
}

func TestAllocInfo_AllAttributesZeroed(t *testing.T) {
	i := AllocInfo()
	if i.TxAttr == nil || i.RxAttr == nil || i.EpAttr == nil || i.DomainAttr == nil || i.FabricAttr == nil {
		t.Fatal("AllocInfo left an attribute struct nil")
	}
	if *i.TxAttr != (TxAttr{}) || *i.RxAttr != (RxAttr{}) || *i.FabricAttr != (FabricAttr{}) {
		t.Fatal("AllocInfo attributes not zero")
	}
}

func TestInfoDup_DeepCopyWithoutHandle(t *testing.T) {
	src := AllocInfo()
	src.Caps = Msg | Tagged
	src.SrcAddr = []byte("fi_shm://a")
	src.DestAddr = []byte{1, 2, 3}
	src.Handle = "handle"
	src.EpAttr.AuthKey = []byte{9}
	src.DomainAttr.AuthKey = []byte{8}
	src.DomainAttr.Name = "d"
	src.Nic = &Nic{DeviceAttr: &DeviceAttr{Name: "eth0"}, BusAttr: &BusAttr{}, LinkAttr: &LinkAttr{MTU: 1500}}
	d := src.Dup()
	if d.Handle != nil {
		t.Fatal("Dup copied Handle")
	}
	src.Handle = nil
	if !reflect.DeepEqual(d, src) {
		t.Fatalf("Dup differs:\n%v\n%v", d, src)
	}
	d.SrcAddr[0] = 'X'
	d.DestAddr[0] = 99
	d.EpAttr.AuthKey[0] = 0
	d.DomainAttr.AuthKey[0] = 0
	d.DomainAttr.Name = "changed"
	d.TxAttr.Size = 5
	d.Nic.DeviceAttr.Name = "x"
	d.Nic.LinkAttr.MTU = 1
	if src.SrcAddr[0] != 'f' || src.DestAddr[0] != 1 || src.EpAttr.AuthKey[0] != 9 || src.DomainAttr.AuthKey[0] != 8 ||
		src.DomainAttr.Name != "d" || src.TxAttr.Size != 0 || src.Nic.DeviceAttr.Name != "eth0" || src.Nic.LinkAttr.MTU != 1500 {
		t.Fatal("Dup shares memory with the original")
	}
	var nilInfo *Info
	if nilInfo.Dup() != nil {
		t.Fatal("Dup of nil")
	}
	partial := &Info{Caps: Msg}
	if p := partial.Dup(); p.TxAttr != nil || p.Caps != Msg {
		t.Fatal("Dup invented attributes")
	}
}

func TestVersion_PackingLikeFI_VERSION(t *testing.T) {
	v := Version(1, 17)
	if v != 1<<16|17 || Major(v) != 1 || Minor(v) != 17 {
		t.Fatalf("Version(1,17) = %#x", v)
	}
	if MajorVersion != 2 || MinorVersion != 0 {
		t.Fatal("library API version must be 2.0")
	}
	if VersionString() != "2.0.0" {
		t.Fatalf("VersionString = %q", VersionString())
	}
}

func TestZeroObjects_ErrorsNotPanics(t *testing.T) {
	var nilFab *Fabric
	var nilDom *Domain
	for name, err := range map[string]error{
		"nil Fabric.Close":       nilFab.Close(),
		"zero Fabric.Close":      (&Fabric{}).Close(),
		"nil Domain.Close":       nilDom.Close(),
		"zero Domain.Close":      (&Domain{}).Close(),
		"zero Domain.addChild":   (&Domain{}).addChild(childCQ),
		"zero Fabric.OpenDomain": func() error { _, err := (&Fabric{}).OpenDomain(AllocInfo()); return err }(),
	} {
		if !errors.Is(err, ErrInval) {
			t.Errorf("%s = %v, want ErrInval", name, err)
		}
	}
	if nilFab.Attr() != (FabricAttr{}) || nilDom.Info() != nil || nilDom.Fabric() != nil {
		t.Error("accessors on nil objects")
	}
	infos, err := GetInfo(v117, "", "", 0, hintsWith(func(h *Info) { h.FabricAttr.Fabric = &Fabric{} }))
	wantNoData(t, infos, err)
	infos, err = GetInfo(v117, "", "", 0, hintsWith(func(h *Info) { h.DomainAttr.Domain = &Domain{} }))
	wantNoData(t, infos, err)
}

func TestOpenDomain_InfoForAnotherFabricRefused(t *testing.T) {
	info, fab, dom := openFirst(t, "tcp")
	defer fab.Close()
	defer dom.Close()
	other := info.Dup()
	other.FabricAttr.Name = "198.51.100.0/24"
	if d, err := fab.OpenDomain(other); !errors.Is(err, ErrInval) || d != nil {
		t.Fatalf("OpenDomain with another fabric's info = %v, %v; want ErrInval", d, err)
	}
}
