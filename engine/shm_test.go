package engine

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/shm"
	"github.com/gofi-dev/fi/transport"
)

// TestEndpointOverShm runs the endpoint table over the real shm transport:
// two regions in /dev/shm, rings, doorbells and (where the kernel allows)
// single copy. The "crowded" rows run it in a tmpfs over a quarter full,
// where rings stay at their 4 KiB start and payloads above that ring's
// eager limit go by rendezvous from bounce copies (root only).
func TestEndpointOverShm(t *testing.T) {
	for _, row := range []struct {
		name         string
		cma, crowded bool
	}{{"cma", true, false}, {"segments", false, false}, {"crowded-cma", true, true}, {"crowded-segments", false, true}} {
		cma := row.cma
		t.Run(row.name, func(t *testing.T) {
			if row.crowded {
				crowdShmDir(t)
			}
			old := makeTransports
			defer func() { makeTransports = old }()
			makeTransports = func(t *testing.T, maxEager int) (*hub, transport.Transport, transport.Transport) {
				mk := func() transport.Transport {
					tr, err := shm.NewTransport(shm.TransportConfig{MaxEager: maxEager, NoCMA: !cma, CMAMin: 1})
					if err != nil {
						t.Fatal(err)
					}
					return tr
				}
				return nil, mk(), mk()
			}
			runEndpointTable(t)
		})
	}
}

// crowdShmDir mounts an 8 MiB tmpfs, fills 3 MiB of it and points
// GOFI_SHM_DIR there: shm rings cannot grow (they may use at most a
// quarter of the directory). It skips where mounting is not allowed.
func crowdShmDir(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=8m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(dir, "ballast"), make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(shm.DirEnv, dir)
}

// TestEndpointOverShm_EagerSendsTakeNoSlot: once connected, a small send
// over shm completes inside Send through the transport's SendEager, with
// its completion and counter but without a transmit slot; sends the fast
// path declines (a rendezvous size) still take one.
func TestEndpointOverShm_EagerSendsTakeNoSlot(t *testing.T) {
	old := makeTransports
	defer func() { makeTransports = old }()
	makeTransports = func(t *testing.T, maxEager int) (*hub, transport.Transport, transport.Transport) {
		mk := func() transport.Transport {
			tr, err := shm.NewTransport(shm.TransportConfig{MaxEager: maxEager})
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}
		return nil, mk(), mk()
	}
	cnt := &testCntr{}
	p := newPair(t, 256, func(c *Config) { c.SendCntr = cnt })
	p.warm(t) // connects (the first send takes the general path)
	// Forget the free slots: a send that takes one now grows the table.
	p.a.txFree = p.a.txFree[:0]
	slots, base := len(p.a.tx), cnt.ok.Load()
	const n = 50
	for i := range n {
		if c := recv(p.b, anySrc, transport.KindTagged, 7, 0, make([]byte, 8), i); c != 0 {
			t.Fatal(c)
		}
		if c := send(p.a, addrB, transport.KindTagged, 7, []byte("12345678"), i); c != 0 {
			t.Fatal(c)
		}
	}
	if len(p.a.tx) != slots {
		t.Fatalf("eager sends grew the transmit table from %d to %d slots", slots, len(p.a.tx))
	}
	ok, errs := drain(p.ca, n)
	sends := 0
	for _, e := range ok {
		if e.Flags&FlagSend != 0 {
			sends++
		}
	}
	if sends != n || len(errs) != 0 || cnt.ok.Load()-base != n {
		t.Fatalf("%d send completions, %d errors, counter %d; want %d, 0, %d", sends, len(errs), cnt.ok.Load()-base, n, n)
	}
	if ok, _ := drain(p.cb, n); len(ok) != n {
		t.Fatalf("%d receive completions, want %d", len(ok), n)
	}
	if c := recv(p.b, anySrc, transport.KindTagged, 8, 0, make([]byte, 4096), "big"); c != 0 {
		t.Fatal(c)
	}
	if c := send(p.a, addrB, transport.KindTagged, 8, make([]byte, 4096), "big"); c != 0 {
		t.Fatal(c)
	}
	if len(p.a.tx) != slots+1 {
		t.Fatal("a rendezvous send took no transmit slot")
	}
	drain(p.cb, 1)
	drain(p.ca, 1)
}

// testCntr counts completions for Config's counters.
type testCntr struct{ ok, bad atomic.Int64 }

func (c *testCntr) Add(n uint64)    { c.ok.Add(int64(n)) }
func (c *testCntr) AddErr(n uint64) { c.bad.Add(int64(n)) }
