package benchmarks

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/edsrzf/mmap-go"
	fi "github.com/gofi-dev/fi"
	"github.com/gofi-dev/fi/ring"
)

// Cross-process streaming through gofi's public API, each beside its
// baseline (a bare ring over /dev/shm between the same two processes'
// roles) in the same run:
//
//   - BenchmarkFiMsgRate: 8-byte tagged messages, a window of msgWindow in
//     flight; the receiver acknowledges every window with one message.
//     Metric msgs/s (and ns/op per message).
//   - BenchmarkFiStream: 1 MiB tagged messages, a window of streamWindow;
//     metric MB/s.
//
// The ring baseline moves the same bytes the same way: the sender writes
// each message (8 B as one record; 1 MiB as 64 KiB records, each
// published) into a ring of gofi's default size, the receiver copies it
// out and answers every window on a second ring.

const (
	envStreamPeer = "GOFI_BENCH_STREAM_PEER" // "fi" or "ring"
	envStreamSize = "GOFI_BENCH_STREAM_SIZE"
	envStreamWin  = "GOFI_BENCH_STREAM_WINDOW"
	envStreamFile = "GOFI_BENCH_STREAM_FILE"

	msgWindow    = 64
	streamWindow = 8
	streamChunk  = 64 << 10 // ring baseline record size for big messages
	streamRing   = 512 << 10
	tagData      = 1
	tagAck       = 2
	tagStop      = 3
	tagLast      = tagData | 4 // data, last of a burst: answer with an ack
)

func BenchmarkFiMsgRate(b *testing.B) {
	for range rounds() {
		b.Run("size=8B/ring", func(b *testing.B) { ringWindowed(b, 8, msgWindow) })
		b.Run("size=8B/gofi", func(b *testing.B) { fiWindowed(b, 8, msgWindow) })
	}
}

func BenchmarkFiStream(b *testing.B) {
	for range rounds() {
		b.Run("size=1MiB/ring", func(b *testing.B) { ringWindowed(b, 1<<20, streamWindow) })
		b.Run("size=1MiB/gofi", func(b *testing.B) { fiWindowed(b, 1<<20, streamWindow) })
	}
}

func streamCmd(ctx context.Context, mode string, size, window int, extra ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestStreamPeer$", "-test.bench=^$", "-test.count=1")
	cmd.Env = append(os.Environ(), envStreamPeer+"="+mode, envStreamSize+"="+strconv.Itoa(size),
		envStreamWin+"="+strconv.Itoa(window))
	cmd.Env = append(cmd.Env, extra...)
	return cmd
}

func reportRate(b *testing.B, size int) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// fiWindowed sends b.N messages of size bytes to a peer process, at most
// window unacknowledged.
func fiWindowed(b *testing.B, size, window int) {
	n, err := openFiNode("shm")
	if err != nil {
		b.Skipf("shm: %v", err)
	}
	defer n.close()
	ctx, cancel := context.WithTimeout(context.Background(), fiPeerMax)
	defer cancel()
	cmd := streamCmd(ctx, "fi", size, window)
	peer, stop := startFiPeer(b, n, cmd)
	defer stop()
	sbuf := make([]byte, size)
	var ack [1]byte
	deadline := time.Now().Add(fiPeerMax)
	var e [16]fi.CQEntry
	acked := false
	poll := func(i int) {
		k, err := n.cq.Read(e[:])
		if err != nil && !isAgain(err) {
			if errors.Is(err, fi.ErrAvail) {
				ee, _ := n.cq.ReadErr()
				b.Fatalf("error completion: %v", ee.Err)
			}
			b.Fatal(err)
		}
		for _, c := range e[:k] {
			if c.Flags&fi.Recv != 0 {
				acked = true
			}
		}
		if i&(1<<16-1) == 1<<16-1 && time.Now().After(deadline) {
			b.Fatal("timed out")
		}
	}
	// One window before the clock starts: connects and warms up.
	total := b.N + window
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for sent := 0; sent < total; {
		if sent == window {
			b.ResetTimer()
		}
		if err := n.ep.TRecv(ack[:], fi.AddrUnspec, tagAck, 0, nil); err != nil {
			b.Fatal(err)
		}
		acked = false
		burst := min(window, total-sent)
		for j := 0; j < burst; j++ {
			tag := uint64(tagData)
			if j == burst-1 {
				tag = tagLast
			}
			for i := 0; ; i++ {
				err := n.ep.TSend(sbuf, peer, tag, nil)
				if err == nil {
					break
				}
				if !errors.Is(err, fi.ErrAgain) {
					b.Fatal(err)
				}
				poll(i)
			}
		}
		sent += burst
		for i := 0; !acked; i++ {
			poll(i)
		}
	}
	b.StopTimer()
	reportRate(b, size)
	n.ep.TSend(nil, peer, tagStop, nil)
	n.wait(1, time.Now().Add(5*time.Second))
}

// ringWindowed is fiWindowed over a bare ring pair.
func ringWindowed(b *testing.B, size, window int) {
	cap := streamRing
	path, m := createShm(b, 4*cap)
	ra, err := ring.Init(m[:2*cap], cap)
	if err != nil {
		b.Fatal(err)
	}
	rb, err := ring.Init(m[2*cap:], cap)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ppPeerMax)
	defer cancel()
	cmd := streamCmd(ctx, "ring", size, window, envStreamFile+"="+path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	src := make([]byte, size)
	dst := make([]byte, 64)
	deadline := time.Now().Add(time.Minute)
	chunk := min(size, streamChunk)
	total := b.N + window
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for sent := 0; sent < total; {
		if sent == window {
			b.ResetTimer()
		}
		burst := min(window, total-sent)
		for j := 0; j < burst; j++ {
			typ := uint16(tagData)
			if j == burst-1 {
				typ = tagLast
			}
			for off := 0; off < size; off += chunk {
				for ra.TryWrite(typ, src[off:off+chunk]) != nil {
				}
			}
		}
		sent += burst
		for idle := 0; ; {
			_, _, err := rb.TryRead(dst)
			if err == nil {
				break
			}
			if err != ring.ErrEmpty {
				b.Fatal(err)
			}
			if idle++; idle&(1<<20-1) == 0 && time.Now().After(deadline) {
				b.Fatalf("peer did not answer:\n%s", out.Bytes())
			}
			spinPause(idle)
		}
	}
	b.StopTimer()
	reportRate(b, size)
	for ra.TryWrite(tagStop, nil) != nil {
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("peer: %v\n%s", err, out.Bytes())
	}
}

// TestStreamPeer is the receiving peer of BenchmarkFiMsgRate and
// BenchmarkFiStream; it does nothing unless re-executed by them.
func TestStreamPeer(t *testing.T) {
	mode := os.Getenv(envStreamPeer)
	if mode == "" {
		t.Skip("peer process of the streaming benchmarks only")
	}
	size, _ := strconv.Atoi(os.Getenv(envStreamSize))
	window, _ := strconv.Atoi(os.Getenv(envStreamWin))
	if size <= 0 || window <= 0 || window > 255 {
		t.Fatalf("bad size %d or window %d", size, window)
	}
	deadline := time.Now().Add(fiPeerMax)
	if mode == "ring" {
		streamRingPeer(t, size, window, deadline)
		return
	}
	n, client := openFiPeerSide(t, "shm")
	defer n.close()
	// One receive per window slot, each with its own buffer; the context
	// is the slot number (a small int: boxing it does not allocate).
	bufs := make([][]byte, window)
	for i := range bufs {
		bufs[i] = make([]byte, size)
		if err := n.ep.TRecv(bufs[i], fi.AddrUnspec, tagData, tagLast^tagData, i); err != nil {
			t.Fatal(err)
		}
	}
	var stop [1]byte
	if err := n.ep.TRecv(stop[:], fi.AddrUnspec, tagStop, 0, -1); err != nil {
		t.Fatal(err)
	}
	var e [16]fi.CQEntry
	for i := 0; ; i++ {
		k, err := n.cq.Read(e[:])
		if err != nil && !isAgain(err) {
			t.Fatal(err)
		}
		for _, c := range e[:k] {
			if c.Flags&fi.Recv == 0 {
				continue
			}
			slot := c.Context.(int)
			if slot < 0 {
				return
			}
			if err := n.ep.TRecv(bufs[slot], fi.AddrUnspec, tagData, tagLast^tagData, slot); err != nil {
				t.Fatal(err)
			}
			if c.Tag == tagLast {
				for j := 0; ; j++ {
					err := n.ep.TSend(nil, client, tagAck, nil)
					if err == nil {
						break
					}
					if !errors.Is(err, fi.ErrAgain) {
						t.Fatal(err)
					}
					n.cq.Read(nil)
				}
			}
		}
		if i&(1<<16-1) == 1<<16-1 && time.Now().After(deadline) {
			t.Fatal("peer timed out")
		}
	}
}

func streamRingPeer(t *testing.T, size, window int, deadline time.Time) {
	f, err := os.OpenFile(os.Getenv(envStreamFile), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := mmap.Map(f, mmap.RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unmap()
	cap := streamRing
	ra, err := ring.Attach(m[:2*cap])
	if err != nil {
		t.Fatal(err)
	}
	rb, err := ring.Attach(m[2*cap:])
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, size)
	var ack [1]byte
	off := 0
	for idle := 0; ; {
		typ, k, err := ra.TryRead(buf[off:])
		if err == nil {
			if typ == tagStop {
				return
			}
			if off += k; off == size {
				off = 0
				if typ == tagLast {
					for rb.TryWrite(tagAck, ack[:]) != nil {
					}
				}
			}
			idle = 0
			continue
		}
		if err != ring.ErrEmpty {
			t.Fatal(err)
		}
		if idle++; idle&(1<<20-1) == 0 && time.Now().After(deadline) {
			t.Fatal("peer timed out")
		}
		spinPause(idle)
	}
}
