package benchmarks

import (
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/edsrzf/mmap-go"
)

func sizeOf[T any](v T) uintptr { return unsafe.Sizeof(v) }

// backoff is the idle strategy of the throughput loops, called on each
// empty or full poll (the caller resets idle to 0 on progress): spin for 64
// polls, then yield to the Go scheduler every 8th poll, then, after 1024
// polls (the other side is most likely descheduled by the OS, as happens
// when other processes load both vCPUs), sleep 20µs so it can run. A ring
// of 256 KiB buffers far more than a sleep's worth of records.
func backoff(idle *int) {
	*idle++
	switch {
	case *idle < 64:
	case *idle < 1024:
		if *idle&7 == 0 {
			runtime.Gosched()
		}
	default:
		time.Sleep(20 * time.Microsecond)
	}
}

func yield() { runtime.Gosched() }

// osYield gives the CPU back to the OS scheduler (sched_yield(2)).
func osYield() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }

// rounds is how many times each benchmark alternates its baseline and the
// gofi variant inside one run (GOFI_BENCH_ROUNDS, default 1). go test's
// -count repeats each sub-benchmark back to back, which on this bimodal
// machine can put the baseline and gofi in different vCPU placements;
// rounds interleave them: baseline, gofi, baseline, gofi, ...
func rounds() int {
	if n, err := strconv.Atoi(os.Getenv("GOFI_BENCH_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 1
}

// placementRT measures where the two vCPUs sit right now: the median of
// 5 batches of 2000 round trips of an atomic flag between this goroutine and
// a spinning one, in ns per round trip. This machine is bimodal (about 70
// ns or 250 ns, changing between and even within runs); benchmarks report
// it as "rt-ns" beside their own figures so that every sample says which
// placement it was taken in.
func placementRT() float64 {
	var flag atomic.Uint64
	const n = 2000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for last, idle := uint64(0), 0; ; {
			v := flag.Load()
			if v == ^uint64(0) {
				return
			}
			if v&1 == 1 && v != last {
				flag.Store(v + 1)
				last, idle = v, 0
				continue
			}
			idle++
			spinPause(idle)
		}
	}()
	var ts [5]float64
	seq := uint64(0)
	for k := range ts {
		start := time.Now()
		for i := 0; i < n; i++ {
			seq += 2
			flag.Store(seq - 1)
			for idle := 0; flag.Load() != seq; {
				idle++
				spinPause(idle)
			}
		}
		ts[k] = float64(time.Since(start).Nanoseconds()) / n
	}
	flag.Store(^uint64(0))
	<-done
	slices.Sort(ts[:])
	return ts[len(ts)/2]
}

// mapPeerFile maps the shared file a ping-pong benchmark names in env for
// the peer process it re-executes (unmapped and closed at the end of the
// test); without env the test is skipped: it runs only as bench's peer.
func mapPeerFile(t *testing.T, env, bench string) mmap.MMap {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		t.Skip("peer process of " + bench + " only")
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := mmap.Map(f, mmap.RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Unmap() })
	return m
}
