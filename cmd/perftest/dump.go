package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// latency -dump: every timed round trip with its start on the kernel's
// CLOCK_MONOTONIC, the clock `perf record -k CLOCK_MONOTONIC` stamps its
// events with, so that each slow round trip can be matched with what the
// kernel ran on the CPUs during it (benchmarks/tailholes.sh). The stamp
// costs nothing more per round trip: the loop's own time.Now reading is
// kept, and turned into CLOCK_MONOTONIC through one pair of readings
// taken at start.

// monoEpoch is a time.Now reading and the CLOCK_MONOTONIC nanoseconds it
// corresponds to (to within monoErr): t.Sub(monoEpoch) is exact (both
// are the runtime's monotonic clock), so a reading t is at
// monoEpochNs + t.Sub(monoEpoch) on CLOCK_MONOTONIC.
var monoEpoch, monoEpochNs, monoErr = monoPair()

// monoPair brackets a time.Now between two clock_gettime system calls and
// keeps the narrowest of a few tries (the system call is the error).
func monoPair() (time.Time, int64, time.Duration) {
	var best time.Time
	var bestNs int64
	bestErr := time.Duration(1<<63 - 1)
	for range 8 {
		var a, b unix.Timespec
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &a) != nil {
			break
		}
		t := time.Now()
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &b) != nil {
			break
		}
		if e := time.Duration(b.Nano()-a.Nano()) / 2; e < bestErr {
			best, bestNs, bestErr = t, a.Nano()+int64(e), e
		}
	}
	return best, bestNs, bestErr
}

// writeDump appends one size's round trips to w: per line the size, the
// start on CLOCK_MONOTONIC in ns and the half round trip in ns, in the
// order they ran. starts are offsets from monoEpoch.
func writeDump(w io.Writer, size int, starts, lat []time.Duration) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	for i := range lat {
		fmt.Fprintf(bw, "%d %d %d\n", size, monoEpochNs+int64(starts[i]), int64(lat[i]))
	}
	return bw.Flush()
}

// openDump creates the -dump file with its header line.
func openDump(path string) (*os.File, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-dump: %w", err)
	}
	if _, err := fmt.Fprintf(f, "# perftest latency -dump: size, start (CLOCK_MONOTONIC ns, +-%d ns), half round trip (ns)\n", monoErr.Nanoseconds()); err != nil {
		f.Close()
		return nil, fmt.Errorf("-dump: %w", err)
	}
	return f, nil
}
