package placement

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FarNs is the round trip (ns) from which a pair of CPUs counts as far
// apart. It splits the two placements of the development machines (70-110
// ns near, 250-400 ns far, nothing measured between); elsewhere the ns
// figure is the one to read.
const FarNs = 170

// Result is one probe of a pair of CPUs (plain data). Round trips are in
// nanoseconds: one store on each side, from the first CPU to the second
// and back.
type Result struct {
	CPUs   [2]int  `json:"cpus"`
	RTNs   float64 `json:"rt_ns"`     // median over batches of the mean round trip
	MinNs  float64 `json:"min_rt_ns"` // the fastest batch's mean round trip
	Class  string  `json:"class"`     // near, far or same-cpu
	Pinned bool    `json:"pinned"`    // the run's processes are pinned to CPUs[0] and CPUs[1]
	Note   string  `json:"note,omitempty"`
}

// Class names a round trip: near below FarNs, far from it.
func Class(rtNs float64) string {
	if rtNs < FarNs {
		return "near"
	}
	return "far"
}

// String is the one line perftest prints above its tables, such as
// "cache-line round trip 74 ns between CPUs 0 and 1 (near; unpinned)".
func (r Result) String() string {
	if r.Class == "same-cpu" {
		return fmt.Sprintf("both sides on CPU %d (no cache line crosses)", r.CPUs[0])
	}
	pin := "pinned"
	if !r.Pinned {
		pin = "unpinned"
	}
	s := fmt.Sprintf("cache-line round trip %.0f ns between CPUs %d and %d (%s; %s)", r.RTNs, r.CPUs[0], r.CPUs[1], r.Class, pin)
	if r.Note != "" {
		s += "; " + r.Note
	}
	return s
}

// Allowed lists the CPUs the calling thread may run on (its affinity
// mask; a process's threads share it unless one was pinned), ascending.
func Allowed() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("placement: sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := 0; c < len(set)*64 && len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// Pin locks the calling goroutine to its OS thread and restricts that
// thread to cpu. unpin restores the thread's mask and unlocks it.
func Pin(cpu int) (unpin func(), err error) {
	if cpu < 0 || cpu >= len(unix.CPUSet{})*64 {
		return nil, fmt.Errorf("placement: CPU %d out of range", cpu)
	}
	runtime.LockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("placement: sched_getaffinity: %w", err)
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("placement: pinning to CPU %d: %w", cpu, err)
	}
	return func() {
		unix.SchedSetaffinity(0, &old)
		runtime.UnlockOSThread()
	}, nil
}

// Pair chooses the two CPUs a run between two processes uses, from their
// affinity masks (ascending, as Allowed returns them). Two processes
// pinned to one CPU each give those (pinned is true). Otherwise the run
// may move; Pair then takes the first CPU of own and the first other CPU
// of peer, which on a 2-CPU machine are the only two there are. Two
// processes restricted to the same single CPU give it twice.
func Pair(own, peer []int) (a, b int, pinned bool, err error) {
	if len(own) == 0 || len(peer) == 0 {
		return 0, 0, false, errors.New("placement: empty CPU mask")
	}
	if len(own) == 1 && len(peer) == 1 {
		return own[0], peer[0], true, nil
	}
	a = own[0]
	for _, c := range peer {
		if c != a {
			return a, c, false, nil
		}
	}
	if len(own) > 1 { // peer pinned to own[0]: take our next CPU
		return own[1], peer[0], false, nil
	}
	return a, a, false, nil
}

// flagLine is a cache line holding the probe's flag word alone.
type flagLine struct {
	_ [64]byte
	v atomic.Uint64
	_ [120]byte
}

// word returns the flag, after aligning the pointer to a line boundary
// (the struct is allocated with 64 bytes of slack on each side).
func (l *flagLine) word() *atomic.Uint64 {
	p := uintptr(unsafe.Pointer(&l.v))
	off := (64 - p%64) % 64 // the next line boundary at or after v
	return (*atomic.Uint64)(unsafe.Add(unsafe.Pointer(&l.v), off))
}

const (
	stopVal    = ^uint64(0)
	probeLimit = 2 * time.Second // a pinned side that gets no CPU for this long fails the probe
)

// pingPong runs the two sides: the responder answers every odd value with
// the next even one; measure drives round trips through round.
func pingPong(a, b int, measure func(round func()) error) error {
	// The two sides spin at once, each on its own thread: with one P (a
	// process started on one CPU, as under taskset -c N, has
	// GOMAXPROCS=1) they would take turns at the runtime's 10 ms
	// preemption, and the probe would fail after seconds.
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	line := new(flagLine)
	f := line.word()
	ready := make(chan error, 1)
	done := make(chan struct{})
	go func() { // the responder, on b; its thread exits with it
		defer close(done)
		runtime.LockOSThread()
		if _, err := Pin(b); err != nil {
			ready <- err
			return
		}
		ready <- nil
		var last uint64
		for idle := 0; ; idle++ {
			v := f.Load()
			if v == stopVal {
				return
			}
			if v&1 == 1 && v != last {
				f.Store(v + 1)
				last, idle = v, 0
			} else if idle > 1<<20 && idle&1023 == 0 {
				unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
			}
		}
	}()
	if err := <-ready; err != nil {
		<-done
		return err
	}
	res := make(chan error, 1)
	go func() { // the initiator, on a; its thread exits with it
		runtime.LockOSThread()
		if _, err := Pin(a); err != nil {
			res <- err
			return
		}
		var seq uint64
		var stuck error
		round := func() {
			if stuck != nil {
				return
			}
			seq += 2
			f.Store(seq - 1)
			var deadline time.Time // set once a round trip takes long
			for idle := 0; f.Load() != seq; idle++ {
				if idle&0xffff == 0xffff {
					if now := time.Now(); deadline.IsZero() {
						deadline = now.Add(probeLimit)
					} else if now.After(deadline) {
						stuck = fmt.Errorf("placement: no answer from CPU %d within %v", b, probeLimit)
						return
					}
				}
			}
		}
		err := measure(round)
		if err == nil {
			err = stuck
		}
		res <- err
	}()
	err := <-res
	stop(f, done)
	return err
}

// stopEvery is how often stop stores stopVal again while the responder
// has not exited.
const stopEvery = 10 * time.Millisecond

// stop ends the responder: it stores stopVal and waits for done, storing
// stopVal again every stopEvery meanwhile. The responder answers with a
// load then a store (a compare-and-swap would change the round trip the
// probe measures); after a round timed out (probeLimit), a responder
// preempted between the two stores its answer late, over stopVal, and
// would spin pinned for good with Probe waiting on it. Its answer is its
// only store, and it stores nothing once it has read stopVal, so the next
// stopVal stays.
func stop(f *atomic.Uint64, done <-chan struct{}) {
	f.Store(stopVal)
	t := time.NewTicker(stopEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			f.Store(stopVal)
		}
	}
}

// Probe measures the round trip of a cache line between CPUs a and b:
// two threads of this process, pinned one to each, bounce a word (a
// thousand round trips of warm-up, then 256 batches of 32, timed per
// batch). RTNs is the median batch, so a batch the scheduler interrupted
// does not move it. It takes a few milliseconds.
func Probe(a, b int) (Result, error) {
	r := Result{CPUs: [2]int{a, b}}
	if a == b {
		r.Class = "same-cpu"
		return r, nil
	}
	const batches, per = 256, 32
	ts := make([]float64, batches)
	err := pingPong(a, b, func(round func()) error {
		for range 1000 {
			round()
		}
		for i := range ts {
			t0 := time.Now()
			for range per {
				round()
			}
			ts[i] = float64(time.Since(t0).Nanoseconds()) / per
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	slices.Sort(ts)
	r.RTNs, r.MinNs = ts[batches/2], ts[0]
	r.Class = Class(r.RTNs)
	return r, nil
}

// Tail is the distribution of n timed round trips, as half round trips in
// nanoseconds (the unit of perftest latency), each including one clock
// read.
type Tail struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ns"`
	P99  float64 `json:"p99_ns"`
	P999 float64 `json:"p99_9_ns"`
	Max  float64 `json:"max_ns"`
}

// ProbeTail times n single round trips between CPUs a and b, pinned as in
// Probe: the floor a ping-pong's tail can reach on this machine (the
// hypervisor's and the kernel's interruptions, no runtime or library).
func ProbeTail(a, b, n int) (Tail, error) {
	if a == b {
		return Tail{}, errors.New("placement: a tail needs two CPUs")
	}
	if n < 1 {
		return Tail{}, errors.New("placement: a tail needs at least one round trip")
	}
	lat := make([]time.Duration, n)
	err := pingPong(a, b, func(round func()) error {
		for range min(n, 1000) {
			round()
		}
		for i := range lat {
			t0 := time.Now()
			round()
			lat[i] = time.Since(t0)
		}
		return nil
	})
	if err != nil {
		return Tail{}, err
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		i := min(int(p*float64(n)+0.999999)-1, n-1)
		return float64(lat[max(i, 0)]) / 2
	}
	return Tail{N: n, P50: at(0.50), P99: at(0.99), P999: at(0.999), Max: float64(lat[n-1]) / 2}, nil
}

// PinProcess restricts every thread of the calling process to cpu (threads
// started later inherit the mask of the thread starting them, so all of
// them). It walks /proc/self/task until a pass finds no thread it has not
// pinned.
func PinProcess(cpu int) error {
	if cpu < 0 || cpu >= len(unix.CPUSet{})*64 {
		return fmt.Errorf("placement: CPU %d out of range", cpu)
	}
	var set unix.CPUSet
	set.Set(cpu)
	done := map[int]bool{}
	for {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("placement: listing threads: %w", err)
		}
		fresh := false
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("placement: pinning thread %d to CPU %d: %w", tid, cpu, err)
			}
			done[tid], fresh = true, true
		}
		if !fresh {
			return nil
		}
	}
}
