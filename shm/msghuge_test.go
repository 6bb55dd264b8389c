package shm

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/gofi-dev/fi/transport"
)

func TestParseMsgHugeMin(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{{"", msgHugeMinDefault}, {"off", 0}, {"0", 0}, {"1m", 1 << 20}, {"64k", 64 << 10}, {"x", msgHugeMinDefault}} {
		if got := parseHugeSize(c.in, msgHugeMinDefault); got != c.want {
			t.Errorf("parseHugeSize(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// A rendezvous send of at least MsgHugeMin bytes advises its buffer's
// 2 MiB blocks once; the payload arrives intact by single copy, and the
// same buffer sent again (or a smaller one) advises nothing more.
func TestSendHuge_AdvisesOnceAndKeepsPayload(t *testing.T) {
	testDir(t)
	p := newTPair(t, TransportConfig{CMAMin: 1})
	if !p.a.CMA() || p.a.hugeMin == 0 {
		t.Skip("single copy or huge-page hints off here")
	}
	size := p.a.hugeMin + 12345
	msg := seqMsg(7, size)
	want := bytes.Clone(msg)
	p.send(transport.KindMsg, msg)
	p.until("the first message", func() bool { return p.sb.n == 1 })
	if !bytes.Equal(p.sb.got[0], want) || !bytes.Equal(msg, want) {
		t.Fatal("payload changed")
	}
	blk := uintptr(unsafe.Pointer(&msg[0])) &^ (hugeSize - 1)
	if !p.a.huge.has(blk) {
		t.Fatal("the send buffer's block was not advised")
	}
	n := p.a.huge.advised
	if n < 1 || n > 2 {
		t.Fatalf("%d blocks advised for %d bytes", n, size)
	}
	// The advice itself is the worker's, after the send (the send's own
	// with one P: go test -cpu 1). The worker is the process's: it may
	// still have blocks of earlier tests to do before ours.
	hugeIdle(t)
	p.send(transport.KindMsg, msg)
	p.send(transport.KindMsg, seqMsg(8, p.a.hugeMin/2))
	p.until("two more messages", func() bool { return p.sb.n == 3 })
	if !bytes.Equal(p.sb.got[1], want) {
		t.Fatal("payload changed on the second send")
	}
	if p.a.huge.advised != n {
		t.Fatalf("advised %d blocks after resending, want %d", p.a.huge.advised, n)
	}
	if len(p.sa.errs)+len(p.sb.errs) > 0 {
		t.Fatal(p.sa.errs, p.sb.errs)
	}
}

// With one P the send advises its blocks itself (a worker would run only
// when the sender yields, and then keep the P through the collapse): every
// new block is done, or handed to the io_uring's kernel worker, when the
// send returns, none is handed to the worker goroutine, and the payload
// arrives intact.
func TestSendHuge_OnePAdvisesOnTheSend(t *testing.T) {
	testDir(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p := newTPair(t, TransportConfig{CMAMin: 1})
	if !p.a.CMA() || p.a.hugeMin == 0 {
		t.Skip("single copy or huge-page hints off here")
	}
	msg := seqMsg(9, p.a.hugeMin+4321)
	want := bytes.Clone(msg)
	queued := hugeWork.queued.Load()
	p.send(transport.KindMsg, msg)
	if p.a.huge.advised == 0 || p.a.huge.inline != p.a.huge.advised {
		t.Fatalf("after the send: %d blocks advised, %d by the send itself", p.a.huge.advised, p.a.huge.inline)
	}
	// With io_uring the send hands the collapse to the ring's kernel
	// worker (hugering.go) instead of waiting for it.
	if hugeRing.on.Load() && p.a.huge.async != p.a.huge.advised {
		t.Fatalf("after the send: %d blocks advised, %d through the ring", p.a.huge.advised, p.a.huge.async)
	}
	p.until("the message and the send's completion", func() bool { return p.sb.n == 1 && p.sa.sent == 1 })
	if !bytes.Equal(p.sb.got[0], want) {
		t.Fatal("payload changed")
	}
	// The worker is the process's and may still be advising blocks an
	// earlier test handed it (the done count moves meanwhile): what
	// matters is that this send handed over none.
	if d := hugeWork.queued.Load() - queued; d != 0 {
		t.Fatalf("%d blocks handed to the worker with one P", d)
	}
	if len(p.sa.errs)+len(p.sb.errs) > 0 {
		t.Fatal(p.sa.errs, p.sb.errs)
	}
}

// A posted receive buffer of at least MsgHugeMin bytes has its blocks
// advised at the post (PrepareRecv), once: posting it again, posting a
// smaller buffer or sending from the same memory advises nothing more
// (one record of the blocks done for both). With one P the post advises
// them itself, as a send does.
func TestPrepareRecv_AdvisesOnceSharedWithSends(t *testing.T) {
	for _, oneP := range []bool{false, true} {
		t.Run(fmt.Sprintf("oneP=%v", oneP), func(t *testing.T) {
			testDir(t)
			if oneP {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			}
			p := newTPair(t, TransportConfig{CMAMin: 1})
			if !p.a.CMA() || p.a.hugeMin == 0 {
				t.Skip("single copy or huge-page hints off here")
			}
			if p.a.RecvPrepareMin() != p.a.hugeMin {
				t.Fatalf("RecvPrepareMin %d, want MsgHugeMin %d", p.a.RecvPrepareMin(), p.a.hugeMin)
			}
			buf := seqMsg(11, p.a.hugeMin+999)
			want := bytes.Clone(buf)
			queued := hugeWork.queued.Load()
			p.a.PrepareRecv(buf[:p.a.hugeMin-1])
			if p.a.huge.advised != 0 {
				t.Fatalf("%d blocks advised for a buffer under MsgHugeMin", p.a.huge.advised)
			}
			p.a.PrepareRecv(buf)
			n := p.a.huge.advised
			if n < 1 || n > 2 || !p.a.huge.has(uintptr(unsafe.Pointer(&buf[0]))&^(hugeSize-1)) {
				t.Fatalf("%d blocks advised for %d bytes, its first block among them: %v", n, len(buf), p.a.huge.has(uintptr(unsafe.Pointer(&buf[0]))&^(hugeSize-1)))
			}
			if oneP && (p.a.huge.inline != n || hugeWork.queued.Load() != queued) {
				t.Fatalf("one P: %d of %d blocks advised by the post, %d handed over", p.a.huge.inline, n, hugeWork.queued.Load()-queued)
			}
			hugeIdle(t)
			p.a.PrepareRecv(buf)
			p.send(transport.KindMsg, buf)
			p.until("the message", func() bool { return p.sb.n == 1 })
			if !bytes.Equal(p.sb.got[0], want) || !bytes.Equal(buf, want) {
				t.Fatal("payload changed")
			}
			if p.a.huge.advised != n {
				t.Fatalf("%d blocks advised after posting again and sending, want %d", p.a.huge.advised, n)
			}
			if len(p.sa.errs)+len(p.sb.errs) > 0 {
				t.Fatal(p.sa.errs, p.sb.errs)
			}
		})
	}
}

// hugeIdle waits until the huge-page worker has advised every block
// handed to it so far (in this process, by any test).
func hugeIdle(t testing.TB) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); hugeWork.done.Load() < hugeWork.queued.Load(); {
		if time.Now().After(deadline) {
			t.Fatalf("the worker advised %d of %d blocks in 20 s", hugeWork.done.Load(), hugeWork.queued.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkReadPeerHuge: one process_vm_readv (a rendezvous single copy)
// from a source in 4 KiB pages and from one backed with huge pages
// (hugeAdvise, what sendHuge's worker does), at 256 KiB and 1 MiB (this process is its own peer: the kernel
// pins the source's pages either way).
func BenchmarkReadPeerHuge(b *testing.B) {
	for _, size := range []int{256 << 10, 1 << 20} {
		for _, huge := range []bool{false, true} {
			name := map[bool]string{false: "4k", true: "huge"}[huge]
			b.Run(fmt.Sprintf("size=%dk/%s", size>>10, name), func(b *testing.B) {
				src := hugeAligned(b, size, huge)
				for i := range src {
					src[i] = byte(i)
				}
				if huge && !hugeAdvise(uintptr(unsafe.Pointer(&src[0])), uintptr(size)) {
					b.Skip("no huge page")
				}
				dst := make([]byte, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				pid := os.Getpid()
				for b.Loop() {
					if _, err := ReadPeer(pid, dst, uintptr(unsafe.Pointer(&src[0]))); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
