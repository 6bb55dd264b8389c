package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The latency, bw and msgrate tests and the default sweep share one
// client-driven protocol over the control connection: the client sends a
// plan (which provider, which test, which sizes), the server ("perftest
// serve", or a peer the client started itself) opens an endpoint and
// answers with its name or an error, the client answers with its name,
// and both run the plan size by size, synchronising before each. A
// session may carry several plans; the client closes the connection when
// done.

// plan is one test the client asks the server to take part in.
type plan struct {
	Test   string `json:"test"` // latency or bw (msgrate is bw at small sizes)
	Prov   string `json:"prov"` // shm, tcp, or net (the Go baseline)
	EpType string `json:"ep_type"`
	Domain string `json:"domain,omitempty"`
	Tagged bool   `json:"tagged,omitempty"`
	Wait   string `json:"wait,omitempty"` // spin, yield or sread
	Sizes  []int  `json:"sizes"`
	Iters  []int  `json:"iters"` // per size, timed
	Warmup []int  `json:"warmup"`
	Window int    `json:"window,omitempty"`
	// Budget, when set, bounds each size's timed phase: the client runs
	// as many iterations (up to Iters) as fit at the warm-up's pace.
	Budget time.Duration `json:"budget,omitempty"`
	// stamps (client only, not sent) keeps each timed round trip's
	// start in sizeResult.starts, for latency -dump.
	stamps bool
}

// hello is the server's answer to a plan.
type hello struct {
	Name  []byte `json:"name,omitempty"`
	Err   string `json:"err,omitempty"`
	Where *where `json:"where,omitempty"` // the answer to a "where" plan
}

// wherePlan asks the server where it may run (placement); it opens no
// link and runs nothing.
const wherePlan = "where"

const maxPlan = 1 << 20

func (p *plan) fab() fabricOpts {
	return fabricOpts{prov: p.Prov, epType: p.EpType, domain: p.Domain, tagged: p.Tagged, wait: p.Wait}
}

func (p *plan) maxSize() int { return slices.Max(p.Sizes) }

func (p *plan) depth() int { return max(p.Window, 1) }

func (p *plan) validate() error {
	switch {
	case p.Test != "latency" && p.Test != "bw":
		return fmt.Errorf("unknown test %q", p.Test)
	case len(p.Sizes) == 0 || len(p.Iters) != len(p.Sizes) || len(p.Warmup) != len(p.Sizes):
		return errors.New("sizes, iterations and warm-ups do not line up")
	case p.Window < 0 || p.Window > 1<<16:
		return fmt.Errorf("window %d out of range", p.Window)
	case p.Test == "bw" && p.Window < 1:
		return errors.New("bw needs a window of at least 1")
	}
	for i, s := range p.Sizes {
		if s < 0 || s > 1<<30 || p.Iters[i] < 0 || p.Warmup[i] < 0 {
			return fmt.Errorf("size %d, %d iterations: out of range", s, p.Iters[i])
		}
		if s == 0 && p.Prov == netProv {
			return errors.New("the Go net baseline needs sizes above 0 (a TCP stream has no empty messages)")
		}
		if p.Test == "bw" && (p.Warmup[i]%p.Window != 0 || p.Iters[i]%p.Window != 0) {
			return fmt.Errorf("warm-up %d or iterations %d not a whole number of windows of %d", p.Warmup[i], p.Iters[i], p.Window)
		}
	}
	return nil
}

// openLink opens this side's end of a plan: a gofi endpoint, or a TCP
// listener (server) for the net baseline. It returns the name to send.
func openLink(p *plan, localIP string, timeout time.Duration) (name []byte, finish func(peer []byte) (link, error), err error) {
	if p.Prov == netProv {
		l, err := net.Listen("tcp", net.JoinHostPort(localIP, "0"))
		if err != nil {
			return nil, nil, err
		}
		return []byte(l.Addr().String()), func(peer []byte) (link, error) {
			defer l.Close()
			if peer == nil {
				return nil, nil // the client gave up
			}
			if tl, ok := l.(*net.TCPListener); ok && timeout > 0 {
				tl.SetDeadline(time.Now().Add(timeout))
			}
			c, err := l.Accept()
			if err != nil {
				return nil, netErr(err)
			}
			return newNetLink(c, p.maxSize(), timeout), nil
		}, nil
	}
	n, err := openNode(p.fab(), localIP, timeout)
	if err != nil {
		return nil, nil, err
	}
	name, err = n.name()
	if err != nil {
		n.Close()
		return nil, nil, err
	}
	return name, func(peer []byte) (link, error) {
		if peer == nil {
			return nil, n.Close() // the client gave up
		}
		if err := n.insertPeer(peer); err != nil {
			n.Close()
			return nil, err
		}
		l, err := newGofiLink(n, p.maxSize(), p.depth())
		if err != nil {
			n.Close()
			return nil, err
		}
		return l, nil
	}, nil
}

// clientLink sets up the client's end of a plan.
func clientLink(c *ctrl, p *plan, timeout time.Duration) (link, error) {
	b, _ := json.Marshal(p)
	if err := c.sendFrame(b); err != nil {
		return nil, err
	}
	hb, err := c.recvFrame(maxName + maxPlan)
	if err != nil {
		return nil, err
	}
	var h hello
	if err := json.Unmarshal(hb, &h); err != nil {
		return nil, fmt.Errorf("control channel: bad answer from the server: %w", err)
	}
	if h.Err != "" {
		return nil, fmt.Errorf("server: %s", h.Err)
	}
	if p.Prov == netProv {
		if err := c.sendFrame([]byte(netProv)); err != nil {
			return nil, err
		}
		conn, err := net.DialTimeout("tcp", string(h.Name), timeout)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errPeerUnreachable, err)
		}
		return newNetLink(conn, p.maxSize(), timeout), nil
	}
	name, finish, err := openLink(p, c.localIP(), timeout)
	if err != nil {
		c.sendFrame(nil) // tell the server we give up
		return nil, err
	}
	if err := c.sendFrame(name); err != nil {
		return nil, err
	}
	return finish(h.Name)
}

// serveSession answers plans on c until the client closes it.
func serveSession(c *ctrl, timeout time.Duration) error {
	for {
		pb, err := c.recvFrame(maxPlan)
		if err != nil {
			if errors.Is(err, errPeerUnreachable) && strings.Contains(err.Error(), "closed by the peer") {
				return nil // the client is done
			}
			return err
		}
		var p plan
		if err := json.Unmarshal(pb, &p); err != nil {
			return fmt.Errorf("control channel: bad plan: %w", err)
		}
		if p.Test == wherePlan {
			w := localWhere()
			b, _ := json.Marshal(hello{Where: &w})
			if err := c.sendFrame(b); err != nil {
				return err
			}
			continue
		}
		if err := p.validate(); err != nil {
			b, _ := json.Marshal(hello{Err: err.Error()})
			if err := c.sendFrame(b); err != nil {
				return err
			}
			continue
		}
		name, finish, err := openLink(&p, c.localIP(), timeout)
		if err != nil {
			b, _ := json.Marshal(hello{Err: err.Error()})
			if err := c.sendFrame(b); err != nil {
				return err
			}
			continue
		}
		b, _ := json.Marshal(hello{Name: name})
		if err := c.sendFrame(b); err != nil {
			return err
		}
		peer, err := c.recvFrame(maxName)
		if err != nil {
			return err
		}
		if len(peer) == 0 {
			peer = nil // the client could not open its side
		}
		l, err := finish(peer)
		if err != nil {
			return err
		}
		if l == nil {
			continue
		}
		err = serverRun(c, &p, l)
		if cerr := l.close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}

// ackSize is the size of bw's acknowledgement message.
const ackSize = 4

// Each size runs in two phases: the warm-up (Warmup messages, known to
// both sides from the plan), then the timed phase, whose length the
// client decides after the warm-up and sends over the control channel:
// Iters, or with a Budget as many as the warm-up's pace fits in it (at
// least minTimed, whole windows for bw).
const minTimed = 20

// After the control frame that starts the timed phase, the client runs
// untimed steps for at least sysmonSettle (at the pace of the warm-up's
// fastest step: its first steps pay for first use), and at most a tenth
// of the timed steps, so that short runs, and the first messages that
// runs of 100 iterations measure, stay as they were). The Go runtime's
// sysmon sleeps deeply while every P of its process is idle, as both
// processes are in the control exchange and the GC between sizes; the
// first system call or start of the world after that (the frame's write,
// the GC's end) wakes it in its busiest mode: it then wakes every 20 us
// (about 100 us here, with the kernel's 50 us timer slack) for 50 wakes,
// then backs off to its 10 ms. On a host with no spare CPU each of those
// wakes takes a CPU from one of the two polling loops for 6-25 us.
// perf record of perftest latency -p shm -S 8,4k -I 200000 (near, quiet):
// 45-50 wakes of each process's sysmon in the first 5 ms of a size's
// timed loop, then one per 10 ms; at 8 B they made 67 of its 223 round
// trips slower than 5x the median (p99.9 2.19 us; 0.85 without them).
const sysmonSettle = 8 * time.Millisecond

// settleSteps is the number of untimed steps run before timing steps
// of pace each (see sysmonSettle).
func settleSteps(steps int, pace time.Duration) int {
	return min(int(sysmonSettle/pace), steps/10)
}

// serverRun is the server's half of a plan: echo (latency) or receive
// windows and acknowledge each (bw).
func serverRun(c *ctrl, p *plan, l link) error {
	defer oneP(l)()
	ack := make([]byte, ackSize)
	for i, size := range p.Sizes {
		runtime.GC() // garbage made so far, before the size starts (see pingpongRun)
		if err := c.sync(false); err != nil {
			return err
		}
		tx := l.txBuf()[:size]
		phase := func(n int) error {
			for k := 0; k < n; k++ {
				if err := l.recv(size); err != nil {
					return fmt.Errorf("size %d, message %d: %w", size, k, err)
				}
				if p.Test == "latency" {
					if err := l.send(tx); err != nil {
						return err
					}
				} else if (k+1)%p.Window == 0 {
					if err := l.send(ack); err != nil {
						return err
					}
				} else {
					continue
				}
				if err := l.flush(); err != nil {
					return err
				}
			}
			return nil
		}
		if err := phase(p.Warmup[i]); err != nil {
			return err
		}
		nb, err := c.recvFrame(16)
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(string(nb))
		if err != nil || n < 0 || (p.Test == "bw" && n%p.Window != 0) {
			return fmt.Errorf("control channel: bad message count %q", nb)
		}
		if err := phase(n); err != nil {
			return err
		}
		if err := c.sync(false); err != nil {
			return err
		}
	}
	return nil
}

// sizeResult is the client's measurement of one size.
type sizeResult struct {
	size    int
	iters   int
	elapsed time.Duration
	lat     []time.Duration // latency: half round trips
	starts  []time.Duration // with plan.stamps: each round trip's start, from monoEpoch
}

// clientRun is the client's half of a plan.
func clientRun(c *ctrl, p *plan, l link, each func(sizeResult)) error {
	defer oneP(l)()
	var lat, starts []time.Duration
	for i, size := range p.Sizes {
		if p.Test == "latency" && cap(lat) < p.Iters[i] {
			lat = make([]time.Duration, p.Iters[i])
			prefault(lat)
		}
		runtime.GC() // garbage made so far, before the size starts (see pingpongRun)
		if err := c.sync(true); err != nil {
			return err
		}
		tx := l.txBuf()[:size]
		// one round trip (latency) or one window (bw); record and starts
		// may be nil
		step := func(record, starts []time.Duration, k int) error {
			if p.Test == "latency" {
				t0 := time.Now()
				err := l.send(tx)
				if err == nil {
					if err = l.flush(); err == nil {
						err = l.recv(size)
					}
				}
				if record != nil {
					record[k] = time.Since(t0) / 2
				}
				if starts != nil {
					starts[k] = t0.Sub(monoEpoch)
				}
				return err
			}
			for j := 0; j < p.Window; j++ {
				if err := l.send(tx); err != nil {
					return err
				}
			}
			if err := l.flush(); err != nil {
				return err
			}
			return l.recv(ackSize)
		}
		per := 1 // messages per step
		if p.Test == "bw" {
			per = p.Window
		}
		warmStart := time.Now()
		var err error
		fastest := time.Duration(math.MaxInt64) // the warm-up's fastest step
		for k := 0; k < p.Warmup[i]/per && err == nil; k++ {
			t0 := time.Now()
			err = step(nil, nil, k)
			fastest = min(fastest, time.Since(t0))
		}
		if err != nil {
			return fmt.Errorf("%s %s, size %d, warm-up: %w", p.Prov, p.Test, size, err)
		}
		steps, settle := p.Iters[i]/per, 0
		if p.Warmup[i] >= per {
			pace := max(time.Since(warmStart)/time.Duration(p.Warmup[i]/per), time.Nanosecond)
			if p.Budget > 0 {
				fit := int(p.Budget / pace)
				steps = min(steps, max(fit, (minTimed+per-1)/per))
			}
			settle = settleSteps(steps, max(fastest, time.Nanosecond))
		}
		if err := c.sendFrame([]byte(strconv.Itoa((settle + steps) * per))); err != nil {
			return err
		}
		for k := 0; k < settle && err == nil; k++ {
			err = step(nil, nil, k)
		}
		if err != nil {
			return fmt.Errorf("%s %s, size %d, settling: %w", p.Prov, p.Test, size, err)
		}
		r := sizeResult{size: size, iters: steps * per}
		if p.Test == "latency" {
			if cap(lat) < steps {
				lat = make([]time.Duration, steps)
				prefault(lat)
			}
			r.lat = lat[:steps]
			if p.stamps {
				if cap(starts) < steps {
					starts = make([]time.Duration, steps)
					prefault(starts)
				}
				r.starts = starts[:steps]
			}
		}
		start := time.Now()
		for k := 0; k < steps && err == nil; k++ {
			err = step(r.lat, r.starts, k)
		}
		r.elapsed = time.Since(start)
		if err != nil {
			return fmt.Errorf("%s %s, size %d: %w", p.Prov, p.Test, size, err)
		}
		if err := c.sync(true); err != nil {
			return err
		}
		each(r)
	}
	return nil
}

// prefault writes one word per page of s. A large slice fresh from the
// OS is untouched memory: its first write to each page faults (a few us
// in a VM), and recording 200 000 round trips then put 391 page faults
// into the timed loop, one every 512 round trips: 0.2% of them, enough to
// make the p99.9 (perf record: exceptions:page_fault_user at the record's
// store).
func prefault(s []time.Duration) {
	const perPage = 4096 / 8 // time.Duration is 8 bytes
	for i := 0; i < len(s); i += perPage {
		s[i] = 0
	}
}

// percentile of sorted durations, in microseconds (nearest rank).
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	i = min(max(i, 0), len(sorted)-1)
	return float64(sorted[i]) / 1e3
}

// result turns a size's measurement into a report entry.
func (r sizeResult) result(p *plan) Result {
	res := Result{Tool: "gofi", Test: p.Test, Provider: p.Prov, Mode: modeName(p.Tagged), Size: r.size,
		Iterations: int64(r.iters), Seconds: r.elapsed.Seconds()}
	if p.Prov == netProv {
		res.Tool, res.Provider, res.Mode = "go-net", "tcp", "stream"
	}
	if r.iters == 0 || r.elapsed <= 0 {
		return res
	}
	if p.Test == "latency" {
		slices.Sort(r.lat)
		res.P50, res.P90, res.P99, res.P999 = percentile(r.lat, 50), percentile(r.lat, 90), percentile(r.lat, 99), percentile(r.lat, 99.9)
		res.Usec = r.elapsed.Seconds() * 1e6 / float64(r.iters) / 2
		return res
	}
	res.Window = p.Window
	res.MBps = float64(r.size) * float64(r.iters) / (r.elapsed.Seconds() * 1e6)
	res.MsgRate = float64(r.iters) / r.elapsed.Seconds() / 1e6
	res.Usec = r.elapsed.Seconds() * 1e6 / float64(r.iters)
	return res
}
