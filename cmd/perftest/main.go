// Command perftest is gofi's tool: discovery (the info subcommand, like
// libfabric's fi_info) and, in later issues, latency and bandwidth runs.
//
// Usage:
//
//	perftest <subcommand> [flags]
//
// Run without arguments it lists the subcommands.
package main

import (
	"fmt"
	"io"
	"os"
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
	{"info", "list fabric providers and their attributes, like libfabric's fi_info", runInfo},
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: perftest <subcommand> [flags]\n\nsubcommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-8s %s\n", "help", "show this list")
	fmt.Fprintf(w, "\nRun 'perftest <subcommand> -h' for the subcommand's flags.\n")
}

// run dispatches to a subcommand and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return 0
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
