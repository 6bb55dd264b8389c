package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
)

// The default run, "perftest" with no subcommand: a peer process on this
// host, a latency and a bandwidth sweep over shm, then tcp, then Go's own
// net package as a baseline, and one table. -compare adds libfabric's
// fi_pingpong, alternated with gofi's pingpong size by size.

var sweepSizes = []int{8, 64, 512, 4 << 10, 64 << 10, 1 << 20}

// sweepProvs are the providers the default run measures, in order.
var sweepProvs = []string{"shm", "tcp", netProv}

// sweepLatencyIters keeps the default run short.
func sweepLatencyIters(size int) int { return min(latencyIters(size), 1000) }

func sweepBWIters(size, window int) int {
	n := (32 << 20) / max(size, 1)
	n = min(max(n, 2*window), max(16*window, 1<<18))
	return n - n%window
}

// sweepWindow is the default run's bandwidth window.
const sweepWindow = 64

// sweepPlans builds the latency and bandwidth plans for one provider:
// iters fixes the iteration count (bandwidth rounds it up to whole
// windows); 0 lets budget bound each size.
func sweepPlans(prov, wait string, iters int, budget time.Duration) []*plan {
	lat := &plan{Test: "latency", Prov: prov, EpType: "rdm", Wait: wait, Sizes: sweepSizes}
	bw := &plan{Test: "bw", Prov: prov, EpType: "rdm", Wait: wait, Sizes: sweepSizes, Window: sweepWindow}
	if iters <= 0 {
		lat.Budget, bw.Budget = budget, budget
	}
	for _, s := range sweepSizes {
		li, bi := sweepLatencyIters(s), sweepBWIters(s, sweepWindow)
		if iters > 0 {
			li, bi = iters, (iters+sweepWindow-1)/sweepWindow*sweepWindow
		}
		lat.Iters, lat.Warmup = append(lat.Iters, li), append(lat.Warmup, min(max(li/10, 1), 50))
		bw.Iters, bw.Warmup = append(bw.Iters, bi), append(bw.Warmup, bwWarmup(bi, sweepWindow))
	}
	return []*plan{lat, bw}
}

// sweepRow is one line of the default table.
type sweepRow struct {
	prov         string
	size         int
	p50, p99     float64
	mbps         float64
	cmp          *compareRow
	hasLat, hasB bool
}

func runSweep(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("perftest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	compare := fs.Bool("compare", false, "also run libfabric's fi_pingpong (when installed) alternating with gofi's pingpong, and print the ratios")
	timeout := fs.Duration("timeout", 10*time.Second, "give up on a silent peer after this long")
	wait := fs.String("wait", "spin", "how to wait for completions: spin (busy-poll), yield (spin, sched_yield every 256 polls) or sread (CQ.Sread)")
	iters := fs.Int("I", 0, "`iterations` per size (default: as many as fit in -time, up to 1000)")
	budget := fs.Duration("time", 250*time.Millisecond, "time per size and test when -I is not given")
	common := addCommonFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: perftest [flags]            latency and bandwidth of shm, tcp and Go net on this host\n       perftest <subcommand> [flags]  (perftest help lists them)\n\n")
		fs.PrintDefaults()
	}
	rest, rc := parseInterspersed(fs, args)
	if rc >= 0 {
		return rc
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "perftest: unknown subcommand %q\n\n", rest[0])
		usage(stderr)
		return 2
	}
	if err := checkWait(*wait); err != nil {
		return usageErr(stderr, "", err)
	}
	if *iters < 0 {
		return usageErr(stderr, "", fmt.Errorf("-I %d: want a positive count", *iters))
	}
	itersFor := func(s int) int { return sweepLatencyIters(s) }
	if *iters > 0 {
		itersFor = func(int) int { return *iters }
	}
	stop, err := common.startProfile()
	if err != nil {
		return usageErr(stderr, "", err)
	}
	defer stop()
	start := time.Now()
	var notes []string
	var plans []*plan
	var provs []string
	for _, prov := range sweepProvs {
		if prov != netProv {
			if err := probeProvider(fabricOpts{prov: prov, epType: "rdm"}); err != nil {
				notes = append(notes, fmt.Sprintf("%s: skipped: %v", prov, err))
				continue
			}
		}
		provs = append(provs, prov)
		plans = append(plans, sweepPlans(prov, *wait, *iters, *budget)...)
	}
	rep := newReport("perftest")
	rows := map[string]*sweepRow{}
	var order []*sweepRow
	row := func(prov string, size int) *sweepRow {
		k := fmt.Sprint(prov, "/", size)
		if rows[k] == nil {
			rows[k] = &sweepRow{prov: prov, size: size}
			order = append(order, rows[k])
		}
		return rows[k]
	}
	prog := newProgress(stderr)
	err = runPlansHooks("", 0, *timeout, plans, stderr, runHooks{
		each: func(p *plan, r sizeResult) {
			res := r.result(p)
			rep.add(res)
			sr := row(p.Prov, r.size)
			if p.Test == "latency" {
				sr.p50, sr.p99, sr.hasLat = res.P50, res.P99, true
			} else {
				sr.mbps, sr.hasB = res.MBps, true
			}
		},
		starting: func(p *plan, size int) {
			prog.set("%s %s %s bytes  (%.0fs)", p.Prov, p.Test, sizeStr(int64(size)), time.Since(start).Seconds())
		},
		placed: func(pl *Placement, _ bool) { rep.setPlacement(pl) },
	})
	if err != nil {
		prog.done()
		fmt.Fprintf(stderr, "perftest: %v\n", err)
		return exitStatus(err)
	}
	cmpDone := false
	var cmpPlaces []roundPlace
	if *compare {
		if fiPingpongBin() == "" {
			notes = append(notes, "-compare: fi_pingpong not installed (Debian: apt-get install libfabric-bin)")
		} else {
			cmpDone = true
			for _, prov := range provs {
				if prov == netProv {
					continue
				}
				fab := fabricOpts{prov: prov, epType: "rdm", wait: *wait}
				cr, err := compareSizes(fab, sweepSizes, itersFor, 3, true, false, ppSettleFor, *timeout, prog, stderr)
				if err != nil {
					prog.done()
					fmt.Fprintf(stderr, "perftest: -compare: %v\n", err)
					return exitStatus(err)
				}
				for i := range cr {
					c := cr[i]
					for _, v := range c.rounds {
						cmpPlaces = append(cmpPlaces, v.place)
					}
					row(prov, c.size).cmp = &c
					rep.add(Result{Tool: "gofi", Test: "pingpong", Provider: prov, Mode: "msg", Size: c.size, Iterations: int64(c.iters), Usec: c.ours.usec, MBps: c.ours.mbps, Placement: c.class, PlacementNs: c.placeNs})
					if c.hasTheirs {
						rep.add(Result{Tool: "libfabric", Test: "pingpong", Provider: prov, Mode: "msg", Size: c.size, Iterations: int64(c.iters), Usec: c.theirs.usec, MBps: c.theirs.mbps, Placement: c.class, PlacementNs: c.placeNs})
					}
				}
			}
		}
	}
	prog.done()
	if !common.json {
		host, _ := os.Hostname()
		fmt.Fprintf(stdout, "gofi %s on %s (%d CPUs, %s, %s/%s), %.0fs\n", rep.Version, host, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH, time.Since(start).Seconds())
		fmt.Fprintf(stdout, "latency: half round trip in usec (p50, p99); bandwidth: streaming, window %d, MB/s\n", sweepWindow)
		printPlacement(stdout, rep.Placement, rep.PlacementEnd)
		if cmpDone {
			fmt.Fprintf(stdout, "pingpong: usec/xfer, median of 3 runs alternating gofi and fi_pingpong; ratio = gofi / fi_pingpong (below 1: gofi faster)\n")
			fmt.Fprintf(stdout, "# pingpong placement: %s\n", placeSummary(cmpPlaces))
		}
		fmt.Fprintln(stdout)
		fmt.Fprintf(stdout, "%-9s%-8s %9s %9s %10s", "provider", "bytes", "p50", "p99", "MB/sec")
		if cmpDone {
			fmt.Fprintf(stdout, " %10s %10s %7s", "gofi pp", "fi_pp", "ratio")
		}
		fmt.Fprintln(stdout)
		for _, r := range order {
			name := r.prov
			if name == netProv {
				name = "go-net"
			}
			fmt.Fprintf(stdout, "%-9s%-8s %9s %9s %10s", name, sizeStr(int64(r.size)), fmtOpt(r.hasLat, r.p50), fmtOpt(r.hasLat, r.p99), fmtOpt(r.hasB, r.mbps))
			if cmpDone {
				if r.cmp != nil {
					fmt.Fprintf(stdout, " %10.2f %10s %7s", r.cmp.ours.usec, fmtOpt(r.cmp.hasTheirs, r.cmp.theirs.usec), ratio(r.cmp.ours.usec, r.cmp.theirs.usec))
				} else {
					fmt.Fprintf(stdout, " %10s %10s %7s", "-", "-", "-")
				}
			}
			fmt.Fprintln(stdout)
		}
		fmt.Fprintln(stdout)
		fmt.Fprintf(stdout, "go-net: Go's net package over TCP loopback (TCP_NODELAY), the baseline for tcp.\n")
		for _, n := range notes {
			fmt.Fprintln(stdout, n)
		}
		fmt.Fprintf(stdout, "More: perftest help; perftest pingpong -compare -p shm; perftest latency -json.\n")
	}
	return common.finish(rep, stdout, stderr)
}
