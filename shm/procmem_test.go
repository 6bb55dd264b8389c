package shm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func needCMA(t *testing.T) {
	t.Helper()
	if info := ProbeCMA(); !info.Available {
		t.Skipf("no single copy here: %v", info.Err)
	}
}

// TestCopyPeer_SmallThroughProcMem: a small window (scattered over two
// local buffers) is written and read back through /proc/<pid>/mem, a
// large one through process_vm_writev/readv; the bytes land either way
// and nothing around the window changes.
func TestCopyPeer_SmallThroughProcMem(t *testing.T) {
	needCMA(t)
	pid := os.Getpid()
	for _, n := range []int{8, procMemMax, procMemMax + 1, 64 << 10} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			target := bytes.Repeat([]byte{0xee}, n+128)
			addr := uintptr(unsafe.Pointer(&target[64]))
			src := make([]byte, n)
			for i := range src {
				src[i] = byte(i*7 + 1)
			}
			var pm procMem
			k := n / 3
			if err := copyPeer(&pm, pid, addr, uint64(n), [][]byte{src[:k], src[k:]}, 0, true); err != nil {
				t.Fatal(err)
			}
			want := procMemUntried
			if n <= procMemMax {
				want = procMemOpen
			}
			if pm.state != uint8(want) {
				t.Fatalf("procMem state %d after a %d-byte write, want %d", pm.state, n, want)
			}
			if !bytes.Equal(target[64:64+n], src) {
				t.Fatal("written bytes differ")
			}
			for _, g := range [][]byte{target[:64], target[64+n:]} {
				if !bytes.Equal(g, bytes.Repeat([]byte{0xee}, 64)) {
					t.Fatal("a guard byte changed")
				}
			}
			got := make([]byte, n+1)
			if err := copyPeer(&pm, pid, addr, uint64(n), [][]byte{got[:1], got[1 : k+1], got[k+1:]}, 1, false); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[1:], src) {
				t.Fatal("read bytes differ")
			}
			runtime.KeepAlive(target)
			pm.close()
		})
	}
}

// TestCopyPeer_ProcMemFaultFallsBack: a window that is not mapped fails
// through /proc/<pid>/mem, turns that path off and gets the fault from
// process_vm_writev.
func TestCopyPeer_ProcMemFaultFallsBack(t *testing.T) {
	needCMA(t)
	var pm procMem
	src := make([]byte, 8)
	err := copyPeer(&pm, os.Getpid(), 4096, 8, [][]byte{src}, 0, true)
	if !errors.Is(err, ErrFault) {
		t.Fatalf("write to page 1: %v, want ErrFault", err)
	}
	if pm.state != procMemOff {
		t.Fatalf("procMem state %d after a fault, want off", pm.state)
	}
}

// TestCopyPeer_ProcMemTargetGone: reads from another process through its
// /proc/<pid>/mem; once it exited, the next read fails over to
// process_vm_readv, which says the peer is gone.
func TestCopyPeer_ProcMemTargetGone(t *testing.T) {
	needCMA(t)
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	pid := cmd.Process.Pid
	done := false
	defer func() {
		if !done {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	addr := firstMapping(t, pid)
	var pm procMem
	buf := make([]byte, 8)
	if err := copyPeer(&pm, pid, addr, 8, [][]byte{buf}, 0, false); err != nil {
		if errors.Is(err, ErrPeerDenied) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	if pm.state != procMemOpen {
		t.Fatalf("procMem state %d, want open", pm.state)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	done = true
	err := copyPeer(&pm, pid, addr, 8, [][]byte{buf}, 0, false)
	if !errors.Is(err, ErrPeerGone) {
		t.Fatalf("read from an exited process: %v, want ErrPeerGone", err)
	}
	if pm.state != procMemOff {
		t.Fatalf("procMem state %d after the target exited, want off", pm.state)
	}
}

// firstMapping returns the start of pid's first readable mapping.
func firstMapping(t *testing.T, pid int) uintptr {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 || !strings.HasPrefix(fs[1], "r") {
			continue
		}
		lo, _, _ := strings.Cut(fs[0], "-")
		a, err := strconv.ParseUint(lo, 16, 64)
		if err == nil {
			return uintptr(a)
		}
	}
	t.Skip("no readable mapping")
	return 0
}
