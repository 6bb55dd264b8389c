package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// peerProc is a perftest server this process started on this host (the
// binary re-executed). It serves on a control listener the parent opened
// and passed down, so there is no race for a port.
type peerProc struct {
	cmd  *exec.Cmd
	port int
	done chan error
	errs *prefixWriter
	// exit holds the peer's exit status once it has exited.
	exit atomic.Pointer[error]
}

// spawned is the peer this process started, while a run uses it: waits
// for completions give up as soon as it has exited (its error, printed
// on stderr, says why) rather than at their timeout.
var spawned atomic.Pointer[peerProc]

// peerExited returns a non-nil error once the spawned peer has exited.
func peerExited() error {
	p := spawned.Load()
	if p == nil {
		return nil
	}
	e := p.exit.Load()
	if e == nil {
		return nil
	}
	if *e == nil {
		return fmt.Errorf("%w: the peer exited", errPeerUnreachable)
	}
	return fmt.Errorf("%w: the peer failed (%v; its error is above)", errPeerUnreachable, *e)
}

// startPeer re-executes this binary with args as a server peer.
func startPeer(args []string, stderr io.Writer) (*peerProc, error) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("control listener for the peer: %w", err)
	}
	defer l.Close()
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		return nil, fmt.Errorf("control listener for the peer: %w", err)
	}
	defer f.Close()
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to start the peer: %w", err)
	}
	p := &peerProc{port: l.Addr().(*net.TCPAddr).Port, done: make(chan error, 1),
		errs: &prefixWriter{w: stderr, prefix: "perftest peer: "}}
	p.cmd = exec.Command(exe, args...)
	p.cmd.ExtraFiles = []*os.File{f} // fd 3
	p.cmd.Env = append(os.Environ(), peerFDEnv+"=3")
	p.cmd.Stdout = io.Discard
	p.cmd.Stderr = p.errs
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the peer: %w", err)
	}
	go func() {
		err := p.cmd.Wait()
		p.exit.Store(&err)
		p.done <- err
	}()
	return p, nil
}

// wait waits for the peer to exit, killing it after timeout.
func (p *peerProc) wait(timeout time.Duration) error {
	select {
	case err := <-p.done:
		p.errs.flush()
		return err
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-p.done
		p.errs.flush()
		return errors.New("peer did not exit in time; killed")
	}
}

// kill stops the peer at once (after a failure on our side).
func (p *peerProc) kill() {
	p.cmd.Process.Kill()
	<-p.done
	p.errs.flush()
}

// prefixWriter prefixes each line a peer writes to stderr.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	part   []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.part = append(p.part, b...)
	for {
		i := strings.IndexByte(string(p.part), '\n')
		if i < 0 {
			break
		}
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.part[:i])
		p.part = p.part[i+1:]
	}
	return len(b), nil
}

func (p *prefixWriter) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.part) > 0 {
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.part)
		p.part = nil
	}
}

// fiPingpong runs libfabric's fi_pingpong (server and client) for one
// provider and size and returns the client's row.
func fiPingpong(bin, prov string, tagged bool, size, iters int, timeout time.Duration) (measure, error) {
	port, err := freePort()
	if err != nil {
		return measure{}, err
	}
	common := []string{"-p", prov, "-e", "rdm", "-I", fmt.Sprint(iters), "-S", fmt.Sprint(size)}
	if tagged {
		common = append(common, "-m", "tagged")
	}
	env := fiEnv()
	srv := exec.Command(bin, append(common, "-B", fmt.Sprint(port))...)
	srv.Env = env
	var srvOut strings.Builder
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return measure{}, fmt.Errorf("starting %s: %w", bin, err)
	}
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Wait() }()
	defer func() {
		select {
		case <-srvDone:
		case <-time.After(timeout): // the client is done: the server follows at once
			srv.Process.Kill()
			<-srvDone
		}
	}()
	// fi_pingpong has no idle timeout of ours: bound the whole run, allowing
	// for a loaded machine (fi_pingpong busy-polls: 10 ms per transfer and
	// more when the peer is not scheduled).
	limit := timeout + time.Duration(iters)*20*time.Millisecond
	deadline := time.Now().Add(timeout)
	for {
		cli := exec.Command(bin, append(common, "-P", fmt.Sprint(port), "127.0.0.1")...)
		cli.Env = env
		var out, errb strings.Builder
		cli.Stdout, cli.Stderr = &out, &errb
		done := make(chan error, 1)
		cli.Start()
		go func() { done <- cli.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(limit):
			cli.Process.Kill()
			<-done
			srv.Process.Kill()
			return measure{}, fmt.Errorf("fi_pingpong client did not finish within %v", limit)
		}
		if err == nil {
			m, perr := parsePPRow(out.String(), size)
			select { // the server exits after the client
			case <-srvDone:
				srvDone <- nil // for the deferred wait
			case <-time.After(timeout):
			}
			m.switches = addSwitches(involuntary(cli.ProcessState), involuntary(srv.ProcessState))
			return m, perr
		}
		if strings.Contains(errb.String(), "failed to connect") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // server not listening yet
			continue
		}
		srv.Process.Kill()
		return measure{}, fmt.Errorf("fi_pingpong client: %v: %s%s", err, errb.String(), srvOut.String())
	}
}

// fiEnv is the environment for fi_pingpong: an empty FI_PROVIDER, which
// gofi reads as "no filter", would make libfabric find no provider.
func fiEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if e != "FI_PROVIDER=" {
			env = append(env, e)
		}
	}
	return env
}

// freePort asks the kernel for a free TCP port for fi_pingpong's control
// connection.
func freePort() (int, error) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// measure is one run's figures for a size: microseconds per transfer and
// MB/s, and switches: the involuntary context switches of the run's two
// processes over their lives (-1: not known), the sign of a shared CPU.
type measure struct {
	usec, mbps float64
	switches   int64
}

// involuntary returns the involuntary context switches of an exited
// process (the kernel counts one each time another thread took the CPU
// from it, and each sched_yield that ran another thread), or -1.
func involuntary(ps *os.ProcessState) int64 {
	if ps == nil {
		return -1
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Nivcsw
	}
	return -1
}

// selfInvoluntary returns this process's involuntary context switches so
// far (all its threads), or -1.
func selfInvoluntary() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return ru.Nivcsw
}

// addSwitches sums two processes' counts (-1 when either is unknown).
func addSwitches(a, b int64) int64 {
	if a < 0 || b < 0 {
		return -1
	}
	return a + b
}

// parsePPRow reads the figures for size from fi_pingpong's output (its own
// usec/xfer and MB/sec columns: its time column is too coarse to
// recompute them).
func parsePPRow(out string, size int) (measure, error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 8 || f[0] != sizeStr(int64(size)) {
			continue
		}
		var m measure
		if _, err := fmt.Sscanf(f[5]+" "+f[6], "%f %f", &m.mbps, &m.usec); err != nil {
			continue
		}
		return m, nil
	}
	return measure{}, fmt.Errorf("no row for size %d in fi_pingpong's output:\n%s", size, out)
}
