package shm

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

func TestProbeCMA_ReadsOwnMemoryAndSuggestsAThreshold(t *testing.T) {
	info := ProbeCMA()
	if !info.Available {
		t.Skipf("process_vm_readv unavailable here: %v", info.Err)
	}
	if th := info.Threshold; th != 0 && (th < 16<<10 || th > 64<<20 || th&(th-1) != 0) {
		t.Errorf("threshold %d is neither 0 nor a power of two in [16 KiB, 64 MiB]", th)
	}
	if info.CallCost <= 0 || info.CopyRate <= 0 || info.Rate <= 0 {
		t.Errorf("probe figures %+v", info)
	}
	t.Logf("process_vm_readv: call %v, %.1f GB/s; copy %.1f GB/s; threshold %d",
		info.CallCost, info.Rate/1e9, info.CopyRate/1e9, info.Threshold)
	if again := ProbeCMA(); again != info {
		t.Error("second ProbeCMA differs: not cached")
	}
}

func TestReadPeer_RejectsUnmappedAddressesWithErrFault(t *testing.T) {
	if !ProbeCMA().Available {
		t.Skip("process_vm_readv unavailable")
	}
	dst := make([]byte, 64)
	if _, err := ReadPeer(os.Getpid(), dst, 4096); !errors.Is(err, ErrFault) {
		t.Errorf("read of address 4096: %v, want ErrFault", err)
	}
	if _, err := ReadPeer(os.Getpid(), nil, 4096); err != nil {
		t.Errorf("empty read: %v", err)
	}
}

func init() {
	// Holds a pattern buffer and reports its pid, address and checksum.
	childRoles["cma-source"] = func(in *bufio.Scanner, out io.Writer) {
		buf := make([]byte, 3<<20+123)
		for i := range buf {
			buf[i] = byte(i*31 + i>>12)
		}
		fmt.Fprintln(out, "buf", os.Getpid(), uintptr(unsafe.Pointer(&buf[0])), len(buf), crc32.ChecksumIEEE(buf))
		readLine(in)
		runtime.KeepAlive(buf)
	}
	// Reads the parent's buffer and reports the error class.
	childRoles["cma-reader"] = func(in *bufio.Scanner, out io.Writer) {
		f := strings.Fields(readLine(in))
		pid, _ := strconv.Atoi(f[0])
		addr, _ := strconv.ParseUint(f[1], 10, 64)
		_, err := ReadPeer(pid, make([]byte, 4096), uintptr(addr))
		switch {
		case err == nil:
			fmt.Fprintln(out, "result ok")
		case errors.Is(err, ErrPeerDenied):
			fmt.Fprintln(out, "result denied")
		default:
			fmt.Fprintln(out, "result other", err)
		}
	}
}

// Single copy between two real processes, and ErrPeerGone once the peer
// has exited.
func TestReadPeer_CopiesFromAnotherProcess(t *testing.T) {
	if !ProbeCMA().Available {
		t.Skip("process_vm_readv unavailable")
	}
	c := startChild(t, "cma-source")
	f := strings.Fields(c.expect("buf"))
	pid, _ := strconv.Atoi(f[0])
	addr, _ := strconv.ParseUint(f[1], 10, 64)
	n, _ := strconv.Atoi(f[2])
	sum, _ := strconv.ParseUint(f[3], 10, 32)
	dst := make([]byte, n)
	got, err := ReadPeer(pid, dst, uintptr(addr))
	if errors.Is(err, ErrPeerDenied) {
		t.Skipf("kernel refuses reading a child here: %v", err)
	}
	if err != nil || got != n {
		t.Fatalf("ReadPeer = %d, %v; want %d", got, err, n)
	}
	if crc32.ChecksumIEEE(dst) != uint32(sum) {
		t.Fatal("checksum differs: wrong bytes")
	}
	// Reading a piece in the middle.
	part := make([]byte, 1000)
	if _, err := ReadPeer(pid, part, uintptr(addr)+5000); err != nil || part[0] != dst[5000] || part[999] != dst[5999] {
		t.Fatalf("partial read: %v", err)
	}
	c.send("exit")
	c.wait()
	if _, err := ReadPeer(pid, part, uintptr(addr)); !errors.Is(err, ErrPeerGone) {
		t.Errorf("read from an exited process: %v, want ErrPeerGone", err)
	}
}

// A peer the kernel will not let us read (here: a child running as another
// user reading a root process) reports ErrPeerDenied, the signal to fall
// back to copying through the ring.
func TestReadPeer_RefusedPeerIsErrPeerDenied(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a child as another user")
	}
	// The child binary must be reachable by the other user.
	dir, err := os.MkdirTemp("", "gofi-cma-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "shm.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	c := startChildCmd(t, bin, "cma-reader", func(cmd *exec.Cmd) {
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}, "GOFI_SHM_DIR="+dir)
	c.send(fmt.Sprint(os.Getpid(), " ", uintptr(unsafe.Pointer(&buf[0]))))
	if got := c.expect("result"); got != "denied" {
		t.Errorf("unprivileged read of a root process: %q, want denied", got)
	}
	c.wait()
	runtime.KeepAlive(buf)
}

func TestEnablePeerAccess_SucceedsWithOrWithoutYama(t *testing.T) {
	if err := EnablePeerAccess(); err != nil {
		t.Fatal(err)
	}
}
