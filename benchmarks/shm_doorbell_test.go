package benchmarks

// Cross-process wake-up latency of the shm doorbell (futex on a shared
// word) against a Unix-domain socket, the usual way to wake another
// process. Each iteration is a round trip: the parent wakes the child, the
// child wakes the parent. ns/wake is half a round trip.
//
//	go test -run '^$' -bench ShmDoorbell -count 5 ./benchmarks/

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/gofi-dev/fi/shm"
)

const shmBellChildEnv = "GOFI_BENCH_SHM_BELL_CHILD"

// shmBellLost is how long a wait may last before the peer counts as gone.
const shmBellLost = 10 * time.Second

// TestShmDoorbellBenchChild is the far side of BenchmarkShmDoorbellWake; it
// only runs when re-exec'd by it.
func TestShmDoorbellBenchChild(t *testing.T) {
	mode := os.Getenv(shmBellChildEnv)
	if mode == "" {
		t.Skip("child of BenchmarkShmDoorbellWake only")
	}
	if mode == "unixsock" {
		c, err := net.FileConn(os.NewFile(3, "sock"))
		if err != nil {
			os.Exit(1)
		}
		var b [1]byte
		for {
			if _, err := c.Read(b[:]); err != nil {
				os.Exit(0)
			}
			if _, err := c.Write(b[:]); err != nil {
				os.Exit(0)
			}
		}
	}
	in := bufio.NewScanner(os.Stdin)
	in.Scan()
	r, err := shm.OpenRegion(in.Text())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	in.Scan()
	seg, err := shm.OpenSegment(in.Text())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w := newShmBellWords(seg.Bytes())
	fmt.Println("ready")
	for i := uint32(1); ; i++ {
		cond := func() bool { return w.ping.Load() >= i }
		var ok bool
		if idle, isIdle := shmBellIdle[mode]; isIdle {
			ok, err = idle.Wait(w.bell, shmBellLost, cond)
		} else {
			ok, err = w.bell.Wait(shmBellLost, cond)
		}
		if !ok || err != nil || w.ping.Load() == shmBellStop {
			os.Exit(0)
		}
		w.pong.Store(i)
		_ = r.Doorbell().Ring()
	}
}

func BenchmarkShmDoorbellWake(b *testing.B) {
	for _, mode := range []string{"futex", "idle", "spin", "unixsock"} {
		b.Run(mode, func(b *testing.B) {
			var elapsed time.Duration
			if mode == "unixsock" {
				elapsed = shmBellSocket(b)
			} else {
				elapsed = shmBellDoorbell(b, mode)
			}
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(2*b.N), "ns/wake")
		})
	}
}

func shmBellChild(b *testing.B, mode string, extra *os.File) (*exec.Cmd, *bufio.Writer, *bufio.Scanner, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestShmDoorbellBenchChild$")
	cmd.Env = append(os.Environ(), shmBellChildEnv+"="+mode)
	cmd.Stderr = os.Stderr
	if extra != nil {
		cmd.ExtraFiles = []*os.File{extra}
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return cmd, bufio.NewWriter(in), bufio.NewScanner(out), cancel
}

func shmBellDoorbell(b *testing.B, mode string) time.Duration {
	r, err := shm.CreateRegion(shm.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	seg, err := shm.CreateSegment(shm.NewName(), 4096)
	if err != nil {
		b.Fatal(err)
	}
	defer seg.Close()
	w := newShmBellWords(seg.Bytes())
	cmd, in, out, cancel := shmBellChild(b, mode, nil)
	defer cancel()
	defer cmd.Process.Kill()
	fmt.Fprintln(in, r.Name())
	fmt.Fprintln(in, seg.Name())
	in.Flush()
	if !out.Scan() || out.Text() != "ready" {
		b.Fatal("child did not start")
	}
	self := r.Doorbell()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := uint32(1); i <= uint32(b.N); i++ {
		w.ping.Store(i)
		if err := w.bell.Ring(); err != nil {
			b.Fatal(err)
		}
		cond := func() bool { return w.pong.Load() >= i }
		var ok bool
		if idle, isIdle := shmBellIdle[mode]; isIdle {
			ok, err = idle.Wait(self, shmBellLost, cond)
		} else {
			ok, err = self.Wait(shmBellLost, cond)
		}
		if !ok || err != nil {
			b.Fatalf("round %d: no answer (%v)", i, err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	w.ping.Store(shmBellStop)
	_ = w.bell.Ring()
	_ = cmd.Wait()
	return elapsed
}

func shmBellSocket(b *testing.B) time.Duration {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "child")
	cmd, _, _, cancel := shmBellChild(b, "unixsock", theirs)
	defer cancel()
	defer cmd.Process.Kill()
	theirs.Close()
	mine := os.NewFile(uintptr(fds[0]), "parent")
	c, err := net.FileConn(mine) // dups the descriptor
	mine.Close()
	if err != nil {
		b.Fatal(err)
	}
	var buf [1]byte
	// One exchange to let the child start.
	if _, err := c.Write(buf[:]); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Read(buf[:]); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := c.Write(buf[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Read(buf[:]); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	c.Close()
	_ = cmd.Wait()
	return elapsed
}

const shmBellStop = ^uint32(0)

// shmBellIdle holds the idle policies measured besides a plain futex
// sleep: shm.DefaultIdle, and a longer pure spin.
var shmBellIdle = map[string]shm.Idle{
	"idle": shm.DefaultIdle,
	"spin": {Spins: 1 << 14},
}

// The sender's per-message cost when nobody sleeps (one shared load), and
// the cost of a liveness probe (one flock call), for the engine's budget.
func BenchmarkShmDoorbellRingNoSleeper(b *testing.B) {
	r, err := shm.CreateRegion(shm.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	d := r.Doorbell()
	b.ReportAllocs()
	for range b.N {
		_ = d.Ring()
	}
}

func BenchmarkShmDoorbellAliveProbe(b *testing.B) {
	r, err := shm.CreateRegion(shm.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	p, err := shm.OpenRegion(r.Name())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	b.ReportAllocs()
	for range b.N {
		if ok, err := p.Alive(); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
