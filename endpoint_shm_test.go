package fi

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// openShm opens an shm fabric, domain, AV, CQ and enabled endpoint.
type shmNode struct {
	fab *Fabric
	dom *Domain
	av  *AV
	cq  *CQ
	ep  *Endpoint
}

func openShmNode(t *testing.T, caps Flags) *shmNode { return openE2E(t, "shm", caps) }

// openE2E opens a node of provider prov ("shm", or "tcp" on loopback)
// whose CQ is busy-polled (WaitNone: Sread on it fails with ErrNoSys).
func openE2E(t *testing.T, prov string, caps Flags) *shmNode {
	t.Helper()
	return openE2EWait(t, prov, caps, WaitNone)
}

// crossInsert inserts each node's name into the other's AV and returns
// the address of b in a's AV and of a in b's.
func crossInsert(t *testing.T, a, b *shmNode) (toB, toA Addr) {
	t.Helper()
	nameA, _ := a.ep.Name()
	nameB, _ := b.ep.Name()
	ab, err := a.av.Insert([][]byte{nameB}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ba, err := b.av.Insert([][]byte{nameA}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ab[0], ba[0]
}

// openE2EWait is openE2E with the CQ's wait object chosen.
func openE2EWait(t *testing.T, prov string, caps Flags, wait WaitObj) *shmNode {
	t.Helper()
	hints := AllocInfo()
	hints.Caps = caps
	hints.EpAttr.Type = EpRDM
	hints.FabricAttr.ProvName = prov
	node := ""
	if prov == "tcp" || prov == linkName {
		node = "127.0.0.1"
	}
	infos, err := GetInfo(Version(2, 0), node, "", 0, hints)
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	n := &shmNode{}
	if n.fab, err = OpenFabric(infos[0].FabricAttr); err != nil {
		t.Fatal(err)
	}
	if n.dom, err = n.fab.OpenDomain(infos[0]); err != nil {
		t.Fatal(err)
	}
	if n.av, err = n.dom.OpenAV(&AVAttr{Type: AVTable}); err != nil {
		t.Fatal(err)
	}
	if n.cq, err = n.dom.OpenCQ(&CQAttr{Format: CQFormatTagged, WaitObj: wait}); err != nil {
		t.Fatal(err)
	}
	if n.ep, err = n.dom.OpenEndpoint(infos[0]); err != nil {
		t.Fatal(err)
	}
	if err = n.ep.BindAV(n.av); err != nil {
		t.Fatal(err)
	}
	if err = n.ep.BindCQ(n.cq, Transmit|Recv); err != nil {
		t.Fatal(err)
	}
	if err = n.ep.Enable(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.ep.Close()
		n.cq.Close()
		n.av.Close()
		n.dom.Close()
		n.fab.Close()
	})
	return n
}

func TestShmEndToEndInProcess(t *testing.T) { endToEnd(t, "shm") }

func TestTCPEndToEndInProcess(t *testing.T) { endToEnd(t, "tcp") }

func endToEnd(t *testing.T, prov string) {
	a := openE2E(t, prov, Msg|Tagged|Source)
	b := openE2E(t, prov, Msg|Tagged|Source)
	toB, fromA := crossInsert(t, a, b)
	for _, size := range []int{0, 8, 4096, 100000, 1 << 20} {
		msg := bytes.Repeat([]byte{byte(size)}, size)
		buf := make([]byte, size)
		if err := b.ep.TRecv(buf, AddrUnspec, 42, 0, "rx"); err != nil {
			t.Fatal(err)
		}
		if err := a.ep.TSend(msg, toB, 42, "tx"); err != nil {
			t.Fatal(err)
		}
		var e [1]CQEntry
		gotTx, gotRx := false, false
		deadline := time.Now().Add(10 * time.Second)
		for !(gotTx && gotRx) && time.Now().Before(deadline) {
			if n, err := a.cq.Read(e[:]); n == 1 {
				gotTx = e[0].Context == "tx"
			} else if !errors.Is(err, ErrAgain) {
				t.Fatal(err)
			}
			if n, err := b.cq.Read(e[:]); n == 1 {
				gotRx = true
				if e[0].Context != "rx" || e[0].Len != size || e[0].Tag != 42 || e[0].Src != fromA {
					t.Fatalf("size %d: completion %+v", size, e[0])
				}
			} else if !errors.Is(err, ErrAgain) {
				t.Fatal(err)
			}
		}
		if !gotTx || !gotRx || !bytes.Equal(buf, msg) {
			t.Fatalf("size %d: tx %v rx %v data ok %v", size, gotTx, gotRx, bytes.Equal(buf, msg))
		}
	}
}
