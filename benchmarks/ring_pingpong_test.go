package benchmarks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/edsrzf/mmap-go"

	"github.com/gofi-dev/fi/ring"
)

// Cross-process ping-pong over one /dev/shm mapping. The peer is this test
// binary re-executed (TestRingPingPongPeer with the env vars below) and
// echoes until told to stop. Three variants, alternated in one run:
//
//   - flag: the floor, a bare atomic word. The initiator stores an odd
//     value, the peer answers with the next even value. Each side reads,
//     then writes the same line.
//   - flag2: two words on two lines, one per direction, as two one-way
//     rings have: each side writes a line the other holds because it
//     polls it, so each way is an invalidation plus the other's read. The
//     floor of any ping-pong over two one-way rings.
//   - ring: an 8-byte record through ring A, echoed back through ring B.
//
// ns/op is one round trip; ns/oneway is half of it (MEASURED.md's unit);
// rt-ns is the placement, measured in-process just before the sample.

const (
	envPeerFile = "GOFI_BENCH_PINGPONG_FILE"
	envPeerMode = "GOFI_BENCH_PINGPONG_MODE"

	ppRingCap = 1 << 16
	ppFlagOff = 0                     // the flag word, alone on its line
	ppEchoOff = ring.LineSep          // flag2's answer word, on the next line
	ppRingA   = 2 * ring.LineSep      // initiator -> peer
	ppRingB   = ppRingA + ppRingCap*2 // peer -> initiator (after A's region)
	ppSize    = ppRingB + ppRingCap*2 // mapping size (each ring fits in 2x cap)
	ppStop    = ^uint64(0)            // flag value telling the peer to exit
	ppStopTyp = 0xffff                // record type telling the peer to exit
	ppPeerMax = 2 * time.Minute       // a peer never outlives this
)

// Compile-time check: each ring's region holds Size(ppRingCap).
var _ [ppRingCap*2 - (ring.HeaderSize + ppRingCap)]byte

func BenchmarkShmPingPong(b *testing.B) {
	for range rounds() {
		for _, mode := range ppModes() {
			b.Run("size=8/"+mode, func(b *testing.B) {
				rt := placementRT()
				pingPong(b, mode)
				b.ReportMetric(rt, "rt-ns") // the placement this sample ran in (see placementRT)
			})
		}
	}
}

func pingPong(b *testing.B, mode string) {
	path, m := createShm(b, ppSize)
	var ra, rb *ring.Ring
	if mode == "ring" {
		var err error
		if ra, err = ring.Init(m[ppRingA:ppRingB], ppRingCap); err != nil {
			b.Fatal(err)
		}
		if rb, err = ring.Init(m[ppRingB:], ppRingCap); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), ppPeerMax)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRingPingPongPeer$", "-test.bench=^$", "-test.count=1")
	cmd.Env = append(os.Environ(), envPeerFile+"="+path, envPeerMode+"="+mode)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	flag := (*atomic.Uint64)(unsafe.Pointer(&m[ppFlagOff]))
	var msg [8]byte
	dst := make([]byte, 64)

	// Warm up: one round trip, which also waits for the peer to start.
	deadline := time.Now().Add(30 * time.Second)
	b.ReportAllocs()
	b.ResetTimer()
	switch mode {
	case "flag":
		for i := uint64(0); i < uint64(b.N)+1; i++ {
			flag.Store(2*i + 1)
			for idle := 0; flag.Load() != 2*i+2; {
				if idle++; idle&(1<<20-1) == 0 && i == 0 && time.Now().After(deadline) {
					b.Fatal("peer did not answer")
				}
				spinPause(idle)
			}
			if i == 0 {
				b.ResetTimer()
			}
		}
		b.StopTimer()
		flag.Store(ppStop)
	case "flag2":
		echo := (*atomic.Uint64)(unsafe.Pointer(&m[ppEchoOff]))
		for i := uint64(1); i < uint64(b.N)+2; i++ {
			flag.Store(i)
			for idle := 0; echo.Load() != i; {
				if idle++; idle&(1<<20-1) == 0 && i == 1 && time.Now().After(deadline) {
					b.Fatal("peer did not answer")
				}
				spinPause(idle)
			}
			if i == 1 {
				b.ResetTimer()
			}
		}
		b.StopTimer()
		flag.Store(ppStop)
	case "ring":
		for i := 0; i < b.N+1; i++ {
			msg[0] = byte(i)
			for ra.TryWrite(1, msg[:]) != nil {
			}
			for idle := 0; ; {
				_, _, err := rb.TryRead(dst)
				if err == nil {
					break
				}
				if err != ring.ErrEmpty {
					b.Fatal(err)
				}
				if idle++; idle&(1<<20-1) == 0 && i == 0 && time.Now().After(deadline) {
					b.Fatal("peer did not answer")
				}
				spinPause(idle)
			}
			if i == 0 {
				b.ResetTimer()
			}
		}
		b.StopTimer()
		for ra.TryWrite(ppStopTyp, nil) != nil {
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/oneway")
	if err := cmd.Wait(); err != nil {
		b.Fatalf("peer: %v\n%s", err, out.Bytes())
	}
}

// ppModes are the variants BenchmarkShmPingPong alternates
// (GOFI_BENCH_PINGPONG_MODES, comma-separated, default flag,flag2,ring).
func ppModes() []string {
	if v := os.Getenv("GOFI_BENCH_PINGPONG_MODES"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"flag", "flag2", "ring"}
}

// spinPause is the idle strategy of both sides of both variants: spin,
// yielding to the Go scheduler every 256th poll and, after 4096 polls
// (when other processes load the vCPUs, the peer is then most likely
// waiting for one), to the OS every 64th poll. On an idle machine a round
// trip ends long before the OS yields start.
func spinPause(idle int) {
	switch {
	case idle >= 4096 && idle&63 == 0:
		osYield()
	case idle&255 == 0:
		yield()
	}
}

// TestRingPingPongPeer is the echoing peer of BenchmarkShmPingPong; it
// does nothing unless re-executed by the benchmark.
func TestRingPingPongPeer(t *testing.T) {
	m := mapPeerFile(t, envPeerFile, "BenchmarkShmPingPong")
	deadline := time.Now().Add(ppPeerMax)
	timedOut := func(idle int) bool { return idle&(1<<20-1) == 0 && time.Now().After(deadline) }
	switch os.Getenv(envPeerMode) {
	case "flag":
		flag := (*atomic.Uint64)(unsafe.Pointer(&m[ppFlagOff]))
		for last, idle := uint64(0), 0; ; {
			v := flag.Load()
			if v == ppStop {
				return
			}
			if v&1 == 1 && v != last {
				flag.Store(v + 1)
				last, idle = v, 0
				continue
			}
			if idle++; timedOut(idle) {
				t.Fatal("peer timed out")
			}
			spinPause(idle)
		}
	case "flag2":
		flag := (*atomic.Uint64)(unsafe.Pointer(&m[ppFlagOff]))
		echo := (*atomic.Uint64)(unsafe.Pointer(&m[ppEchoOff]))
		for last, idle := uint64(0), 0; ; {
			v := flag.Load()
			if v == ppStop {
				return
			}
			if v != last {
				echo.Store(v)
				last, idle = v, 0
				continue
			}
			if idle++; timedOut(idle) {
				t.Fatal("peer timed out")
			}
			spinPause(idle)
		}
	case "ring":
		ra, err := ring.Attach(m[ppRingA:ppRingB])
		if err != nil {
			t.Fatal(err)
		}
		rb, err := ring.Attach(m[ppRingB:])
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		for idle := 0; ; {
			typ, n, err := ra.TryRead(buf)
			if err == nil {
				if typ == ppStopTyp {
					return
				}
				for rb.TryWrite(typ, buf[:n]) != nil {
				}
				idle = 0
				continue
			}
			if err != ring.ErrEmpty {
				t.Fatal(err)
			}
			if idle++; timedOut(idle) {
				t.Fatal("peer timed out")
			}
			spinPause(idle)
		}
	default:
		t.Fatalf("unknown mode %q", os.Getenv(envPeerMode))
	}
}

// createShm creates a 0600 file of size bytes under /dev/shm, maps it, and
// registers unmapping and removal.
func createShm(tb testing.TB, size int) (string, mmap.MMap) {
	tb.Helper()
	path := filepath.Join("/dev/shm", fmt.Sprintf("gofi-ringbench-%d-%d", os.Getpid(), time.Now().UnixNano()))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		tb.Skipf("no /dev/shm: %v", err)
	}
	tb.Cleanup(func() { os.Remove(path) })
	defer f.Close()
	if err := f.Truncate(int64(size)); err != nil {
		tb.Fatal(err)
	}
	m, err := mmap.Map(f, mmap.RDWR, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := m.Unmap(); err != nil && !errors.Is(err, os.ErrClosed) {
			tb.Error(err)
		}
	})
	return path, m
}
