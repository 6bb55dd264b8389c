package engine

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

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

// TestEndpointOverShm_InjectThatBouncesCountsWhenDelivered: an inject of
// at most MaxEager bytes that the shm ring cannot take inline (a crowded
// directory: rings stay at 4 KiB) goes by rendezvous from the
// transport's bounce copy. Its buffer is free when Send returns, the
// payload arrives intact also without single copy (the sender streams
// it after CTS), the send counter counts it once the transport reports
// it done (it holds a transmit slot until then), and no send completion
// is written. Root only (a small tmpfs).
func TestEndpointOverShm_InjectThatBouncesCountsWhenDelivered(t *testing.T) {
	crowdShmDir(t)
	old := makeTransports
	defer func() { makeTransports = old }()
	makeTransports = func(t *testing.T, maxEager int) (*hub, transport.Transport, transport.Transport) {
		mk := func() transport.Transport {
			tr, err := shm.NewTransport(shm.TransportConfig{MaxEager: maxEager, NoCMA: true})
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}
		return nil, mk(), mk()
	}
	cnt := &testCntr{}
	p := newPair(t, 16<<10, func(c *Config) { c.SendCntr = cnt })
	p.warm(t)
	base := cnt.ok.Load()
	const n, size = 5, 8 << 10
	bufs := make([][]byte, n)
	for i := range n {
		bufs[i] = make([]byte, size)
		if c := recv(p.b, anySrc, transport.KindTagged, 9, 0, bufs[i], i); c != 0 {
			t.Fatal(c)
		}
	}
	payload := make([]byte, size)
	held := 0
	for i := range n {
		for j := range payload {
			payload[j] = byte(i + j)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			c := p.a.Send(&SendArgs{Buf: payload, Dest: addrB, Kind: transport.KindTagged, Tag: 9, Flags: FlagInject}, nil)
			if c == 0 {
				break
			}
			if c != CodeAgain || time.Now().After(deadline) {
				t.Fatalf("inject %d: %v", i, c)
			}
			drain(p.ca)
		}
		if p.a.ntx > 0 {
			held++ // bounced: done only once streamed
		}
		clear(payload) // the inject's buffer is the caller's again
	}
	if held == 0 {
		t.Fatal("no inject held a transmit slot: none bounced, the test missed its case")
	}
	ok, errs := drain(p.cb, n)
	if len(ok) != n || len(errs) != 0 {
		t.Fatalf("%d receives, errors %v", len(ok), errs)
	}
	for i, b := range bufs {
		for j := range b {
			if b[j] != byte(i+j) {
				t.Fatalf("inject %d arrived garbled at byte %d", i, j)
			}
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for cnt.ok.Load()-base < n || p.a.ntx > 0 {
		if ok, errs := drain(p.ca); len(ok)+len(errs) > 0 {
			t.Fatalf("inject wrote completions: %v %v", ok, errs)
		}
		if time.Now().After(deadline) {
			t.Fatalf("send counter %d of %d, %d transmit slots held", cnt.ok.Load()-base, n, p.a.ntx)
		}
	}
	if cnt.bad.Load() != 0 {
		t.Fatalf("%d send errors counted", cnt.bad.Load())
	}
}
