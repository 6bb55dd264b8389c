package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gofi-dev/fi/shm"
)

// shm-gc lists every gofi file of this user with its owner's state and
// removes the dead owners' files only; -n removes nothing. The dead file
// here carries a running pid (ours, as after pid reuse): the automatic
// reaper skips it without opening it, shm-gc judges by the owner lock.
func TestShmGC_ListsAndRemovesOnlyDeadOwnersFiles(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(shm.DirEnv, dir)
	live, err := shm.CreateSegment(shm.NewName(), 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	dead := shm.Prefix() + strconv.Itoa(os.Getpid()) + "-999-0badf00d" // unlocked: its owner is gone
	if err := os.WriteFile(filepath.Join(dir, dead), make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "not-gofi")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if n, _ := shm.Reap(); n != 0 {
		t.Fatalf("Reap removed %d files with a running pid in their names", n)
	}

	var out, errb bytes.Buffer
	if rc := run([]string{"shm-gc", "-n", "-dir", dir}, &out, &errb); rc != 0 {
		t.Fatalf("shm-gc -n: exit %d: %s", rc, errb.String())
	}
	for _, want := range []string{live.Name(), dead, "alive", "dead", "2 files", "1 alive", "1 dead", "removed 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("shm-gc -n output lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, dead)); err != nil {
		t.Fatalf("-n removed a file: %v", err)
	}

	out.Reset()
	if rc := run([]string{"shm-gc", "-dir", dir}, &out, &errb); rc != 0 {
		t.Fatalf("shm-gc: exit %d: %s", rc, errb.String())
	}
	if !strings.Contains(out.String(), "removed 1 (") || !strings.Contains(out.String(), "dead, removed") {
		t.Errorf("shm-gc output:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, dead)); !os.IsNotExist(err) {
		t.Errorf("dead owner's file still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, live.Name())); err != nil {
		t.Errorf("live file removed: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a file without the gofi prefix was removed: %v", err)
	}
	if rc := run([]string{"shm-gc", "-dir", filepath.Join(dir, "missing")}, &out, &errb); rc != 1 {
		t.Errorf("unreadable directory: exit %d, want 1", rc)
	}
}
