// Command perftest measures gofi: run without arguments it starts its own
// peer process on this host and prints the latency and bandwidth of the
// shm and tcp providers next to Go's net package; its subcommands are
// libfabric's fi_pingpong (pingpong, same flags and output), latency
// percentiles, streaming bandwidth, message rate, collective latency
// as the OSU micro-benchmarks measure it (coll), the server for runs
// between hosts, plots of -json results, and fi_info (info).
//
// Usage:
//
//	perftest [-compare] [-json] [-plot out.svg]
//	perftest <subcommand> [flags]
//
// "perftest help" lists the subcommands.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// command is one perftest subcommand. run parses args (without the
// subcommand name), writes to stdout/stderr and returns the exit status.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands lists the subcommands in the order usage shows them.
var commands = []command{
	{"pingpong", "ping-pong latency and bandwidth, flags and output of libfabric's fi_pingpong", runPingpong},
	{"latency", latencyKind.summary, testRunner(latencyKind)},
	{"bw", bwKind.summary, testRunner(bwKind)},
	{"msgrate", msgrateKind.summary, testRunner(msgrateKind)},
	{"serve", "the server side of latency, bw and msgrate for runs between hosts", runServe},
	{"coll", "collective latency per size (barrier, bcast, allreduce, allgather, alltoall), as the OSU micro-benchmarks measure MPI's", runColl},
	{"atomic", "remote atomic latency (fetch-add, cswap) and rate against a target process that makes no gofi call", runAtomicBench},
	{"rma", "RMA write and read latency and bandwidth against a target process that makes no gofi call", runRMABench},
	{"place", "the placement: cache-line round trip between two CPUs (and, with -tail, a bare flag ping-pong's tail)", runPlace},
	{"plot", "draw -json result files over each other (latency and bandwidth against size)", runPlot},
	{"info", "list fabric providers and their attributes, like libfabric's fi_info", runInfo},
	{"shm-gc", "list gofi's shared-memory files and remove those of dead processes (like ipcrm)", runShmGC},
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: perftest [-compare] [-json] [-plot file.svg]   latency and bandwidth sweep: shm, tcp, Go net\n       perftest <subcommand> [flags]\n\nsubcommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-8s %s\n", "help", "show this list")
	fmt.Fprintf(w, "\nRun 'perftest <subcommand> -h' for the subcommand's flags.\n")
}

func isHelp(a string) bool {
	switch a {
	case "-h", "-help", "--help":
		return true
	}
	return false
}

// run dispatches to a subcommand and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if st, ok := runLaunched(args, stdout, stderr); ok { // a rank of a job (launched.go)
		return st
	}
	if len(args) == 0 || (strings.HasPrefix(args[0], "-") && !isHelp(args[0])) {
		return runSweep(args, stdout, stderr)
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "perftest: unknown subcommand %q\n\n", args[0])
	usage(stderr)
	return 2
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
