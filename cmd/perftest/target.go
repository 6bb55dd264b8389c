package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gofi-dev/fi"
)

// The one-sided benchmarks (perftest rma, perftest atomic) run against a
// target process of this binary: it registers a region, prints
// "target <hex name> <key>" and then makes no gofi call (or, with
// -target-spin, only polls its CQ) until its stdin closes.

// announceTarget registers a region of size bytes for remote reads and
// writes (AllocMR with alloc, else RegMR on Go memory under key 7) and
// prints the target line. The caller closes the MR.
func announceTarget(dom *fi.Domain, ep *fi.Endpoint, alloc bool, size int, stdout io.Writer) (*fi.MR, error) {
	var mr *fi.MR
	var err error
	if alloc {
		mr, err = dom.AllocMR(size, fi.RemoteRead|fi.RemoteWrite)
	} else {
		mr, err = dom.RegMR(make([]byte, size), fi.RemoteRead|fi.RemoteWrite, 0, 7, 0)
	}
	if err != nil {
		return nil, err
	}
	name, err := ep.Name()
	if err != nil {
		mr.Close()
		return nil, err
	}
	fmt.Fprintf(stdout, "target %s %d\n", hex.EncodeToString(name), mr.Key())
	return mr, nil
}

// startTarget runs this binary with args as the target and reads its
// target line. stop closes the target's stdin and waits for it to exit.
func startTarget(args []string, stderr io.Writer) (name []byte, key uint64, stop func(), err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, 0, nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, 0, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, nil, err
	}
	stop = func() {
		in.Close()
		_ = cmd.Wait()
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 3 || f[0] != "target" {
		stop()
		return nil, 0, nil, fmt.Errorf("target did not start (%q, %v)", line, err)
	}
	if name, err = hex.DecodeString(f[1]); err == nil {
		key, err = strconv.ParseUint(f[2], 10, 64)
	}
	if err != nil {
		stop()
		return nil, 0, nil, err
	}
	return name, key, stop, nil
}

// serveTarget returns when stdin closes. Until then the target makes no
// gofi call, or with spin polls cq in a loop (as a libfabric target must
// for its RMA to progress), over shm with one P and the periodic yield
// (spinsched.go).
func serveTarget(cq *fi.CQ, spin bool, prov string) {
	if !spin {
		_, _ = io.Copy(io.Discard, os.Stdin)
		return
	}
	var c coop
	defer c.start(prov)()
	var stop atomic.Bool
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop.Store(true)
	}()
	var e [8]fi.CQEntry
	for i := 0; ; i++ {
		c.poll()
		_, _ = cq.Read(e[:])
		if i&1023 == 0 && stop.Load() {
			return
		}
	}
}

// targetDoes says what the target does meanwhile, for the header lines.
func targetDoes(spin bool) string {
	if spin {
		return "polling its CQ"
	}
	return "making no gofi call"
}
