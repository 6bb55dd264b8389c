package main

// The measurement behind issue #17's "across two hosts, allreduce within
// 1.2x of MPICH over tcp": perftest coll on tcp and benchmarks/mpi/coll.c
// built with mpicc.mpich, both under mpiexec.hydra across two hosts of
// internal/hosts (own network namespace and /dev/shm each), in alternating
// rounds; the medians over rounds and their ratio are logged.
//
// It measures, so it runs only when asked:
//
//	GOFI_BENCH_COLL_HOSTS=1 go test ./cmd/perftest -run TestColl_TwoHostsAgainstMPICH -v
//
// GOFI_BENCH_COLL_HOSTS_ROUNDS sets the rounds (default 5),
// GOFI_BENCH_COLL_HOSTS_SIZES the sizes (default 8,1k,64k,1m,16m),
// GOFI_BENCH_COLL_HOSTS_RANKS the rank counts (default 2; half on each
// host), GOFI_BENCH_COLL_HOSTS_ITERS the timed calls per size (default
// 50), GOFI_BENCH_COLL_HOSTS_BIND=1 binds both tools' ranks (rank r to
// CPU r modulo the CPUs, with taskset, as perftest and coll.sh bind
// ranks on one host; unbound by default, as Hydra leaves them), and
// GOFI_BENCH_COLL_HOSTS_RUN_FOR bounds one run (default 5m). Each run's
// average and p50 per size are logged. GOFI_BENCH_COLL_HOSTS_DUMP=dir
// has every gofi run write its timed calls (perftest coll -dump) to
// dir/VARIANT.N.ROUND.RANK, to find the calls behind an average above
// the median. GOFI_BENCH_COLL_HOSTS_GOFI lists variants of
// gofi to alternate with MPICH, separated by ';', each a name followed
// by its binary (a field starting with '/': perftest built elsewhere,
// e.g. from another commit) and KEY=VALUE settings of its environment,
// space-separated: "old /tmp/pt_old;new" or "base;x GOFI_X=1"; every
// variant gets a column pair of its own against MPICH. At 4 ranks (two per host on this 2-CPU
// machine) both sides are oversubscribed and MPICH over UCX's tcp once
// hung after its table; at 2 ranks it hung once in its 1 KiB allreduce
// (2000 calls) and once after its table, each time until the run's
// limit: a run of MPICH's that times out with its table complete counts,
// one that times out before is left out of the medians (at 3000-5000
// calls of 8 bytes, 1 of 8-10 rounds on 2026-11-25).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofi-dev/fi/internal/hosts"
	"github.com/gofi-dev/fi/internal/jobtest"
)

// collRow is one row of perftest coll's (or coll.c's) table: the size,
// the average call and the median call (microseconds).
var collRowFields = regexp.MustCompile(`(?m)^(\d+)\s+([0-9.]+)\s+[0-9.]+\s+[0-9.]+\s+\d+\s+([0-9.]+)`)

func TestColl_TwoHostsAgainstMPICH(t *testing.T) {
	if os.Getenv("GOFI_BENCH_COLL_HOSTS") == "" {
		t.Skip("a measurement: set GOFI_BENCH_COLL_HOSTS=1 to run it")
	}
	bin := buildPerftest(t)
	jobtest.Hydra(t)
	mpicc, err := exec.LookPath("mpicc.mpich")
	if err != nil {
		t.Skip("mpicc.mpich not installed (apt-get install libmpich-dev)")
	}
	mpich := filepath.Join(t.TempDir(), "coll-mpich")
	if out, err := exec.Command(mpicc, "-O2", "-o", mpich, "../../benchmarks/mpi/coll.c").CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v\n%s", err, out)
	}
	rounds := 5
	if v, err := strconv.Atoi(os.Getenv("GOFI_BENCH_COLL_HOSTS_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	sizes := "8,1k,64k,1m,16m"
	if v := os.Getenv("GOFI_BENCH_COLL_HOSTS_SIZES"); v != "" {
		sizes = v
	}
	ranks := []int{2}
	if v := os.Getenv("GOFI_BENCH_COLL_HOSTS_RANKS"); v != "" {
		ranks = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 2 || n%2 != 0 {
				t.Fatalf("GOFI_BENCH_COLL_HOSTS_RANKS=%q: want even counts from 2", v)
			}
			ranks = append(ranks, n)
		}
	}
	nt := hosts.New(t, 2, nil)
	iters := "50"
	if v := os.Getenv("GOFI_BENCH_COLL_HOSTS_ITERS"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("GOFI_BENCH_COLL_HOSTS_ITERS=%q: want a count from 1", v)
		}
		iters = v
	}
	args := []string{"-c", "allreduce", "-S", sizes, "-I", iters, "-x", "5"}
	bind := os.Getenv("GOFI_BENCH_COLL_HOSTS_BIND") == "1"
	nsizes := len(strings.Split(sizes, ","))
	runFor := 5 * time.Minute
	if v, err := time.ParseDuration(os.Getenv("GOFI_BENCH_COLL_HOSTS_RUN_FOR")); err == nil && v > 0 {
		runFor = v
	}
	type key struct {
		tool string
		n    int
		size int
	}
	variants := gofiVariants(t, os.Getenv("GOFI_BENCH_COLL_HOSTS_GOFI"), bin)
	dumpDir := os.Getenv("GOFI_BENCH_COLL_HOSTS_DUMP")
	if dumpDir != "" {
		var err error
		if dumpDir, err = filepath.Abs(dumpDir); err != nil {
			t.Fatalf("GOFI_BENCH_COLL_HOSTS_DUMP: %v", err)
		}
		if err := os.MkdirAll(dumpDir, 0o755); err != nil {
			t.Fatalf("GOFI_BENCH_COLL_HOSTS_DUMP: %v", err)
		}
	}
	avg, p50 := map[key][]float64{}, map[key][]float64{}
	for _, n := range ranks {
		for r := range rounds {
			// The order rotates every round: MPICH first, last and
			// between the variants in turn.
			tools := []string{"mpich"}
			for _, v := range variants {
				tools = append(tools, v.name)
			}
			k := r % len(tools)
			tools = append(tools[k:], tools[:k]...)
			for _, tool := range tools {
				// MPICH (ch4:ucx here) takes processes on hosts of the
				// same hostname for one node and would reach them through
				// System V shared memory or CMA, which namespaces do not
				// separate: NOLOCAL and UCX_TLS keep it on tcp.
				argv := append([]string{mpich}, args...)
				env := append(launchEnv(), "MPIR_CVAR_NOLOCAL=1", "UCX_TLS=tcp,self")
				if v := variantNamed(variants, tool); v != nil {
					// Sread when the two hosts' ranks outnumber the CPUs
					// they share.
					wait := "spin"
					if n > runtime.NumCPU() {
						wait = "sread"
					}
					argv = append([]string{v.bin, "coll", "-p", "tcp", "-wait", wait}, args...)
					if dumpDir != "" {
						argv = append(argv, "-dump", filepath.Join(dumpDir, fmt.Sprintf("%s.%d.%d", tool, n, r+1)))
					}
					env = append(launchEnv(), v.env...)
				}
				if bind {
					argv = append([]string{"sh", "-c", `exec taskset -c $((PMI_RANK % ` + strconv.Itoa(runtime.NumCPU()) + `)) "$@"`, "sh"}, argv...)
				}
				load := loadAvg()
				res := jobtest.RunHydraHosts(t, nt, runFor, env, n, n/2, argv...)
				rows := collRowFields.FindAllStringSubmatch(res.Stdout, -1)
				if res.Err != nil {
					// MPICH over UCX's tcp sometimes hangs after its
					// last call, its table complete: that run counts.
					// One that hangs before is left out of the medians
					// (the other rounds' count).
					if tool != "mpich" {
						t.Fatalf("%s %d ranks:\n%s", tool, n, res.Report())
					}
					if len(rows) != nsizes {
						t.Logf("%s %d ranks, round %d: left out, hung with %d of %d sizes: %v", tool, n, r+1, len(rows), nsizes, res.Err)
						continue
					}
					t.Logf("%s %d ranks, round %d: table complete, then %v", tool, n, r+1, res.Err)
				}
				place := regexp.MustCompile(`(?m)^# placement: .*$`).FindString(res.Stdout)
				var got strings.Builder
				for _, m := range rows {
					fmt.Fprintf(&got, " %s:%s/%s", m[1], m[2], m[3])
				}
				t.Logf("%s %d ranks (%d per host), round %d: load %s %s; avg/p50 us by size:%s", tool, n, n/2, r+1, load, place, got.String())
				for _, m := range rows {
					size, _ := strconv.Atoi(m[1])
					a, _ := strconv.ParseFloat(m[2], 64)
					p, _ := strconv.ParseFloat(m[3], 64)
					k := key{tool, n, size}
					avg[k] = append(avg[k], a)
					p50[k] = append(p50[k], p)
				}
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "allreduce (float32 SUM) across two hosts over tcp, medians of %d rounds, microseconds; %d CPUs\n", rounds, runtime.NumCPU())
	fmt.Fprintf(&b, "%-8s %5s %9s %10s %10s %7s %10s %10s %7s\n", "gofi", "ranks", "size", "gofi_avg", "mpich_avg", "ratio", "gofi_p50", "mpich_p50", "ratio")
	var keys []key
	for k := range avg {
		if k.tool != "mpich" {
			keys = append(keys, k)
		}
	}
	order := map[string]int{}
	for i, v := range variants {
		order[v.name] = i
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].n != keys[j].n {
			return keys[i].n < keys[j].n
		}
		if keys[i].size != keys[j].size {
			return keys[i].size < keys[j].size
		}
		return order[keys[i].tool] < order[keys[j].tool]
	})
	for _, k := range keys {
		m := key{"mpich", k.n, k.size}
		ga, ma, gp, mp := medianOf(avg[k]), medianOf(avg[m]), medianOf(p50[k]), medianOf(p50[m])
		fmt.Fprintf(&b, "%-8s %5d %9d %10.2f %10.2f %7.2f %10.2f %10.2f %7.2f\n", k.tool, k.n, k.size, ga, ma, ga/ma, gp, mp, gp/mp)
	}
	t.Logf("\n%s(ratio: gofi / MPICH; below 1: gofi faster)", b.String())
}

// gofiVariant is one gofi to measure: its name in the logs and table, its
// perftest binary and settings added to its environment.
type gofiVariant struct {
	name string
	bin  string
	env  []string
}

// gofiVariants parses GOFI_BENCH_COLL_HOSTS_GOFI (see the file comment);
// "" is the one variant "gofi" with the perftest built from this tree.
func gofiVariants(t *testing.T, spec, bin string) []gofiVariant {
	t.Helper()
	if strings.TrimSpace(spec) == "" {
		return []gofiVariant{{name: "gofi", bin: bin}}
	}
	var vs []gofiVariant
	for _, item := range strings.Split(spec, ";") {
		f := strings.Fields(item)
		if len(f) == 0 {
			continue
		}
		v := gofiVariant{name: f[0], bin: bin}
		if v.name == "mpich" || variantNamed(vs, v.name) != nil || strings.ContainsAny(v.name, "=/") {
			t.Fatalf("GOFI_BENCH_COLL_HOSTS_GOFI: bad or repeated variant name %q", v.name)
		}
		for _, x := range f[1:] {
			switch {
			case strings.HasPrefix(x, "/"):
				v.bin = x
			case strings.Contains(x, "="):
				v.env = append(v.env, x)
			default:
				t.Fatalf("GOFI_BENCH_COLL_HOSTS_GOFI: %q in variant %q is neither a binary (/...) nor KEY=VALUE", x, v.name)
			}
		}
		vs = append(vs, v)
	}
	if len(vs) == 0 {
		t.Fatalf("GOFI_BENCH_COLL_HOSTS_GOFI=%q names no variant", spec)
	}
	return vs
}

// variantNamed returns the variant called name, or nil.
func variantNamed(vs []gofiVariant, name string) *gofiVariant {
	for i := range vs {
		if vs[i].name == name {
			return &vs[i]
		}
	}
	return nil
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
