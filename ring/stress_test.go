package ring_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/edsrzf/mmap-go"

	"github.com/gofi-dev/fi/ring"
)

// Environment of the re-executed child process.
const (
	envStressFile     = "GOFI_RING_STRESS_FILE"
	envStressN        = "GOFI_RING_STRESS_N"
	envStressDeadline = "GOFI_RING_STRESS_DEADLINE"
)

const (
	stressCap    = 1 << 16
	stressOffset = 128 // the ring sits at an aligned offset of the mapping
)

// stressRecords is 10 million, also under -race (16 s there at load
// average 14 on two cores: the race runtime does not track the mapping's
// memory, the record fill works in words, and both sides sleep when idle).
// -short runs 1 million for quick runs; the protocol exercised is the same.
func stressRecords() int {
	if testing.Short() {
		return 1_000_000
	}
	return 10_000_000
}

// stressSize is the payload size of record seq, so the reader can check it.
func stressSize(seq uint64) int { return 12 + int(seq*7%53) }

// TestTwoProcess_StressNoLossDupOrReorder maps a /dev/shm file, lays a ring
// out in it, re-executes the test binary as the producer, and checks that
// every record arrives once, in order, with its checksum.
func TestTwoProcess_StressNoLossDupOrReorder(t *testing.T) {
	if os.Getenv(envStressFile) != "" {
		stressChild(t)
		return
	}
	n := stressRecords()
	deadline := time.Now().Add(4 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-10*time.Second).Before(deadline) {
		deadline = d.Add(-10 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	path, m := createShm(t, stressOffset+ring.Size(stressCap))
	r, err := ring.Init(m[stressOffset:], stressCap)
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestTwoProcess_StressNoLossDupOrReorder$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		envStressFile+"="+path,
		envStressN+"="+strconv.Itoa(n),
		envStressDeadline+"="+strconv.FormatInt(deadline.UnixNano(), 10))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	start := time.Now()
	var childErr error
	childDone := false
	for seq, idle := uint64(0), 0; seq < uint64(n); {
		typ, p, err := r.Peek()
		if err == ring.ErrEmpty {
			if idle&1023 == 1023 {
				if ctx.Err() != nil {
					t.Fatalf("timed out after %d of %d records", seq, n)
				}
				if childDone {
					t.Fatalf("producer exited (%v) after %d of %d records", childErr, seq, n)
				}
				select {
				case childErr = <-exited:
					childDone = true // drain what it published, then fail
				default:
				}
			}
			idleWait(&idle)
			continue
		}
		idle = 0
		if err != nil {
			t.Fatalf("record %d: %v", seq, err)
		}
		if typ != uint16(seq) || len(p) != stressSize(seq) {
			t.Fatalf("record %d: type %d len %d, want type %d len %d", seq, typ, len(p), uint16(seq), stressSize(seq))
		}
		if err := checkRecord(p, seq); err != nil {
			t.Fatalf("record %d: %v", seq, err)
		}
		r.Consume()
		if seq++; seq&31 == 0 {
			r.Release()
		}
	}
	r.Release()
	if !childDone {
		childErr = <-exited
	}
	if childErr != nil {
		t.Fatalf("producer: %v", childErr)
	}
	if _, _, err := r.Peek(); err != ring.ErrEmpty {
		t.Fatalf("after the last record Peek = %v, want ErrEmpty (duplicate or extra record)", err)
	}
	el := time.Since(start)
	t.Logf("%d records in %v (%.1f M records/s)", n, el, float64(n)/el.Seconds()/1e6)
}

// stressChild is the producer, in the re-executed process.
func stressChild(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv(envStressN))
	if err != nil {
		t.Fatal(err)
	}
	dl, err := strconv.ParseInt(os.Getenv(envStressDeadline), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Unix(0, dl)
	f, err := os.OpenFile(os.Getenv(envStressFile), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := mmap.Map(f, mmap.RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unmap()
	r, err := ring.Attach(m[stressOffset:])
	if err != nil {
		t.Fatal(err)
	}
	batch := 0
	for seq, idle := uint64(0), 0; seq < uint64(n); {
		size := stressSize(seq)
		b, err := r.Reserve(size)
		if err == ring.ErrFull {
			r.Publish()
			batch = 0
			if idle&1023 == 1023 && time.Now().After(deadline) {
				t.Fatalf("producer timed out at record %d", seq)
			}
			idleWait(&idle)
			continue
		}
		idle = 0
		if err != nil {
			t.Fatalf("record %d: %v", seq, err)
		}
		fillRecord(b, seq)
		if err := r.Commit(uint16(seq), size); err != nil {
			t.Fatal(err)
		}
		seq++
		if batch++; batch == 16 {
			r.Publish()
			batch = 0
		}
	}
	r.Publish()
}

// createShm creates a 0600 file of size bytes under /dev/shm, maps it and
// registers its unmapping and removal.
func createShm(t testing.TB, size int) (string, mmap.MMap) {
	t.Helper()
	dir := "/dev/shm"
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Skip("no /dev/shm")
	}
	path := filepath.Join(dir, fmt.Sprintf("gofi-ringtest-%d-%d", os.Getpid(), time.Now().UnixNano()))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	defer f.Close()
	if err := f.Truncate(int64(size)); err != nil {
		t.Fatal(err)
	}
	m, err := mmap.Map(f, mmap.RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Unmap(); err != nil && !errors.Is(err, os.ErrClosed) {
			t.Error(err)
		}
	})
	return path, m
}
