package main

import (
	"os"
	"runtime"
	"time"
)

// Busy-polling under the Go scheduler.
//
// A goroutine that busy-polls a CQ never blocks, so the runtime's sysmon
// finds its P on the same scheduling tick every 10 ms and preempts it
// (SIGURG, or at the next function prologue). The preempted goroutine goes
// to the global run queue, and with an idle P the runtime wakes a second
// thread for it (wakep); on a host with no spare CPU that thread takes the
// spinner's CPU, picks the goroutine up, and the old thread still has to
// run once to go to sleep. perf sched showed every such preemption as a
// 20-30 us hole in the spinning goroutine, and a thread hand-off per
// process every 10 ms (perf record: each SIGURG followed by one futex wake
// and one futex sleep, asyncPreempt -> goschedImpl -> wakep -> startm).
//
// For the shm provider, whose progress runs entirely in the polling
// goroutine, the timed loops therefore run with one P (no idle P: a
// preempted or yielding goroutine resumes on its own thread at once, no
// thread is woken) and the poll loop yields (runtime.Gosched) every
// coopEvery of continuous spinning, so that sysmon always sees a fresh
// tick and sends no signal. Both are what a Go application that
// busy-polls gofi on a crowded host wants; GOMAXPROCS in the environment
// turns this off, so the runtime's default can be measured beside it.
// tcp keeps its processors: its event loop is a goroutine of its own.

// coopEvery is how long the poll loop runs before it yields: well under
// sysmon's 10 ms preemption limit, long enough that the yield's ~0.3 us
// is lost in the noise.
const coopEvery = 2 * time.Millisecond

// spinEpoch is the origin of node.lastYield (monotonic).
var spinEpoch = time.Now()

// oneP switches the process to one P for a busy-polled shm run (see
// above) and returns the function that switches back. It does nothing
// for Sread, for other providers and when GOMAXPROCS is set in the
// environment.
func (n *node) oneP() (restore func()) {
	if !busyPollOneP(n.provName(), n.sread) {
		return func() {}
	}
	prev := runtime.GOMAXPROCS(1)
	n.coop, n.lastYield = true, time.Since(spinEpoch)
	return func() {
		n.coop = false
		runtime.GOMAXPROCS(prev)
	}
}

// busyPollOneP reports whether a run over provider prov, waiting with
// Sread or not, gets one P and the periodic yield (see above).
func busyPollOneP(prov string, sread bool) bool {
	return !sread && prov == "shm" && os.Getenv("GOMAXPROCS") == ""
}

// busyPollNote is the table header's line saying so, so that a figure
// can be reproduced (empty when the runtime's default is kept).
func busyPollNote(prov string, sread bool) string {
	if !busyPollOneP(prov, sread) {
		return ""
	}
	return "# busy-polling with one P and a yield every 2 ms of spinning (set GOMAXPROCS to keep the runtime's default)\n"
}

// oneP is node.oneP for a link over a gofi endpoint; other links are left
// alone.
func oneP(l link) (restore func()) {
	if g, ok := l.(*gofiLink); ok {
		return g.n.oneP()
	}
	return func() {}
}

// coopYield yields when the goroutine has been running for coopEvery
// since the last yield; poll calls it every 64 polls.
func (n *node) coopYield() {
	if now := time.Since(spinEpoch); now-n.lastYield >= coopEvery {
		runtime.Gosched()
		n.lastYield = time.Since(spinEpoch)
	}
}

// coop is the same for the one-sided benchmarks' loops (perftest rma and
// atomic: the initiator's completion reads and a spinning target's CQ
// reads), which run on a CQ of their own rather than a node: both
// processes of an shm run busy-poll, and a thread hand-off in either
// (sysmon's preemption with an idle P) can leave the two polling threads
// on one CPU, where the target never takes a quick request while the
// initiator waits for it.
type coop struct {
	on    bool
	polls uint32
	last  time.Duration
}

// start switches the process to one P for a busy-polled run over prov
// (busyPollOneP) and returns the function that switches back.
func (c *coop) start(prov string) (restore func()) {
	if !busyPollOneP(prov, false) {
		return func() {}
	}
	prev := runtime.GOMAXPROCS(1)
	c.on, c.last = true, time.Since(spinEpoch)
	return func() {
		c.on = false
		runtime.GOMAXPROCS(prev)
	}
}

// poll is called before each CQ read of the loop: every 64th call it
// yields if the goroutine has run for coopEvery.
func (c *coop) poll() {
	if !c.on {
		return
	}
	if c.polls++; c.polls&63 != 0 {
		return
	}
	if now := time.Since(spinEpoch); now-c.last >= coopEvery {
		runtime.Gosched()
		c.last = time.Since(spinEpoch)
	}
}
