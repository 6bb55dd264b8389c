package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofi-dev/fi"
)

// "perftest rma": RMA write and read latency and bandwidth against a
// target process this perftest starts on this host, as fabtests' fi_rma_bw
// and ucx_perftest's put_lat/put_bw/get_bw measure them. The target opens
// an endpoint, registers a region as large as the largest size (AllocMR
// with -alloc, so shm peers map it; else RegMR on Go memory), prints its
// name and key and then makes no gofi call: every write and read is done
// without its application (tcp: its event loop; shm: the initiator itself,
// or the target's executor when single copy is refused).
//
// Per size: "write-lat" and "read-lat" (one operation in flight: median
// and p99 in µs), "write-bw" and "read-bw" (-w in flight: MB/s, 10^6
// bytes). Lines "test size value [p99]", the format of
// benchmarks/rma/fi_rma_bench.c (libfabric's side), under "# placement"
// lines; -json writes the same as a JSON report (each record stamped with
// the placement probed at the start), -plot draws it as the other
// subcommands do.

const rmaTargetArg = "-rma-target"

func runRMABench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("perftest rma", flag.ContinueOnError)
	fs.SetOutput(stderr)
	prov := fs.String("p", "shm", "`provider`: shm or tcp")
	sizesArg := fs.String("s", "8,4k,64k,1m", "message `sizes`")
	iters := fs.Int("n", 2000, "operations timed per latency test (bandwidth: scaled by size)")
	window := fs.Int("w", 16, "operations in flight for the bandwidth tests")
	alloc := fs.Bool("alloc", false, "target region from AllocMR (shm peers map it); false: RegMR on Go memory")
	spin := fs.Bool("target-spin", false, "the target polls its CQ in a loop (as libfabric's target must for its progress); default: it makes no gofi call")
	jsonOut := fs.String("json", "", "also write the results as JSON to `file`")
	plotOut := fs.String("plot", "", "draw latency and bandwidth against size into `file` (.svg or .png)")
	tests := fs.String("tests", "write-lat,read-lat,write-bw,read-bw", "the `tests` to run, comma-separated (a subset isolates one for perf stat)")
	target := fs.Bool(rmaTargetArg[1:], false, "internal: be the target process")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *prov != "shm" && *prov != "tcp" {
		return usageErr(stderr, "rma", fmt.Errorf("-p %q: want shm or tcp", *prov))
	}
	sizes, err := parseSizes(*sizesArg)
	if err != nil || len(sizes) == 0 {
		return usageErr(stderr, "rma", fmt.Errorf("-s %q: %v", *sizesArg, err))
	}
	maxSize := slices.Max(sizes)
	if *target {
		if err := rmaTarget(*prov, *alloc, *spin, maxSize, stdout); err != nil {
			fmt.Fprintf(stderr, "perftest rma target: %v\n", err)
			return 1
		}
		return 0
	}
	if *iters < 10 || *window < 1 || maxSize < 1 {
		return usageErr(stderr, "rma", errors.New("-n at least 10, -w at least 1, sizes at least 1"))
	}
	if *plotOut != "" && !strings.HasSuffix(*plotOut, ".svg") && !strings.HasSuffix(*plotOut, ".png") {
		return usageErr(stderr, "rma", fmt.Errorf("-plot %s: want a .svg or .png file name", *plotOut))
	}
	if err := rmaInitiator(*prov, *sizesArg, sizes, *alloc, *spin, *iters, *window, *jsonOut, *plotOut, strings.Split(*tests, ","), stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "perftest rma: %v\n", err)
		return 1
	}
	return 0
}

// rmaTarget serves as the target until stdin closes.
func rmaTarget(prov string, alloc, spin bool, size int, stdout io.Writer) error {
	dom, ep, _, cq, done, err := benchEndpoint(prov, fi.Msg|fi.RMA)
	if err != nil {
		return err
	}
	defer done()
	mr, err := announceTarget(dom, ep, alloc, size, stdout)
	if err != nil {
		return err
	}
	defer mr.Close()
	serveTarget(cq, spin, prov)
	return nil
}

// rmaRecord is one JSON result.
type rmaRecord struct {
	Test  string  `json:"test"`
	Size  int     `json:"size"`
	Value float64 `json:"value"` // µs (median) or MB/s
	P99   float64 `json:"p99_us,omitempty"`
	// Placement is the class (near, far) of the placement probed at the
	// start of the run and PlacementNs its cache-line round trip, as every
	// perftest result carries them.
	Placement   string  `json:"placement,omitempty"`
	PlacementNs float64 `json:"placement_rt_ns,omitempty"`
}

type rmaReport struct {
	Cmd        string      `json:"cmd"`
	Provider   string      `json:"provider"`
	Memory     string      `json:"memory"`
	TargetSpin bool        `json:"target_spin"`
	Load       string      `json:"load"`
	Placement  []string    `json:"placement"`
	Results    []rmaRecord `json:"results"`
}

func rmaInitiator(prov, sizesArg string, sizes []int, alloc, spin bool, iters, window int, jsonOut, plotOut string, tests []string, stdout, stderr io.Writer) error {
	name, key, stop, err := startTarget([]string{"rma", "-p", prov, "-s", sizesArg, "-alloc=" + strconv.FormatBool(alloc),
		"-target-spin=" + strconv.FormatBool(spin), rmaTargetArg}, stderr)
	if err != nil {
		return err
	}
	defer stop()
	_, ep, av, cq, done, err := benchEndpoint(prov, fi.Msg|fi.RMA)
	if err != nil {
		return err
	}
	defer done()
	addrs, err := av.Insert([][]byte{name}, 0)
	if err != nil {
		return err
	}
	mem := map[bool]string{true: "AllocMR", false: "RegMR"}[alloc]
	rep := &rmaReport{Cmd: "rma", Provider: prov, Memory: mem, TargetSpin: spin, Load: loadavg()}
	place := probeLocal()
	printPlacement(stdout, place, nil)
	fmt.Fprintf(stdout, "# gofi %s, target memory from %s, target %s, load %s\n", prov, mem, targetDoes(spin), rep.Load)
	io.WriteString(stdout, busyPollNote(prov, false))
	b := &rmaBench{ab: atomicBench{ep: ep, cq: cq, dest: addrs[0], key: key}, buf: make([]byte, slices.Max(sizes))}
	restore := b.ab.coop.start(prov) // after the probe, which wants two Ps
	defer func() { restore() }()
	// Warm-up before anything is timed: the target process has just
	// started (its runtime, its first page faults, its first quick
	// requests); the first test alone would pay for that.
	if _, err := b.latency(false, min(sizes[0], 4096), max(10, min(iters, 1000))); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	for _, size := range sizes {
		n := max(10, min(iters, iters*4096/max(size, 1)))
		for _, test := range []string{"write-lat", "read-lat"} {
			if !slices.Contains(tests, test) {
				continue
			}
			t, err := b.latency(test == "read-lat", size, n)
			if err != nil {
				return fmt.Errorf("%s %d: %w", test, size, err)
			}
			slices.Sort(t)
			r := rmaRecord{Test: test, Size: size, Value: t[len(t)/2], P99: t[len(t)*99/100]}
			rep.Results = append(rep.Results, r)
			fmt.Fprintf(stdout, "%s %d %.3f %.3f\n", test, size, r.Value, r.P99)
		}
		for _, test := range []string{"write-bw", "read-bw"} {
			if !slices.Contains(tests, test) {
				continue
			}
			total := max(4*window, min(20*iters, (256<<20)/max(size, 1)))
			v, err := b.bandwidth(test == "read-bw", size, total, window)
			if err != nil {
				return fmt.Errorf("%s %d: %w", test, size, err)
			}
			rep.Results = append(rep.Results, rmaRecord{Test: test, Size: size, Value: v})
			fmt.Fprintf(stdout, "%s %d %.1f\n", test, size, v)
		}
	}
	restore()
	restore = func() {}
	end := probeLocal()
	printPlacement(stdout, place, end)
	for _, p := range []*Placement{place, end} {
		if p != nil {
			rep.Placement = append(rep.Placement, fmt.Sprint(*p))
		}
	}
	if place != nil {
		for i := range rep.Results {
			rep.Results[i].Placement, rep.Results[i].PlacementNs = place.Class, place.RTNs
		}
	}
	if plotOut != "" {
		if err := plotReports(plotOut, []*Report{rep.report(place, end, prov)}, []string{""}); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "# plot: %s\n", plotOut)
	}
	if jsonOut != "" {
		j, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonOut, append(j, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// report is rep in the common Report form plotReports draws: latencies as
// "latency" results (mode "write" or "read" and the memory), bandwidths as
// "bw" results.
func (rep *rmaReport) report(place, end *Placement, prov string) *Report {
	r := newReport("rma")
	r.setPlacement(place)
	r.setPlacement(end)
	for _, x := range rep.Results {
		kind, what, _ := strings.Cut(x.Test, "-")
		res := Result{Tool: "gofi", Provider: prov, Mode: "rma " + kind + " " + rep.Memory, Size: x.Size,
			Placement: x.Placement, PlacementNs: x.PlacementNs}
		if what == "lat" {
			res.Test, res.P50, res.P99 = "latency", x.Value, x.P99
		} else {
			res.Test, res.MBps = "bw", x.Value
		}
		r.add(res)
	}
	return r
}

type rmaBench struct {
	ab  atomicBench // endpoint, CQ, target and reaping
	buf []byte
}

// post starts one operation, returning the completions it reaped while
// the queue was full.
func (b *rmaBench) post(read bool, size int) (int, error) {
	e := &b.ab
	got := 0
	for {
		var err error
		if read {
			err = e.ep.Read(b.buf[:size], nil, e.dest, 0, e.key, nil)
		} else {
			err = e.ep.Write(b.buf[:size], nil, e.dest, 0, e.key, nil)
		}
		if !errors.Is(err, fi.ErrAgain) {
			return got, err
		}
		n, err := e.reap()
		if err != nil {
			return got, err
		}
		got += n
	}
}

func (b *rmaBench) latency(read bool, size, iters int) ([]float64, error) {
	t := make([]float64, iters)
	warm := iters/10 + 1
	for i := -warm; i < iters; i++ {
		t0 := time.Now()
		if _, err := b.post(read, size); err != nil {
			return nil, err
		}
		for {
			n, err := b.ab.reap()
			if err != nil {
				return nil, err
			}
			if n > 0 {
				break
			}
		}
		if i >= 0 {
			t[i] = float64(time.Since(t0).Nanoseconds()) / 1e3
		}
	}
	return t, nil
}

// bandwidth returns MB/s (10^6 bytes) of total operations of size with
// window in flight, after a warm-up of a tenth as many.
func (b *rmaBench) bandwidth(read bool, size, total, window int) (float64, error) {
	var t0 time.Time
	for phase := 0; phase < 2; phase++ {
		goal := max(total/10, 1)
		if phase == 1 {
			goal, t0 = total, time.Now()
		}
		posted, done := 0, 0
		for done < goal {
			for posted < goal && posted-done < window {
				n, err := b.post(read, size)
				if err != nil {
					return 0, err
				}
				done += n
				posted++
			}
			n, err := b.ab.reap()
			if err != nil {
				return 0, err
			}
			done += n
		}
	}
	return float64(total) * float64(size) / time.Since(t0).Seconds() / 1e6, nil
}
