package engine

import (
	"os"
	"path/filepath"
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
