package fi

// The shm provider where single copy (process_vm_readv/writev) is refused,
// as in containers: the conformance table run with the peer process in
// another user namespace (which may not read our memory: the refusal
// comes at the first rendezvous and turns single copy off for that peer
// only), and run wholly under a seccomp filter that refuses both calls
// (as Docker's default profile does: the start-up probe sees it).

import (
	"context"
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
	deadline := time.Now().Add(4 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-10*time.Second).Before(deadline) {
		deadline = d.Add(-10 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestConformance_shm_seccomp$", "-test.count=1", "-test.v",
		"-test.timeout="+time.Until(deadline).Round(time.Second).String())
	cmd.Env = nocma.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestConformance_shm_seccomp") {
		t.Fatalf("under seccomp: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "--- SKIP"); n > 0 {
		t.Logf("%d rows skipped under seccomp", n)
	}
}
