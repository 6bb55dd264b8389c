package main

// perftest under a launcher: "mpiexec.hydra -n 2 perftest pingpong", "srun
// -n 2 --mpi=pmi2 perftest latency", torchrun's environment. Package
// launch says which rank this process is. With two ranks, rank 1 plays
// the peer perftest would otherwise start itself (the pingpong server, or
// perftest serve) on a control port it publishes through the job, and
// rank 0 runs the subcommand against it, printing exactly the table the
// self-spawning run prints. With more ranks, multi.go runs all pairs at
// once, the way OSU's osu_multi_lat and osu_mbw_mr do. Only rank 0
// prints results.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"

	"github.com/gofi-dev/fi/launch"
)

// launchedListener, when set, is the control listener rank 1 serves on:
// listenCtrl returns it as if the parent had passed it down.
var launchedListener net.Listener

// launchedPeer, when set, is where rank 1 serves: runPlansHooks dials it
// instead of starting a peer.
var launchedPeer struct {
	node string
	port int
}

// launchedActive is set while runLaunched runs a subcommand.
var launchedActive bool

// launcherEnv lists the variables a launcher sets; without any of them
// perftest does not look for a job at all.
var launcherEnv = []string{"PMI_FD", "PMI_PORT", "RANK", "WORLD_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"}

// ctrlInfo is what rank 1 publishes: where its control listener is.
type ctrlInfo struct {
	IPs  []string `json:"ips"`  // its interface addresses, loopback last
	Port int      `json:"port"` // the control port
	Host string   `json:"host"` // its host identity (kernel and /dev/shm)
}

// runLaunched runs a measuring subcommand as one rank of a job. It
// returns false when the process is not part of a job of two or more
// ranks (perftest then runs as usual).
func runLaunched(args []string, stdout, stderr io.Writer) (int, bool) {
	if launchedActive {
		return 0, false // the subcommand itself, run from here
	}
	sub := ""
	if len(args) > 0 && !isHelp(args[0]) && args[0] != "" && args[0][0] != '-' {
		sub = args[0]
	}
	switch sub {
	case "", "pingpong", "latency", "bw", "msgrate":
	default:
		return 0, false
	}
	for _, a := range args {
		if isHelp(a) {
			return 0, false
		}
	}
	found := false
	for _, v := range launcherEnv {
		if os.Getenv(v) != "" {
			found = true
		}
	}
	if !found {
		return 0, false
	}
	launchedActive = true
	defer func() { launchedActive = false }()
	job, err := launch.Init()
	if err != nil {
		fmt.Fprintf(stderr, "perftest: %v\n", err)
		return 1, true
	}
	if job.Size() == 1 {
		job.Finalize()
		return 0, false
	}
	name := sub
	if name == "" {
		name = "perftest"
	} else {
		name = "perftest " + sub
	}
	st := 0
	if job.Size() > 2 {
		st = runMulti(job, sub, args, stdout, stderr)
	} else {
		st = runPair(job, sub, args, stdout, stderr)
	}
	if st != 0 {
		// A failed rank leaves the others waiting: end the job now, with
		// the status, rather than after their timeouts.
		job.Abort(st, fmt.Sprintf("%s failed on rank %d", name, job.Rank()))
	}
	if err := job.Finalize(); err != nil {
		fmt.Fprintf(stderr, "perftest: rank %d: %v\n", job.Rank(), err)
		return 1, true
	}
	return 0, true
}

// runPair runs sub between rank 0 (the client, which prints) and rank 1
// (the peer).
func runPair(job *launch.Job, sub string, args []string, stdout, stderr io.Writer) int {
	rest := args
	if sub != "" {
		rest = args[1:]
	}
	for _, a := range rest {
		if a == "-compare" || a == "--compare" {
			fmt.Fprintf(stderr, "perftest: -compare runs both sides in this process and its own peer: run it without a launcher\n")
			return 2
		}
	}
	const key = "perftest.ctrl"
	if job.Rank() == 1 {
		l, err := net.Listen("tcp4", ":0")
		if err != nil {
			fmt.Fprintf(stderr, "perftest: rank 1: control listener: %v\n", err)
			return 1
		}
		ci := ctrlInfo{IPs: localIPs(), Port: l.Addr().(*net.TCPAddr).Port, Host: hostIdentity()}
		b, _ := json.Marshal(ci)
		if err := job.Put(key, b); err != nil {
			fmt.Fprintf(stderr, "perftest: rank 1: %v\n", err)
			return 1
		}
		if err := job.Fence(); err != nil {
			fmt.Fprintf(stderr, "perftest: rank 1: %v\n", err)
			return 1
		}
		launchedListener = l
		defer func() { launchedListener = nil }()
		// Rank 0 prints the table and the placement; rank 1 only errors.
		errs := &dropLines{w: stderr, prefix: "# placement"}
		defer errs.flush()
		if sub == "pingpong" {
			return runPingpong(rest, io.Discard, errs) // the server
		}
		timeout := "10s"
		for i, a := range rest {
			if (a == "-timeout" || a == "--timeout") && i+1 < len(rest) {
				timeout = rest[i+1]
			}
		}
		return runServe([]string{"-timeout", timeout}, io.Discard, errs)
	}

	if err := job.Fence(); err != nil {
		fmt.Fprintf(stderr, "perftest: rank 0: %v\n", err)
		return 1
	}
	b, err := job.Get(1, key)
	if err != nil {
		fmt.Fprintf(stderr, "perftest: rank 0: %v\n", err)
		return 1
	}
	var ci ctrlInfo
	if err := json.Unmarshal(b, &ci); err != nil || ci.Port <= 0 || ci.Port > 65535 || len(ci.IPs) == 0 {
		fmt.Fprintf(stderr, "perftest: rank 0: rank 1 published a bad control address %q\n", b)
		return 1
	}
	sameHost := ci.Host == hostIdentity()
	node := ci.IPs[0]
	if sameHost {
		node = "127.0.0.1"
	}
	port := strconv.Itoa(ci.Port)
	switch sub {
	case "pingpong":
		return runPingpong(append(append([]string(nil), rest...), "-P", port, node), stdout, stderr)
	case "latency", "bw", "msgrate":
		return run(append(append([]string{sub}, rest...), "-P", port, node), stdout, stderr)
	}
	// The default sweep: shm only when both ranks share a host.
	launchedPeer.node, launchedPeer.port = node, ci.Port
	defer func() { launchedPeer.node, launchedPeer.port = "", 0 }()
	if !sameHost {
		saved := sweepProvs
		sweepProvs = []string{"tcp", netProv}
		defer func() { sweepProvs = saved }()
	}
	return runSweep(rest, stdout, stderr)
}

// localIPs lists this host's IPv4 interface addresses, loopback last.
func localIPs() []string {
	var up, lo []string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.To4() == nil {
			continue
		}
		if ipn.IP.IsLoopback() {
			lo = append(lo, ipn.IP.String())
		} else {
			up = append(up, ipn.IP.String())
		}
	}
	return append(up, lo...)
}

// hostIdentity names what processes that can share memory have in
// common: the kernel (boot id) and the /dev/shm file system.
func hostIdentity() string {
	var st syscall.Stat_t
	dev := uint64(0)
	if syscall.Stat("/dev/shm", &st) == nil {
		dev = uint64(st.Dev)
	}
	return fmt.Sprintf("%s/%x", bootID(), dev)
}

// dropLines passes lines through to w except those starting with prefix.
type dropLines struct {
	w      io.Writer
	prefix string
	buf    []byte
}

func (d *dropLines) Write(p []byte) (int, error) {
	d.buf = append(d.buf, p...)
	for {
		i := bytes.IndexByte(d.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := d.buf[:i+1]
		if !bytes.HasPrefix(line, []byte(d.prefix)) {
			d.w.Write(line)
		}
		d.buf = d.buf[i+1:]
	}
}

// flush writes a last unterminated line.
func (d *dropLines) flush() {
	if len(d.buf) > 0 && !bytes.HasPrefix(d.buf, []byte(d.prefix)) {
		d.w.Write(d.buf)
	}
	d.buf = nil
}
