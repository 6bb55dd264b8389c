package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"

	"github.com/gofi-dev/fi/internal/placement"
)

// Every figure perftest prints carries the placement it was measured in:
// the round trip of a cache line between the CPUs of the two processes
// (internal/placement), probed at the start of a run, again at its end,
// and before and after every round of -compare. On the 2-vCPU machines
// gofi is developed on the host moves the vCPUs between a near (~70-110
// ns) and a far (~250-400 ns) placement between runs and even within
// one, and shared-memory figures move with it.
//
// Subcommands reuse it in three ways:
//   - runPlansHooks probes between this process and its control peer (the
//     peer says where it may run in its answer to a "where" plan) and
//     reports through hooks.placed;
//   - probeLocal probes the run's CPUs when both processes inherit this
//     process's mask (peers it started itself, fi_pingpong);
//   - Report.add stamps every Result with the report's current placement,
//     and printPlacement writes the "# placement:" line above a table.

// Placement is a probe's outcome as perftest reports it: the probe, or
// why there is none (peer on another host, one CPU), in Class and Note.
type Placement = placement.Result

// where is a peer's answer to a "where" plan: where it may run.
type where struct {
	CPUs []int  `json:"cpus"` // its affinity mask
	Boot string `json:"boot"` // kernel boot id: equal on one host
}

// localWhere is this process's where.
func localWhere() where {
	cpus, _ := placement.Allowed()
	return where{CPUs: cpus, Boot: bootID()}
}

// bootID identifies the running kernel (containers of one host share it).
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

// probeWith measures the placement between this process and a peer that
// may run on peerCPUs of the kernel peerBoot.
func probeWith(own, peer where) *Placement {
	if peer.Boot == "" || own.Boot == "" || peer.Boot != own.Boot {
		return &Placement{Class: "other-host", Note: "peer on another host: no cache line is shared"}
	}
	a, b, pinned, err := placement.Pair(own.CPUs, peer.CPUs)
	if err != nil {
		return &Placement{Class: "unknown", Note: err.Error()}
	}
	r, err := placement.Probe(a, b)
	if err != nil {
		return &Placement{CPUs: [2]int{a, b}, Class: "unknown", Note: err.Error()}
	}
	r.Pinned = pinned
	if !pinned && len(own.CPUs) > 2 {
		r.Note = fmt.Sprintf("the run may use any of %d CPUs", len(own.CPUs))
	}
	return &r
}

// probeLocal measures the placement of a run between this process and
// processes that inherit its mask.
func probeLocal() *Placement { return probeWith(localWhere(), localWhere()) }

// isLocalHost reports whether host names this machine (a loopback or a
// local interface address), so a peer there shares its caches with us.
func isLocalHost(host string) bool {
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return false
	}
	addrs, _ := net.InterfaceAddrs()
	for _, ip := range ips {
		if ip.IsLoopback() {
			return true
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return true
			}
		}
	}
	return false
}

// printPlacement writes the "# placement:" line of a table; end, when
// not nil and in another class, says the placement moved during the run.
func printPlacement(w io.Writer, start, end *Placement) {
	if start == nil {
		return
	}
	fmt.Fprintf(w, "# placement: %s\n", placeStr(start))
	if end != nil && end.Class != start.Class {
		fmt.Fprintf(w, "# placement moved during the run: at the end %s\n", placeStr(end))
	}
}

func placeStr(p *Placement) string {
	if p.RTNs == 0 && p.Note != "" {
		return p.Note
	}
	return p.String()
}

// setPlacement records a probe in the report: the first is the start of
// the run, each later one its latest state. Results added afterwards are
// stamped with it.
func (r *Report) setPlacement(p *Placement) {
	if p == nil {
		return
	}
	if r.Placement == nil {
		r.Placement = p
		return
	}
	r.PlacementEnd = p
}

// stamp marks res with the report's current placement unless it has one.
func (r *Report) stamp(res *Result) {
	if res.Placement != "" {
		return
	}
	p := r.PlacementEnd
	if p == nil {
		p = r.Placement
	}
	if p != nil {
		res.Placement, res.PlacementNs = p.Class, p.RTNs
	}
}

// roundPlace is the placement of one -compare round: probed before and
// after it.
type roundPlace struct{ before, after *Placement }

// class is the round's placement class, or "mixed" when it moved.
func (r roundPlace) class() string {
	if r.before == nil || r.after == nil {
		return "unknown"
	}
	if r.before.Class != r.after.Class {
		return "mixed"
	}
	return r.before.Class
}

// ns is the round's round trip: the mean of the two probes.
func (r roundPlace) ns() float64 {
	if r.before == nil || r.after == nil {
		return 0
	}
	return (r.before.RTNs + r.after.RTNs) / 2
}

// placeSummary describes rounds' placements for a table's header: the
// class and median round trip of each class present, with counts.
func placeSummary(rounds []roundPlace) string {
	if len(rounds) == 0 {
		return ""
	}
	var classes []string
	byClass := map[string][]float64{}
	for _, r := range rounds {
		c := r.class()
		if byClass[c] == nil {
			classes = append(classes, c)
		}
		byClass[c] = append(byClass[c], r.ns())
	}
	slices.Sort(classes)
	var s string
	for i, c := range classes {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%d of %d rounds %s", len(byClass[c]), len(rounds), c)
		if c == "near" || c == "far" {
			s += fmt.Sprintf(" (%.0f ns)", median(slices.Clone(byClass[c])))
		}
	}
	return s
}

// runPlace is "perftest place": the probe alone, for scripts that record
// the placement beside figures of other tools (benchmarks/vs_libfabric_*),
// and, with -tail, the floor of a ping-pong's tail on this machine.
func runPlace(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("perftest place", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cpus := fs.String("cpus", "", "the two `CPUs` to probe, as a,b (default: the first two this process may run on)")
	tail := fs.Int("tail", 0, "also time `n` single round trips and print their half-round-trip percentiles (ns)")
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: perftest place [-cpus a,b] [-tail n] [-json]\n\nMeasures the round trip of a cache line between two CPUs (two threads pinned\none to each): the placement every perftest table reports.\n\n")
		fs.PrintDefaults()
	}
	rest, rc := parseInterspersed(fs, args)
	if rc >= 0 {
		return rc
	}
	if len(rest) > 0 {
		return usageErr(stderr, "place", fmt.Errorf("unexpected argument %q", rest[0]))
	}
	if *tail < 0 {
		return usageErr(stderr, "place", fmt.Errorf("-tail %d: want a positive count", *tail))
	}
	var p *Placement
	if *cpus == "" {
		p = probeLocal()
	} else {
		var a, b int
		if _, err := fmt.Sscanf(*cpus, "%d,%d", &a, &b); err != nil || a < 0 || b < 0 {
			return usageErr(stderr, "place", fmt.Errorf("-cpus %q: want two CPU numbers a,b", *cpus))
		}
		r, err := placement.Probe(a, b)
		if err != nil {
			fmt.Fprintf(stderr, "perftest place: %v\n", err)
			return 1
		}
		r.Pinned = true
		p = &r
	}
	out := struct {
		Placement *Placement      `json:"placement"`
		Tail      *placement.Tail `json:"tail,omitempty"`
	}{Placement: p}
	if *tail > 0 {
		if p.RTNs == 0 {
			fmt.Fprintf(stderr, "perftest place: -tail: %s\n", placeStr(p))
			return 1
		}
		t, err := placement.ProbeTail(p.CPUs[0], p.CPUs[1], *tail)
		if err != nil {
			fmt.Fprintf(stderr, "perftest place: %v\n", err)
			return 1
		}
		out.Tail = &t
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(out)
		return 0
	}
	fmt.Fprintf(stdout, "# placement: %s\n", placeStr(p))
	if t := out.Tail; t != nil {
		fmt.Fprintf(stdout, "# flag ping-pong, %d round trips: half round trip in usec\n%9s %9s %9s %9s\n%9.3f %9.3f %9.3f %9.3f\n",
			t.N, "p50", "p99", "p99.9", "max", t.P50/1e3, t.P99/1e3, t.P999/1e3, t.Max/1e3)
	}
	return 0
}
