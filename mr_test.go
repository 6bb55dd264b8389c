package fi

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofi-dev/fi/shm"
)

// openMRDomain opens a domain of prov with the given MR mode hint.
func openMRDomain(t *testing.T, prov string, mode MRMode) *Domain {
	t.Helper()
	h := AllocInfo()
	h.FabricAttr.ProvName = prov
	h.DomainAttr.MRMode = mode
	infos, err := GetInfo(Version(1, 17), "", "", 0, h)
	if err != nil {
		t.Fatalf("GetInfo(%s): %v", prov, err)
	}
	fab, err := OpenFabric(infos[0].FabricAttr)
	if err != nil {
		t.Fatal(err)
	}
	dom, err := fab.OpenDomain(infos[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dom.Close()
		_ = fab.Close()
	})
	return dom
}

func TestRegMR_Keys(t *testing.T) {
	for _, prov := range []string{"shm", "tcp"} {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			dom := openMRDomain(t, prov, 0)
			buf := make([]byte, 64)
			mr, err := dom.RegMR(buf, RemoteRead|RemoteWrite, 4096, 77, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Close()
			if mr.Key() != 77 || &mr.Bytes()[0] != &buf[0] || mr.Desc() != nil || mr.Access() != RemoteRead|RemoteWrite {
				t.Fatalf("key %d bytes %p desc %v", mr.Key(), mr.Bytes(), mr.Desc())
			}
			if _, err := dom.RegMR(buf, RemoteRead, 0, 77, 0); !errors.Is(err, ErrNoKey) {
				t.Fatalf("duplicate requested key: %v, want ErrNoKey", err)
			}
			for _, c := range []struct {
				name   string
				access Flags
				off    uint64
				flags  Flags
				want   Errno
			}{
				{"access bit not for regions", Tagged, 0, 0, ErrInval},
				{"flags", RemoteRead, 0, RMAEvent, ErrBadFlags},
				{"offset wraps", RemoteRead, ^uint64(0) - 10, 0, ErrInval},
			} {
				if _, err := dom.RegMR(buf, c.access, c.off, 1000, c.flags); !errors.Is(err, c.want) {
					t.Errorf("%s: %v, want %v", c.name, err, c.want)
				}
			}
			if err := dom.Close(); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "MR") {
				t.Fatalf("Domain.Close with an MR open: %v, want ErrBusy naming MRs", err)
			}
			if err := mr.Close(); err != nil {
				t.Fatal(err)
			}
			if err := mr.Close(); !errors.Is(err, ErrOpBadState) {
				t.Fatalf("second Close: %v", err)
			}
			// The key is free again.
			mr2, err := dom.RegMR(buf, RemoteRead, 0, 77, 0)
			if err != nil {
				t.Fatalf("re-registering a closed key: %v", err)
			}
			mr2.Close()
		})
	}
}

func TestRegMR_ProviderKeys(t *testing.T) {
	for _, prov := range []string{"shm", "tcp"} {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			dom := openMRDomain(t, prov, MRProvKey)
			if dom.Info().DomainAttr.MRMode&MRProvKey == 0 {
				t.Fatal("MRProvKey offered but not used")
			}
			seen := map[uint64]bool{}
			var mrs []*MR
			for range 20 {
				mr, err := dom.RegMR(make([]byte, 8), RemoteWrite, 0, 5, 0) // requested key ignored
				if err != nil {
					t.Fatal(err)
				}
				if seen[mr.Key()] {
					t.Fatalf("provider key %#x given twice", mr.Key())
				}
				seen[mr.Key()] = true
				mrs = append(mrs, mr)
			}
			for _, mr := range mrs {
				mr.Close()
			}
		})
	}
}

func TestRegMRAttr(t *testing.T) {
	dom := openMRDomain(t, "tcp", 0)
	if _, err := dom.RegMRAttr(&MRAttr{IOV: [][]byte{make([]byte, 1), make([]byte, 1)}}, 0); !errors.Is(err, ErrInval) {
		t.Fatalf("two buffers: %v", err)
	}
	mr, err := dom.RegMRAttr(&MRAttr{IOV: [][]byte{make([]byte, 4)}, Access: RemoteRead, RequestedKey: 3, Context: "c"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if mr.Key() != 3 || mr.Context() != "c" {
		t.Fatalf("key %d ctx %v", mr.Key(), mr.Context())
	}
	mr.Close()
}

// TestRegMR_TableFull registers up to the reported MRCnt: the next one
// fails with ErrNoMem, and a freed slot is usable again.
func TestRegMR_TableFull(t *testing.T) {
	dom := openMRDomain(t, "tcp", 0)
	n := dom.Info().DomainAttr.MRCnt
	mrs := make([]*MR, 0, n)
	for i := range n {
		mr, err := dom.RegMR(nil, RemoteRead, 0, uint64(i), 0)
		if err != nil {
			t.Fatalf("region %d of %d: %v", i, n, err)
		}
		mrs = append(mrs, mr)
	}
	if _, err := dom.RegMR(nil, RemoteRead, 0, uint64(n), 0); !errors.Is(err, ErrNoMem) {
		t.Fatalf("region beyond MRCnt: %v, want ErrNoMem", err)
	}
	mrs[0].Close()
	mr, err := dom.RegMR(nil, RemoteRead, 0, uint64(n), 0)
	if err != nil {
		t.Fatal(err)
	}
	mr.Close()
	for _, m := range mrs[1:] {
		m.Close()
	}
}

func TestAllocMR(t *testing.T) {
	for _, prov := range []string{"shm", "tcp"} {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			dom := openMRDomain(t, prov, 0)
			if _, err := dom.AllocMR(0, RemoteWrite); !errors.Is(err, ErrInval) {
				t.Fatalf("size 0: %v", err)
			}
			mr, err := dom.AllocMR(10000, RemoteWrite|RemoteRead)
			if err != nil {
				t.Fatal(err)
			}
			b := mr.Bytes()
			if len(b) != 10000 {
				t.Fatalf("len %d", len(b))
			}
			for _, c := range b {
				if c != 0 {
					t.Fatal("AllocMR memory not zeroed")
				}
			}
			b[9999] = 1
			files := func() int {
				m, _ := filepath.Glob(filepath.Join(shm.Dir(), "*.m*.*"))
				return len(m)
			}
			if prov == "shm" && files() != 1 {
				t.Fatalf("shm AllocMR: %d segment files", files())
			}
			if err := mr.Close(); err != nil {
				t.Fatal(err)
			}
			if files() != 0 {
				t.Fatalf("segment left after Close")
			}
		})
	}
}

func TestCntr_Basics(t *testing.T) {
	for _, prov := range []string{"shm", "tcp"} {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			dom := openMRDomain(t, prov, 0)
			if _, err := dom.OpenCntr(&CntrAttr{Flags: Send}); !errors.Is(err, ErrBadFlags) {
				t.Fatalf("flags: %v", err)
			}
			if _, err := dom.OpenCntr(&CntrAttr{Events: 7}); !errors.Is(err, ErrInval) {
				t.Fatalf("events: %v", err)
			}
			if _, err := dom.OpenCntr(&CntrAttr{WaitObj: WaitFD}); !errors.Is(err, ErrNoSys) {
				t.Fatalf("wait fd: %v", err)
			}
			c, err := dom.OpenCntr(nil)
			if err != nil {
				t.Fatal(err)
			}
			c.Add(5)
			c.AddErr(2)
			if c.Read() != 5 || c.ReadErr() != 2 {
				t.Fatalf("read %d/%d", c.Read(), c.ReadErr())
			}
			c.Set(1)
			c.SetErr(0)
			if c.Read() != 1 || c.ReadErr() != 0 {
				t.Fatalf("after set %d/%d", c.Read(), c.ReadErr())
			}
			if err := c.Wait(1, 0); err != nil {
				t.Fatalf("Wait for a reached threshold: %v", err)
			}
			start := time.Now()
			if err := c.Wait(2, 30*time.Millisecond); !errors.Is(err, ErrTimedOut) {
				t.Fatalf("Wait timeout: %v", err)
			}
			if time.Since(start) < 30*time.Millisecond {
				t.Fatal("Wait returned before its timeout")
			}
			// Another goroutine's Add wakes a sleeping Wait.
			go func() { time.Sleep(20 * time.Millisecond); c.Add(4) }()
			if err := c.Wait(5, 10*time.Second); err != nil {
				t.Fatalf("Wait woken by Add: %v", err)
			}
			// A change of the error count ends Wait with ErrAvail.
			go func() { time.Sleep(20 * time.Millisecond); c.AddErr(1) }()
			if err := c.Wait(100, 10*time.Second); !errors.Is(err, ErrAvail) {
				t.Fatalf("Wait on an error: %v, want ErrAvail", err)
			}
			mr, err := dom.RegMR(make([]byte, 8), RemoteWrite, 0, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			if dom.Info().Caps&RMAEvent == 0 {
				if err := mr.BindCntr(c, RemoteWrite); !errors.Is(err, ErrOpNotSupp) {
					t.Fatalf("BindCntr without RMAEvent: %v", err)
				}
			} else {
				if err := mr.BindCntr(c, RemoteWrite|RemoteRead); err != nil {
					t.Fatal(err)
				}
				if err := c.Close(); !errors.Is(err, ErrBusy) {
					t.Fatalf("Close while bound: %v, want ErrBusy", err)
				}
			}
			if err := dom.Close(); !errors.Is(err, ErrBusy) {
				t.Fatalf("Domain.Close with a counter open: %v", err)
			}
			mr.Close()
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if err := c.Add(1); !errors.Is(err, ErrOpBadState) {
				t.Fatalf("Add after Close: %v", err)
			}
			n, _ := dom.OpenCntr(&CntrAttr{WaitObj: WaitNone})
			if err := n.Wait(1, 0); !errors.Is(err, ErrNoSys) {
				t.Fatalf("Wait on WaitNone: %v", err)
			}
			n.Close()
		})
	}
}

// TestCntr_WaitManyWaiters has several goroutines wait on one counter
// while another counts: all wake, none spins forever.
func TestCntr_WaitManyWaiters(t *testing.T) {
	dom := openMRDomain(t, "tcp", 0)
	c, _ := dom.OpenCntr(nil)
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- c.Wait(uint64(i*10+10), 20*time.Second)
		}()
	}
	for range 100 {
		c.Add(1)
		time.Sleep(100 * time.Microsecond)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestEndpointCntr_SendRecv binds counters to both sides of a message
// exchange: every completion counts, CQ entry or not (inject).
func TestEndpointCntr_SendRecv(t *testing.T) {
	for _, prov := range []string{"shm", "tcp", linkName} {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			a := openCntrNode(t, prov, Send|Recv)
			b := openCntrNode(t, prov, Send|Recv)
			nb, _ := b.ep.Name()
			dest, err := a.av.Insert([][]byte{nb}, 0)
			if err != nil {
				t.Fatal(err)
			}
			const n = 10
			for i := range n {
				if err := b.ep.Recv(make([]byte, 16), AddrUnspec, i); err != nil {
					t.Fatal(err)
				}
			}
			for i := range n {
				var err error
				if i%2 == 0 {
					err = a.ep.Inject([]byte("hi"), dest[0])
				} else {
					err = a.ep.Send([]byte("hello"), dest[0], i)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := b.cntr.Wait(n, 10*time.Second); err != nil {
				t.Fatalf("receive counter: %v (at %d)", err, b.cntr.Read())
			}
			if err := a.cntr.Wait(n, 10*time.Second); err != nil {
				t.Fatalf("send counter: %v (at %d)", err, a.cntr.Read())
			}
			if err := a.ep.BindCntr(a.cntr, Send); !errors.Is(err, ErrOpBadState) {
				t.Fatalf("BindCntr after Enable: %v", err)
			}
		})
	}
}

type cntrNode struct {
	*shmNode
	cntr *Cntr
}

// openCntrNode opens a node with one counter bound for flags.
func openCntrNode(t *testing.T, prov string, flags Flags) *cntrNode {
	t.Helper()
	hints := AllocInfo()
	hints.Caps = Msg
	hints.FabricAttr.ProvName = prov
	node := ""
	if prov == "tcp" {
		node = "127.0.0.1"
	}
	infos, err := GetInfo(Version(2, 0), node, "", 0, hints)
	if err != nil {
		t.Fatal(err)
	}
	n := &cntrNode{shmNode: &shmNode{}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	n.fab, err = OpenFabric(infos[0].FabricAttr)
	must(err)
	n.dom, err = n.fab.OpenDomain(infos[0])
	must(err)
	n.av, err = n.dom.OpenAV(&AVAttr{Type: AVTable})
	must(err)
	n.ep, err = n.dom.OpenEndpoint(infos[0])
	must(err)
	n.cntr, err = n.dom.OpenCntr(nil)
	must(err)
	must(n.ep.BindAV(n.av))
	if err := n.ep.BindCntr(n.cntr, Read); !errors.Is(err, ErrOpNotSupp) {
		t.Fatalf("Read counter without RMA: %v, want ErrOpNotSupp", err)
	}
	must(n.ep.BindCntr(n.cntr, flags))
	must(n.ep.Enable())
	t.Cleanup(func() {
		n.ep.Close()
		n.cntr.Close()
		n.av.Close()
		n.dom.Close()
		n.fab.Close()
	})
	return n
}

func TestShmKeyTable_RemovedOnDomainClose(t *testing.T) {
	shmTestDir(t)
	dom := openMRDomain(t, "shm", 0)
	mr, err := dom.RegMR(make([]byte, 8), RemoteRead, 0, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(shm.Dir())
	if len(ents) != 1 {
		t.Fatalf("%d files in the shm directory, want the key table", len(ents))
	}
	mr.Close()
	if err := dom.Close(); err != nil {
		t.Fatal(err)
	}
	ents, _ = os.ReadDir(shm.Dir())
	if len(ents) != 0 {
		t.Fatalf("%d files left after Domain.Close", len(ents))
	}
}
