//go:build !race

package net

import (
	"testing"
	"time"

	"github.com/gofi-dev/fi/transport"
)

// doneSink counts SendDone completions and their failures.
type doneSink struct {
	countSink
	done, failed int
}

func (s *doneSink) SendDone(_ transport.Op, c transport.Code) {
	s.done++
	if c != transport.OK {
		s.failed++
	}
}

// Reads that ask for more than rmaAnswerWindow at once (three of 16 MiB,
// four requests each: the second one's last request goes only as answers
// free room, the third gets EAgain until then) allocate nothing once warm.
func TestAllocs_RMAReadsPastTheAnswerWindow(t *testing.T) {
	const size = 16 << 20
	b, _ := rmaFlowTarget(t, size, 9)
	a := listen(t, Config{})
	as, bs := &doneSink{}, &doneSink{}
	p, _ := a.Resolve(b.Name())
	var bufs [3][]byte
	var reqs [3]transport.RMAReq
	for i := range bufs {
		bufs[i] = make([]byte, size)
		reqs[i] = transport.RMAReq{Kind: transport.RMARead, Local: [][]byte{bufs[i]}, Remote: []transport.RMAIOV{{Len: size, Key: 9}}}
	}
	agains := 0
	round := func() {
		want := as.done + len(reqs)
		deadline := time.Now().Add(30 * time.Second)
		for i := 0; i < len(reqs) || as.done < want; {
			if i < len(reqs) {
				done, c := a.RMA(p, &reqs[i], transport.Op(i))
				switch {
				case c == transport.OK && !done:
					i++
				case c == transport.EAgain && !done:
					agains++
				default:
					t.Fatalf("read %d: done %v code %d", i, done, c)
				}
			}
			if !a.Poll(as) && !b.Poll(bs) {
				a.Wait(time.Millisecond)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d reads done", as.done-want+len(reqs), len(reqs))
			}
		}
		if as.failed > 0 {
			t.Fatalf("%d reads failed", as.failed)
		}
	}
	for range 5 {
		round()
	}
	if agains == 0 {
		t.Fatal("no read was refused for room: the test does not reach the window")
	}
	if n := testing.AllocsPerRun(10, round); n != 0 {
		t.Fatalf("%v allocations per round of three 16 MiB reads", n)
	}
}
