package engine

import (
	"sync/atomic"
	"testing"
	"time"
)

// collProg is a bound endpoint whose collective waits on shared memory
// (shmWaiter) when shm is set.
type collProg struct {
	prog
	shm bool
}

func (p *collProg) collShmWait() bool { return p.shm }

// Sread's yield mode sleeps on the transport once a yield took a time
// slice (sliceYield) while a collective waits on shared memory, and keeps
// yielding otherwise: yields that return at once, or no collective
// waiting.
func TestCQ_YieldSreadSleepsWhileCrowded(t *testing.T) {
	defer func(f func() time.Duration) { sreadYield = f }(sreadYield)
	for _, tc := range []struct {
		name      string
		took      time.Duration
		shm       bool
		wantSleep bool
	}{
		{"slice and shared-memory wait", 300 * time.Microsecond, true, true},
		{"quick yields", time.Microsecond, true, false},
		{"no collective waiting", 300 * time.Microsecond, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var yields atomic.Int64
			sreadYield = func() time.Duration { yields.Add(1); return tc.took }
			cq := NewCQ(4, NewSerial(true))
			cq.SetYield(true)
			p := &collProg{prog: prog{cq: cq}, shm: tc.shm}
			w := &waiter{}
			w.s.init()
			cq.Bind(p, w)
			defer cq.Unbind(p, w)
			var buf [1]Entry
			if n, c := cq.Sread(buf[:], 5*time.Millisecond); n != 0 || c != CodeAgain {
				t.Fatalf("Sread on an idle CQ = %d, %v", n, c)
			}
			if yields.Load() == 0 {
				t.Fatal("Sread never yielded")
			}
			if slept := w.waits.Load() > 0; slept != tc.wantSleep {
				t.Fatalf("slept on the waiter %d times (after %d yields); want sleeping %v", w.waits.Load(), yields.Load(), tc.wantSleep)
			}
			// A completion still ends the wait, asleep or not.
			go func() {
				time.Sleep(time.Millisecond)
				p.add(3)
			}()
			if n, _ := cq.Sread(buf[:], 10*time.Second); n != 1 || buf[0].Context != 3 {
				t.Fatalf("Sread = %d, %v; want the entry pushed by the other goroutine", n, buf[0].Context)
			}
		})
	}
}
