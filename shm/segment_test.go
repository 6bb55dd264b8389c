package shm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestCreateSegment_IsPrivate0600WhateverTheUmask(t *testing.T) {
	dir := testDir(t)
	for _, mask := range []int{0, 0o022, 0o077} {
		old := unix.Umask(mask)
		s, err := CreateSegment(NewName(), 4096)
		unix.Umask(old)
		if err != nil {
			t.Fatalf("umask %#o: %v", mask, err)
		}
		st, err := os.Stat(filepath.Join(dir, s.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 || !st.Mode().IsRegular() {
			t.Errorf("umask %#o: mode %v, want -rw-------", mask, st.Mode())
		}
		if st.Size() != 4096 || s.Size() != 4096 {
			t.Errorf("size %d / mapped %d, want 4096", st.Size(), s.Size())
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCreateSegment_RoundsToPagesAndZeroes(t *testing.T) {
	testDir(t)
	s, err := CreateSegment(NewName(), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Size() != os.Getpagesize() {
		t.Fatalf("size %d, want one page", s.Size())
	}
	for i, c := range s.Bytes() {
		if c != 0 {
			t.Fatalf("byte %d is %d", i, c)
		}
	}
}

func TestCreateSegment_RefusesBadNameSizeAndExistingName(t *testing.T) {
	testDir(t)
	if _, err := CreateSegment("../x", 4096); !errors.Is(err, ErrName) {
		t.Errorf("bad name: %v", err)
	}
	for _, size := range []int{0, -1, MaxSegmentSize + 1} {
		if _, err := CreateSegment(NewName(), size); !errors.Is(err, ErrSize) {
			t.Errorf("size %d: %v, want ErrSize", size, err)
		}
	}
	n := NewName()
	s, err := CreateSegment(n, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := CreateSegment(n, 4096); !errors.Is(err, os.ErrExist) {
		t.Errorf("second create: %v, want ErrExist", err)
	}
	if Owned() < 1 {
		t.Errorf("Owned() = %d after create", Owned())
	}
}

// A full file system fails at create with ErrNoSpace (statfs, then
// fallocate), never with SIGBUS later. Needs a small tmpfs: root only.
func TestCreateSegment_FullFileSystemIsErrNoSpace(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0700"); err != nil {
		t.Skipf("cannot mount a small tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	t.Setenv(DirEnv, dir)
	_, err := CreateSegment(NewName(), 2<<20)
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("2 MiB on a 1 MiB tmpfs: %v, want ErrNoSpace", err)
	}
	// The message says where and how much, so a user can act on it.
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "2097152 bytes") || !strings.Contains(msg, DirEnv) {
		t.Errorf("message %q does not name the directory, the bytes needed and %s", msg, DirEnv)
	}
	a, err := CreateSegment(NewName(), 600<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := CreateSegment(NewName(), 600<<10); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("second 600 KiB on a 1 MiB tmpfs: %v, want ErrNoSpace", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("failed creates left files behind: %d entries", len(ents))
	}
}

func TestOpenSegment_SharesMemoryWithOwner(t *testing.T) {
	testDir(t)
	s, err := CreateSegment(NewName(), 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, err := OpenSegment(s.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Owner() || !s.Owner() || p.Size() != 8192 {
		t.Fatalf("owner %v/%v size %d", s.Owner(), p.Owner(), p.Size())
	}
	s.Bytes()[5000] = 42
	if p.Bytes()[5000] != 42 {
		t.Fatal("peer mapping does not see the owner's write")
	}
}

func TestOpenSegment_RefusesFilesThatAreNotOurs(t *testing.T) {
	dir := testDir(t)
	write := func(mode os.FileMode) string {
		n := NewName()
		if err := os.WriteFile(filepath.Join(dir, n), make([]byte, 4096), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, n), mode); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		what string
		name func() string
		want error
	}{
		{"missing", func() string { return NewName() }, os.ErrNotExist},
		{"group readable", func() string { return write(0o640) }, ErrNotOwner},
		{"world writable", func() string { return write(0o606) }, ErrNotOwner},
		{"empty", func() string {
			n := NewName()
			if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return n
		}, ErrSize},
		{"a directory", func() string {
			n := NewName()
			if err := os.Mkdir(filepath.Join(dir, n), 0o700); err != nil {
				t.Fatal(err)
			}
			return n
		}, ErrNotOwner},
		{"another user's", func() string {
			if os.Geteuid() != 0 {
				return ""
			}
			n := write(0o600)
			if err := os.Chown(filepath.Join(dir, n), 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return n
		}, ErrNotOwner},
	} {
		n := tc.name()
		if n == "" {
			continue
		}
		if _, err := OpenSegment(n); !errors.Is(err, tc.want) {
			t.Errorf("open %s file: %v, want %v", tc.what, err, tc.want)
		}
	}
	// A symlink is refused too (O_NOFOLLOW), even to a good file.
	good, err := CreateSegment(NewName(), 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	link := NewName()
	if err := os.Symlink(filepath.Join(dir, good.Name()), filepath.Join(dir, link)); err != nil {
		t.Fatal(err)
	}
	if s, err := OpenSegment(link); !errors.Is(err, ErrNotOwner) {
		if err == nil {
			s.Close()
		}
		t.Errorf("open symlink: %v, want ErrNotOwner", err)
	}
}

func TestClose_OwnerUnlinksPeerKeepsFile(t *testing.T) {
	dir := testDir(t)
	s, err := CreateSegment(NewName(), 4096)
	if err != nil {
		t.Fatal(err)
	}
	p, err := OpenSegment(s.Name())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, s.Name())); err != nil {
		t.Fatalf("peer Close removed the file: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, s.Name())); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("owner Close left the file: %v", err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if _, err := p.Alive(); !errors.Is(err, ErrClosed) {
		t.Errorf("Alive after Close: %v", err)
	}
}

func TestAlive_FollowsTheOwnersLock(t *testing.T) {
	testDir(t)
	s, err := CreateSegment(NewName(), 4096)
	if err != nil {
		t.Fatal(err)
	}
	p, err := OpenSegment(s.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if ok, err := Alive(s.Name()); !ok || err != nil {
		t.Errorf("Alive(live) = %v, %v", ok, err)
	}
	if ok, err := p.Alive(); !ok || err != nil {
		t.Errorf("peer Alive(live) = %v, %v", ok, err)
	}
	if ok, _ := s.Alive(); !ok {
		t.Error("owner's own Alive is false")
	}
	// The probe must not disturb the owner's lock: still alive.
	if ok, _ := p.Alive(); !ok {
		t.Error("second probe says dead")
	}
	s.Close()
	if ok, err := p.Alive(); ok || err != nil {
		t.Errorf("peer Alive(closed owner) = %v, %v", ok, err)
	}
	if ok, err := Alive(s.Name()); ok || err != nil {
		t.Errorf("Alive(removed) = %v, %v", ok, err)
	}
}

func init() {
	// The owner of a segment, killed later by the parent.
	childRoles["own-segment"] = func(in *bufio.Scanner, out io.Writer) {
		s, err := CreateSegment(NewName(), 4096)
		must(err)
		r, err := CreateRegion(Config{})
		must(err)
		fmt.Fprintln(out, "names", s.Name(), r.Name())
		for {
			readLine(in)
		}
	}
}

// kill -9 leaves the files behind; the lock dies with the process, so the
// owner reads dead at once and Reap removes the files. Another process's
// live files are never reaped.
func TestAliveAndReap_AfterKill9(t *testing.T) {
	dir := testDir(t)
	live := startChild(t, "own-segment")
	liveNames := strings.Fields(live.expect("names"))
	dead := startChild(t, "own-segment")
	deadNames := strings.Fields(dead.expect("names"))
	for _, n := range deadNames {
		if ok, err := Alive(n); !ok || err != nil {
			t.Fatalf("Alive(%s) before kill = %v, %v", n, ok, err)
		}
	}
	if err := dead.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	dead.waitExit()
	for _, n := range deadNames {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Fatalf("kill -9 should leave %s behind: %v", n, err)
		}
		if ok, err := Alive(n); ok || err != nil {
			t.Fatalf("Alive(%s) after kill -9 = %v, %v", n, ok, err)
		}
	}
	// Files that are not ours in name must stay.
	other := filepath.Join(dir, "not-gofi")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := Reap()
	if err != nil {
		t.Fatal(err)
	}
	if n != len(deadNames) {
		t.Errorf("Reap removed %d files, want %d", n, len(deadNames))
	}
	for _, n := range deadNames {
		if _, err := os.Stat(filepath.Join(dir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("dead %s not reaped: %v", n, err)
		}
	}
	for _, n := range liveNames {
		if ok, err := Alive(n); !ok || err != nil {
			t.Errorf("live %s: Alive = %v, %v after Reap", n, ok, err)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("Reap removed a file without our prefix: %v", err)
	}
}

// A temporary file being built is not locked yet: Reap must leave it alone
// while it is young, and remove it once old.
func TestReap_SparesYoungTemporaryFiles(t *testing.T) {
	dir := testDir(t)
	// Named, like every temporary file, after its (here: exited) creator.
	tmp := filepath.Join(dir, Prefix()+tmpMarker+strconv.Itoa(deadPID(t))+"-1-ab")
	if err := os.WriteFile(tmp, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, _ := Reap(); n != 0 {
		t.Fatalf("reaped a young temporary file")
	}
	old := time.Now().Add(-2 * tmpGrace)
	if err := os.Chtimes(tmp, old, old); err != nil {
		t.Fatal(err)
	}
	if n, _ := Reap(); n != 1 {
		t.Fatalf("old unlocked temporary file not reaped")
	}
}

func init() {
	childRoles["signal-cleanup"] = func(in *bufio.Scanner, out io.Writer) {
		if os.Getenv("GOFI_TEST_NO_SIGNAL_CLEANUP") != "" {
			DisableSignalCleanup()
		}
		r, err := CreateRegion(Config{})
		must(err)
		s, err := CreateSegment(NewName(), 1<<20)
		must(err)
		fmt.Fprintln(out, "names", r.Name(), s.Name())
		for {
			readLine(in)
		}
	}
}

// SIGINT and SIGTERM remove the process's files and the process still dies
// of the signal (conventional status).
func TestSignalCleanup_RemovesFilesAndDiesOfTheSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := testDir(t)
			c := startChild(t, "signal-cleanup")
			names := strings.Fields(c.expect("names"))
			for _, n := range names {
				if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			st := c.waitExit()
			ws, ok := st.Sys().(syscall.WaitStatus)
			if !ok || !ws.Signaled() || ws.Signal() != sig {
				if !ok || ws.ExitStatus() != 128+int(sig) {
					t.Errorf("child ended with %v, want death by %v", st, sig)
				}
			}
			for _, n := range names {
				if _, err := os.Stat(filepath.Join(dir, n)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s survives %v: %v", n, sig, err)
				}
			}
		})
	}
}

// Without O_TMPFILE the segment is built under a temporary name: the result
// is the same (private, locked, published whole) and no temporary is left.
func TestCreateSegment_WithoutOTmpfileLeavesNoTemporary(t *testing.T) {
	dir := testDir(t)
	noTmpfile = true
	defer func() { noTmpfile = false }()
	r, err := CreateRegion(Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := OpenRegion(r.Name())
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if ok, err := Alive(r.Name()); !ok || err != nil {
		t.Errorf("Alive = %v, %v", ok, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != r.Name() {
		t.Errorf("directory holds %v, want only %s", ents, r.Name())
	}
	if _, err := CreateSegment(r.Name(), 4096); !errors.Is(err, os.ErrExist) {
		t.Errorf("create over an existing name: %v", err)
	}
	r.Close()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
	if Owned() != 0 {
		t.Errorf("registry still holds %d paths", Owned())
	}
}

// With the handler disabled, SIGTERM takes its default course: the process
// dies of it and its files stay for the reaper.
func TestDisableSignalCleanup_LeavesSignalsToTheApplication(t *testing.T) {
	dir := testDir(t)
	c := startChild(t, "signal-cleanup", "GOFI_TEST_NO_SIGNAL_CLEANUP=1")
	names := strings.Fields(c.expect("names"))
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	st := c.waitExit()
	if ws, ok := st.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("child ended with %v, want death by SIGTERM", st)
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s removed although cleanup was disabled: %v", n, err)
		}
	}
	if n, err := Reap(); err != nil || n != len(names) {
		t.Errorf("Reap = %d, %v; want %d", n, err, len(names))
	}
}

// deadPID returns the pid of a process that has exited (and been waited
// for).
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	return cmd.Process.Pid
}

// TestRingSegPopulated: a ring segment is mapped in full when created, so
// the sender's first pass through it takes no page faults (where the
// kernel has MADV_POPULATE_WRITE: 5.14 and later).
func TestRingSegPopulated(t *testing.T) {
	testDir(t)
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil || major < 5 || major == 5 && minor < 14 {
		t.Skipf("kernel %s has no MADV_POPULATE_WRITE", u.Release[:])
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	rs, err := createRingSeg(512 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.seg.Close()
	var r0, r1 unix.Rusage
	b := rs.seg.Bytes()
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &r0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &r1); err != nil {
		t.Fatal(err)
	}
	if n := r1.Minflt - r0.Minflt; n > 4 {
		t.Errorf("writing the %d pages of a new ring segment took %d page faults", len(b)/4096, n)
	}
}
