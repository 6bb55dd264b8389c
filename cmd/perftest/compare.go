package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"
)

// -compare: gofi's pingpong and libfabric's fi_pingpong on the same
// provider, size by size, alternating, so both see the same machine
// (which on a shared 2-vCPU host changes from minute to minute). Medians
// of the rounds and their ratios are printed.

// fiPingpongBin finds libfabric's fi_pingpong ("" when not installed).
func fiPingpongBin() string {
	if p := os.Getenv("PERFTEST_FI_PINGPONG"); p != "" {
		return p
	}
	p, err := exec.LookPath("fi_pingpong")
	if err != nil {
		return ""
	}
	return p
}

// ourPingpong runs one gofi pingpong of size: a peer process started here
// and this process as the client. switches is the peer's involuntary
// context switches and this process's during the run (-1: not known).
func ourPingpong(fab fabricOpts, size, iters int, settle, timeout time.Duration, stderr io.Writer) (row ppRow, switches int64, err error) {
	wait := fab.wait
	if wait == "" {
		wait = "spin"
	}
	args := []string{"pingpong", "-e", fab.epType, "-I", strconv.Itoa(iters), "-S", strconv.Itoa(size),
		"-m", modeName(fab.tagged), "-timeout", timeout.String(), "-wait", wait, "-settle", settle.String()}
	if fab.prov != "" {
		args = append(args, "-p", fab.prov)
	}
	if fab.domain != "" {
		args = append(args, "-d", fab.domain)
	}
	p, err := startPeer(args, stderr)
	if err != nil {
		return ppRow{}, -1, err
	}
	o := &ppOpts{fab: fab, iters: iters, size: size, timeout: timeout, dst: "127.0.0.1", dstPort: p.port,
		common: &commonOpts{json: true}, noPlace: true, settle: settle}
	sw0 := selfInvoluntary()
	rows, err := pingpongMain(o, io.Discard, stderr)
	sw1 := selfInvoluntary()
	if err != nil {
		p.kill()
		return ppRow{}, -1, err
	}
	if err := p.wait(timeout); err != nil {
		return ppRow{}, -1, fmt.Errorf("peer: %w", err)
	}
	if len(rows) != 1 {
		return ppRow{}, -1, fmt.Errorf("pingpong returned %d rows", len(rows))
	}
	sw := int64(-1)
	if sw0 >= 0 && sw1 >= 0 {
		sw = addSwitches(sw1-sw0, involuntary(p.cmd.ProcessState))
	}
	return rows[0], sw, nil
}

// netPingpong measures Go's net package the same way: a ping-pong of
// size over TCP loopback against a peer process, microseconds per
// transfer (half a round trip) and MB/s.
func netPingpong(size, iters int, timeout time.Duration, stderr io.Writer) (measure, error) {
	p := &plan{Test: "latency", Prov: netProv, EpType: "rdm", Sizes: []int{size}, Iters: []int{iters}, Warmup: []int{max(iters/10, 1)}}
	var m measure
	err := runPlans("", 0, timeout, []*plan{p}, stderr, func(p *plan, r sizeResult) {
		res := r.result(p)
		// res.Usec is half a round trip, one transfer of size bytes: the
		// same MB/s as fi_pingpong's and gofi's rows (bytes moved both
		// ways over the whole run).
		m = measure{usec: res.Usec, mbps: float64(size) / res.Usec}
	}, nil)
	return m, err
}

// median of xs (xs is reordered).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}

// roundVals is one -compare round of one size: each tool's figures and
// the placement probed before and after the round.
type roundVals struct {
	ours, theirs, net          measure
	hasOurs, hasTheirs, hasNet bool
	place                      roundPlace
}

// compareRow is one size: its rounds, and the medians over the rounds
// selected (all of them, or those of one placement class).
type compareRow struct {
	size         int
	iters        int
	rounds       []roundVals
	ours, theirs measure
	hasTheirs    bool
	goNet        measure // Go's net package over TCP loopback
	class        string  // near, far, or mixed over rounds that differ
	placeNs      float64 // median probe of the rounds selected
}

// summarize computes the medians over the rounds keep selects (nil:
// all). ok is false when keep selects none.
func (r compareRow) summarize(keep func(roundVals) bool) (compareRow, bool) {
	var ours, oursBW, th, thBW, nt, ntBW, ns []float64
	classes := map[string]bool{}
	out := r
	out.rounds = nil
	for _, v := range r.rounds {
		if keep != nil && !keep(v) {
			continue
		}
		out.rounds = append(out.rounds, v)
		classes[v.place.class()] = true
		ns = append(ns, v.place.ns())
		if v.hasOurs {
			ours, oursBW = append(ours, v.ours.usec), append(oursBW, v.ours.mbps)
		}
		if v.hasTheirs {
			th, thBW = append(th, v.theirs.usec), append(thBW, v.theirs.mbps)
		}
		if v.hasNet {
			nt, ntBW = append(nt, v.net.usec), append(ntBW, v.net.mbps)
		}
	}
	if len(out.rounds) == 0 {
		return out, false
	}
	out.ours = measure{usec: median(ours), mbps: median(oursBW)}
	out.goNet = measure{usec: median(nt), mbps: median(ntBW)}
	out.hasTheirs = len(th) > 0
	out.theirs = measure{usec: median(th), mbps: median(thBW)}
	out.placeNs = median(ns)
	out.class = "mixed"
	if len(classes) == 1 {
		for c := range classes {
			out.class = c
		}
	}
	return out, true
}

// byClass splits rows into the rounds of each placement class present
// (near, far), when the run saw more than one; nil otherwise.
func byClass(rows []compareRow) map[string][]compareRow {
	seen := map[string]bool{}
	for _, r := range rows {
		for _, v := range r.rounds {
			if c := v.place.class(); c == "near" || c == "far" {
				seen[c] = true
			}
		}
	}
	if len(seen) < 2 {
		return nil
	}
	out := map[string][]compareRow{}
	for c := range seen {
		for _, r := range rows {
			if s, ok := r.summarize(func(v roundVals) bool { return v.place.class() == c }); ok {
				out[c] = append(out[c], s)
			}
		}
	}
	return out
}

// compareSizes runs the alternating rounds for each size. The placement
// is probed before the first round and after each (a round's "after" is
// the next one's "before").
func compareSizes(fab fabricOpts, sizes []int, itersFor func(int) int, rounds int, withOurs, withNet bool, settle, timeout time.Duration, prog *progress, stderr io.Writer) ([]compareRow, error) {
	bin := fiPingpongBin()
	prov := fab.prov
	var out []compareRow
	last := probeLocal()
	for _, size := range sizes {
		row := compareRow{size: size, iters: itersFor(size)}
		for r := 0; r < rounds; r++ {
			v := roundVals{place: roundPlace{before: last}}
			if withOurs {
				prog.set("%s pingpong %s: gofi, round %d/%d", prov, sizeStr(int64(size)), r+1, rounds)
				ours, sw, err := ourPingpong(fab, size, row.iters, settle, timeout, stderr)
				if err != nil {
					return out, err
				}
				v.ours, v.hasOurs = measure{usec: ours.usecPerXfer(), mbps: ours.mbps(), switches: sw}, true
			}
			if withNet {
				prog.set("%s pingpong %s: Go net, round %d/%d", prov, sizeStr(int64(size)), r+1, rounds)
				m, err := netPingpong(size, row.iters, timeout, stderr)
				if err != nil {
					return out, fmt.Errorf("Go net: %w", err)
				}
				v.net, v.hasNet = m, true
			}
			if bin != "" {
				prog.set("%s pingpong %s: fi_pingpong, round %d/%d", prov, sizeStr(int64(size)), r+1, rounds)
				theirs, err := fiPingpong(bin, prov, fab.tagged, size, row.iters, timeout)
				if err != nil {
					// libfabric's failure is not ours: note it, keep going
					prog.done()
					fmt.Fprintf(stderr, "perftest: fi_pingpong %s %s, round %d: %v\n", prov, sizeStr(int64(size)), r+1, err)
				} else {
					v.theirs, v.hasTheirs = theirs, true
				}
			}
			last = probeLocal()
			v.place.after = last
			row.rounds = append(row.rounds, v)
		}
		row, _ = row.summarize(nil)
		out = append(out, row)
	}
	return out, nil
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func runPingpongCompare(o *ppOpts, stdout, stderr io.Writer) int {
	if o.dst != "" {
		fmt.Fprintf(stderr, "perftest pingpong: -compare runs both sides on this host: drop the node argument %q\n", o.dst)
		return 2
	}
	if o.fab.prov == "" {
		o.fab.prov = "shm"
	}
	rounds := 3
	if s := os.Getenv("PERFTEST_ROUNDS"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			rounds = v
		}
	}
	// Say at once when our side cannot run this provider; the others
	// are still measured when there are others.
	bin := fiPingpongBin()
	withOurs := true
	if err := probeProvider(o.fab); err != nil {
		if bin == "" {
			fmt.Fprintf(stderr, "perftest pingpong: %v\n", err)
			return exitStatus(err)
		}
		fmt.Fprintf(stderr, "perftest pingpong: %v: measuring fi_pingpong and Go net only\n", err)
		withOurs = false
	}
	if bin == "" {
		fmt.Fprintf(stderr, "perftest pingpong: fi_pingpong not installed (Debian: apt-get install libfabric-bin): measuring gofi and Go net only\n")
	}
	sizes := ppSizes(o, ppMaxData)
	itersFor := func(size int) int {
		if o.iters >= 0 {
			return o.iters
		}
		return ppIterations(size)
	}
	prog := newProgress(stderr)
	rows, err := compareSizes(o.fab, sizes, itersFor, rounds, withOurs, true, o.settle, o.timeout, prog, stderr)
	prog.done()
	if err != nil {
		fmt.Fprintf(stderr, "perftest pingpong: %v\n", err)
		return exitStatus(err)
	}
	rep := newReport("pingpong -compare")
	if len(rows) > 0 && len(rows[0].rounds) > 0 {
		last := rows[len(rows)-1].rounds
		rep.setPlacement(rows[0].rounds[0].place.before)
		rep.setPlacement(last[len(last)-1].place.after)
	}
	addRows := func(rows []compareRow) {
		for _, r := range rows {
			stamp := func(res Result) Result {
				res.Placement, res.PlacementNs = r.class, r.placeNs
				return res
			}
			if withOurs {
				rep.add(stamp(Result{Tool: "gofi", Test: "pingpong", Provider: o.fab.prov, Mode: modeName(o.fab.tagged), Size: r.size,
					Iterations: int64(r.iters), Usec: r.ours.usec, MBps: r.ours.mbps, MxfersPerSec: 1 / r.ours.usec}))
			}
			rep.add(stamp(Result{Tool: "go-net", Test: "pingpong", Provider: "tcp", Mode: "stream", Size: r.size,
				Iterations: int64(r.iters), Usec: r.goNet.usec, MBps: r.goNet.mbps, MxfersPerSec: 1 / r.goNet.usec}))
			if r.hasTheirs {
				rep.add(stamp(Result{Tool: "libfabric", Test: "pingpong", Provider: o.fab.prov, Mode: modeName(o.fab.tagged), Size: r.size,
					Iterations: int64(r.iters), Usec: r.theirs.usec, MBps: r.theirs.mbps, MxfersPerSec: 1 / r.theirs.usec}))
			}
		}
	}
	addRows(rows)
	split := byClass(rows)
	for _, c := range []string{"near", "far"} {
		addRows(split[c])
	}
	if !o.common.json {
		fmt.Fprintf(stdout, "%s pingpong: usec/xfer (half a round trip) and MB/sec, median of %d rounds alternating gofi, fi_pingpong and Go net (TCP loopback)\n", o.fab.prov, rounds)
		fmt.Fprintf(stdout, "ratios: gofi / other (for usec below 1 means gofi is faster; for MB/sec above 1)\n")
		printCompareTable(stdout, rows, withOurs, "")
		for _, c := range []string{"near", "far"} {
			if len(split[c]) > 0 {
				fmt.Fprintln(stdout)
				printCompareTable(stdout, split[c], withOurs, c)
			}
		}
		printRounds(stdout, rows)
	}
	return o.common.finish(rep, stdout, stderr)
}

// printCompareTable prints -compare's table over rows, under a placement
// line: the rounds' placements, or of one class (near, far) when the
// rows are that class's rounds only.
func printCompareTable(w io.Writer, rows []compareRow, withOurs bool, class string) {
	var places []roundPlace
	for _, r := range rows {
		for _, v := range r.rounds {
			places = append(places, v.place)
		}
	}
	if class != "" {
		fmt.Fprintf(w, "# %s rounds only: %s\n", class, placeSummary(places))
	} else {
		fmt.Fprintf(w, "# placement (cache-line round trip between the CPUs, probed before and after each round): %s\n", placeSummary(places))
	}
	fmt.Fprintf(w, "%-8s%7s %10s %10s %7s %10s %7s %10s %10s %7s %10s %7s %6s\n", "bytes", "iters",
		"gofi usec", "libfab", "ratio", "go-net", "ratio", "gofi MB/s", "libfab", "ratio", "go-net", "ratio", "rt-ns")
	for _, r := range rows {
		th := measure{}
		if r.hasTheirs {
			th = r.theirs
		}
		fmt.Fprintf(w, "%-8s%7s %10s %10s %7s %10.2f %7s %10s %10s %7s %10.2f %7s %6.0f\n", sizeStr(int64(r.size)), cntStr(int64(r.iters)),
			fmtOpt(withOurs, r.ours.usec), fmtOpt(r.hasTheirs, th.usec), ratio(r.ours.usec, th.usec), r.goNet.usec, ratio(r.ours.usec, r.goNet.usec),
			fmtOpt(withOurs, r.ours.mbps), fmtOpt(r.hasTheirs, th.mbps), ratio(r.ours.mbps, th.mbps), r.goNet.mbps, ratio(r.ours.mbps, r.goNet.mbps), r.placeNs)
	}
}

func fmtOpt(ok bool, v float64) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// probeProvider opens (and closes) an endpoint on the provider, so a run
// that cannot work says why before starting peers.
func probeProvider(fab fabricOpts) error {
	n, err := openNode(fab, "127.0.0.1", time.Second)
	if err != nil {
		return err
	}
	return n.Close()
}

// progress is the one-line status perftest keeps on stderr while it
// works: rewritten in place on a terminal, one line per step otherwise
// (a log file then reads well).
type progress struct {
	w     io.Writer
	tty   bool
	width int
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) set(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	if !p.tty {
		fmt.Fprintf(p.w, "perftest: %s\n", s)
		return
	}
	pad := max(p.width-len(s), 0)
	fmt.Fprintf(p.w, "\r%s%*s", s, pad, "")
	p.width = len(s)
}

func (p *progress) done() {
	if p.tty && p.width > 0 {
		fmt.Fprintf(p.w, "\r%*s\r", p.width, "")
		p.width = 0
	}
}

// printRounds lists every round's figures in the order run, with the
// involuntary context switches of each tool's two processes per 1000
// iterations: a ping-pong whose processes had a CPU each switches a few
// times per run (gofi's runtime threads now and then), one whose two
// processes shared a CPU, or shared it with another program, at about
// every transfer. A median hides which rounds those were.
func printRounds(w io.Writer, rows []compareRow) {
	fmt.Fprintf(w, "# rounds in order: usec/xfer [involuntary context switches of both processes per 1000 iterations] placement\n")
	for _, r := range rows {
		var ours, theirs strings.Builder
		for _, v := range r.rounds {
			pl := v.place.class()
			if v.hasOurs {
				fmt.Fprintf(&ours, " %.2f [%s] %s", v.ours.usec, perKilo(v.ours.switches, r.iters), pl)
			}
			if v.hasTheirs {
				fmt.Fprintf(&theirs, " %.2f [%s] %s", v.theirs.usec, perKilo(v.theirs.switches, r.iters), pl)
			}
		}
		fmt.Fprintf(w, "# %s x %s gofi:%s; libfabric:%s\n", sizeStr(int64(r.size)), cntStr(int64(r.iters)), orNone(ours.String()), orNone(theirs.String()))
	}
}

// perKilo is n per 1000 of iters ("-" when n is not known).
func perKilo(n int64, iters int) string {
	if n < 0 || iters <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(n)*1000/float64(iters))
}

func orNone(s string) string {
	if s == "" {
		return " -"
	}
	return s
}
