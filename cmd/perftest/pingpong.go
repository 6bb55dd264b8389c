package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// pingpong is "perftest pingpong": libfabric's fi_pingpong with its flags,
// its control protocol and exactly its output. The server runs without a
// node argument, the client with the server's host name:
//
//	perftest pingpong -p shm -e rdm -I 1000 -S 8            # server
//	perftest pingpong -p shm -e rdm -I 1000 -S 8 localhost  # client
//
// Each transfer size is a timed loop of iterations; in each the client
// sends a message and waits for the server's reply of the same size.

// ppMaxData is fi_pingpong's largest transfer: 4 MiB + 2 MiB.
const ppMaxData = 1<<22 + 1<<21

// ppMinRecv is the smallest receive buffer fi_pingpong posts.
const ppMinRecv = 64

// ppOpts are fi_pingpong's options.
type ppOpts struct {
	fab       fabricOpts
	srcPort   int
	dstPort   int
	iters     int // -1: fi_pingpong's size-dependent default
	size      int // -1: not given
	all       bool
	verify    bool
	debug     bool
	timeout   time.Duration
	dst       string
	common    *commonOpts
	compare   bool
	listenFor time.Duration // bound on the server's wait for a client (0: none)
	noPlace   bool          // -compare probes the placement itself
	settle    time.Duration // spin this long, untimed and without messages, before each timed loop
	placed    []*Placement  // probes at the start and the end (peer on this host)
}

// ppSizes is fi_pingpong's generate_test_sizes: the one -S size, every
// power of two and its half-way-up neighbour for -S all, or its six
// defaults.
func ppSizes(o *ppOpts, maxSize int) []int {
	switch {
	case o.size >= 0:
		return []int{o.size}
	case o.all:
		var s []int
		for i := 0; ; i++ {
			p, half := 0, 1
			if i > 0 {
				p = 1 << i
				half = p + p/2
			}
			if p > maxSize {
				break
			}
			s = append(s, p)
			if half > maxSize {
				break
			}
			s = append(s, half)
		}
		return s
	}
	var s []int
	for _, d := range []int{64, 256, 1024, 4096, 65536, 1 << 20} {
		if d > maxSize {
			break
		}
		s = append(s, d)
	}
	return s
}

// ppIterations is fi_pingpong's size_to_count, used when -I is not given.
func ppIterations(size int) int {
	switch {
	case size >= 1<<20:
		return 100
	case size >= 1<<16:
		return 1000
	}
	return 10000
}

// ppRow is one line of fi_pingpong's output.
type ppRow struct {
	size    int
	sent    int64
	acked   int64
	elapsed time.Duration
}

// xfersPerIter: a ping-pong iteration moves two messages.
const xfersPerIter = 2

func (r ppRow) usec() int64 {
	us := r.elapsed.Microseconds() // fi_pingpong's microsecond clock
	if us < 1 {
		us = 1
	}
	return us
}

func (r ppRow) bytes() int64 { return r.sent * int64(r.size) * xfersPerIter }

func (r ppRow) mbps() float64 { return float64(r.bytes()) / float64(r.usec()) }

func (r ppRow) usecPerXfer() float64 {
	return float64(float32(float64(r.usec()) / float64(r.sent) / xfersPerIter))
}

// ppHeader is fi_pingpong's header line.
func ppHeader() string {
	return fmt.Sprintf("%-8s%-8s%-9s%-8s%8s %10s%13s%13s\n", "bytes", "#sent", "#ack", "total", "time", "MB/sec", "usec/xfer", "Mxfers/sec")
}

// String formats the row as fi_pingpong's show_perf does.
func (r ppRow) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s%-8s", sizeStr(int64(r.size)), cntStr(r.sent))
	switch {
	case r.sent == r.acked:
		fmt.Fprintf(&b, "=%-8s", cntStr(r.acked))
	case r.sent < r.acked:
		fmt.Fprintf(&b, "-%-8s", cntStr(r.acked-r.sent))
	default:
		fmt.Fprintf(&b, "+%-8s", cntStr(r.sent-r.acked))
	}
	fmt.Fprintf(&b, "%-8s", sizeStr(r.bytes()))
	u := r.usecPerXfer()
	fmt.Fprintf(&b, "%8.2fs%10.2f%11.2f%11.2f\n", float64(r.usec())/1e6, r.mbps(), u, 1/u)
	return b.String()
}

// sizeStr is fi_pingpong's size_str: 1024-based with one decimal below 10.
func sizeStr(n int64) string {
	base, mag := int64(1), ""
	switch {
	case n >= 1<<30:
		base, mag = 1<<30, "g"
	case n >= 1<<20:
		base, mag = 1<<20, "m"
	case n >= 1<<10:
		base, mag = 1<<10, "k"
	}
	frac := int64(0)
	if n/base < 10 {
		frac = (n % base) * 10 / base
	}
	if frac != 0 {
		return fmt.Sprintf("%d.%d%s", n/base, frac, mag)
	}
	return fmt.Sprintf("%d%s", n/base, mag)
}

// cntStr is fi_pingpong's cnt_str: 1000-based, truncated.
func cntStr(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%db", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%dm", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%dk", n/1e3)
	}
	return strconv.FormatInt(n, 10)
}

// integAlphabet is the data -c fills messages with and checks.
const integAlphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

// integ fills or checks messages the way fi_pingpong -c does: message k
// starts at alphabet position 7k.
type integ struct{ fillIter, checkIter int }

func (g *integ) fill(b []byte) {
	j := (g.fillIter * 7) % len(integAlphabet)
	g.fillIter++
	for i := range b {
		b[i] = integAlphabet[j]
		if j++; j == len(integAlphabet) {
			j = 0
		}
	}
}

func (g *integ) check(b []byte) error {
	j := (g.checkIter * 7) % len(integAlphabet)
	g.checkIter++
	for i := range b {
		if b[i] != integAlphabet[j] {
			return fmt.Errorf("data check: message %d of %d bytes differs at byte %d", g.checkIter, len(b), i)
		}
		if j++; j == len(integAlphabet) {
			j = 0
		}
	}
	return nil
}

func runPingpong(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("perftest pingpong", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &ppOpts{}
	fs.IntVar(&o.srcPort, "B", 0, "source control `port` number (server: 47592, client: auto)")
	fs.IntVar(&o.dstPort, "P", 0, "destination control `port` number (client: 47592)")
	fs.StringVar(&o.fab.domain, "d", "", "`domain` name")
	fs.StringVar(&o.fab.prov, "p", "", "specific `provider` name: shm, tcp or shm+tcp (default: the first GetInfo returns)")
	fs.StringVar(&o.fab.epType, "e", "rdm", "endpoint `type`: msg|rdm|dgram (gofi serves rdm only)")
	iters := fs.String("I", "", "`number` of iterations (default 10000, 1000 from 64k, 100 from 1m, as fi_pingpong)")
	size := fs.String("S", "", "specific transfer `size` or 'all' (default: 64, 256, 1k, 4k, 64k, 1m)")
	fs.BoolVar(&o.verify, "c", false, "enables data_integrity checks")
	mode := fs.String("m", "msg", "transmit `mode` type: msg|tagged")
	fs.BoolVar(&o.debug, "v", false, "enable debugging output (to stderr)")
	fs.StringVar(&o.fab.wait, "wait", "spin", "how to wait for completions: spin (busy-poll, as fi_pingpong), yield (spin, sched_yield every 256 polls) or sread (CQ.Sread)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "give up on an unreachable or silent peer after this long")
	fs.DurationVar(&o.settle, "settle", ppSettleFor, "spin this `long` after the control sync, untimed and sending nothing, before each size's timed loop (see ppSettle; 0: time at once, as fi_pingpong)")
	fs.BoolVar(&o.compare, "compare", false, "run both sides here, alternating gofi, libfabric's fi_pingpong and Go net per size (PERFTEST_ROUNDS rounds, default 3), and print medians and ratios")
	o.common = addCommonFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage:\n  perftest pingpong [OPTIONS]\t\tstart server\n  perftest pingpong [OPTIONS] <srv_addr>\tconnect to server\n\nPing pong client and server (libfabric's fi_pingpong)\n\nOptions:\n")
		fs.PrintDefaults()
	}
	rest, rc := parseInterspersed(fs, args)
	if rc >= 0 {
		return rc
	}
	if len(rest) > 1 {
		fmt.Fprintf(stderr, "perftest pingpong: unexpected argument %q\n", rest[1])
		return 2
	}
	if len(rest) == 1 {
		o.dst = rest[0]
	}
	var err error
	if o.iters, err = parseCount("-I", *iters); err != nil {
		return usageErr(stderr, "pingpong", err)
	}
	o.size = -1
	switch {
	case *size == "all":
		o.all = true
	case *size != "":
		if o.size, err = parseSize(*size); err != nil {
			return usageErr(stderr, "pingpong", err)
		}
	}
	switch *mode {
	case "msg":
	case "tagged":
		o.fab.tagged = true
	default:
		return usageErr(stderr, "pingpong", fmt.Errorf("-m %q: want msg or tagged", *mode))
	}
	if _, err := parseEpType(o.fab.epType); err != nil {
		return usageErr(stderr, "pingpong", err)
	}
	if o.settle < 0 {
		return usageErr(stderr, "pingpong", fmt.Errorf("-settle %v: negative", o.settle))
	}
	if err := checkWait(o.fab.wait); err != nil {
		return usageErr(stderr, "pingpong", err)
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"-B", o.srcPort}, {"-P", o.dstPort}} {
		if p.v < 0 || p.v > 65535 {
			return usageErr(stderr, "pingpong", fmt.Errorf("%s %d: not a port number", p.name, p.v))
		}
	}
	stop, err := o.common.startProfile()
	if err != nil {
		return usageErr(stderr, "pingpong", err)
	}
	defer stop()
	if o.compare {
		return runPingpongCompare(o, stdout, stderr)
	}
	rows, err := pingpongMain(o, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "perftest pingpong: %v\n", err)
		return exitStatus(err)
	}
	rep := newReport("pingpong")
	for _, p := range o.placed {
		rep.setPlacement(p)
	}
	for _, r := range rows {
		rep.add(r.result(o.fab, "gofi"))
	}
	return o.common.finish(rep, stdout, stderr)
}

// result turns a pingpong row into a report entry.
func (r ppRow) result(f fabricOpts, tool string) Result {
	return Result{Tool: tool, Test: "pingpong", Provider: f.prov, Mode: modeName(f.tagged), Size: r.size,
		Iterations: r.sent, Seconds: r.elapsed.Seconds(), MBps: r.mbps(), Usec: r.usecPerXfer(),
		MxfersPerSec: 1 / r.usecPerXfer()}
}

func modeName(tagged bool) string {
	if tagged {
		return "tagged"
	}
	return "msg"
}

// pingpongMain sets up the control connection and runs the sizes,
// printing fi_pingpong's table to stdout (unless -json asks for JSON).
func pingpongMain(o *ppOpts, stdout, stderr io.Writer) ([]ppRow, error) {
	client := o.dst != ""
	// Say at once when this side cannot run the provider, before waiting
	// for (or on) a peer.
	if err := probeProvider(o.fab); err != nil {
		return nil, err
	}
	var c *ctrl
	var err error
	if client {
		port := o.dstPort
		if port == 0 {
			port = defaultCtrlPort
		}
		c, err = dialCtrl(o.dst, port, o.srcPort, o.timeout)
	} else {
		port := o.srcPort
		if port == 0 {
			port = defaultCtrlPort
		}
		l, spawned, lerr := listenCtrl(port)
		if lerr != nil {
			return nil, lerr
		}
		wait := o.listenFor
		if spawned {
			wait = o.timeout
		}
		c, err = acceptCtrl(l, wait, o.timeout)
		l.Close()
	}
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// The placement, when the peer is on this host. fi_pingpong's control
	// protocol has no room to ask the peer where it runs: probe the CPUs
	// of our own mask, which a peer started on this host shares unless
	// pinned. It goes to stderr: stdout stays fi_pingpong's.
	local := false
	if !o.noPlace {
		if client {
			local = isLocalHost(o.dst)
		} else if a, ok := c.conn.RemoteAddr().(*net.TCPAddr); ok {
			local = isLocalHost(a.IP.String())
		}
	}
	if local {
		p := probeLocal()
		o.placed = append(o.placed, p)
		printPlacement(stderr, p, nil)
		defer func() {
			e := probeLocal()
			o.placed = append(o.placed, e)
			if e.Class != p.Class {
				printPlacement(stderr, p, e)
			}
		}()
	}
	table := stdout
	if o.common.json {
		table = io.Discard
	}
	return pingpongRun(c, o, client, table, stderr)
}

// ppSettleFor is how long each side spins before a timed loop (-settle).
const ppSettleFor = 30 * time.Millisecond

// ppSettle spins for d, making no system call and sending nothing, after
// the control sync that starts a size and before its timed loop, on both
// sides (both clocks start from the sync: the client's first message
// still finds the server polling).
//
// Why: this program just blocked (the control exchange, the collection
// and GOMAXPROCS change before the first size), so its runtime's monitor
// thread (sysmon) slept deeply, and the sync's system call or the end of
// that stop-the-world woke it in its busiest mode: every 20 us (~90 us
// with the kernel's timer slack) for 50 rounds, then doubling up to
// 10 ms, ~25 ms in all. With both CPUs of a two-CPU host spinning (the
// two processes of the ping-pong) each wake-up takes a spinner's CPU for
// ~30 us on this VM (a Go loop pinned to one CPU: 1.6-1.8 ms of holes in
// its first 10 ms, none later). In an 8 B x 10k run (~10 ms) that was
// 53-118 holes of 15-60 us in the first 6 ms, 2.2-4.3 ms in all, against
// 0-12 (0-0.4 ms) after a 30 ms settle (perftest pingpong -S 8, four
// alternated pairs, load 8-10); quiet (load 0.3-0.6, 10 alternated
// rounds, near and far) 0.77 against 0.47 us per transfer (medians),
// faster in 10 of 10. fi_pingpong, a C process, has no such thread. Nothing in the fabric is touched: no message, ring or page;
// the first messages are timed as fi_pingpong times them. -settle 0
// times at once.
func ppSettle(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
	}
}

// pingpongRun is fi_pingpong's rdm flow over an established control
// connection.
func pingpongRun(c *ctrl, o *ppOpts, client bool, table, stderr io.Writer) (rows []ppRow, err error) {
	debugf := func(format string, a ...any) {
		if o.debug {
			fmt.Fprintf(stderr, "[debug] "+format+"\n", a...)
		}
	}
	var n *node
	var peerName []byte
	if client {
		if peerName, err = c.recvFrame(maxName); err != nil {
			return nil, err
		}
		debugf("received server name %q", peerName)
	}
	if n, err = openNode(o.fab, c.localIP(), o.timeout); err != nil {
		return nil, err
	}
	defer func() {
		if cerr := n.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	debugf("running pingpong over %s (%s endpoint, inject size %d)", n.provName(), n.info.EpAttr.Type, n.injectSize)
	o.fab.prov = n.provName()
	maxSize := ppMaxData
	if o.size >= 0 {
		maxSize = o.size
	}
	if m := n.info.EpAttr.MaxMsgSize; m > 0 && maxSize > m {
		maxSize = m
	}
	sizes := ppSizes(o, maxSize)
	if len(sizes) == 0 {
		return nil, fmt.Errorf("transfer size %d exceeds the provider's max_msg_size %d", o.size, n.info.EpAttr.MaxMsgSize)
	}
	rxBuf := make([]byte, max(maxSize, ppMinRecv))
	txBuf := make([]byte, max(maxSize, ppMinRecv))
	// Written once, as fi_pingpong memsets its buffer when it allocates
	// it: the pages are mapped before the timed loop. make leaves fresh
	// memory untouched, and the first 1 MiB transfers then paid for
	// faulting in both processes' buffers, which fi_pingpong does not.
	for _, b := range [][]byte{rxBuf, txBuf} {
		for i := range b {
			b[i] = 0
		}
	}
	// Free memory back to the kernel now, before the post backs the
	// receive buffer with huge pages (shm, from 256 KiB): otherwise the
	// runtime's background scavenger returns the set-up's free pages
	// during the timed loop, and a free page in a 2 MiB block the
	// buffer shares splits the block's huge page (MADV_DONTNEED), so
	// the other process's single copies pin the buffer 4 KiB at a time
	// again. perftest pingpong -S 1m -I 100, 8+8 alternated pairs (load
	// 14, near): 7 of 8 runs without it went to whole copies after
	// their splits came late, 78.8 us per transfer (median); with it 3
	// of 8, 39.5. fi_pingpong's C process has no such background work.
	debug.FreeOSMemory()
	if err = n.postRecv(rxBuf); err != nil {
		return nil, err
	}
	name, err := n.name()
	if err != nil {
		return nil, err
	}
	// The client, which has the server's name already, inserts it before
	// it sends its own: its insert (shm: connecting ahead, with a ring
	// back for the server to take) is then done when the server inserts,
	// and neither side's first poll maps a file. Both inserting at once
	// made a ring each way at each insert, and each side's first poll
	// mapped the other's inside the timed loop.
	if client {
		if err = n.insertPeer(peerName); err != nil {
			return nil, err
		}
	}
	if err = c.sendFrame(name); err != nil {
		return nil, err
	}
	if !client {
		if peerName, err = c.recvFrame(maxName); err != nil {
			return nil, err
		}
		debugf("received client name %q", peerName)
		if err = n.insertPeer(peerName); err != nil {
			return nil, err
		}
	}
	var g integ
	printedHeader := false
	// Collect the set-up's garbage now: a collection due during the timed
	// loop would run its mark worker on a vCPU the other side spins on.
	runtime.GC()
	defer n.oneP()()
	for _, size := range sizes {
		iters := o.iters
		if iters < 0 {
			iters = ppIterations(size)
		}
		var acked int64
		tx, rx := txBuf[:size], rxBuf
		if err = c.sync(client); err != nil {
			return rows, err
		}
		ppSettle(o.settle)
		inject := size < n.injectSize
		send := func() error {
			if o.verify {
				g.fill(tx)
			}
			if _, err := n.post(tx, inject); err != nil {
				return err
			}
			if !inject {
				return n.wait(n.txcq, 1)
			}
			return nil
		}
		recv := func() error {
			if err := n.wait(n.rxcq, 1); err != nil {
				return err
			}
			if o.verify {
				if err := g.check(rx[:size]); err != nil {
					return err
				}
			}
			if err := n.postRecv(rx); err != nil {
				return err
			}
			acked++
			return nil
		}
		start := time.Now()
		for i := 0; i < iters; i++ {
			if client {
				err = send()
				if err == nil {
					err = recv()
				}
			} else {
				err = recv()
				if err == nil {
					err = send()
				}
			}
			if err != nil {
				return rows, fmt.Errorf("size %d, iteration %d: %w", size, i, err)
			}
		}
		elapsed := time.Since(start)
		if acked, err = c.exchangeCount(client, acked); err != nil {
			return rows, err
		}
		row := ppRow{size: size, sent: int64(iters), acked: acked, elapsed: elapsed}
		rows = append(rows, row)
		if iters == 0 {
			continue // fi_pingpong prints nothing for zero iterations
		}
		if !printedHeader {
			io.WriteString(table, ppHeader())
			printedHeader = true
		}
		io.WriteString(table, row.String())
	}
	// finalize: each side sends "fin" and waits for the other's.
	copy(txBuf, "fin\x00")
	if _, err = n.post(txBuf[:4], false); err != nil {
		return rows, err
	}
	if err = n.wait(n.txcq, 1); err != nil {
		return rows, err
	}
	if err = n.wait(n.rxcq, 1); err != nil {
		return rows, fmt.Errorf("waiting for the peer's fin: %w", err)
	}
	// One more sync so neither side closes its endpoint while the other
	// still reads from it.
	if err = c.sync(client); err != nil && !errors.Is(err, errPeerUnreachable) {
		return rows, err
	}
	return rows, nil
}
