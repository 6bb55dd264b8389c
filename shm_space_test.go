package fi

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofi-dev/fi/shm"
	"golang.org/x/sys/unix"
)

// mountShmDir mounts a private tmpfs of size bytes, points GOFI_SHM_DIR at
// it for the test and returns it. It skips unless the test may mount
// (root, as in CI).
func mountShmDir(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0700,size="+strconv.Itoa(size)); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	t.Setenv(shm.DirEnv, dir)
	return dir
}

// resizeShmDir changes the size of a tmpfs mounted by mountShmDir.
func resizeShmDir(t *testing.T, dir string, size int) {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_REMOUNT, "mode=0700,size="+strconv.Itoa(size)); err != nil {
		t.Fatalf("remount %s with size %d: %v", dir, size, err)
	}
}

func dirEntries(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// regionBytes is what one shm endpoint's region occupies.
func regionBytes(t *testing.T) int {
	l, err := shm.ComputeLayout(shm.DefaultConnSlots, shm.DefaultMaxPeers)
	if err != nil {
		t.Fatal(err)
	}
	return l.TotalSize
}

// checkNoSpcErr asserts err is ErrNoSpc and that its message names the
// directory and the bytes needed, so a user can act on it.
func checkNoSpcErr(t *testing.T, what string, err error, dir string) {
	t.Helper()
	if !errors.Is(err, ErrNoSpc) {
		t.Fatalf("%s in a full shm directory: %v, want ErrNoSpc", what, err)
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "bytes") || !strings.Contains(msg, shm.DirEnv) {
		t.Errorf("%s: message %q does not name the directory, the bytes needed and %s", what, msg, shm.DirEnv)
	}
}

// Opening an endpoint when its region does not fit is ErrNoSpc, and
// leaves no file behind.
func TestShmFullDir_OpenEndpointIsErrNoSpc(t *testing.T) {
	dir := mountShmDir(t, regionBytes(t)-os.Getpagesize())
	info := nodeInfo(t, "shm", nodeCfg{})
	fab, err := OpenFabric(info.FabricAttr)
	if err != nil {
		t.Fatal(err)
	}
	defer fab.Close()
	dom, err := fab.OpenDomain(info)
	if err != nil {
		t.Fatal(err)
	}
	defer dom.Close()
	ep, err := dom.OpenEndpoint(info)
	if err == nil {
		ep.Close()
		t.Fatal("OpenEndpoint succeeded in a tmpfs smaller than a region")
	}
	checkNoSpcErr(t, "OpenEndpoint", err, dir)
	if n := dirEntries(t, dir); n != 0 {
		t.Errorf("the failed open left %d files", n)
	}
}

// A send whose connection ring does not fit fails at once with ErrNoSpc
// (not a timeout), leaves no half-made connection, and works once there
// is room.
func TestShmFullDir_SendIsErrNoSpcThenWorksWithRoom(t *testing.T) {
	region := regionBytes(t)
	dir := mountShmDir(t, 2*region+os.Getpagesize()) // two regions, no ring
	a := openNode(t, "shm", nodeCfg{})
	b := openNode(t, "shm", nodeCfg{})
	a.peers = a.insertNames(b.names(), false)
	b.peers = b.insertNames(a.names(), false)
	msg := []byte("after the space came back")
	err := a.ep.Send(msg, a.peers[0], nil)
	checkNoSpcErr(t, "Send", err, dir)
	if n := dirEntries(t, dir); n != 2 {
		t.Errorf("after the failed send %d files in the directory, want the 2 regions", n)
	}

	resizeShmDir(t, dir, 2*region+1<<20)
	buf := make([]byte, 64)
	if err := b.ep.Recv(buf, AddrUnspec, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.retry(func() error { return a.ep.Send(msg, a.peers[0], nil) }); err != nil {
		t.Fatalf("send with room: %v", err)
	}
	deadline := time.Now().Add(waitLimit)
	for len(b.rxq) == 0 && time.Now().Before(deadline) {
		a.progress()
		b.progress()
	}
	if len(b.rxq) == 0 || b.rxq[0].err != nil || string(buf[:b.rxq[0].Len]) != string(msg) {
		t.Fatalf("receive after the space came back: %+v", b.rxq)
	}
}
