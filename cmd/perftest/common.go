package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/gofi-dev/fi"
)

// commonOpts are the output and profiling flags every measuring
// subcommand shares.
type commonOpts struct {
	json       bool
	plot       string
	cpuprofile string
	memprofile string
}

func addCommonFlags(fs *flag.FlagSet) *commonOpts {
	c := &commonOpts{}
	fs.BoolVar(&c.json, "json", false, "print the results as JSON instead of a table")
	fs.StringVar(&c.plot, "plot", "", "draw latency and bandwidth against message size into `file` (.svg or .png)")
	fs.StringVar(&c.cpuprofile, "cpuprofile", "", "write a CPU profile to `file`")
	fs.StringVar(&c.memprofile, "memprofile", "", "write a heap profile to `file` on exit")
	return c
}

// startProfile starts the CPU profile; the returned function stops it and
// writes the heap profile.
func (c *commonOpts) startProfile() (func(), error) {
	var cpu *os.File
	if c.cpuprofile != "" {
		f, err := os.Create(c.cpuprofile)
		if err != nil {
			return nil, fmt.Errorf("-cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("-cpuprofile: %w", err)
		}
		cpu = f
	}
	return func() {
		if cpu != nil {
			pprof.StopCPUProfile()
			cpu.Close()
		}
		if c.memprofile != "" {
			f, err := os.Create(c.memprofile)
			if err != nil {
				fmt.Fprintf(os.Stderr, "perftest: -memprofile: %v\n", err)
				return
			}
			runtime.GC()
			if err := pprof.WriteHeapProfile(f); err != nil {
				fmt.Fprintf(os.Stderr, "perftest: -memprofile: %v\n", err)
			}
			f.Close()
		}
	}, nil
}

// finish prints the report as JSON when asked and draws the plot.
func (c *commonOpts) finish(rep *Report, stdout, stderr io.Writer) int {
	if c.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "perftest: %v\n", err)
			return 1
		}
	}
	if c.plot != "" {
		if err := plotReports(c.plot, []*Report{rep}, []string{""}); err != nil {
			fmt.Fprintf(stderr, "perftest: -plot: %v\n", err)
			return 1
		}
	}
	return 0
}

// Report is what -json prints and plot reads: where and how the results
// were measured, and one Result per test and size. Plain data: not safe
// for concurrent mutation.
type Report struct {
	Tool      string    `json:"tool"`
	Version   string    `json:"version"`
	Command   string    `json:"command"`
	Host      string    `json:"host"`
	GoVersion string    `json:"go_version"`
	CPUs      int       `json:"cpus"`
	Date      time.Time `json:"date"`
	// Placement is the cache-line round trip between the two processes'
	// CPUs at the start of the run, PlacementEnd the last probe (at the
	// end, or before the last -compare round); see place.go.
	Placement    *Placement `json:"placement,omitempty"`
	PlacementEnd *Placement `json:"placement_end,omitempty"`
	Results      []Result   `json:"results"`
}

// Result is one measurement (plain data). Latencies are in microseconds (half a round
// trip), bandwidth in MB/s (10^6 bytes per second, as fi_pingpong counts
// bytes per microsecond). Fields a test does not measure are omitted.
type Result struct {
	Tool         string  `json:"tool"`     // gofi, libfabric, go-net
	Test         string  `json:"test"`     // pingpong, latency, bw, msgrate
	Provider     string  `json:"provider"` // shm, tcp
	Mode         string  `json:"mode"`     // msg or tagged
	Size         int     `json:"size"`
	Iterations   int64   `json:"iterations"`
	Seconds      float64 `json:"seconds"`
	MBps         float64 `json:"mb_per_sec,omitempty"`
	Usec         float64 `json:"usec_per_xfer,omitempty"`
	MxfersPerSec float64 `json:"mxfers_per_sec,omitempty"`
	Window       int     `json:"window,omitempty"`
	P50          float64 `json:"p50_usec,omitempty"`
	P90          float64 `json:"p90_usec,omitempty"`
	P99          float64 `json:"p99_usec,omitempty"`
	P999         float64 `json:"p99_9_usec,omitempty"`
	MsgRate      float64 `json:"mmsgs_per_sec,omitempty"`
	// Placement is the placement class the result was measured in (near,
	// far, mixed for -compare medians over rounds that moved, other-host)
	// and PlacementNs its cache-line round trip.
	Placement   string  `json:"placement,omitempty"`
	PlacementNs float64 `json:"placement_rt_ns,omitempty"`
	// Collectives (perftest coll): Usec is the average over ranks of each
	// rank's average per call, MinUsec and MaxUsec the fastest and slowest
	// rank's; AllocsPerCall the most heap allocations per call on a rank;
	// Load the machine's load average when the run started.
	MinUsec       float64 `json:"min_usec,omitempty"`
	MaxUsec       float64 `json:"max_usec,omitempty"`
	Ranks         int     `json:"ranks,omitempty"`
	AllocsPerCall float64 `json:"allocs_per_call,omitempty"`
	Load          string  `json:"load,omitempty"`
}

// latency is the result's latency for plots: the median when measured
// (latency), otherwise the mean per transfer (pingpong).
func (r Result) latency() float64 {
	if r.P50 > 0 {
		return r.P50
	}
	return r.Usec
}

func newReport(cmd string) *Report {
	host, _ := os.Hostname()
	return &Report{Tool: "perftest", Version: fi.VersionString(), Command: cmd, Host: host,
		GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), Date: time.Now().UTC()}
}

// add appends res, stamped with the report's current placement unless it
// carries its own.
func (r *Report) add(res Result) {
	r.stamp(&res)
	r.Results = append(r.Results, res)
}

// parseInterspersed parses flags that may come before and after the
// positional arguments (getopt style: "pingpong -p shm localhost -I 10").
// It returns the positional arguments and -1, or an exit status.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, int) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, 0
			}
			return nil, 2
		}
		if fs.NArg() == 0 {
			return pos, -1
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// parseCount parses a non-negative iteration count; "" gives -1 (default).
func parseCount(flagName, s string) (int, error) {
	if s == "" {
		return -1, nil
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%s %q: want a non-negative number", flagName, s)
	}
	return int(v), nil
}

// parseSize parses a byte count with an optional k, m or g suffix
// (1024-based).
func parseSize(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mul := 1
	switch {
	case strings.HasSuffix(t, "k"):
		mul, t = 1<<10, t[:len(t)-1]
	case strings.HasSuffix(t, "m"):
		mul, t = 1<<20, t[:len(t)-1]
	case strings.HasSuffix(t, "g"):
		mul, t = 1<<30, t[:len(t)-1]
	}
	v, err := strconv.ParseInt(t, 10, 32)
	if err != nil || v < 0 || v*int64(mul) > 1<<31-1 {
		return 0, fmt.Errorf("size %q: want a byte count such as 8, 4k or 1m", s)
	}
	return int(v) * mul, nil
}

// parseSizes parses a comma-separated size list.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := parseSize(f)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func usageErr(stderr io.Writer, sub string, err error) int {
	fmt.Fprintf(stderr, "perftest %s: %v\n", sub, err)
	return 2
}

// exitStatus maps an error to the exit status: the fabric errno when the
// error carries one (as fi_pingpong exits with -ret), 1 otherwise.
func exitStatus(err error) int {
	if e := fi.ErrnoOf(err); e > 0 && e < 256 {
		return int(e)
	}
	if errors.Is(err, errPeerUnreachable) {
		return 3
	}
	return 1
}
