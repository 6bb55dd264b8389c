package main

// perftest coll: the latency of gofi's collectives per size, measured the
// way the OSU micro-benchmarks measure MPI's (osu_barrier, osu_bcast,
// osu_allreduce, osu_allgather, osu_alltoall), so the two tables can be
// set side by side (benchmarks/mpi/coll.c is the same loop in MPI, and
// benchmarks/coll.sh runs both).
//
// Each rank times every call on its own: start the clock, post the
// collective, wait for its completion, stop the clock; a barrier (gofi's)
// follows each call but barrier's own test. The first -x calls of a size
// are warm-up; the average of the next -I is the rank's figure, and the
// table gives the average over ranks and the fastest and slowest rank's,
// as OSU's -f format does. Before the timed calls of each size one call's
// result is checked (every rank's data is distinct and the expected
// result known), and the heap allocations per call are counted over the
// timed calls.
//
// The job: under a launcher (mpiexec.hydra -n N perftest coll, srun,
// torchrun's variables) the launcher's ranks; otherwise perftest starts
// -n ranks itself, re-executing its binary with torchrun's variables
// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and a private job key,
// and binds each rank to one CPU, rank r to the r-th allowed CPU modulo
// their number (-bind; Open MPI's mpirun binds so with --bind-to
// core:overload-allowed, which benchmarks/coll.sh gives it). Only rank 0
// prints.
//
// Spinning over shm (the default with no more ranks than CPUs), each rank
// runs its calls with one P and a yield every 2 ms of spinning (see
// spinsched.go), and polls for settleFor before its first timed call
// (settle). -dump writes every timed call, to find what made an average
// exceed its median (benchmarks/tailholes reads it once converted).

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gofi-dev/fi"
	"github.com/gofi-dev/fi/dtype"
	"github.com/gofi-dev/fi/dtype/kernel"
	"github.com/gofi-dev/fi/internal/placement"
	"github.com/gofi-dev/fi/launch"
	"golang.org/x/sys/unix"
)

// collNames are the collectives perftest coll measures, in table order.
var collNames = []string{"barrier", "bcast", "allreduce", "allgather", "alltoall"}

// collDefaultSizes are OSU's default sizes: powers of two to 1 MiB
// (allreduce from 4 bytes, one float).
var collDefaultSizes = func() []int {
	var s []int
	for n := 1; n <= 1<<20; n *= 2 {
		s = append(s, n)
	}
	return s
}()

type collOpts struct {
	ranks   int
	prov    string
	colls   []string
	sizes   []int
	iters   int // -1: by size
	warm    int // -1: by size
	timeout time.Duration
	wait    string // spin, yield or sread
	check   bool
	dump    string // -dump: every rank's timed calls into dump.RANK
	bind    string // spread, core or none
	settle  time.Duration
	cpus    []int // rank 0 of a self-spawned job: the CPUs the job may use (the placement probe's)
	common  *commonOpts
}

// collCPUEnv tells a rank perftest coll started itself which CPU to bind
// to (-bind spread or core).
const collCPUEnv = "GOFI_PERFTEST_COLL_CPU"

// collRank is one rank's figures, per collective and size, as it reports
// them to rank 0.
type collRank struct {
	Rank   int         `json:"rank"`
	CPUs   []int       `json:"cpus"`
	Usec   [][]float64 `json:"usec"`   // [coll][size]: average per call
	P50    [][]float64 `json:"p50"`    // [coll][size]: median call
	Allocs [][]float64 `json:"allocs"` // [coll][size]: heap allocations per call
	Iters  [][]int     `json:"iters"`
}

// collSizes returns the sizes measured for collective c: barrier has
// none (0), allreduce whole floats.
func (o *collOpts) collSizes(c string) []int {
	switch c {
	case "barrier":
		return []int{0}
	case "allreduce":
		var s []int
		for _, z := range o.sizes {
			if z >= 4 && z%4 == 0 {
				s = append(s, z)
			}
		}
		return s
	}
	return o.sizes
}

// itersFor is OSU's choice: 1000 calls (200 warm-up) up to 8 KiB, 100
// (10 warm-up) above.
func (o *collOpts) itersFor(size int) (iters, warm int) {
	iters, warm = 1000, 200
	if size > 8<<10 {
		iters, warm = 100, 10
	}
	if o.iters >= 0 {
		iters = max(o.iters, 1)
	}
	if o.warm >= 0 {
		warm = o.warm
	}
	return iters, warm
}

func runColl(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("perftest coll", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &collOpts{}
	fs.IntVar(&o.ranks, "n", 4, "`ranks` to start when not run under a launcher")
	fs.StringVar(&o.prov, "p", "", "`provider`: shm, tcp or shm+tcp (default shm when every rank shares this host, else tcp)")
	cs := fs.String("c", strings.Join(collNames, ","), "`collectives`, comma-separated: "+strings.Join(collNames, ", "))
	sz := fs.String("S", "", "message `sizes` in bytes, comma-separated (default powers of two 1 B to 1 MiB; per rank block for allgather and alltoall)")
	mm := fs.String("m", "", "OSU's size range `[min:]max` (powers of two), instead of -S")
	iters := fs.String("I", "", "timed calls per size (default 1000, 100 above 8 KiB)")
	warm := fs.String("x", "", "warm-up calls per size (default 200, 10 above 8 KiB)")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "give up on a collective that has not completed after this long")
	fs.StringVar(&o.wait, "wait", "", "how to wait for completions: spin (CQ.Read), sread (CQ.Sread) or yield (CQ.Sread on a CQ opened with WaitYield: sched_yield between polls) (default spin; with more ranks than CPUs yield, or sread when the rank leads its own session, as under Hydra)")
	fs.BoolVar(&o.check, "check", true, "check one result of every collective and size")
	fs.DurationVar(&o.settle, "settle", settleFor, "poll, calling barriers, this `long` before the first timed call (see settle in coll.go)")
	fs.StringVar(&o.bind, "bind", "spread", "spread: bind each rank perftest starts to one CPU, rank r to allowed CPU r modulo their number (as mpirun --bind-to core:overload-allowed); core: the same, but every rank on a CPU of its own (refused with more ranks than CPUs); none: leave them unbound (under a launcher the launcher binds)")
	fs.StringVar(&o.dump, "dump", "", "write every rank's timed calls to `prefix`.RANK: collective, size, start on CLOCK_MONOTONIC (ns) and the call's time (ns), in the order they ran, to find the slow calls behind an average above the median")
	o.common = addCommonFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: perftest coll [-n ranks] [-p prov] [-c colls] [-S sizes | -m [min:]max] [-I iters] [-x warmup] [-json] [-plot f.svg]\n       mpiexec.hydra -n N perftest coll [flags]\n\nLatency of each collective per size, as the OSU micro-benchmarks measure MPI's.\n\n")
		fs.PrintDefaults()
	}
	if rc := parseMultiFlags(fs, args); rc >= 0 {
		return rc
	}
	var err error
	for _, c := range strings.Split(*cs, ",") {
		if !slices.Contains(collNames, c) {
			return usageErr(stderr, "coll", fmt.Errorf("-c: unknown collective %q (want %s)", c, strings.Join(collNames, ", ")))
		}
		o.colls = append(o.colls, c)
	}
	switch {
	case *sz != "" && *mm != "":
		return usageErr(stderr, "coll", errors.New("-S and -m both given"))
	case *sz != "":
		if o.sizes, err = parseSizes(*sz); err != nil {
			return usageErr(stderr, "coll", err)
		}
	case *mm != "":
		if o.sizes, err = parseRange(*mm); err != nil {
			return usageErr(stderr, "coll", err)
		}
	default:
		o.sizes = collDefaultSizes
	}
	if o.iters, err = parseCount("-I", *iters); err != nil {
		return usageErr(stderr, "coll", err)
	}
	if o.warm, err = parseCount("-x", *warm); err != nil {
		return usageErr(stderr, "coll", err)
	}
	if o.wait != "" {
		if err := checkWait(o.wait); err != nil {
			return usageErr(stderr, "coll", err)
		}
	}
	if o.ranks < 1 || o.ranks > 1024 {
		return usageErr(stderr, "coll", fmt.Errorf("-n %d: want 1 to 1024", o.ranks))
	}
	if o.bind != "spread" && o.bind != "core" && o.bind != "none" {
		return usageErr(stderr, "coll", fmt.Errorf("-bind %q: want spread, core or none", o.bind))
	}

	launched := false
	for _, v := range launcherEnv {
		if os.Getenv(v) != "" {
			launched = true
		}
	}
	var kids []*exec.Cmd
	var kidErrs []*prefixWriter
	kidDone := make(chan error, o.ranks)
	if !launched {
		// Start ranks 1..n-1 and join as rank 0 of a private env job.
		port, err := freePort()
		if err != nil {
			fmt.Fprintf(stderr, "perftest coll: %v\n", err)
			return 1
		}
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "perftest coll: finding this program to start the ranks: %v\n", err)
			return 1
		}
		env := map[string]string{"WORLD_SIZE": strconv.Itoa(o.ranks), "MASTER_ADDR": "127.0.0.1",
			"MASTER_PORT": strconv.Itoa(port), "GOFI_JOB_KEY": fmt.Sprintf("perftest-coll-%d-%d", os.Getpid(), rand.Uint64())}
		for k, v := range env {
			os.Setenv(k, v)
		}
		os.Setenv("RANK", "0")
		// Binding (bindCPUs): two unbound spinning ranks on a host with
		// other work get stacked on one CPU by the load balancer now
		// and then, and every call then waits for a time slice; with
		// more ranks than CPUs, unbound ranks end up unevenly spread.
		cpus, _ := placement.Allowed()
		o.cpus = cpus
		binds, err := bindCPUs(o.bind, o.ranks, cpus)
		if err != nil {
			return usageErr(stderr, "coll", err)
		}
		if binds != nil {
			os.Setenv(collCPUEnv, strconv.Itoa(binds[0]))
			defer os.Unsetenv(collCPUEnv)
		}
		defer func() {
			for k := range env {
				os.Unsetenv(k)
			}
			os.Unsetenv("RANK")
		}()
		for r := 1; r < o.ranks; r++ {
			c := exec.Command(exe, append([]string{"coll"}, args...)...)
			c.Env = append(os.Environ(), "RANK="+strconv.Itoa(r))
			if binds != nil {
				c.Env = append(c.Env, collCPUEnv+"="+strconv.Itoa(binds[r]))
			}
			w := &prefixWriter{w: stderr, prefix: fmt.Sprintf("perftest coll rank %d: ", r)}
			c.Stdout, c.Stderr = io.Discard, w
			if err := c.Start(); err != nil {
				fmt.Fprintf(stderr, "perftest coll: starting rank %d: %v\n", r, err)
				for _, k := range kids {
					k.Process.Kill()
				}
				return 1
			}
			kids, kidErrs = append(kids, c), append(kidErrs, w)
			go func() { kidDone <- c.Wait() }()
		}
	}
	st := collMain(o, stdout, stderr)
	if len(kids) > 0 {
		deadline := time.After(o.timeout)
		for range kids {
			select {
			case err := <-kidDone:
				if err != nil && st == 0 {
					st = 1
				}
			case <-deadline:
				for _, k := range kids {
					k.Process.Kill()
				}
				if st == 0 {
					st = 1
				}
			}
		}
		for _, w := range kidErrs {
			w.flush()
		}
	}
	return st
}

// parseRange parses OSU's -m: "max" or "min:max", every power of two
// between them.
func parseRange(s string) ([]int, error) {
	lo, hi := 1, 0
	var err error
	if i := strings.IndexByte(s, ':'); i >= 0 {
		if lo, err = parseSize(s[:i]); err != nil {
			return nil, err
		}
		s = s[i+1:]
	}
	if hi, err = parseSize(s); err != nil {
		return nil, err
	}
	if lo < 1 || hi < lo {
		return nil, fmt.Errorf("-m %d:%d: want 1 <= min <= max", lo, hi)
	}
	var out []int
	for n := lo; n <= hi; n *= 2 {
		out = append(out, n)
	}
	return out, nil
}

// collMain runs this rank's part of the job and, on rank 0, prints.
func collMain(o *collOpts, stdout, stderr io.Writer) int {
	job, err := launch.Init(launch.Timeout(o.timeout))
	if err != nil {
		fmt.Fprintf(stderr, "perftest coll: %v\n", err)
		return 1
	}
	if job.Rank() == 0 { // -cpuprofile, -memprofile: rank 0's
		stop, err := o.common.startProfile()
		if err != nil {
			fmt.Fprintf(stderr, "perftest coll: %v\n", err)
			job.Abort(1, "perftest coll: rank 0 cannot profile")
			return 1
		}
		defer stop()
	}
	if o.prov == "" {
		o.prov = "shm"
		if job.LocalSize() < job.Size() {
			o.prov = "tcp"
		}
	}
	if o.wait == "" {
		// More ranks than CPUs: a spinning rank holds a CPU another rank
		// needs to arrive. Open MPI yields after every empty poll there
		// (yield_when_idle); so does Sread on a CQ opened with WaitYield
		// ("yield"). But sched_yield only hands the CPU to tasks of the
		// same scheduling group: with autogroups (Linux's default) a rank
		// that leads a session of its own, as every rank Hydra starts
		// does, is a group of one, its yield gives nothing away and the
		// rank waited for runs only when the kernel preempts the yielder.
		// Measured at 8 ranks on 2 CPUs (load 12-13, p50 barrier): yield
		// 16-28 us with the ranks in one session (perftest -n 8), 17 us
		// once and 1.1 ms twice under mpiexec.hydra; Open MPI 19-58 us.
		// There, sread (the last rank to arrive at a shared-memory phase
		// wakes the sleepers: 28-55 us at 4 ranks, 120-220 us at 8) is
		// the safe choice. spin: tens of ms.
		o.wait = "spin"
		if job.LocalSize() > runtime.NumCPU() {
			o.wait = "yield"
			if sid, err := unix.Getsid(0); err == nil && sid == os.Getpid() {
				o.wait = "sread"
			}
		}
	}
	var place *Placement
	if job.Rank() == 0 {
		place = o.probe()
	}
	if v := os.Getenv(collCPUEnv); v != "" {
		cpu, err := strconv.Atoi(v)
		if err == nil {
			err = placement.PinProcess(cpu)
		}
		if err != nil {
			fmt.Fprintf(stderr, "perftest coll: rank %d: binding to CPU %q: %v\n", job.Rank(), v, err)
			job.Abort(1, "perftest coll: binding failed")
			return 1
		}
	}
	load := loadAvg()
	mine, err := collRun(job, o)
	if err != nil {
		fmt.Fprintf(stderr, "perftest coll: rank %d: %v\n", job.Rank(), err)
		job.Abort(exitStatus(err), fmt.Sprintf("perftest coll failed on rank %d", job.Rank()))
		return exitStatus(err)
	}
	var all []collRank
	if job.Rank() == 0 {
		all, err = collGather(job, mine)
	} else {
		_, err = collGather(job, mine)
	}
	if err == nil {
		err = job.Finalize()
	}
	if err != nil {
		fmt.Fprintf(stderr, "perftest coll: rank %d: %v\n", job.Rank(), err)
		return 1
	}
	if job.Rank() != 0 {
		return 0
	}
	rep := newReport("coll")
	rep.setPlacement(place)
	rep.setPlacement(o.probe())
	table := stdout
	if o.common.json {
		table = io.Discard
	}
	printColl(table, job, o, all, rep, load)
	return o.common.finish(rep, stdout, stderr)
}

// probe measures the placement between the CPUs of a job perftest
// started (before and after rank 0 bound itself: o.cpus), or between this
// process's CPUs.
func (o *collOpts) probe() *Placement {
	if o.cpus == nil {
		return probeLocal()
	}
	w := where{CPUs: o.cpus, Boot: bootID()}
	p := probeWith(w, w)
	if os.Getenv(collCPUEnv) != "" && o.ranks == 2 && p.Class != "unknown" {
		p.Pinned = true // the two ranks are bound to the pair probed
	}
	return p
}

// loadAvg is /proc/loadavg's first three fields, or "".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// collGather sends every rank's figures to rank 0 through the job.
func collGather(job *launch.Job, mine *collRank) ([]collRank, error) {
	b, _ := json.Marshal(mine)
	if err := job.Put("perftest.coll", b); err != nil {
		return nil, err
	}
	if err := job.Fence(); err != nil {
		return nil, err
	}
	if job.Rank() != 0 {
		return nil, nil
	}
	all := make([]collRank, job.Size())
	for r := range all {
		b, err := job.Get(r, "perftest.coll")
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &all[r]); err != nil || len(all[r].Usec) != len(mine.Usec) {
			return nil, fmt.Errorf("rank %d reported %q", r, b)
		}
	}
	return all, nil
}

// collEP is one rank's endpoint and group.
type collEP struct {
	fab   *fi.Fabric
	dom   *fi.Domain
	av    *fi.AV
	cq    *fi.CQ
	ep    *fi.Endpoint
	set   *fi.AVSet
	mc    *fi.MC
	wait  string
	spin  bool // wait == "spin": CQ.Read, no clock read but every 1024 passes
	tmo   time.Duration
	coop  coop // spin over shm: one P, a yield every 2 ms of spinning (spinsched.go)
	ent   [4]fi.CQEntry
	rank  int
	ranks int
}

func openCollEP(job *launch.Job, o *collOpts) (c *collEP, err error) {
	c = &collEP{wait: o.wait, spin: o.wait == "spin", tmo: o.timeout, rank: job.Rank(), ranks: job.Size()}
	defer func() {
		if err != nil {
			c.close()
			c = nil
		}
	}()
	info, err := collInfo(o.prov)
	if err != nil {
		return c, err
	}
	wait := fi.WaitNone
	switch o.wait {
	case "sread":
		wait = fi.WaitUnspec
	case "yield":
		wait = fi.WaitYield
	}
	if c.fab, err = fi.OpenFabric(info.FabricAttr); err != nil {
		return c, err
	}
	if c.dom, err = c.fab.OpenDomain(info); err != nil {
		return c, err
	}
	if c.av, err = c.dom.OpenAV(&fi.AVAttr{Type: fi.AVTable}); err != nil {
		return c, err
	}
	if c.cq, err = c.dom.OpenCQ(&fi.CQAttr{Format: fi.CQFormatContext, WaitObj: wait}); err != nil {
		return c, err
	}
	if c.ep, err = c.dom.OpenEndpoint(info); err != nil {
		return c, err
	}
	if err = c.ep.BindAV(c.av); err != nil {
		return c, err
	}
	if err = c.ep.BindCQ(c.cq, fi.Transmit|fi.Recv); err != nil {
		return c, err
	}
	if err = c.ep.Enable(); err != nil {
		return c, err
	}
	addrs, err := launch.Connect(job, c.ep, c.av)
	if err != nil {
		return c, err
	}
	if c.set, err = c.av.NewSet(nil); err != nil {
		return c, err
	}
	for _, a := range addrs {
		if err = c.set.Insert(a); err != nil {
			return c, err
		}
	}
	if c.mc, err = c.ep.JoinCollective(c.set.Addr(), c.set, 0, nil); err != nil {
		return c, err
	}
	if err = c.waitOne("join"); err != nil {
		return c, err
	}
	return c, nil
}

// collInfo finds provider prov with collectives.
func collInfo(prov string) (*fi.Info, error) {
	hints := fi.AllocInfo()
	hints.Caps = fi.Msg | fi.Collective
	hints.EpAttr.Type = fi.EpRDM
	hints.FabricAttr.ProvName = prov
	// One goroutine per rank calls the library, as an MPI process that
	// asked for MPI_THREAD_SINGLE: the domain needs no lock.
	hints.DomainAttr.Threading = fi.ThreadDomain
	infos, err := fi.GetInfo(fi.Version(fi.MajorVersion, fi.MinorVersion), "", "", 0, hints)
	if err != nil {
		return nil, fmt.Errorf("%w: %s with collectives: %w", errProvider, prov, err)
	}
	return infos[0], nil
}

func (c *collEP) close() {
	if c.mc != nil {
		c.mc.Close()
	}
	if c.set != nil {
		c.set.Close()
	}
	for _, x := range []interface{ Close() error }{c.ep, c.cq, c.av, c.dom, c.fab} {
		if x != nil && !isNilCloser(x) {
			x.Close()
		}
	}
}

// isNilCloser reports whether x holds a nil pointer.
func isNilCloser(x interface{ Close() error }) bool {
	switch v := x.(type) {
	case *fi.Endpoint:
		return v == nil
	case *fi.CQ:
		return v == nil
	case *fi.AV:
		return v == nil
	case *fi.Domain:
		return v == nil
	case *fi.Fabric:
		return v == nil
	}
	return false
}

// waitOne waits for the next completion on the CQ and returns the
// operation's error.
func (c *collEP) waitOne(what string) error {
	var deadline time.Time
	for spins := 0; ; spins++ {
		var n int
		var err error
		if c.spin {
			c.coop.poll()
			n, err = c.cq.Read(c.ent[:1])
		} else {
			n, err = c.cq.Sread(c.ent[:1], 100*time.Millisecond)
		}
		if e, ok := err.(fi.Errno); ok && e == fi.ErrAgain {
			err = nil // the common case, tested without errors.Is's or an interface comparison's cost per pass
		}
		switch {
		case n > 0:
			return nil
		case err == nil:
		case errors.Is(err, fi.ErrAvail):
			ee, rerr := c.cq.ReadErr()
			if rerr != nil {
				return fmt.Errorf("%s: %w", what, rerr)
			}
			return fmt.Errorf("%s: %w", what, ee.Err)
		case err != nil && !errors.Is(err, fi.ErrAgain):
			return fmt.Errorf("%s: %w", what, err)
		}
		if spins&1023 == 1023 || !c.spin {
			if deadline.IsZero() {
				deadline = time.Now().Add(c.tmo)
			} else if time.Now().After(deadline) {
				return fmt.Errorf("%s: %w: no completion in %v", what, fi.ErrTimedOut, c.tmo)
			}
		}
	}
}

// collBufs are one rank's buffers for the largest size.
type collBufs struct {
	buf, res []byte
}

// post starts one call of collective name on size bytes (per rank block
// for allgather and alltoall).
func (c *collEP) post(name string, size int, b *collBufs) error {
	a := c.mc.Addr()
	switch name {
	case "barrier":
		return c.ep.Barrier(a, nil)
	case "bcast":
		return c.ep.Broadcast(b.buf[:size], size, nil, a, 0, fi.Uint8, 0, nil)
	case "allreduce":
		return c.ep.Allreduce(b.buf[:size], size/4, nil, b.res[:size], nil, a, fi.Float, fi.OpSum, 0, nil)
	case "allgather":
		return c.ep.Allgather(b.buf[:size], size, nil, b.res[:size*c.ranks], nil, a, fi.Uint8, 0, nil)
	case "alltoall":
		return c.ep.Alltoall(b.buf[:size*c.ranks], size, nil, b.res[:size*c.ranks], nil, a, fi.Uint8, 0, nil)
	}
	return fmt.Errorf("unknown collective %q", name)
}

// fill writes this rank's input for a checked call.
func (c *collEP) fill(name string, size int, b *collBufs, k int) {
	switch name {
	case "allreduce":
		for i := 0; i+4 <= size; i += 4 {
			binary.NativeEndian.PutUint32(b.buf[i:], math.Float32bits(float32((c.rank+1)*(i/4%7+1)+k)))
		}
	case "bcast":
		for i := range size {
			b.buf[i] = byte(i*7 + k + c.rank*0x55)
		}
	default:
		for i := range size * c.ranks {
			b.buf[i] = byte(c.rank*31 + i/max(size, 1)*17 + i + k)
		}
	}
	clear(b.res)
}

// verify checks a checked call's result.
func (c *collEP) verify(name string, size int, b *collBufs, k int) error {
	n := c.ranks
	switch name {
	case "allreduce":
		for i := 0; i+4 <= size; i += 4 {
			want := float32(n*(n+1)/2*(i/4%7+1) + n*k)
			if got := math.Float32frombits(binary.NativeEndian.Uint32(b.res[i:])); got != want {
				return fmt.Errorf("allreduce of %d B: element %d is %v, want %v", size, i/4, got, want)
			}
		}
	case "bcast":
		for i := range size {
			if want := byte(i*7 + k); b.buf[i] != want {
				return fmt.Errorf("bcast of %d B: byte %d is %#x, want %#x (root's)", size, i, b.buf[i], want)
			}
		}
	case "allgather":
		for r := range n {
			for i := range size {
				if want := byte(r*31 + i + k); b.res[r*size+i] != want {
					return fmt.Errorf("allgather of %d B: rank %d's byte %d is %#x, want %#x", size, r, i, b.res[r*size+i], want)
				}
			}
		}
	case "alltoall":
		for r := range n {
			for i := range size {
				j := c.rank*size + i // rank r's byte for us
				if want := byte(r*31 + j/max(size, 1)*17 + j + k); b.res[r*size+i] != want {
					return fmt.Errorf("alltoall of %d B: byte %d from rank %d is %#x, want %#x", size, i, r, b.res[r*size+i], want)
				}
			}
		}
	}
	return nil
}

// call runs one collective to completion.
func (c *collEP) call(name string, size int, b *collBufs) error {
	if err := c.post(name, size, b); err != nil {
		return fmt.Errorf("%s of %d B: %w", name, size, err)
	}
	return c.waitOne(name)
}

// collRun measures every collective and size on this rank.
func collRun(job *launch.Job, o *collOpts) (*collRank, error) {
	c, err := openCollEP(job, o)
	if err != nil {
		return nil, err
	}
	defer c.close()
	if c.spin {
		defer c.coop.start(o.prov)() // after the placement probe, which wants two Ps
	}
	b0 := &collBufs{buf: make([]byte, 1), res: make([]byte, 1)}
	if err := c.settle(b0, o.settle); err != nil {
		return nil, err
	}
	maxSize := 4
	for _, s := range o.sizes {
		maxSize = max(maxSize, s)
	}
	b := &collBufs{buf: make([]byte, maxSize*c.ranks), res: make([]byte, maxSize*c.ranks)}
	mine := &collRank{Rank: c.rank, CPUs: localWhere().CPUs}
	most := 0
	for _, s := range o.sizes {
		most = max(most, o.iters4(s))
	}
	samples := make([]time.Duration, max(most, o.iters4(0)))
	var starts []time.Duration // -dump: each timed call's start
	var dump *bufio.Writer
	if o.dump != "" {
		starts = make([]time.Duration, len(samples))
		f, err := os.Create(fmt.Sprintf("%s.%d", o.dump, c.rank))
		if err != nil {
			return nil, fmt.Errorf("-dump: %w", err)
		}
		defer f.Close()
		dump = bufio.NewWriterSize(f, 1<<16)
		fmt.Fprintf(dump, "# perftest coll -dump, rank %d of %d: collective, size, start (CLOCK_MONOTONIC ns, +-%d ns), call (ns)\n", c.rank, c.ranks, monoErr.Nanoseconds())
	}
	var ms runtime.MemStats
	// A call is timed with one read of the monotonic clock at each end
	// (time.Since of a fixed base), as benchmarks/mpi/coll.c times it
	// with MPI_Wtime (one clock_gettime in Open MPI and MPICH): time.Now
	// would read the wall clock as well, on the path between two calls.
	base := time.Now()
	baseNs := monoEpochNs + int64(base.Sub(monoEpoch))
	for _, name := range o.colls {
		var usec, p50, allocs []float64
		var its []int
		for k, size := range o.collSizes(name) {
			iters, warm := o.itersFor(size)
			if o.check && name != "barrier" {
				c.fill(name, size, b, k)
				if err := c.call(name, size, b); err != nil {
					return nil, err
				}
				if err := c.verify(name, size, b, k); err != nil {
					return nil, err
				}
			}
			if err := c.call("barrier", 0, b); err != nil {
				return nil, err
			}
			var total time.Duration
			var m0 uint64
			for i := range warm + iters {
				if i == warm {
					runtime.ReadMemStats(&ms)
					m0 = ms.Mallocs
				}
				t0 := time.Since(base)
				if err := c.call(name, size, b); err != nil {
					return nil, err
				}
				if i >= warm {
					d := time.Since(base) - t0
					total += d
					samples[i-warm] = d
					if starts != nil {
						starts[i-warm] = t0
					}
				}
				if name != "barrier" {
					if err := c.call("barrier", 0, b); err != nil {
						return nil, err
					}
				}
			}
			runtime.ReadMemStats(&ms)
			if dump != nil {
				for i := range iters {
					fmt.Fprintf(dump, "%s %d %d %d\n", name, size, baseNs+int64(starts[i]), int64(samples[i]))
				}
				if err := dump.Flush(); err != nil {
					return nil, fmt.Errorf("-dump: %w", err)
				}
			}
			usec = append(usec, float64(total.Nanoseconds())/1e3/float64(iters))
			p50 = append(p50, medianDur(samples[:iters]))
			// ReadMemStats itself allocates nothing; the barriers
			// between calls are counted in: they are collectives too.
			allocs = append(allocs, float64(ms.Mallocs-m0)/float64(iters))
			its = append(its, iters)
		}
		mine.Usec = append(mine.Usec, usec)
		mine.P50 = append(mine.P50, p50)
		mine.Allocs = append(mine.Allocs, allocs)
		mine.Iters = append(mine.Iters, its)
	}
	// Nobody closes while another still waits for its last barrier: a
	// barrier completes on a rank once it has heard from the others, not
	// once they have heard from it, so the job's own barrier follows.
	if err := c.call("barrier", 0, b); err != nil {
		return nil, err
	}
	if err := job.Barrier(); err != nil {
		return nil, err
	}
	return mine, nil
}

// bindCPUs returns the CPU each of ranks self-spawned ranks binds to
// (nil: none) under -bind mode, from the CPUs the job may use. spread
// (the default) binds rank r to cpus[r % len(cpus)]: with more ranks
// than CPUs each CPU then runs the same number of ranks and a barrier
// costs each CPU one switch between its ranks, where unbound ranks are
// spread unevenly by the load balancer now and then (4 ranks on 2 CPUs,
// 5 alternated rounds at load 5.6-7.9, p50 us: barrier 8.47 unbound,
// 5.41 spread; 8 B allreduce 8.66-11.49 / 5.32-6.16; 8 ranks, 3 rounds
// at load 7-13: barrier 27.3-27.7 / 12.1-12.6; 16 MiB allreduce at 4
// ranks, 3 rounds: 11.3-15.1 / 6.6-9.7 ms). Open MPI's mpirun binds so
// with --bind-to core:overload-allowed (its default with more than 2
// ranks binds to the socket, every CPU here; binding helped it as much:
// barrier 9.45 / 6.61 at 4 ranks).
func bindCPUs(mode string, ranks int, cpus []int) ([]int, error) {
	if mode == "none" || len(cpus) == 0 {
		return nil, nil
	}
	if mode == "core" && ranks > len(cpus) {
		return nil, fmt.Errorf("-bind core: %d ranks, %d CPUs", ranks, len(cpus))
	}
	b := make([]int, ranks)
	for r := range b {
		b[r] = cpus[r%len(cpus)]
	}
	return b, nil
}

// settleFor is how long every rank polls, calling barriers, before the
// first timed call (settle).
const settleFor = 30 * time.Millisecond

// settle calls barriers until the ranks have polled for d (-settle;
// rank 0's clock decides, told to the others by a broadcast every 256
// barriers, so that all call the same number).
//
// Why: while a Go process blocks (here, in the job's start-up and the
// join), its runtime's monitor thread (sysmon) sleeps; once woken, it
// wakes every 20 us for 50 rounds, then doubles its sleep up to 10 ms:
// a few hundred wake-ups in the first ~25 ms. Each one takes a CPU that
// a spinning rank holds for 10-50 us (perf: 4300-5300 sysmon runs a
// second in the first timed calls, 26-53 barriers of ~50 us each in
// 20000; later 90-190 a second). That is a start-up transient of the
// runtime, like a cold cache, which warm-up is for; a count of warm-up
// calls ends it only at large counts.
//
// On a host busy with other work it has a price: a process that has just
// woken is left alone for a few milliseconds before the scheduler hands
// its CPU to the others, and the timed calls then come after that window
// (2 ranks, 20000 barriers, alternated rounds at load 3-4: average 0.36,
// 0.59, 0.65, 0.69 and 2.55 us with -settle 0, 0.27-11.96 us with 8 or
// 30 ms; Open MPI's first test, run at once, 0.30-0.57, once 14.89).
// -settle 0 measures that way.
func (c *collEP) settle(b *collBufs, d time.Duration) error {
	t0 := time.Now()
	for {
		for range 256 {
			if err := c.call("barrier", 0, b); err != nil {
				return err
			}
		}
		b.buf[0] = 0
		if c.rank == 0 && time.Since(t0) < d {
			b.buf[0] = 1
		}
		if err := c.call("bcast", 1, b); err != nil {
			return err
		}
		if b.buf[0] == 0 {
			return nil
		}
	}
}

// iters4 is the timed calls of size.
func (o *collOpts) iters4(size int) int {
	it, _ := o.itersFor(size)
	return it
}

// medianDur is the median of d in microseconds (d is reordered).
func medianDur(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	m := d[len(d)/2]
	if len(d)%2 == 0 {
		m = (d[len(d)/2-1] + m) / 2
	}
	return float64(m.Nanoseconds()) / 1e3
}

// printColl writes OSU's table per collective and adds the results to rep.
func printColl(w io.Writer, job *launch.Job, o *collOpts, all []collRank, rep *Report, load string) {
	ranks := job.Size()
	isa := kernel.Vector(dtype.Float, dtype.Sum)
	if isa == "" {
		isa = "portable Go"
	}
	fmt.Fprintf(w, "# perftest coll: %d ranks (%d on this host) on %s, launcher %s, wait %s; %d CPUs, load %s; reduction kernels %s\n",
		ranks, job.LocalSize(), o.prov, job.Launcher(), o.wait, runtime.NumCPU(), load, isa)
	printPlacement(w, rep.Placement, rep.PlacementEnd)
	if o.wait == "spin" {
		io.WriteString(w, busyPollNote(o.prov, false))
	}
	fmt.Fprintf(w, "# CPUs allowed per rank:")
	for _, r := range all {
		fmt.Fprintf(w, " %d:%s", r.Rank, cpuList(r.CPUs))
	}
	fmt.Fprintln(w)
	for ci, name := range o.colls {
		what := ""
		switch name {
		case "allreduce":
			what = " (FLOAT SUM)"
		case "allgather", "alltoall":
			what = " (size per rank)"
		}
		fmt.Fprintf(w, "\n# %s%s\n", name, what)
		fmt.Fprintf(w, "# %-10s %16s %16s %16s %11s %12s %12s\n", "Size", "Avg Latency(us)", "Min Latency(us)", "Max Latency(us)", "Iterations", "P50(us)", "Allocs/call")
		for si, size := range o.collSizes(name) {
			var sum, lo, hi, al float64
			lo = math.Inf(1)
			meds := make([]float64, 0, len(all))
			for _, r := range all {
				meds = append(meds, r.P50[ci][si])
				v := r.Usec[ci][si]
				sum += v
				lo, hi = min(lo, v), max(hi, v)
				al = max(al, r.Allocs[ci][si])
			}
			avg := sum / float64(len(all))
			it := all[0].Iters[ci][si]
			p50 := median(meds)
			fmt.Fprintf(w, "%-12d %16.2f %16.2f %16.2f %11d %12.2f %12.2f\n", size, avg, lo, hi, it, p50, al)
			rep.add(Result{Tool: "gofi", Test: name, Provider: o.prov, Mode: fmt.Sprintf("%d ranks", ranks), Size: size,
				Iterations: int64(it), Usec: avg, P50: p50, MinUsec: lo, MaxUsec: hi, Ranks: ranks, AllocsPerCall: al, Load: load})
		}
	}
}

// cpuList writes a CPU list as ranges: 0-3,6.
func cpuList(cpus []int) string {
	if len(cpus) == 0 {
		return "?"
	}
	s := append([]int(nil), cpus...)
	sort.Ints(s)
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", s[i], s[j]))
		} else {
			parts = append(parts, strconv.Itoa(s[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
