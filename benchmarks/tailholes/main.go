package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

func main() {
	perfPath := flag.String("perf", "", "`file` written by perf script -F comm,pid,tid,cpu,time,event,trace of a perf record -k CLOCK_MONOTONIC")
	dumpPath := flag.String("dump", "", "`file` written by perftest latency -dump")
	factor := flag.Float64("x", 5, "a round trip is slow above this many times its size's median")
	flag.StringVar(&benchComm, "comm", "perftest", "command name (`prefix`) of the two measuring processes")
	flag.Parse()
	if *perfPath == "" || *dumpPath == "" {
		flag.Usage()
		os.Exit(2)
	}
	pf, err := os.Open(*perfPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tailholes:", err)
		os.Exit(1)
	}
	defer pf.Close()
	df, err := os.Open(*dumpPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tailholes:", err)
		os.Exit(1)
	}
	defer df.Close()
	tr, err := parsePerf(pf)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tailholes:", err)
		os.Exit(1)
	}
	phases, err := parseDump(df)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tailholes:", err)
		os.Exit(1)
	}
	report(os.Stdout, tr, phases, *factor)
}

// task is a thread seen in the trace.
type task struct {
	tid, pid int
	comm     string
	nanos    int // nanosleep calls (the Go runtime's sysmon sleeps with usleep)
}

// run is a task on a CPU from start to end (ns, CLOCK_MONOTONIC); state
// is how it left (R: preempted, S/D: blocked).
type run struct {
	start, end int64
	tid        int
	state      string
}

// point is an instantaneous event on a CPU (interrupt, timer, system call).
type point struct {
	t    int64
	what string
}

// wake is a sched_wakeup on a CPU: who was woken.
type wake struct {
	t   int64
	tid int
}

type trace struct {
	tasks  map[int]*task
	runs   map[int][]run // per CPU, in time order
	points map[int][]point
	wakes  map[int][]wake
}

var (
	lineRE   = regexp.MustCompile(`^\s*(.+?)\s+(-?\d+)/(-?\d+)\s+\[(\d+)\]\s+(\d+)\.(\d+):\s+(\S+):\s*(.*)$`)
	switchRE = regexp.MustCompile(`prev_comm=(.*?) prev_pid=(\d+) prev_prio=-?\d+ prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)`)
	wakeRE   = regexp.MustCompile(`pid=(\d+)`)
	detailRE = regexp.MustCompile(`(name=\S+|vec=\d+ \[action=\S+\]|function=\S+|reason:[a-z ]+)`)
)

// parsePerf reads perf script output.
func parsePerf(r io.Reader) (*trace, error) {
	tr := &trace{tasks: map[int]*task{}, runs: map[int][]run{}, points: map[int][]point{}, wakes: map[int][]wake{}}
	type cur struct {
		tid   int
		since int64
	}
	running := map[int]cur{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	get := func(tid int, comm string) *task {
		t := tr.tasks[tid]
		if t == nil {
			t = &task{tid: tid, pid: -1, comm: comm}
			tr.tasks[tid] = t
		}
		return t
	}
	for sc.Scan() {
		m := lineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[2])
		tid, _ := strconv.Atoi(m[3])
		cpu, _ := strconv.Atoi(m[4])
		t := timeNs(m[5], m[6])
		if tid > 0 {
			k := get(tid, m[1])
			k.pid, k.comm = pid, m[1]
		}
		ev, rest := m[7], m[8]
		switch {
		case ev == "sched:sched_switch":
			s := switchRE.FindStringSubmatch(rest)
			if s == nil {
				continue
			}
			prev, _ := strconv.Atoi(s[2])
			next, _ := strconv.Atoi(s[5])
			get(prev, s[1])
			get(next, s[4])
			if c, ok := running[cpu]; ok {
				tr.runs[cpu] = append(tr.runs[cpu], run{c.since, t, c.tid, s[3]})
			}
			running[cpu] = cur{next, t}
		case ev == "sched:sched_wakeup":
			if w := wakeRE.FindStringSubmatch(rest); w != nil {
				woken, _ := strconv.Atoi(w[1])
				tr.wakes[cpu] = append(tr.wakes[cpu], wake{t, woken})
			}
		case ev == "syscalls:sys_enter_nanosleep" || ev == "syscalls:sys_enter_clock_nanosleep":
			if tid > 0 {
				get(tid, m[1]).nanos++
			}
		case strings.HasPrefix(ev, "exceptions:page_fault"):
			tr.points[cpu] = append(tr.points[cpu], point{t, strings.TrimPrefix(ev, "exceptions:") + " (" + tr.tasks[tid].comm + ")"})
		case strings.HasPrefix(ev, "irq:") || strings.HasPrefix(ev, "timer:") || strings.HasPrefix(ev, "irq_vectors:") || strings.HasPrefix(ev, "tlb:"):
			what := ev[strings.IndexByte(ev, ':')+1:]
			if d := detailRE.FindString(rest); d != "" {
				what += " " + d
			}
			tr.points[cpu] = append(tr.points[cpu], point{t, what})
		}
	}
	return tr, sc.Err()
}

// timeNs turns perf's seconds.fraction into ns.
func timeNs(sec, frac string) int64 {
	s, _ := strconv.ParseInt(sec, 10, 64)
	for len(frac) < 9 {
		frac += "0"
	}
	f, _ := strconv.ParseInt(frac[:9], 10, 64)
	return s*1e9 + f
}

// phase is one size's timed round trips from the dump.
type phase struct {
	size        int
	start, half []int64
}

func parseDump(r io.Reader) ([]*phase, error) {
	var out []*phase
	by := map[int]*phase{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || strings.HasPrefix(f[0], "#") {
			continue
		}
		var v [3]int64
		for i := range f {
			n, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("dump line %q: %w", sc.Text(), err)
			}
			v[i] = n
		}
		p := by[int(v[0])]
		if p == nil {
			p = &phase{size: int(v[0])}
			by[p.size] = p
			out = append(out, p)
		}
		p.start = append(p.start, v[1])
		p.half = append(p.half, v[2])
	}
	return out, sc.Err()
}

// ran returns the runs on cpu overlapping [a, b), clipped to it.
func (tr *trace) ran(cpu int, a, b int64) []run {
	rs := tr.runs[cpu]
	i := sort.Search(len(rs), func(i int) bool { return rs[i].end > a })
	var out []run
	for ; i < len(rs) && rs[i].start < b; i++ {
		r := rs[i]
		r.start, r.end = max(r.start, a), min(r.end, b)
		out = append(out, r)
	}
	return out
}

func (tr *trace) pointsIn(cpu int, a, b int64) []point {
	ps := tr.points[cpu]
	i := sort.Search(len(ps), func(i int) bool { return ps[i].t >= a })
	var out []point
	for ; i < len(ps) && ps[i].t < b; i++ {
		out = append(out, ps[i])
	}
	return out
}

// timerWoke returns the task a timer interrupt at t on cpu woke (the
// first wake-up on that CPU within 50 us after it), or 0.
func (tr *trace) timerWoke(cpu int, t int64) int {
	ws := tr.wakes[cpu]
	i := sort.Search(len(ws), func(i int) bool { return ws[i].t >= t })
	if i < len(ws) && ws[i].t-t < 50_000 {
		return ws[i].tid
	}
	return 0
}

func (tr *trace) cpus() []int {
	var cs []int
	for c := range tr.runs {
		cs = append(cs, c)
	}
	slices.Sort(cs)
	return cs
}

// benchComm is the command name (prefix) of the measuring processes.
var benchComm = "perftest"

// roles names the threads of one phase: the two perftest threads that ran
// most in it are the spinners; in their processes the thread with most
// nanosleep calls is the runtime's sysmon.
type roles struct {
	spin   map[int]bool
	procs  map[int]bool
	sysmon map[int]bool
}

func (tr *trace) rolesIn(a, b int64) roles {
	on := map[int]int64{}
	for _, c := range tr.cpus() {
		for _, r := range tr.ran(c, a, b) {
			if t := tr.tasks[r.tid]; t != nil && strings.HasPrefix(t.comm, benchComm) {
				on[r.tid] += r.end - r.start
			}
		}
	}
	ids := make([]int, 0, len(on))
	for id := range on {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return on[ids[i]] > on[ids[j]] })
	// the busiest thread of each of the two busiest processes (the
	// spinning goroutine can change threads within its process)
	ro := roles{spin: map[int]bool{}, procs: map[int]bool{}, sysmon: map[int]bool{}}
	for _, id := range ids {
		if pid := tr.tasks[id].pid; !ro.procs[pid] && len(ro.procs) < 2 {
			ro.spin[id] = true
			ro.procs[pid] = true
		}
	}
	best := map[int]*task{}
	for _, t := range tr.tasks {
		if ro.procs[t.pid] && !ro.spin[t.tid] && t.nanos > 0 && (best[t.pid] == nil || t.nanos > best[t.pid].nanos) {
			best[t.pid] = t
		}
	}
	for _, t := range best {
		ro.sysmon[t.tid] = true
	}
	return ro
}

var digitsRE = regexp.MustCompile(`[/:-]?\d.*$`)

// source names what a run that is not a spinner's was.
func (tr *trace) source(ro roles, tid int) string {
	if tid == 0 {
		return "idle"
	}
	t := tr.tasks[tid]
	switch {
	case t == nil:
		return "?"
	case ro.sysmon[tid]:
		return fmt.Sprintf("Go sysmon (pid %d)", t.pid)
	case ro.procs[t.pid]:
		return fmt.Sprintf("other Go thread (pid %d)", t.pid)
	}
	c := digitsRE.ReplaceAllString(t.comm, "")
	if c == "" {
		c = t.comm
	}
	return c
}

type tally struct {
	n   int
	sum int64
}

func report(w io.Writer, tr *trace, phases []*phase, factor float64) {
	cpus := tr.cpus()
	for _, p := range phases {
		if len(p.start) == 0 {
			continue
		}
		a := p.start[0]
		b := p.start[len(p.start)-1] + 2*p.half[len(p.half)-1]
		sorted := slices.Clone(p.half)
		slices.Sort(sorted)
		p50 := sorted[len(sorted)/2]
		p999 := sorted[min(len(sorted)-1, (len(sorted)*999+999)/1000-1)]
		thr := int64(float64(p50) * factor)
		ro := tr.rolesIn(a, b)
		fmt.Fprintf(w, "\n== %d B: %d round trips in %.3f s, half round trip p50 %.3f us, p99.9 %.3f us\n",
			p.size, len(p.half), float64(b-a)/1e9, float64(p50)/1e3, float64(p999)/1e3)
		// the spinners' switches out
		states := map[string]int{}
		preempted := 0
		others := map[string]*tally{}
		for _, c := range cpus {
			for _, r := range tr.ran(c, a, b) {
				if ro.spin[r.tid] {
					if r.end < b {
						states[r.state]++
						if strings.HasPrefix(r.state, "R") {
							preempted++
						}
					}
					continue
				}
				s := tr.source(ro, r.tid)
				if others[s] == nil {
					others[s] = &tally{}
				}
				others[s].n++
				others[s].sum += r.end - r.start
			}
		}
		fmt.Fprintf(w, "spinners' switches out: %d preempted (R), %d blocked (states: %v)\n",
			preempted, sumStates(states)-preempted, states)
		fmt.Fprintf(w, "what else ran on the CPUs (runs, per second, total us, mean us):\n")
		secs := float64(b-a) / 1e9
		for i, k := range sortedKeys(others, func(t *tally) int64 { return int64(t.n) }) {
			if i == maxDetail {
				fmt.Fprintf(w, "  (and %d more)\n", len(others)-maxDetail)
				break
			}
			t := others[k]
			fmt.Fprintf(w, "  %-34s %7d %9.1f %11.1f %8.1f\n", k, t.n, float64(t.n)/secs, float64(t.sum)/1e3, float64(t.sum)/1e3/float64(t.n))
		}
		// slow round trips
		causes, classes := map[string]*tally{}, map[string]*tally{}
		var slow int
		var unseen []int64 // middles of the slow round trips nothing was seen in
		for i, s := range p.start {
			d := p.half[i]
			if d <= thr {
				continue
			}
			slow++
			e := s + 2*d
			seen := map[string]bool{}
			for _, c := range cpus {
				for _, r := range tr.ran(c, s, e) {
					if !ro.spin[r.tid] {
						seen[tr.source(ro, r.tid)] = true
					}
				}
			}
			key := joinKeys(seen)
			if key == "" && !slices.ContainsFunc(cpus, func(c int) bool { return len(tr.pointsIn(c, s, e)) > 0 }) {
				unseen = append(unseen, s+d)
			}
			if key == "" {
				for _, c := range cpus {
					for _, pt := range tr.pointsIn(c, s, e) {
						what := pt.what
						if strings.HasSuffix(what, "function=hrtimer_wakeup") {
							if id := tr.timerWoke(c, pt.t); id != 0 {
								what += " (woke " + tr.source(ro, id) + ")"
							}
						}
						seen[what] = true
					}
				}
				key = "no switch: " + joinKeys(seen)
				if len(seen) == 0 {
					key = "nothing the guest saw (no switch, interrupt or timer)"
				}
			}
			if causes[key] == nil {
				causes[key] = &tally{}
			}
			causes[key].n++
			causes[key].sum += d
			c := classOf(seen, key)
			if classes[c] == nil {
				classes[c] = &tally{}
			}
			classes[c].n++
			classes[c].sum += d
		}
		fmt.Fprintf(w, "slow round trips (half > %.2f us = %.0fx p50): %d (%.3f%%), by what ran on the CPUs during each (count, mean half us):\n",
			float64(thr)/1e3, factor, slow, 100*float64(slow)/float64(len(p.half)))
		for _, k := range sortedKeys(classes, func(t *tally) int64 { return int64(t.n) }) {
			t := classes[k]
			fmt.Fprintf(w, "  %7d %9.1f  %s\n", t.n, float64(t.sum)/1e3/float64(t.n), k)
		}
		if len(unseen) >= 20 {
			per, share := period(unseen)
			fmt.Fprintf(w, "  those the guest saw nothing in: %.0f%% fall in one 1/40 of a %.1f ms period of CLOCK_MONOTONIC (2.5%% if unrelated to the clock)\n",
				100*share, float64(per)/1e6)
		}
		fmt.Fprintf(w, "  in detail (the %d commonest sets of tasks):\n", maxDetail)
		for i, k := range sortedKeys(causes, func(t *tally) int64 { return int64(t.n) }) {
			if i == maxDetail {
				break
			}
			t := causes[k]
			fmt.Fprintf(w, "    %7d %9.1f  %s\n", t.n, float64(t.sum)/1e3/float64(t.n), k)
		}
	}
}

// maxDetail bounds the lists of other tasks and of slow round trips'
// task sets.
const maxDetail = 12

// kernelThreads are the name prefixes of the kernel's own threads.
var kernelThreads = []string{"kworker", "ksoftirqd", "rcu", "migration", "kcompactd", "kdamond", "damon",
	"khugepaged", "kthreadd", "kswapd", "watchdog", "hwrng", "khungtaskd", "irq/", "cpuhp", "oom_reaper", "vsock"}

// classOf sorts one slow round trip by the most likely culprit among the
// tasks that ran during it: another process first (the machine's load),
// then the Go runtime's threads of the two processes, then kernel
// threads; a round trip during which nothing else ran is put down to the
// interrupts or timers seen, or to nothing the guest saw.
func classOf(seen map[string]bool, key string) string {
	if strings.HasPrefix(key, "no switch: ") {
		if strings.Contains(key, "(woke Go sysmon") {
			return "the timer waking sysmon (no other task ran)"
		}
		return "interrupt or timer only (no other task ran)"
	}
	if strings.HasPrefix(key, "nothing the guest saw") {
		return key
	}
	var sysmon, goThread, kernel, idle bool
	for k := range seen {
		switch {
		case strings.HasPrefix(k, "Go sysmon"):
			sysmon = true
		case strings.HasPrefix(k, "other Go thread"):
			goThread = true
		case k == "idle":
			idle = true
		case slices.ContainsFunc(kernelThreads, func(p string) bool { return strings.HasPrefix(k, p) }):
			kernel = true
		default:
			return "another process ran (the machine's load)"
		}
	}
	switch {
	case sysmon:
		return "the Go runtime's sysmon ran"
	case goThread:
		return "another thread of the two Go processes ran"
	case kernel:
		return "a kernel thread ran"
	case idle:
		return "a spinner slept (CPU idle)"
	}
	return key
}

// period finds, among a few timer periods, the one whose phase the times
// ts cluster at most: the largest share of ts in one of 40 phase bins. A
// cause that keeps the host's time (a timer of the hypervisor) shows as a
// share far above 1/40; events unrelated to the clock stay near it.
func period(ts []int64) (best int64, share float64) {
	for _, p := range []int64{500e3, 1e6, 2e6, 2.5e6, 4e6, 10e6} {
		var bins [40]int
		for _, t := range ts {
			bins[(t%p)*40/p]++
		}
		if f := float64(slices.Max(bins[:])) / float64(len(ts)); f > share {
			best, share = p, f
		}
	}
	return best, share
}

func sumStates(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func joinKeys(m map[string]bool) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ", ")
}

func sortedKeys[T any](m map[string]T, by func(T) int64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if bi, bj := by(m[ks[i]]), by(m[ks[j]]); bi != bj {
			return bi > bj
		}
		return ks[i] < ks[j]
	})
	return ks
}
