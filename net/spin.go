package net

import (
	"os"
	"reflect"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/panjf2000/gnet/v2"
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
// A pass that read nothing gives the CPU away (sched_yield) before the
// next: the spin never keeps a thread of this CPU's run queue waiting,
// and when nobody waits the yield returns at once. Without it a loaded
// host made the spin a loss: when the initiator (or any thread it needs)
// shared the spinning loop's CPU, it ran only when the scheduler
// preempted the spinner or the window ran out, and the window, seeing the
// next request come right after it gave up, even grew. Measured (perftest
// atomic -p tcp, 8-byte fetch-add, idle target, median us): both
// processes pinned to one CPU, 135-141 spinning without the yield, 25-31
// with it (and the initiator's own yield in Poll), 24-56 not spinning; at
// load 10-14 on both CPUs, 106-130 without the yield, 22.4-22.9 with it,
// 29.5-31.2 not spinning (libfabric's always spinning target 18.5-23.3,
// p99 5-50 ms against gofi's 85-270 us). An earlier rule, no spin while
// /proc/loadavg's runnable count exceeded the CPUs, avoided the loss but
// gave up the spin on any loaded host, where the wake-up path is slowest.
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
	max  time.Duration
	w    time.Duration // the current window
	last time.Time     // the end of the last traffic the loop saw
	hits atomic.Int64  // spin passes that read bytes (tests)
	// hitYields counts the yields after such passes (tests).
	hitYields atomic.Int64
	gaveUp    bool   // the last session ended idle (the loop then blocked)
	tasks     *int32 // gnet's task flag (gnetTasks), nil unknown
	skipped   bool   // a pass left a connection to gnet (bytes in its buffer)
	conns     []*tconn
	lastMove  time.Duration // the loop's last move off a peer's CPU (place.go)
	appPoll   time.Duration // when the loop last saw that Poll ran (notePlace)
}

// schedYield gives the CPU to another thread of its run queue, if one
// waits (sched_yield never blocks).
func schedYield() { _, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

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
	local := t.local.Load() != nil
	if local {
		t.notePlace(true) // where the loop polls (place.go)
	}
	now := time.Now()
	s.last = now
	if s.w == 0 {
		s.gaveUp = true
		return
	}
	start := now
	t.epollOffAll(&s.conns)
	defer t.epollOn()
	for pass := 1; ; pass++ {
		if t.closing.Load() || t.handshakes.Load() != 0 || t.parkWanted() {
			return
		}
		if local && pass%placeEvery == 0 {
			t.lookPlace(&s.lastMove, true) // where the loop and its peers poll (place.go)
		}
		if t.spinPass() {
			s.hits.Add(1)
			// The pass answered (or handed over) what came: the next
			// request cannot be here yet, so yield before reading
			// again rather than after a read that says EAGAIN. When
			// the initiator shares this CPU it runs now; on a CPU of
			// its own nobody waits and the yield returns at once.
			schedYield()
			s.hitYields.Add(1)
			now = time.Now()
			s.last = now
		} else {
			schedYield()
			now = time.Now()
		}
		if now.Sub(s.last) >= s.w {
			s.gaveUp = true
			return
		}
		if now.Sub(start) >= spinSession {
			if s.gnetBusy() {
				return
			}
			start = now
		}
	}
}

// Sessions under continuous traffic.
//
// A spin session ends every spinSession so that gnet runs the tasks
// queued for the loop (registrations, closes, the park task). Returning
// to gnet when it had none cost a thread hand-off: gnet's poll then found
// no event and called runtime.Gosched, which wakes another thread of the
// runtime (a futex wake, on this 2-CPU host often on the other CPU, where
// the peer spins) and puts the loop goroutine in the global run queue,
// where that thread may take it. So at the end of a session the spin
// looks at gnet's task flag first (gnet's poller sets wakeupCall before
// it signals its eventfd and clears it once it ran the tasks) and goes on
// spinning while it is clear. gnet does not export the flag: gnetTasks
// finds it by reflection (gnet v2's eventloop.poller.wakeupCall); without
// it every session returns to gnet as before. A session also returns when
// a pass skipped a connection whose older bytes wait in gnet's buffer:
// only gnet decodes those.

// gnetBusy reports whether gnet has tasks queued for the loop (true when
// the flag is unknown).
func (s *spinner) gnetBusy() bool {
	if s.skipped {
		s.skipped = false
		return true
	}
	return s.tasks == nil || atomic.LoadInt32(s.tasks) != 0
}

// gnetTasks returns gnet's task flag of event loop el (see above), or nil.
func gnetTasks(el gnet.EventLoop) *int32 {
	v := reflect.ValueOf(el)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	p := v.Elem().FieldByName("poller")
	if !p.IsValid() || p.Kind() != reflect.Pointer || p.IsNil() || p.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := p.Elem().FieldByName("wakeupCall")
	if !f.IsValid() || f.Kind() != reflect.Int32 || !f.CanAddr() {
		return nil
	}
	return (*int32)(unsafe.Pointer(f.UnsafeAddr()))
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
	s.conns = append(s.conns[:0], t.fdv...)
	t.mu.Unlock()
	got := false
	for i, tc := range s.conns {
		s.conns[i] = nil
		if tc.dead || tc.gc == nil || tc.stalled.Load() {
			continue
		}
		if tc.gc.InboundBuffered() > 0 {
			s.skipped = true // gnet must decode them (gnetBusy)
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

// spinRead reads tc once into pre (non-blocking). drained reports a
// read shorter than the room offered: the socket's receive queue was
// empty when it returned (tcp_recvmsg stops early only then), so reading
// again at once would only return EAGAIN.
func (tc *tconn) spinRead() (n int, drained bool, err error) {
	tc.reservePre(ownRead)
	room := cap(tc.pre) - len(tc.pre)
	n, err = sysRead(tc.fd, tc.pre[len(tc.pre):cap(tc.pre)])
	if n > 0 {
		tc.pre = tc.pre[:len(tc.pre)+n]
	}
	return n, n > 0 && n < room, err
}
