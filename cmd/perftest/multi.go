package main

// perftest under a launcher with more than two ranks, the way OSU's
// multi-pair tests measure: "mpiexec.hydra -n 8 perftest latency" pairs
// rank i with rank i+n/2 (osu_multi_lat: with ranks placed by host, every
// pair crosses hosts) and runs every pair's ping-pong at once, size by
// size; "perftest bw" streams windows over every pair at once
// (osu_mbw_mr) and sums the bandwidth; "-pattern ring" passes a message
// around all ranks instead and reports the time per hop. Every rank opens
// one endpoint and learns the others through launch.Connect; a barrier
// starts each size; rank 0 gathers the per-pair figures through the job
// and prints avg, min and max over the pairs. Same-host pairs probe their
// placement (the cache-line round trip between their CPUs) first, one
// pair at a time, and the table header lists it.

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/gofi-dev/fi/launch"
)

// multiOpts are the flags of a multi-rank run.
type multiOpts struct {
	fab     fabricOpts
	kind    string // "latency" or "bw"
	sizes   []int
	iters   int // -1: by size
	window  int
	pattern string // "pairs" or "ring"
	timeout time.Duration
	common  *commonOpts
}

// multiRank is what each rank reports to rank 0: a figure per size (usec
// for latency, MB/s for bandwidth; 0 for ranks that do not measure) and
// its pair's placement.
type multiRank struct {
	Figures []float64  `json:"figures"`
	Iters   []int      `json:"iters"`
	Place   *Placement `json:"place,omitempty"`
	Partner int        `json:"partner"`
	Measure bool       `json:"measure"`
}

func runMulti(job *launch.Job, sub string, args []string, stdout, stderr io.Writer) int {
	rest := args
	if sub != "" {
		rest = args[1:]
	}
	name := "perftest " + sub
	o := &multiOpts{kind: "latency"}
	sizes := latencyKind.sizes
	switch sub {
	case "bw":
		o.kind, sizes = "bw", bwKind.sizes
	case "msgrate":
		o.kind, sizes = "bw", msgrateKind.sizes
	case "":
		name = "perftest"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	defProv := "shm"
	if job.LocalSize() < job.Size() {
		defProv = "tcp"
	}
	fs.StringVar(&o.fab.prov, "p", defProv, "`provider`: shm, tcp or shm+tcp (default shm when every rank shares this host, else tcp)")
	sz := fs.String("S", "", "message `sizes`, comma-separated (default "+sizeList(sizes)+")")
	iters := fs.String("I", "", "`number` of iterations per size (default depends on the size)")
	fs.IntVar(&o.window, "W", 64, "bandwidth `window`: messages in flight before the receiver acknowledges")
	fs.StringVar(&o.pattern, "pattern", "pairs", "`pattern`: pairs (rank i with i+n/2, all at once, as osu_multi_lat) or ring (latency around all ranks)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "give up on a silent peer after this long")
	mode := fs.String("m", "msg", "transmit `mode`: msg|tagged")
	o.common = addCommonFlags(fs)
	if rc := parseMultiFlags(fs, rest); rc >= 0 {
		return rc
	}
	var err error
	o.sizes = sizes
	if *sz != "" {
		if o.sizes, err = parseSizes(*sz); err != nil {
			return usageErr(stderr, sub, err)
		}
	}
	if o.iters, err = parseCount("-I", *iters); err != nil {
		return usageErr(stderr, sub, err)
	}
	switch {
	case o.window < 1 || o.window > 1<<12:
		return usageErr(stderr, sub, fmt.Errorf("-W %d: want 1 to 4096", o.window))
	case o.pattern != "pairs" && o.pattern != "ring":
		return usageErr(stderr, sub, fmt.Errorf("-pattern %q: want pairs or ring", o.pattern))
	case o.pattern == "ring" && o.kind != "latency":
		return usageErr(stderr, sub, fmt.Errorf("-pattern ring measures latency: use it with pingpong or latency"))
	case *mode == "tagged":
		o.fab.tagged = true
	case *mode != "msg":
		return usageErr(stderr, sub, fmt.Errorf("-m %q: want msg or tagged", *mode))
	}
	o.fab.epType, o.fab.wait = "rdm", "spin"

	res, err := multiRun(job, o)
	if err != nil {
		fmt.Fprintf(stderr, "%s: rank %d: %v\n", name, job.Rank(), err)
		return exitStatus(err)
	}
	if job.Rank() != 0 {
		return 0
	}
	table := stdout
	if o.common.json {
		table = io.Discard
	}
	rep := newReport(strings.TrimPrefix(name, "perftest "))
	printMulti(table, job, o, res, rep)
	return o.common.finish(rep, stdout, stderr)
}

// parseMultiFlags parses flags, refusing positional arguments (the ranks
// are the peers).
func parseMultiFlags(fs *flag.FlagSet, args []string) int {
	rest, rc := parseInterspersed(fs, args)
	if rc >= 0 {
		return rc
	}
	if len(rest) > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q: under a launcher the ranks are the peers\n", fs.Name(), rest[0])
		return 2
	}
	return -1
}

// multiIters is the iteration count of a size.
func (o *multiOpts) multiIters(size int) int {
	if o.iters > 0 {
		return o.iters
	}
	if o.kind == "bw" {
		n := (16 << 20) / max(size, 1)
		n = min(max(n, 4*o.window), 256*o.window)
		return (n + o.window - 1) / o.window * o.window
	}
	return min(latencyIters(size), 2000)
}

// multiRun runs every size on this rank and, on rank 0, returns every
// rank's report.
func multiRun(job *launch.Job, o *multiOpts) ([]multiRank, error) {
	n, err := openNode(o.fab, "", o.timeout)
	if err != nil {
		return nil, err
	}
	defer n.Close()
	addrs, err := launch.Connect(job, n.ep, n.av)
	if err != nil {
		return nil, err
	}
	me, size := job.Rank(), job.Size()
	var mine multiRank
	half := size / 2
	switch {
	case o.pattern == "ring":
		mine.Partner = (me + 1) % size
		mine.Measure = me == 0
	case me < half:
		mine.Partner, mine.Measure = me+half, true
	case me < 2*half:
		mine.Partner = me - half
	default:
		mine.Partner = -1 // odd rank count: the last rank sits out
	}
	if mine.Partner >= 0 {
		n.peer = addrs[mine.Partner]
	}

	// Placement of same-host pairs, one pair at a time.
	if o.pattern == "pairs" {
		w, _ := json.Marshal(localWhere())
		if err := job.Put("perftest.where", w); err != nil {
			return nil, err
		}
		if err := job.Fence(); err != nil {
			return nil, err
		}
		for p := range half {
			if me == p {
				b, err := job.Get(mine.Partner, "perftest.where")
				if err != nil {
					return nil, err
				}
				var pw where
				if json.Unmarshal(b, &pw) == nil {
					mine.Place = probeWith(localWhere(), pw)
				}
			}
			if err := job.Barrier(); err != nil {
				return nil, err
			}
		}
	}

	maxSize := 0
	for _, s := range o.sizes {
		maxSize = max(maxSize, s)
	}
	rx := make([]byte, max(maxSize, 64))
	tx := make([]byte, max(maxSize, 64))
	for i := range tx {
		tx[i] = byte(i)
	}
	if mine.Partner >= 0 {
		if err := n.postRecv(rx); err != nil {
			return nil, err
		}
	}
	for _, s := range o.sizes {
		it := o.multiIters(s)
		if err := job.Barrier(); err != nil {
			return nil, err
		}
		var fig float64
		var err error
		switch {
		case mine.Partner < 0:
		case o.pattern == "ring":
			fig, err = ringLatency(n, tx[:s], rx, it, me == 0, size)
		case o.kind == "latency":
			fig, err = pairLatency(n, tx[:s], rx, it, mine.Measure)
		default:
			fig, err = pairBandwidth(n, tx[:s], rx, it, o.window, mine.Measure)
		}
		if err != nil {
			return nil, fmt.Errorf("%d bytes with rank %d: %w", s, mine.Partner, err)
		}
		mine.Figures = append(mine.Figures, fig)
		mine.Iters = append(mine.Iters, it)
	}
	// Everyone's receives are done before anyone closes its endpoint.
	if err := job.Barrier(); err != nil {
		return nil, err
	}
	b, _ := json.Marshal(&mine)
	if err := job.Put("perftest.res", b); err != nil {
		return nil, err
	}
	if err := job.Fence(); err != nil {
		return nil, err
	}
	if me != 0 {
		return nil, nil
	}
	all := make([]multiRank, size)
	for r := range all {
		b, err := job.Get(r, "perftest.res")
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &all[r]); err != nil || len(all[r].Figures) != len(o.sizes) {
			return nil, fmt.Errorf("rank %d reported %q", r, b)
		}
	}
	return all, nil
}

// send posts tx to the node's peer and reaps its completion.
func (n *node) sendWait(tx []byte) error {
	inject := len(tx) < n.injectSize
	if _, err := n.post(tx, inject); err != nil {
		return err
	}
	if !inject {
		return n.wait(n.txcq, 1)
	}
	return nil
}

// recvWait waits for one message and posts rx again.
func (n *node) recvWait(rx []byte) error {
	if err := n.wait(n.rxcq, 1); err != nil {
		return err
	}
	return n.postRecv(rx)
}

// pairLatency ping-pongs it times (after a tenth as warm-up, at most
// 100); the initiator returns the usec per one-way transfer.
func pairLatency(n *node, tx, rx []byte, it int, initiator bool) (float64, error) {
	d, err := passes(n, tx, rx, min(max(it/10, 1), 100), it, initiator)
	return float64(d.Nanoseconds()) / 1e3 / float64(2*it), err
}

// ringLatency passes a message around the ring it times (after a tenth
// as warm-up, at most 20); rank 0 returns the usec per hop.
func ringLatency(n *node, tx, rx []byte, it int, first bool, ranks int) (float64, error) {
	d, err := passes(n, tx, rx, min(max(it/10, 1), 20), it, first)
	return float64(d.Nanoseconds()) / 1e3 / float64(it*ranks), err
}

// passes sends then receives (first) or receives then sends, warm+it
// times, and returns how long the last it passes took.
func passes(n *node, tx, rx []byte, warm, it int, first bool) (time.Duration, error) {
	var start time.Time
	for i := range warm + it {
		if i == warm {
			start = time.Now()
		}
		if first {
			if err := n.sendWait(tx); err != nil {
				return 0, err
			}
		}
		if err := n.recvWait(rx); err != nil {
			return 0, err
		}
		if !first {
			if err := n.sendWait(tx); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start), nil
}

// pairBandwidth streams it messages in windows; the receiver answers each
// window with one small message. The sender returns MB/s (10^6 bytes).
func pairBandwidth(n *node, tx, rx []byte, it, window int, sender bool) (float64, error) {
	windows := it / window
	warm := min(max(windows/10, 1), 8)
	ack := tx[:min(4, len(tx))]
	if len(tx) < 4 {
		ack = make([]byte, 4)
	}
	var start time.Time
	for w := range warm + windows {
		if w == warm {
			start = time.Now()
		}
		if sender {
			posted := 0
			for range window {
				r, err := n.post(tx, false)
				if err != nil {
					return 0, err
				}
				posted += 1 - r
			}
			if err := n.wait(n.txcq, posted); err != nil {
				return 0, err
			}
			if err := n.recvWait(rx); err != nil {
				return 0, err
			}
		} else {
			for range window {
				if err := n.recvWait(rx); err != nil {
					return 0, err
				}
			}
			if err := n.sendWait(ack); err != nil {
				return 0, err
			}
		}
	}
	secs := time.Since(start).Seconds()
	return float64(len(tx)) * float64(windows*window) / secs / 1e6, nil
}

// printMulti writes rank 0's table.
func printMulti(w io.Writer, job *launch.Job, o *multiOpts, all []multiRank, rep *Report) {
	size := job.Size()
	var measuring []int
	for r, m := range all {
		if m.Measure {
			measuring = append(measuring, r)
		}
	}
	test := o.kind
	switch {
	case o.pattern == "ring":
		fmt.Fprintf(w, "# %s around a ring of %d ranks (%s), provider %s, %s: usec per hop\n",
			test, size, job.Launcher(), o.fab.prov, modeName(o.fab.tagged))
	default:
		fmt.Fprintf(w, "# %s over %d pairs at once (rank i with rank i+%d, as osu_multi_lat/osu_mbw_mr), %d ranks (%s), provider %s, %s\n",
			test, len(measuring), size/2, size, job.Launcher(), o.fab.prov, modeName(o.fab.tagged))
	}
	var places []string
	for _, r := range measuring {
		if p := all[r].Place; p != nil {
			places = append(places, fmt.Sprintf("%d-%d %s", r, all[r].Partner, p.Class+placeNs(p)))
		}
	}
	if len(places) > 0 {
		fmt.Fprintf(w, "# placement of each pair (cache-line round trip between its CPUs): %s\n", strings.Join(places, ", "))
	} else {
		fmt.Fprintf(w, "# placement: not probed (ring over %d ranks)\n", size)
	}
	if o.kind == "latency" {
		fmt.Fprintf(w, "%-10s%10s%12s%12s%12s\n", "bytes", "iters", "avg usec", "min usec", "max usec")
	} else {
		fmt.Fprintf(w, "%-10s%10s%8s%14s%14s%14s\n", "bytes", "iters", "window", "sum MB/s", "min MB/s", "sum Mmsg/s")
	}
	for i, s := range o.sizes {
		var figs []float64
		for _, r := range measuring {
			figs = append(figs, all[r].Figures[i])
		}
		sort.Float64s(figs)
		sum := 0.0
		for _, f := range figs {
			sum += f
		}
		it := all[0].Iters[i]
		res := Result{Tool: "gofi", Test: "multi-" + test, Provider: o.fab.prov, Mode: modeName(o.fab.tagged),
			Size: s, Iterations: int64(it)}
		if o.kind == "latency" {
			avg := sum / float64(len(figs))
			fmt.Fprintf(w, "%-10s%10d%12.2f%12.2f%12.2f\n", sizeStr(int64(s)), it, avg, figs[0], figs[len(figs)-1])
			res.Usec, res.P50 = avg, figs[len(figs)/2]
		} else {
			msgs := 0.0
			if s > 0 {
				msgs = sum / float64(s)
			}
			fmt.Fprintf(w, "%-10s%10d%8d%14.2f%14.2f%14.3f\n", sizeStr(int64(s)), it, o.window, sum, figs[0], msgs)
			res.MBps, res.MsgRate, res.Window = sum, msgs, o.window
		}
		rep.Results = append(rep.Results, res)
	}
}

func placeNs(p *Placement) string {
	if p.RTNs <= 0 || math.IsNaN(p.RTNs) {
		return ""
	}
	return fmt.Sprintf(" (%.0f ns)", p.RTNs)
}
