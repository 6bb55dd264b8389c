package shm

import (
	"math/bits"
	"time"
)

// Rendezvous payloads below CMAMin take whichever of single copy and
// segments has been faster lately for their size class. Which one wins
// depends on where the host put the two processes: measured on the
// development machine (README, load 2), segments win at every size from
// 32 KiB with the vCPUs close (the two copies overlap in a shared cache:
// 64 KiB 6.9 us against 9.6, 1 MiB 42 against 109) and lose at every size
// with them far apart (64 KiB 23.7 against 10.9), where single copy runs
// as libfabric's does. So every timed fetch adds its time to its class's
// recent samples of the method in use, and now and then a burst of
// exploreBurst fetches tries the other method.
//
// A method's cost is the least of its recent samples, not their mean: on
// a busy host some fetches are preempted and take hundreds of
// microseconds to milliseconds, which says nothing about the method. A
// mean, or a single try's time, caught such a sample often enough to keep
// the slower method for thousands of messages (seen near at 64 KiB under
// load 5: one segment try of 572 us against single copy's 8 us, where
// segments are 1.4x faster). Preemption only adds time, so the least of a
// few samples is robust. The method in use is judged on its last
// costSamples, a burst on its exploreBurst: the method in use needs the
// other to beat its luckiest recent fetch, a little hysteresis (with four
// samples a 1 MiB class flipped to segments on noise, seen under load 9).
//
// From SplitMin (or MsgHugeMin, if lower) up single copy is the only way
// (NewTransport sets cmaMin), split between the two sides or whole as
// splitCost picks. Measured on the development machine (perftest
// pingpong, fi_pingpong's 1000 messages, pinned, 2026-11-25): 64 KiB
// segments 35.3 us a transfer far apart and 10.3 close, whole single
// copy 7.75 and 6.97, split 6.2-6.3 and 5.3-5.4; 128 KiB split 8.8-9.2
// far and 7.7-8.0 near against the adaptive choice's 12.6 and 12.0; with
// the sender's buffer in huge pages (MsgHugeMin) single copy wins in both
// placements.
//
// Segments need both processes running at once (the receiver's CTS, the
// sender's copy, the receiver's copy); single copy only the receiver. On
// a host with more runnable threads than CPUs the two processes of a
// ping-pong can share one CPU for a while (after both slept, the
// scheduler wakes one where the other runs), and then every hand-off
// waits for a time slice: a segment fetch took 8 ms for the first ten
// messages of a size under load 5, against 3-6 us after. A burst that
// falls in such a phase finds segments hopeless; one more burst after
// confirmGap fetches checks that before the choice settles.
//
// The next burst comes when the class has spent exploreEvery times the
// last burst's time on the method in use: exploring costs about
// 1/exploreEvery of the time whatever the placement and the load (a
// method 6x slower is tried 6x less often), and a change of placement is
// noticed within a few hundred messages of a size.
const (
	fetchClasses = 8 // up to 32 KiB, 64, 128, 256, 512 KiB, 1, 2 MiB, larger
	exploreEvery = 64
	// exploreBurst is the number of fetches a try of the other method
	// takes: one preempted sample then does not decide.
	exploreBurst = 3
	// firstBurst: the class's fetch that starts the first burst. Not
	// earlier: the first messages of a size often come after a pause
	// (a benchmark's barrier, a program's set-up), after which on a busy
	// host the two processes share a CPU for a few messages, each
	// segment fetch waiting for time slices (8 ms each, seen under load
	// 5-15, while single copy took 10 us): bursts in that phase cost the
	// first hundred messages of 64 KiB 20-30x their steady time. Near,
	// waiting costs the first 32 messages about 1.4x each.
	firstBurst = 32
	// confirmGap: fetches between the first burst and the second.
	confirmGap = 32
	// maxGap bounds the fetches between bursts.
	maxGap = 1 << 20
	// costSamples is the number of recent samples kept per method.
	costSamples = 8
	// maxVoids bounds the tries dropped in a row (retry).
	maxVoids = 2
)

// costWin is one method's recent fetch times (ns): the last costSamples.
type costWin struct {
	s    [costSamples]int64
	k, i uint8 // samples held, next slot
}

func (w *costWin) add(x int64) {
	w.s[w.i] = max(x, 1)
	w.i = (w.i + 1) % costSamples
	w.k = min(w.k+1, costSamples)
}

// least returns the least recent sample, or 0 when there is none.
func (w *costWin) least() int64 {
	m := int64(0)
	for _, v := range w.s[:w.k] {
		if m == 0 || v < m {
			m = v
		}
	}
	return m
}

func (w *costWin) reset() { *w = costWin{} }

// fetchCost is one size class's recent cost of each method.
type fetchCost struct {
	cma, seg costWin
	n, next  uint32 // fetches of the class; the next burst's first (0: none set)
	// burst: tries of the other method still to hand out; trySeg: which
	// method the current burst tries; burstNs: its tries' time so far
	burst   uint32
	trySeg  bool
	bursts  uint32 // bursts started
	burstNs int64
	voids   uint32 // tries dropped in a row (retry)
}

// fetchClass is total's size class.
func fetchClass(total int) int {
	c := bits.Len(uint(max(total-1, 1))) - 15 // 32 KiB and below: 0
	return min(max(c, 0), fetchClasses-1)
}

// segFaster reports whether segments have been the faster method.
func (c *fetchCost) segFaster() bool {
	s := c.seg.least()
	return s > 0 && s < c.cma.least()
}

// pickCMA reports whether the class's next fetch goes by single copy,
// and whether it is a try of the method not in use (explore). The first
// firstBurst-1 fetches of a class go by single copy (the first is not
// timed: it pays for first touches), the next exploreBurst by segments (a
// try whose sender had to grow the ring does not count: see retry), then
// the faster, with a second burst confirmGap fetches later. In the far
// placement the bursts cost six messages at about twice the time, about
// 0.6% of fi_pingpong's 1000 messages of 64 KiB.
func (c *fetchCost) pickCMA() (cma, explore bool) {
	c.n++
	switch {
	case c.cma.k == 0:
		return true, false
	case c.burst == 0 && (c.bursts == 0 && c.n >= firstBurst || c.next != 0 && c.n >= c.next):
		// Start a burst of the method not in use; its old samples are
		// stale (the placement may have changed since).
		c.trySeg = !c.segFaster()
		if c.trySeg {
			c.seg.reset()
		} else {
			c.cma.reset()
		}
		c.burst, c.next, c.burstNs = exploreBurst, 0, 0
		c.bursts++
	}
	if c.burst > 0 {
		c.burst--
		return !c.trySeg, true
	}
	return !c.segFaster(), false
}

// retry drops a try that is no measure (the sender grew its ring for it,
// which costs a file and its pages): the burst gets one more fetch. It
// declines (the try counts) after maxVoids in a row, for traffic so sparse
// that its rings shrink between messages.
func (c *fetchCost) retry() bool {
	if c.voids >= maxVoids {
		return false
	}
	c.voids++
	c.burst++
	return true
}

// note adds one fetch's time to the method's samples. The last try of a
// burst sets when the next burst comes.
func (c *fetchCost) note(cma, explore bool, d time.Duration) {
	w := &c.seg
	if cma {
		w = &c.cma
	}
	w.add(int64(d))
	c.voids = 0
	if !explore {
		return
	}
	c.burstNs += int64(max(d, 1))
	if c.burst != 0 || c.next != 0 {
		return
	}
	gap := int64(confirmGap)
	if c.bursts > 1 {
		// Spend exploreEvery times the burst's time on the method in use
		// (the faster one's cost per fetch) before the next.
		fast := c.cma.least()
		if s := c.seg.least(); s > 0 && (fast == 0 || s < fast) {
			fast = s
		}
		gap = min(exploreEvery*c.burstNs/max(fast, 1), maxGap)
		gap = max(gap, exploreEvery)
	}
	c.next = c.n + uint32(gap)
}
