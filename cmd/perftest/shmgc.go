package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gofi-dev/fi/shm"
)

// runShmGC implements "perftest shm-gc": the shm provider's ipcrm. It
// lists this user's gofi files in the shm directory ($GOFI_SHM_DIR or
// /dev/shm, or -dir) with the pid in each name, the bytes each holds and
// whether its owner is alive (the owner's lock is held), and removes the
// files of dead owners. gofi processes reap dead owners' files themselves
// when they open an endpoint; shm-gc is for when none will start soon, or
// for files the automatic reaper leaves because their pid was reused.
// A live process's files are never touched. Exit status: 0, or 1 when the
// directory cannot be read.
func runShmGC(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("perftest shm-gc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		dry   = fs.Bool("n", false, "list only: remove nothing")
		dir   = fs.String("dir", "", "shm `directory` (default $GOFI_SHM_DIR or /dev/shm)")
		quiet = fs.Bool("q", false, "print the summary line only")
	)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: perftest shm-gc [-n] [-q] [-dir directory]\n\n"+
			"Lists this user's gofi shared-memory files (name, pid in the name, bytes,\n"+
			"owner alive or dead) and removes those of dead owners, as ipcrm does for\n"+
			"SysV segments. Files of live processes are never touched.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "perftest shm-gc: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if *dir != "" {
		if err := os.Setenv(shm.DirEnv, *dir); err != nil {
			fmt.Fprintf(stderr, "perftest shm-gc: %v\n", err)
			return 1
		}
	}
	files, err := shm.Scan()
	if err != nil {
		fmt.Fprintf(stderr, "perftest shm-gc: %v\n", err)
		return 1
	}
	if !*quiet && len(files) > 0 {
		fmt.Fprintf(stdout, "%-48s %8s %10s  %s\n", "file", "pid", "bytes", "owner")
	}
	var live, dead, removed int
	var liveBytes, deadBytes, removedBytes int64
	for _, f := range files {
		state := "alive"
		switch {
		case f.Alive:
			live++
			liveBytes += f.Bytes
		default:
			dead++
			deadBytes += f.Bytes
			state = "dead"
			if !*dry {
				if shm.RemoveStale(f) {
					removed++
					removedBytes += f.Bytes
					state = "dead, removed"
				} else {
					state = "dead, kept (young temporary file, or alive again)"
				}
			}
		}
		if !*quiet {
			fmt.Fprintf(stdout, "%-48s %8d %10d  %s\n", f.Name, f.PID, f.Bytes, state)
		}
	}
	fmt.Fprintf(stdout, "%s: %d files of %s: %d alive (%d bytes), %d dead (%d bytes); removed %d (%d bytes)\n",
		shm.Dir(), len(files), shm.Prefix()+"*", live, liveBytes, dead, deadBytes, removed, removedBytes)
	return 0
}
