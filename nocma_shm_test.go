package fi

// The shm provider where single copy (process_vm_readv/writev) is refused,
// as in containers: the conformance table run with the peer process in
// another user namespace (which may not read our memory: the refusal
// comes at the first rendezvous and turns single copy off for that peer
// only), and run wholly under a seccomp filter that refuses both calls
// (as Docker's default profile does: the start-up probe sees it).

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gofi-dev/fi/internal/nocma"
	"github.com/gofi-dev/fi/shm"
)

// A child asked to run under the seccomp filter installs it here, before
// anything else runs, and re-executes itself.
func init() { nocma.Init() }

func init() {
	provCases["shm_userns"] = provCase{prov: "shm", eager: shm.DefaultMaxEager, setup: func(t *testing.T) {
		needUserns(t)
		shmTestDir(t)
	}, peerWrap: usernsWrap}
	provCases["shm_seccomp"] = provCase{prov: "shm", eager: shm.DefaultMaxEager, setup: shmTestDir}
	peerRoles["rma-userns"] = rmaUsernsPeer
}

// usernsWrap runs a command in a new user namespace whose root is us: the
// files under /dev/shm stay ours, but the kernel refuses the namespace's
// processes single copy from ours.
var usernsWrap = []string{"unshare", "--user", "--map-root-user"}

// needUserns skips unless we are root (a new namespace's root must map to
// the owner of our files, whose names carry the euid) and may create user
// namespaces.
func needUserns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the peer's files must carry our euid inside its user namespace")
	}
	if err := exec.Command(usernsWrap[0], append(usernsWrap[1:], "true")...).Run(); err != nil {
		t.Skipf("cannot create a user namespace: %v", err)
	}
}

// TestConformance_shm_userns: the conformance table with the peer in
// another user namespace. A long run (GOFI_STRESS=1): CI covers the
// per-peer refusal with shm's TestTransport_PeerInAnotherUserNamespaceFallsBack
// and the whole table without single copy with TestConformance_shm_seccomp.
func TestConformance_shm_userns(t *testing.T) {
	if os.Getenv("GOFI_STRESS") != "1" {
		t.Skip("long run: set GOFI_STRESS=1")
	}
	runConformance(t, "shm_userns")
}

// TestConformance_shm_seccomp: the conformance table with this process and
// its peers under a seccomp filter refusing process_vm_readv/writev. The
// test re-executes itself under the filter.
func TestConformance_shm_seccomp(t *testing.T) {
	if nocma.Active() {
		if info := shm.ProbeCMA(); info.Available {
			t.Fatal("process_vm_readv works under the seccomp filter")
		}
		runConformance(t, "shm_seccomp")
		return
	}
	if testing.Short() {
		t.Skip("re-executes the conformance table")
	}
	if out := runUnderSeccomp(t, "^TestConformance_shm_seccomp$"); !strings.Contains(out, "--- PASS: TestConformance_shm_seccomp") {
		t.Fatalf("under seccomp: the table did not pass\n%s", out)
	}
}

// TestRMA_shm_seccomp: the shm rows of the RMA, memory-region and counter
// tables with this process under the seccomp filter refusing
// process_vm_readv/writev (Docker's default profile): one-sided writes
// and reads into registered Go memory go through the target's executor
// channel instead of single copy. The test re-executes itself under the
// filter, running only those rows.
func TestRMA_shm_seccomp(t *testing.T) {
	if nocma.Active() {
		if info := shm.ProbeCMA(); info.Available {
			t.Fatal("process_vm_readv works under the seccomp filter")
		}
		return // the rows run as their own tests in this process
	}
	if testing.Short() {
		t.Skip("re-executes the RMA tables")
	}
	// The in-process tables' shm rows; the two-process RMA tests run their
	// shm_nocma rows (the same channel) in the package's own run.
	const rows = "^(TestRMA_shm_seccomp|TestRMA_(WriteReadRoundTrip|Vectors|Refusals|WriteData|Counters|Fence|AllocMR|CloseRacesAccess)|" +
		"TestRegMR_Keys|TestAllocMR|TestEndpointCntr_SendRecv)$/^shm$"
	out := runUnderSeccomp(t, rows)
	for _, want := range []string{"--- PASS: TestRMA_shm_seccomp", "--- PASS: TestRMA_WriteReadRoundTrip/shm ",
		"--- PASS: TestRMA_Counters/shm ", "--- PASS: TestRMA_AllocMR/shm "} {
		if !strings.Contains(out, want) {
			t.Fatalf("under seccomp: no %q in\n%s", want, out)
		}
	}
}

// runUnderSeccomp runs this test binary's tests matching pattern under
// the filter and returns the verbose output; it fails unless all passed.
func runUnderSeccomp(t *testing.T, pattern string) string {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-10*time.Second).Before(deadline) {
		deadline = d.Add(-10 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+pattern, "-test.count=1", "-test.v",
		"-test.timeout="+time.Until(deadline).Round(time.Second).String())
	cmd.Env = nocma.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "--- FAIL") {
		t.Fatalf("under seccomp: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "--- SKIP"); n > 0 {
		t.Logf("%d rows skipped under seccomp", n)
	}
	return string(out)
}

// rmaUserns* are the sizes and keys of TestRMA_shm_PeerInAnotherUserNamespace.
const (
	rmaUsernsSize = 1 << 20
	rmaUsernsKey  = 9
)

// rmaTransfer writes src to dest's region at off and reads it back,
// waiting for each completion.
func rmaTransfer(t *testing.T, n *rmaNode, dest Addr, src []byte, off uint64) []byte {
	t.Helper()
	if err := n.ep.Write(src, nil, dest, off, rmaUsernsKey, "w"); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if _, err := waitTx(t, n, nil, "w"); err != nil {
		t.Fatalf("write completion: %v", err)
	}
	back := make([]byte, len(src))
	if err := n.ep.Read(back, nil, dest, off, rmaUsernsKey, "r"); err != nil {
		t.Fatalf("Read: %v", err)
	}
	if _, err := waitTx(t, n, nil, "r"); err != nil {
		t.Fatalf("read completion: %v", err)
	}
	return back
}

// rmaUsernsPeer runs in another user namespace: it writes and reads the
// parent's region (the kernel refuses it single copy into the parent),
// then lets the parent do the same to its own region.
func rmaUsernsPeer(t *testing.T, l *link, _ string) {
	n := openRMANode(t, "shm", rmaNodeCfg{})
	region := make([]byte, rmaUsernsSize)
	mr, err := n.dom.RegMR(region, RemoteRead|RemoteWrite, 0, rmaUsernsKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	name, err := hex.DecodeString(l.expect("target")[0])
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := n.av.Insert([][]byte{name}, 0)
	if err != nil {
		t.Fatal(err)
	}
	src := pattern(rmaUsernsSize, 1)
	if back := rmaTransfer(t, n, addrs[0], src, 0); !bytes.Equal(back, src) {
		l.send("fail", "read back from the parent differs")
		return
	}
	own, _ := n.ep.Name()
	l.send("wrote", hex.EncodeToString(own))
	l.expect("check")
	if !bytes.Equal(snapshot(mr), pattern(rmaUsernsSize, 2)) {
		l.send("fail", "the parent's write did not land in our region")
		return
	}
	l.send("ok")
}

// TestRMA_shm_PeerInAnotherUserNamespace: one-sided writes and reads of
// 1 MiB between this process and a peer in another user namespace
// (unshare --user --map-root-user), both ways. The kernel refuses the
// peer process_vm_writev/readv into our memory, so its operations take
// the target's executor channel; ours into its memory may use single
// copy. Either way the bytes land and read back intact.
func TestRMA_shm_PeerInAnotherUserNamespace(t *testing.T) {
	needUserns(t)
	if !shm.ProbeCMA().Available {
		t.Skip("no process_vm_readv here at all")
	}
	shmTestDir(t)
	n := openRMANode(t, "shm", rmaNodeCfg{})
	region := make([]byte, rmaUsernsSize)
	mr, err := n.dom.RegMR(region, RemoteRead|RemoteWrite, 0, rmaUsernsKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	peerWrap = usernsWrap
	p := startPeer(t, "rma-userns", "", 2*time.Minute)
	peerWrap = nil
	name, _ := n.ep.Name()
	p.send("target", hex.EncodeToString(name))
	peerName, err := hex.DecodeString(p.expect("wrote")[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshot(mr), pattern(rmaUsernsSize, 1)) {
		t.Fatal("the peer's write did not land in our region")
	}
	addrs, err := n.av.Insert([][]byte{peerName}, 0)
	if err != nil {
		t.Fatal(err)
	}
	src := pattern(rmaUsernsSize, 2)
	if back := rmaTransfer(t, n, addrs[0], src, 0); !bytes.Equal(back, src) {
		t.Fatal("read back from the peer differs")
	}
	p.send("check")
	p.expect("ok")
	p.wait(t)
}
