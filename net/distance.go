package net

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gofi-dev/fi/internal/placement"
	"golang.org/x/sys/unix"
)

// How far apart two CPUs sit: the large-traffic join of messages of
// colocateMax bytes or more pays only where the two CPUs of a pair are
// far apart (a cache line's round trip between them of placement.FarNs
// or more), and costs where they are near (place.go, colocateMax).
//
// cpusFar answers from the last probe of that pair of CPUs, which the
// polling thread makes itself (probeCPUs, from lookPlace) when the last
// one is of another pair or older than distEvery: it pins itself to its
// CPU and bounces one cache line with the responder, a thread the
// process keeps for it (started by the first Listen, see own.go's "The
// loop needs a P"; addLocal's start is then a no-op), pinned
// to the other CPU (probeWarm round trips, then probeBatches batches of
// probePer, timed per batch; the median batch counts, as in
// internal/placement's Probe); both restore their masks. A probe takes
// ~0.2 ms far, ~0.1 near, and allocates nothing. Until the first answer
// for a pair, and when a probe fails (a CPU outside this process's mask,
// one P, the responder not running within probeLimit), the pair counts
// as not known: no join for such messages.
//
// A first version probed from two goroutines of its own while Poll went
// on: both spun holding the process's two Ps, and under load the pinned
// responder waited for its CPU (then up to 100 ms) with the application
// stopped. 256 KiB near (where nothing joins) x 1000, alternated, load
// 12: 121 against 221 us per transfer, slower in 6 of 8 rounds.

const (
	probeWarm    = 200
	probeBatches = 32
	probePer     = 16
	probeLimit   = 5 * time.Millisecond
)

// distEvery: a pair's probe is made again after this long (the
// development machines' placement changes between runs, minutes apart).
var distEvery = time.Second

// distance is the last probe: CPUs a and b (a < b, 15 bits each; b 0:
// none yet), far (bit 30), known (bit 31: the probe measured), and when
// (ms since placeEpoch, the top 32 bits).
var distance atomic.Uint64

func packDistance(a, b int, far, known bool, at time.Duration) uint64 {
	v := uint64(a)&0x7fff | (uint64(b)&0x7fff)<<15 | uint64(uint32(at/time.Millisecond))<<32
	if far {
		v |= 1 << 30
	}
	if known {
		v |= 1 << 31
	}
	return v
}

// cpusFar reports whether CPUs a and b are far apart, and whether that is
// known, from the last probe (see above); stale: there is none of this
// pair, or it is older than distEvery (the caller may probe, probeCPUs).
func cpusFar(a, b int) (far, known, stale bool) {
	if a == b || a < 0 || b < 0 || a >= placeCPU || b >= placeCPU {
		return false, false, false
	}
	if a > b {
		a, b = b, a
	}
	if placeFar != nil {
		far, known = placeFar(a, b)
		return far, known, false
	}
	v := distance.Load()
	same := int(v&0x7fff) == a && int(v>>15&0x7fff) == b
	stale = !same || time.Since(placeEpoch)-time.Duration(v>>32)*time.Millisecond >= distEvery
	known = same && v&(1<<31) != 0
	return known && v&(1<<30) != 0, known, stale
}

// placeFar stands in for cpusFar's probes in tests (nil: probe).
var placeFar func(a, b int) (far, known bool)

// prober is the process's probing thread (the responder; the initiator
// is the polling thread that asks, probeCPUs).
var prober probeThreads

type probeThreads struct {
	start sync.Once
	busy  atomic.Bool  // a probe is under way (set by probeCPUs, cleared by the responder)
	to    atomic.Int32 // the responder's CPU + 1 (0: none asked), a futex word
	ran   atomic.Bool  // the responder started (run)
	flag  [3]flagWord  // the line bounced: flag[1], padded
	ts    [probeBatches]int64
	// probes and fails count the probes answered and failed (tests).
	probes, fails atomic.Int64
}

type flagWord struct {
	v atomic.Uint64
	_ [56]byte
}

// run starts the responder once (at the first Listen; addLocal's call,
// at the first same-host peer, finds it started).
func (pt *probeThreads) run() {
	pt.start.Do(func() {
		pt.ran.Store(true)
		go pt.responder()
	})
}

// The responder sleeps in futex(2) on pt.to rather than on a channel:
// readying a goroutine parked on a channel puts it in the waker's run
// queue, where it waited, while the waker spun for it, until another
// thread of the runtime stole it (two more wake-ups of threads on a busy
// host) or the waker was preempted: under load a probe then failed its
// 5 ms wait in 3 of 8 tries and took up to 15 ms. A thread woken in
// futex(2) runs at once and takes the idle P back on its way out of the
// system call.
func futexWait(w *atomic.Int32, v int32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), linuxFutexWaitPrivate, uintptr(v), 0, 0, 0)
}

func futexWake(w *atomic.Int32) {
	unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), linuxFutexWakePrivate, 1, 0, 0, 0)
}

const (
	linuxFutexWaitPrivate = 0 | 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
	linuxFutexWakePrivate = 1 | 128 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
)

// The bounced word: 0 set by the initiator before it wakes the responder,
// probeReady once the responder runs pinned, then odd values the
// initiator stores and the responder answers with the next even one, or
// probeFail (the responder could not pin itself), or probeGaveUp (the
// initiator stopped waiting for the responder before it came), and at
// the end probeStop, the initiator's last store (it is done or gave up),
// which the responder waits for before it clears busy, whatever it found
// in the word: a stale store of one probe then never lands in the next
// one's word (a version that cleared busy on its own left a later
// initiator or the responder spinning forever, go test -race -count=3:
// TestProbeCPUs; and while giving up stored probeStop itself, a
// responder that came late took that for the last store and cleared busy
// before the initiator's own last store, which could then land in the
// next probe's word and fail it).
const (
	probeReady  = 2
	probeStop   = ^uint64(0)
	probeFail   = probeStop - 1
	probeGaveUp = probeStop - 2
)

func (pt *probeThreads) responder() {
	runtime.LockOSThread() // for good: this thread only probes
	f := &pt.flag[1].v
	for {
		v := pt.to.Load()
		if v == 0 {
			futexWait(&pt.to, 0)
			continue
		}
		pt.to.Store(0)
		cpu := int(v) - 1
		var old unix.CPUSet
		pinned := pinTo(cpu, &old)
		if pinned && f.CompareAndSwap(0, probeReady) {
			var last uint64
			for {
				v := f.Load()
				if v == probeStop {
					break
				}
				// A compare-and-swap, not a store: an initiator that gave
				// up on this round (probeLimit, say while this thread was
				// preempted between its load and its answer) has stored
				// probeStop, which a store would overwrite, and this loop
				// would then spin, pinned, for good.
				if v&1 == 1 && v != last && f.CompareAndSwap(v, v+1) {
					last = v
				}
			}
		} else if !pinned {
			f.CompareAndSwap(0, probeFail)
		}
		// Only once the initiator's last store (probeStop) is seen: it
		// never touches f after it, so a later probe's f starts clean.
		// (Found probeGaveUp: it comes right after.)
		for f.Load() != probeStop {
		}
		if pinned {
			unix.SchedSetaffinity(0, &old)
		}
		pt.busy.Store(false)
	}
}

// probeCPUs probes CPUs a and b, the calling goroutine's thread the
// initiator on the CPU it runs on (one of the two) and the responder on
// the other, records the answer (also a failure, as not known: tried
// again after distEvery) and returns it. The caller stops for the probe:
// about 0.3 ms far, 0.1 near, at most probeLimit waiting for the
// responder to run and as long again for the round trips. Nothing when
// another probe is under way or the process has one P (the responder
// would wait for the caller's preemption).
func probeCPUs(a, b int) (far, known bool) {
	pt := &prober
	if a > b {
		a, b = b, a
	}
	if !pt.ran.Load() || runtime.GOMAXPROCS(0) < 2 || !pt.busy.CompareAndSwap(false, true) {
		return false, false
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	me, other := a, b
	if getCPU() == b {
		me, other = b, a
	}
	var old unix.CPUSet
	ok := false
	f := &pt.flag[1].v
	f.Store(0)
	if !pinTo(me, &old) {
		pt.busy.Store(false)
	} else {
		pt.to.Store(int32(other) + 1) // busy held: the responder took the last one
		futexWake(&pt.to)
		ok = pt.bounce(f)
		f.Store(probeStop) // the responder restores its mask and clears busy
		unix.SchedSetaffinity(0, &old)
	}
	if ok {
		ts := pt.ts[:]
		slices.Sort(ts)
		far = float64(ts[len(ts)/2])/probePer >= placement.FarNs
		pt.probes.Add(1)
	} else {
		pt.fails.Add(1)
	}
	distance.Store(packDistance(a, b, far, ok, time.Since(placeEpoch)))
	return far, ok
}

// bounce waits for the responder (probeLimit) and times the round trips
// into pt.ts (probeLimit more); false when either took longer or the
// responder could not pin itself.
func (pt *probeThreads) bounce(f *atomic.Uint64) bool {
	start := time.Now()
	for i := 0; ; i++ {
		v := f.Load()
		if v == probeReady {
			break
		}
		if v == probeFail || v == probeStop || (i&0xff == 0xff && time.Since(start) > probeLimit && f.CompareAndSwap(0, probeGaveUp)) {
			return false
		}
	}
	start = time.Now()
	seq := uint64(probeReady)
	round := func() bool {
		seq += 2
		f.Store(seq - 1)
		for i := 0; f.Load() != seq; i++ {
			if i&0xfff == 0xfff && time.Since(start) > probeLimit {
				return false
			}
		}
		return true
	}
	for range probeWarm {
		if !round() {
			return false
		}
	}
	for i := range pt.ts {
		t0 := time.Now()
		for range probePer {
			if !round() {
				return false
			}
		}
		pt.ts[i] = int64(time.Since(t0))
	}
	return true
}

// pinTo binds the calling (locked) thread to cpu alone, keeping its mask
// in old; false when it could not.
func pinTo(cpu int, old *unix.CPUSet) bool {
	if unix.SchedGetaffinity(0, old) != nil || !old.IsSet(cpu) {
		return false
	}
	var one unix.CPUSet
	one.Set(cpu)
	return unix.SchedSetaffinity(0, &one) == nil
}
