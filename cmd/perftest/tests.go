package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// "perftest latency", "perftest bw" and "perftest msgrate": against a
// "perftest serve" on the node given, or, without one, against a peer
// process this perftest starts on this host.

// testKind describes one of the three measuring subcommands.
type testKind struct {
	name    string // subcommand
	test    string // plan test
	sizes   []int  // default sizes
	window  int    // default window (bw, msgrate)
	summary string
}

var (
	latencyKind = testKind{name: "latency", test: "latency", summary: "half round-trip latency percentiles per message size",
		sizes: []int{1, 8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20}}
	bwKind = testKind{name: "bw", test: "bw", window: 64, summary: "streaming bandwidth with a window of messages in flight",
		sizes: []int{64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20, 4 << 20}}
	msgrateKind = testKind{name: "msgrate", test: "bw", window: 256, summary: "small-message rate with a window of messages in flight",
		sizes: []int{1, 8, 64, 512, 4 << 10}}
)

// latencyIters is the default iteration count for a latency size.
func latencyIters(size int) int {
	switch {
	case size >= 1<<20:
		return 100
	case size >= 64<<10:
		return 500
	}
	return 2000
}

// bwIters is the default message count for a bandwidth size: about 64 MiB,
// at least 4 windows and at most 40 windows or 1Mi messages, whichever is
// more (small messages need many to time well: 10k messages of 8 bytes
// pass in about a millisecond). The time budget (-time) bounds the run.
func bwIters(size, window int) int {
	n := (64 << 20) / max(size, 1)
	n = min(max(n, 4*window), max(40*window, 1<<20))
	return n - n%window
}

// bwWarmup is the warm-up for a bandwidth size of it messages: a tenth of
// them, between 1 and 64 windows. The first size of a run also pays for
// the connection's first use (page faults in rings and queues, pools
// filling up); one window was too short for that, and the budget then
// sized the timed phase from a pace several times too slow.
func bwWarmup(it, window int) int {
	w := min(max(it/10, window), 64*window)
	return w - w%window
}

// testOpts are the flags of latency, bw and msgrate.
type testOpts struct {
	kind    testKind
	fab     fabricOpts
	port    int
	sizes   []int
	iters   int // -1: per size default
	window  int
	timeout time.Duration
	budget  time.Duration
	node    string
	common  *commonOpts
}

// buildPlan turns options into the plan sent to the server.
func (o *testOpts) buildPlan() *plan {
	p := &plan{Test: o.kind.test, Prov: o.fab.prov, EpType: o.fab.epType, Domain: o.fab.domain,
		Tagged: o.fab.tagged, Wait: o.fab.wait, Sizes: o.sizes, Window: o.window}
	if o.iters < 0 {
		p.Budget = o.budget // -I pins the count; otherwise time bounds it
	}
	for _, s := range o.sizes {
		it := o.iters
		var warm int
		if o.kind.test == "latency" {
			if it < 0 {
				it = latencyIters(s)
			}
			warm = min(max(it/10, 1), 100)
		} else {
			if it < 0 {
				it = bwIters(s, o.window)
			}
			warm = bwWarmup(it, o.window)
		}
		p.Iters = append(p.Iters, it)
		p.Warmup = append(p.Warmup, warm)
	}
	return p
}

func testRunner(kind testKind) func(args []string, stdout, stderr io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int { return runTest(kind, args, stdout, stderr) }
}

func runTest(kind testKind, args []string, stdout, stderr io.Writer) int {
	sub := kind.name
	fs := flag.NewFlagSet("perftest "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &testOpts{kind: kind}
	fs.StringVar(&o.fab.prov, "p", "shm", "`provider`: shm, tcp, or net (Go's net package over TCP, a baseline)")
	fs.StringVar(&o.fab.epType, "e", "rdm", "endpoint `type` (gofi serves rdm)")
	fs.StringVar(&o.fab.domain, "d", "", "`domain` name")
	mode := fs.String("m", "msg", "transmit `mode`: msg|tagged")
	sizes := fs.String("S", "", "message `sizes`, comma-separated (such as 8,4k,1m); default "+sizeList(kind.sizes))
	iters := fs.String("I", "", "`number` of iterations per size (default depends on the size)")
	if kind.window > 0 {
		fs.IntVar(&o.window, "W", kind.window, "`window`: messages in flight before the receiver acknowledges")
	}
	fs.IntVar(&o.port, "P", defaultCtrlPort, "control `port` of the perftest serve on the node")
	fs.StringVar(&o.fab.wait, "wait", "spin", "how to wait for completions: spin (busy-poll), yield (spin, sched_yield every 256 polls) or sread (CQ.Sread)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "give up on an unreachable or silent peer after this long")
	fs.DurationVar(&o.budget, "time", time.Second, "time per size when -I is not given (the count is then at most the default)")
	var dump *string
	if kind.test == "latency" {
		dump = fs.String("dump", "", "write every timed round trip to `file`: size, start on CLOCK_MONOTONIC (ns) and half round trip (ns), to match slow ones with perf record -k CLOCK_MONOTONIC (benchmarks/tailholes.sh)")
	}
	o.common = addCommonFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: perftest %s [flags] [node]\n\n%s. Without a node it starts its own peer on this host;\nwith one it connects to 'perftest serve' running there.\n\n", sub, kind.summary)
		fs.PrintDefaults()
	}
	rest, rc := parseInterspersed(fs, args)
	if rc >= 0 {
		return rc
	}
	if len(rest) > 1 {
		return usageErr(stderr, sub, fmt.Errorf("unexpected argument %q", rest[1]))
	}
	if len(rest) == 1 {
		o.node = rest[0]
	}
	var err error
	o.sizes = kind.sizes
	if *sizes != "" {
		if o.sizes, err = parseSizes(*sizes); err != nil {
			return usageErr(stderr, sub, err)
		}
	}
	if o.iters, err = parseCount("-I", *iters); err != nil {
		return usageErr(stderr, sub, err)
	}
	if kind.window > 0 && (o.window < 1 || o.window > 1<<16) {
		return usageErr(stderr, sub, fmt.Errorf("-W %d: want 1 to 65536", o.window))
	}
	if kind.window > 0 && o.iters > 0 && o.iters%o.window != 0 {
		o.iters += o.window - o.iters%o.window // whole windows
	}
	switch *mode {
	case "msg":
	case "tagged":
		o.fab.tagged = true
	default:
		return usageErr(stderr, sub, fmt.Errorf("-m %q: want msg or tagged", *mode))
	}
	if _, err := parseEpType(o.fab.epType); err != nil {
		return usageErr(stderr, sub, err)
	}
	if err := checkWait(o.fab.wait); err != nil {
		return usageErr(stderr, sub, err)
	}
	if o.port < 1 || o.port > 65535 {
		return usageErr(stderr, sub, fmt.Errorf("-P %d: not a port number", o.port))
	}
	stop, err := o.common.startProfile()
	if err != nil {
		return usageErr(stderr, sub, err)
	}
	defer stop()
	if o.fab.prov != netProv {
		if err := probeProvider(o.fab); err != nil {
			fmt.Fprintf(stderr, "perftest %s: %v\n", sub, err)
			return exitStatus(err)
		}
	}
	p := o.buildPlan()
	if err := p.validate(); err != nil {
		return usageErr(stderr, sub, err)
	}
	var dumpTo *os.File
	if dump != nil && *dump != "" {
		if dumpTo, err = openDump(*dump); err != nil {
			return usageErr(stderr, sub, err)
		}
		defer dumpTo.Close()
		p.stamps = true
	}
	rep := newReport(sub)
	prog := newProgress(stderr)
	table := stdout
	if o.common.json {
		table = io.Discard
	}
	err = runPlansHooks(o.node, o.port, o.timeout, []*plan{p}, stderr, runHooks{
		each: func(p *plan, r sizeResult) {
			if dumpTo != nil && r.starts != nil {
				if err := writeDump(dumpTo, r.size, r.starts, r.lat); err != nil {
					fmt.Fprintf(stderr, "perftest %s: -dump: %v\n", sub, err)
				}
			}
			res := r.result(p) // sorts r.lat
			rep.add(res)
			prog.done()
			printTestRow(table, kind, res)
		},
		starting: func(p *plan, size int) {
			prog.set("%s %s: %s bytes", p.Prov, sub, sizeStr(int64(size)))
		},
		placed: func(pl *Placement, start bool) {
			rep.setPlacement(pl)
			prog.done()
			if start {
				printPlacement(table, pl, nil)
				printTestHeader(table, kind, p)
			} else if pl.Class != rep.Placement.Class {
				printPlacement(table, rep.Placement, pl)
			}
		},
	})
	prog.done()
	if err != nil {
		fmt.Fprintf(stderr, "perftest %s: %v\n", sub, err)
		return exitStatus(err)
	}
	return o.common.finish(rep, stdout, stderr)
}

func sizeList(s []int) string {
	var b []string
	for _, v := range s {
		b = append(b, sizeStr(int64(v)))
	}
	return strings.Join(b, ",")
}

func printTestHeader(w io.Writer, kind testKind, p *plan) {
	what := p.Prov + " " + modeName(p.Tagged)
	if p.Prov == netProv {
		what = "Go net (TCP) baseline"
	}
	io.WriteString(w, busyPollNote(p.Prov, p.Wait == "sread"))
	switch kind.name {
	case "latency":
		fmt.Fprintf(w, "# latency, %s: half round trip in usec\n", what)
		fmt.Fprintf(w, "%-8s%8s %9s %9s %9s %9s %9s\n", "bytes", "iters", "p50", "p90", "p99", "p99.9", "mean")
	case "bw":
		fmt.Fprintf(w, "# bandwidth, %s: window %d\n", what, p.Window)
		fmt.Fprintf(w, "%-8s%8s %12s %12s\n", "bytes", "iters", "MB/sec", "Mmsgs/sec")
	case "msgrate":
		fmt.Fprintf(w, "# message rate, %s: window %d\n", what, p.Window)
		fmt.Fprintf(w, "%-8s%8s %12s %12s\n", "bytes", "iters", "Mmsgs/sec", "MB/sec")
	}
}

func printTestRow(w io.Writer, kind testKind, r Result) {
	switch kind.name {
	case "latency":
		fmt.Fprintf(w, "%-8s%8s %9.2f %9.2f %9.2f %9.2f %9.2f\n", sizeStr(int64(r.Size)), cntStr(r.Iterations), r.P50, r.P90, r.P99, r.P999, r.Usec)
	case "bw":
		fmt.Fprintf(w, "%-8s%8s %12.2f %12.4f\n", sizeStr(int64(r.Size)), cntStr(r.Iterations), r.MBps, r.MsgRate)
	case "msgrate":
		fmt.Fprintf(w, "%-8s%8s %12.4f %12.2f\n", sizeStr(int64(r.Size)), cntStr(r.Iterations), r.MsgRate, r.MBps)
	}
}

// runHooks are what a run reports as it goes: each size's result, the
// size about to start (progress), and the placement probed at the start
// (before any size) and at the end. Any may be nil.
type runHooks struct {
	each     func(*plan, sizeResult)
	starting func(*plan, int)
	placed   func(p *Placement, start bool)
}

// runPlans runs plans over one control connection: to the node's
// perftest serve, or to a peer started here when node is empty.
func runPlans(node string, port int, timeout time.Duration, plans []*plan, stderr io.Writer,
	each func(*plan, sizeResult), starting func(*plan, int)) (err error) {
	return runPlansHooks(node, port, timeout, plans, stderr, runHooks{each: each, starting: starting})
}

// runPlansHooks is runPlans reporting through hooks; with hooks.placed
// set it probes the placement between this process and the peer first
// and last.
func runPlansHooks(node string, port int, timeout time.Duration, plans []*plan, stderr io.Writer, h runHooks) (err error) {
	var peer *peerProc
	if node == "" && launchedPeer.node != "" { // rank 1 of a launched pair serves (launched.go)
		node, port = launchedPeer.node, launchedPeer.port
	}
	if node == "" {
		if peer, err = startPeer([]string{"serve", "-timeout", timeout.String()}, stderr); err != nil {
			return err
		}
		node, port = "127.0.0.1", peer.port
		spawned.Store(peer)
		defer func() {
			spawned.Store(nil)
			if err != nil {
				peer.kill()
				return
			}
			if werr := peer.wait(timeout); werr != nil {
				err = fmt.Errorf("peer: %w", werr)
			}
		}()
	}
	c, err := dialCtrl(node, port, 0, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	var pw where
	if h.placed != nil {
		if pw, err = askWhere(c); err != nil {
			return err
		}
		h.placed(probeWith(localWhere(), pw), true)
	}
	each := h.each
	if each == nil {
		each = func(*plan, sizeResult) {}
	}
	for _, p := range plans {
		if err := runPlan(c, p, timeout, each, h.starting); err != nil {
			return err
		}
	}
	if h.placed != nil {
		h.placed(probeWith(localWhere(), pw), false)
	}
	return nil
}

// askWhere asks the control peer where it may run.
func askWhere(c *ctrl) (where, error) {
	b, _ := json.Marshal(&plan{Test: wherePlan})
	if err := c.sendFrame(b); err != nil {
		return where{}, err
	}
	hb, err := c.recvFrame(maxPlan)
	if err != nil {
		return where{}, err
	}
	var h hello
	if err := json.Unmarshal(hb, &h); err != nil {
		return where{}, fmt.Errorf("control channel: bad answer from the server: %w", err)
	}
	if h.Err != "" {
		return where{}, fmt.Errorf("server: %s", h.Err)
	}
	if h.Where == nil {
		return where{}, errors.New("server: no answer to where (an older perftest serve?)")
	}
	return *h.Where, nil
}

func runPlan(c *ctrl, p *plan, timeout time.Duration, each func(*plan, sizeResult), starting func(*plan, int)) error {
	l, err := clientLink(c, p, timeout)
	if err != nil {
		return err
	}
	if starting != nil {
		starting(p, p.Sizes[0])
	}
	i := 0
	err = clientRun(c, p, l, func(r sizeResult) {
		each(p, r)
		if i++; starting != nil && i < len(p.Sizes) {
			starting(p, p.Sizes[i])
		}
	})
	if cerr := l.close(); err == nil {
		err = cerr
	}
	return err
}

// runServe is "perftest serve": the other side of latency, bw, msgrate and
// the default sweep, for runs between hosts.
func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("perftest serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("B", defaultCtrlPort, "control `port` to listen on")
	timeout := fs.Duration("timeout", 10*time.Second, "give up on a silent client after this long")
	once := fs.Bool("once", false, "exit after the first client")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: perftest serve [-B port] [-once]\n\nWaits for 'perftest latency|bw|msgrate <this host>' and runs their tests.\n\n")
		fs.PrintDefaults()
	}
	rest, rc := parseInterspersed(fs, args)
	if rc >= 0 {
		return rc
	}
	if len(rest) > 0 {
		return usageErr(stderr, "serve", fmt.Errorf("unexpected argument %q", rest[0]))
	}
	if *port < 0 || *port > 65535 {
		return usageErr(stderr, "serve", fmt.Errorf("-B %d: not a port number", *port))
	}
	l, spawned, err := listenCtrl(*port)
	if err != nil {
		fmt.Fprintf(stderr, "perftest serve: %v\n", err)
		return 1
	}
	defer l.Close()
	if !spawned {
		fmt.Fprintf(stdout, "perftest serve: listening on port %s\n", strconv.Itoa(*port))
	}
	for {
		var wait time.Duration
		if spawned {
			wait = *timeout
		}
		c, err := acceptCtrl(l, wait, *timeout)
		if err != nil {
			fmt.Fprintf(stderr, "perftest serve: %v\n", err)
			return exitStatus(err)
		}
		err = serveSession(c, *timeout)
		c.Close()
		if err != nil {
			fmt.Fprintf(stderr, "perftest serve: %v\n", err)
		}
		if spawned || *once {
			if err != nil {
				return exitStatus(err)
			}
			return 0
		}
	}
}
