package net

import (
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Busy-polling on the loop: the idle target's latency design.
//
// A one-sided operation completes while the target's application makes no
// gofi call: the target's gnet loop reads the request, executes it and
// writes the answer. Between requests that loop sleeps in epoll_wait, and
// on this VM waking a thread whose vCPU went idle (halted) costs 30-40 us:
// an 8-byte tcp write or fetch-add took 53 us with an idle target against
// 18 us when the target's application polled its CQ (Poll then owns the
// sockets, own.go), and libfabric's tcp target never sleeps (it spins in
// fi_cq_read).
//
// So after traffic the loop keeps polling its sockets (a non-blocking
// read of each ready connection, the same decoder, the same answers) for
// a window before it goes back to gnet and epoll_wait: a request that
// comes within the window is read by a running thread, no wake-up. The
// window adapts like the kernel's haltpoll governor: when the loop gave up
// and blocked, and the next traffic came within SpinMax of the last, the
// window doubles (from spinStart up to SpinMax: spinning longer would have
// caught it); when it came later, the window halves and falls to zero below
// spinStart/2 (an endpoint with sparse traffic does not spin at all). An
// endpoint with no traffic makes no system call. The cost is CPU: at most
// SpinMax of one core after each burst of traffic, and a whole core while
// requests keep coming less than SpinMax apart (as libfabric's spinning
// target costs one always).
//
// The loop leaves the spin at once when Poll asks for the sockets (park
// requested, own.go), when a connection is in its handshake (only gnet
// reads those), when the transport closes, and at the latest after
// spinSession, so that gnet runs its queued tasks (registrations of dials,
// closes, wake-ups) at least that often under continuous traffic.
const (
	defaultSpinMax = 100 * time.Microsecond
	spinStart      = 25 * time.Microsecond
	spinSession    = time.Millisecond
)

// SpinEnv overrides Config.SpinMax when that is zero: a Go duration
// ("100us"); "0" disables busy-polling.
const SpinEnv = "GOFI_TCP_SPIN"

// spinner is the loop's adaptive busy-poll state (loop goroutine only).
type spinner struct {
	max    time.Duration
	w      time.Duration // the current window
	last   time.Time     // the end of the last traffic the loop saw
	hits   atomic.Int64  // spin passes that read bytes (tests)
	gaveUp bool          // the last session ended idle (the loop then blocked)
	conns  []*tconn

	// The CPUs' state, sampled at most every spinLoadEvery.
	loadFd  int // /proc/loadavg, opened on first use; -2: unavailable
	loadAt  time.Time
	crowded bool // more runnable threads than CPUs: do not spin
	spinBuf [64]byte
}

// spinLoadEvery is how often the loop looks at the number of runnable
// threads (one pread of /proc/loadavg).
const spinLoadEvery = 10 * time.Millisecond

// busyCPUs reports whether the host has more runnable threads than CPUs,
// sampled at most every spinLoadEvery. A spinning loop then takes a CPU
// from a thread that has work (perhaps the very peer whose request it
// waits for), and the scheduler no longer favours it as a sleeper when the
// request comes: measured with eight busy processes on the 2 vCPUs, an
// 8-byte tcp write took 120-135 us with the spin against 30-70 us without.
// At a lighter load (3-10 runnable threads) a fetch-add with the check
// off was bimodal, 15 us or 90-100 us per operation against 41-48 us
// without the spin: in the slow runs the requests came ~100 us after the
// spin gave up (the initiator, sharing the one remaining CPU with the
// other work, was slowed), not while it spun.
func (s *spinner) busyCPUs(now time.Time) bool {
	if now.Sub(s.loadAt) < spinLoadEvery && !s.loadAt.IsZero() {
		return s.crowded
	}
	s.loadAt = now
	if s.loadFd == 0 {
		fd, err := unix.Open("/proc/loadavg", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			fd = -2
		}
		s.loadFd = fd
	}
	if s.loadFd < 0 {
		s.crowded = false
		return false
	}
	n, err := unix.Pread(s.loadFd, s.spinBuf[:], 0)
	if err != nil || n <= 0 {
		s.crowded = false
		return false
	}
	s.crowded = runnable(s.spinBuf[:n]) > runtime.NumCPU()
	return s.crowded
}

// runnable reads the running-thread count of a /proc/loadavg line
// ("0.52 0.58 0.59 3/94 17622": 3), or 0.
func runnable(b []byte) int {
	i := 0
	for i < len(b) && b[i] != '/' {
		i++
	}
	j := i
	for j > 0 && b[j-1] >= '0' && b[j-1] <= '9' {
		j--
	}
	n := 0
	for _, c := range b[j:i] {
		n = n*10 + int(c-'0')
	}
	return n
}

// closeLoad closes the /proc/loadavg descriptor (on the loop's shutdown).
func (s *spinner) closeLoad() {
	if s.loadFd > 0 {
		unix.Close(s.loadFd)
	}
	s.loadFd = -2
}

func spinMaxOf(cfg *Config) time.Duration {
	if cfg.SpinMax != 0 {
		return max(cfg.SpinMax, 0)
	}
	if v := os.Getenv(SpinEnv); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return min(max(d, 0), 10*time.Millisecond)
		}
	}
	return defaultSpinMax
}

// arrived adapts the window to traffic that woke the loop from gnet
// (OnTraffic) after a session that gave up.
func (s *spinner) arrived(now time.Time) {
	if !s.gaveUp {
		return
	}
	s.gaveUp = false
	if gap := now.Sub(s.last); gap <= s.max {
		s.w = min(max(2*s.w, spinStart), s.max)
	} else if s.w /= 2; s.w < spinStart/2 {
		s.w = 0
	}
}

// loopSpin polls every ready connection from the loop (inside OnTraffic)
// until no byte came for the window.
func (t *Transport) loopSpin() {
	s := &t.spin
	now := time.Now()
	s.last = now
	if s.w == 0 || !t.cfg.spinAlways && s.busyCPUs(now) {
		s.gaveUp = true
		return
	}
	start := now
	for {
		if t.closing.Load() || t.handshakes.Load() != 0 || t.parkWanted() {
			return
		}
		if t.spinPass() {
			s.hits.Add(1)
			now = time.Now()
			s.last = now
		} else {
			now = time.Now()
		}
		if now.Sub(s.last) >= s.w {
			s.gaveUp = true
			return
		}
		if now.Sub(start) >= spinSession {
			return
		}
	}
}

// parkWanted reports whether Poll asked for the loop (own.go).
func (t *Transport) parkWanted() bool {
	t.pmu.Lock()
	s := t.pstate
	t.pmu.Unlock()
	return s != parkIdle
}

// spinPass reads and decodes each ready connection once; it returns
// whether bytes arrived.
func (t *Transport) spinPass() bool {
	s := &t.spin
	t.mu.Lock()
	s.conns = s.conns[:0]
	for _, tc := range t.fds {
		s.conns = append(s.conns, tc)
	}
	t.mu.Unlock()
	got := false
	for i, tc := range s.conns {
		s.conns[i] = nil
		if tc.dead || tc.gc == nil || tc.stalled.Load() {
			continue
		}
		if tc.gc.InboundBuffered() > 0 {
			// Older bytes wait in gnet's buffer (a decode that stopped
			// early left them): the decoder reads pre before them, so
			// reading the socket into pre now would put newer bytes
			// ahead of older ones. They are decoded where they were left.
			continue
		}
		if tc.outq.Load() {
			tc.ownerFlush()
		}
		if t.readConn(tc, false) {
			got = true
		}
	}
	if t.lis.committed {
		t.lis.committed = false
		t.ho.publish()
		t.notify()
	}
	return got
}

// loopDecode decodes what tc has buffered, on the loop (as OnTraffic). It
// returns false when reading tc must stop.
func (t *Transport) loopDecode(tc *tconn) bool {
	tc.src.tc, tc.src.gc = tc, tc.gc
	stalled, err := tc.dec.run(&tc.src, tc)
	t.flushAnswers()
	if err != nil {
		tc.loopFail(err)
		return false
	}
	if stalled {
		t.listStalled(tc, true)
		return false
	}
	return true
}

// loopFail gives up on a connection the loop was reading in a spin:
// gnet closes it once the spin returns.
func (tc *tconn) loopFail(err error) {
	tc.dead = true
	tc.closeReason(err)
	_ = tc.gc.Close()
}

// spinRead reads tc once into pre (non-blocking) for the loop.
func (tc *tconn) spinRead() (int, error) {
	tc.reservePre(ownRead)
	n, err := unix.Read(tc.fd, tc.pre[len(tc.pre):cap(tc.pre)])
	if n > 0 {
		tc.pre = tc.pre[:len(tc.pre)+n]
	}
	return n, err
}
