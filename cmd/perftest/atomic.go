package main

import (
	"encoding/binary"
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

// "perftest atomic": remote atomic latency and rate against a target
// process this perftest starts on this host. The target opens an
// endpoint, registers a 64-byte region (AllocMR with -alloc, so shm peers
// map it and use the processor's atomics; else RegMR on Go memory),
// prints its name and key, and then makes no gofi call at all: every
// atomic is executed without its application (tcp: its event loop; shm:
// the initiator itself on mapped memory, or the target's executor).
//
// The initiator measures on one uint64, one operation in flight, the
// latency of FetchAtomic(OpSum) ("fetch-add") and CompareAtomic(OpCSwap)
// ("cswap"), then the rate of Atomic(OpSum) with -w in flight ("rate").
// Output lines are "op median_us p99_us" and "rate ops_per_s", the format
// of benchmarks/atomic/fi_atomic_bench.c (libfabric's side), under a
// "# placement" line.

const atomicTargetArg = "-atomic-target"

func runAtomicBench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("perftest atomic", flag.ContinueOnError)
	fs.SetOutput(stderr)
	prov := fs.String("p", "shm", "`provider`: shm or tcp")
	iters := fs.Int("n", 20000, "operations timed per latency test (rate: 5x)")
	window := fs.Int("w", 64, "operations in flight for the rate test")
	alloc := fs.Bool("alloc", true, "target region from AllocMR (shm peers map it); false: RegMR on Go memory")
	spin := fs.Bool("target-spin", false, "the target polls its CQ in a loop (as libfabric's target must for its progress); default: it makes no gofi call")
	tests := fs.String("tests", "fetch-add,cswap,rate", "the `tests` to run, comma-separated (a subset isolates one for perf stat)")
	target := fs.Bool(atomicTargetArg[1:], false, "internal: be the target process")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *prov != "shm" && *prov != "tcp" {
		return usageErr(stderr, "atomic", fmt.Errorf("-p %q: want shm or tcp", *prov))
	}
	if *target {
		if err := atomicTarget(*prov, *alloc, *spin, stdout); err != nil {
			fmt.Fprintf(stderr, "perftest atomic target: %v\n", err)
			return 1
		}
		return 0
	}
	if *iters < 10 || *window < 1 {
		return usageErr(stderr, "atomic", errors.New("-n at least 10, -w at least 1"))
	}
	if err := atomicInitiator(*prov, *alloc, *spin, *iters, *window, strings.Split(*tests, ","), stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "perftest atomic: %v\n", err)
		return 1
	}
	return 0
}

// atomicEndpoint opens an endpoint with atomics on prov, its CQ bound to
// both sides.
func atomicEndpoint(prov string) (*fi.Domain, *fi.Endpoint, *fi.AV, *fi.CQ, func(), error) {
	return benchEndpoint(prov, fi.Msg|fi.RMA|fi.Atomic)
}

// benchEndpoint opens an endpoint with caps on prov, its CQ bound to both
// sides.
func benchEndpoint(prov string, caps fi.Flags) (*fi.Domain, *fi.Endpoint, *fi.AV, *fi.CQ, func(), error) {
	hints := fi.AllocInfo()
	hints.Caps = caps
	hints.FabricAttr.ProvName = prov
	node := ""
	if prov == "tcp" {
		node = "127.0.0.1"
	}
	infos, err := fi.GetInfo(fi.Version(2, 0), node, "", 0, hints)
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	var closers []func() error
	done := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i]()
		}
	}
	fail := func(err error) (*fi.Domain, *fi.Endpoint, *fi.AV, *fi.CQ, func(), error) {
		done()
		return nil, nil, nil, nil, nil, err
	}
	fab, err := fi.OpenFabric(infos[0].FabricAttr)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, fab.Close)
	dom, err := fab.OpenDomain(infos[0])
	if err != nil {
		return fail(err)
	}
	closers = append(closers, dom.Close)
	av, err := dom.OpenAV(&fi.AVAttr{Type: fi.AVTable})
	if err != nil {
		return fail(err)
	}
	closers = append(closers, av.Close)
	cq, err := dom.OpenCQ(&fi.CQAttr{Format: fi.CQFormatContext, Size: 1024})
	if err != nil {
		return fail(err)
	}
	closers = append(closers, cq.Close)
	ep, err := dom.OpenEndpoint(infos[0])
	if err != nil {
		return fail(err)
	}
	closers = append(closers, ep.Close)
	for _, err := range []error{ep.BindAV(av), ep.BindCQ(cq, fi.Transmit|fi.Recv), ep.Enable()} {
		if err != nil {
			return fail(err)
		}
	}
	return dom, ep, av, cq, done, nil
}

// atomicTarget serves as the target until stdin closes.
func atomicTarget(prov string, alloc, spin bool, stdout io.Writer) error {
	dom, ep, _, cq, done, err := atomicEndpoint(prov)
	if err != nil {
		return err
	}
	defer done()
	mr, err := announceTarget(dom, ep, alloc, 64, stdout)
	if err != nil {
		return err
	}
	defer mr.Close()
	serveTarget(cq, spin, prov)
	return nil
}

func atomicInitiator(prov string, alloc, spin bool, iters, window int, tests []string, stdout, stderr io.Writer) error {
	name, key, stop, err := startTarget([]string{"atomic", "-p", prov, "-alloc=" + strconv.FormatBool(alloc), "-target-spin=" + strconv.FormatBool(spin), atomicTargetArg}, stderr)
	if err != nil {
		return err
	}
	defer stop()
	_, ep, av, cq, done, err := atomicEndpoint(prov)
	if err != nil {
		return err
	}
	defer done()
	addrs, err := av.Insert([][]byte{name}, 0)
	if err != nil {
		return err
	}
	b := &atomicBench{ep: ep, cq: cq, dest: addrs[0], key: key}
	place := probeLocal()
	printPlacement(stdout, place, nil)
	fmt.Fprintf(stdout, "# gofi %s, target memory from %s, target %s, load %s\n", prov, map[bool]string{true: "AllocMR", false: "RegMR"}[alloc],
		targetDoes(spin), loadavg())
	io.WriteString(stdout, busyPollNote(prov, false))
	restore := b.coop.start(prov) // after the probe, which wants two Ps
	defer func() { restore() }()
	for _, op := range []string{"fetch-add", "cswap"} {
		if !slices.Contains(tests, op) {
			continue
		}
		t, err := b.latency(op, iters)
		if err != nil {
			return err
		}
		slices.Sort(t)
		fmt.Fprintf(stdout, "%s %.3f %.3f\n", op, t[len(t)/2], t[len(t)*99/100])
	}
	if slices.Contains(tests, "rate") {
		rate, err := b.rate(5*iters, window)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "rate %.0f\n", rate)
	}
	restore()
	restore = func() {}
	printPlacement(stdout, place, probeLocal())
	return nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

type atomicBench struct {
	ep   *fi.Endpoint
	cq   *fi.CQ
	dest fi.Addr
	key  uint64
	buf  [4][8]byte // operand, compare, result
	ents [16]fi.CQEntry
	coop coop
}

// reap reads completions, returning how many, or the first error.
func (b *atomicBench) reap() (int, error) {
	b.coop.poll()
	n, err := b.cq.Read(b.ents[:])
	switch {
	case n > 0:
		return n, nil
	case errors.Is(err, fi.ErrAgain):
		return 0, nil
	case errors.Is(err, fi.ErrAvail):
		ee, err := b.cq.ReadErr()
		if err != nil {
			return 0, err
		}
		return 0, ee.Err
	}
	return 0, err
}

func (b *atomicBench) latency(op string, iters int) ([]float64, error) {
	ne := binary.NativeEndian
	t := make([]float64, iters)
	warm := iters/10 + 1
	ne.PutUint64(b.buf[0][:], 1)
	for i := -warm; i < iters; i++ {
		if op == "cswap" {
			b.buf[1] = b.buf[2]
			ne.PutUint64(b.buf[0][:], ne.Uint64(b.buf[2][:])+1)
		}
		t0 := time.Now()
		for {
			var err error
			if op == "cswap" {
				err = b.ep.CompareAtomic(b.buf[0][:], 1, nil, b.buf[1][:], nil, b.buf[2][:], nil, b.dest, 0, b.key, fi.Uint64, fi.OpCSwap, nil)
			} else {
				err = b.ep.FetchAtomic(b.buf[0][:], 1, nil, b.buf[2][:], nil, b.dest, 0, b.key, fi.Uint64, fi.OpSum, nil)
			}
			if err == nil {
				break
			}
			if !errors.Is(err, fi.ErrAgain) {
				return nil, err
			}
			if _, err := b.reap(); err != nil {
				return nil, err
			}
		}
		for {
			n, err := b.reap()
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

func (b *atomicBench) rate(total, window int) (float64, error) {
	binary.NativeEndian.PutUint64(b.buf[0][:], 1)
	var t0 time.Time
	for phase := 0; phase < 2; phase++ {
		goal := total / 10
		if phase == 1 {
			goal, t0 = total, time.Now()
		}
		posted, done := 0, 0
		for done < goal {
			for posted < goal && posted-done < window {
				err := b.ep.Atomic(b.buf[0][:], 1, nil, b.dest, 0, b.key, fi.Uint64, fi.OpSum, nil)
				if errors.Is(err, fi.ErrAgain) {
					break
				}
				if err != nil {
					return 0, err
				}
				posted++
			}
			n, err := b.reap()
			if err != nil {
				return 0, err
			}
			done += n
		}
	}
	return float64(total) / time.Since(t0).Seconds(), nil
}
