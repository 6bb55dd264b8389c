package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runBin runs the binary with a hard deadline, so a hang fails the test
// instead of stalling it.
func runBin(t *testing.T, bin string, limit time.Duration, env []string, args ...string) (int, string, string) {
	t.Helper()
	rc, out, errs, err := runBinE(bin, limit, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	return rc, out, errs
}

// runBinE is runBin for goroutines other than the test's: it reports a
// hang or a failure to start as an error.
func runBinE(bin string, limit time.Duration, env []string, args ...string) (int, string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(cmd.Environ(), "FI_PROVIDER=")
	cmd.Env = append(cmd.Env, env...)
	err := cmd.Run()
	if ctx.Err() != nil {
		return -1, out.String(), errb.String(), fmt.Errorf("perftest %v did not finish within %v\nstdout:\n%s\nstderr:\n%s", args, limit, out.String(), errb.String())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String(), nil
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String(), nil
	}
	return -1, out.String(), errb.String(), fmt.Errorf("run %v: %v", args, err)
}

// testPort returns a TCP port that was free a moment ago.
func testPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// fiPingpongHeader is fi_pingpong's header line, byte for byte.
const fiPingpongHeader = "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec"

// ppRowRE matches one fi_pingpong result row.
var ppRowRE = regexp.MustCompile(`^(\d+(\.\d)?[kmg]?) +(\d+[kmb]?) +=(\d+[kmb]?) +(\d+(\.\d)?[kmg]?) +\d+\.\d\ds +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d$`)

// serverAndClient runs a pingpong server and client with the same flags.
func serverAndClient(t *testing.T, bin string, flags ...string) (srvRC int, srvOut string, cliRC int, cliOut, cliErr string) {
	t.Helper()
	port := testPort(t)
	type res struct {
		rc       int
		out, err string
		runErr   error
	}
	done := make(chan res, 1)
	go func() {
		rc, o, e, err := runBinE(bin, 60*time.Second, nil, append([]string{"pingpong", "-B", port}, flags...)...)
		done <- res{rc, o, e, err}
	}()
	cliRC, cliOut, cliErr = runBin(t, bin, 60*time.Second, nil, append(append([]string{"pingpong", "-P", port}, flags...), "127.0.0.1")...)
	s := <-done
	if s.runErr != nil {
		t.Fatalf("server: %v", s.runErr)
	}
	if s.rc != 0 {
		t.Logf("server stderr:\n%s", s.err)
	}
	return s.rc, s.out, cliRC, cliOut, cliErr
}

func TestPingpong_ServerAndClientPrintFiPingpongColumns(t *testing.T) {
	bin := buildPerftest(t)
	cases := []struct {
		name  string
		flags []string
		sizes []string
	}{
		{"one size", []string{"-p", "shm", "-e", "rdm", "-I", "50", "-S", "8"}, []string{"8"}},
		{"default sizes, tagged, checked", []string{"-p", "shm", "-I", "5", "-m", "tagged", "-c"}, []string{"64", "256", "1k", "4k", "64k", "1m"}},
		{"flags after the node", []string{"-p", "shm", "-I", "5", "-S", "4k"}, []string{"4k"}},
		{"linked shm+tcp, checked", []string{"-p", "shm+tcp", "-I", "5", "-S", "all", "-c"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srvRC, srvOut, cliRC, cliOut, cliErr := serverAndClient(t, bin, c.flags...)
			if srvRC != 0 || cliRC != 0 {
				t.Fatalf("server exit %d, client exit %d\nclient stderr:\n%s", srvRC, cliRC, cliErr)
			}
			if !placementLine.MatchString(cliErr) {
				t.Fatalf("client on this host: no placement line on stderr:\n%s", cliErr)
			}
			for side, out := range map[string]string{"server": srvOut, "client": cliOut} {
				lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
				if lines[0] != fiPingpongHeader {
					t.Fatalf("%s header %q, want fi_pingpong's %q", side, lines[0], fiPingpongHeader)
				}
				if c.sizes == nil {
					continue // any sizes; the run itself is the test
				}
				if len(lines)-1 != len(c.sizes) {
					t.Fatalf("%s: %d rows, want %d:\n%s", side, len(lines)-1, len(c.sizes), out)
				}
				for i, l := range lines[1:] {
					m := ppRowRE.FindStringSubmatch(l)
					if m == nil || m[1] != c.sizes[i] || m[3] != m[4] {
						t.Fatalf("%s row %q does not match fi_pingpong's columns for size %s", side, l, c.sizes[i])
					}
				}
			}
		})
	}
}

func TestPingpong_FormatsLikeShowPerf(t *testing.T) {
	// fi_pingpong -S 8 -I 1000 printed exactly this for 3.80 s.
	r := ppRow{size: 8, sent: 1000, acked: 1000, elapsed: 3804320 * time.Microsecond}
	want := "8       1k      =1k      15k         3.80s      0.00    1902.16       0.00\n"
	if got := r.String(); got != want {
		t.Fatalf("row\n%q\nwant\n%q", got, want)
	}
	if got := ppHeader(); got != fiPingpongHeader+"\n" {
		t.Fatalf("header %q", got)
	}
	for _, c := range []struct {
		n    int64
		size string
		cnt  string
	}{{0, "0", "0"}, {1023, "1023", "1k"}, {1536, "1.5k", "1k"}, {10 << 10, "10k", "10k"}, {1 << 20, "1m", "1m"}, {6 << 20, "6m", "6m"}, {1e9, "953m", "1b"}} {
		if s := sizeStr(c.n); s != c.size {
			t.Errorf("sizeStr(%d) = %q, want %q", c.n, s, c.size)
		}
		if s := cntStr(c.n); s != c.cnt {
			t.Errorf("cntStr(%d) = %q, want %q", c.n, s, c.cnt)
		}
	}
}

func TestPingpong_SizesLikeFiPingpong(t *testing.T) {
	all := ppSizes(&ppOpts{size: -1, all: true}, ppMaxData)
	if all[0] != 0 || all[1] != 1 || all[2] != 2 || all[3] != 3 || all[len(all)-1] != 6<<20 || all[len(all)-2] != 4<<20 {
		t.Fatalf("-S all sizes %v", all)
	}
	def := ppSizes(&ppOpts{size: -1}, ppMaxData)
	if len(def) != 6 || def[0] != 64 || def[5] != 1<<20 {
		t.Fatalf("default sizes %v", def)
	}
	if one := ppSizes(&ppOpts{size: 12}, 12); len(one) != 1 || one[0] != 12 {
		t.Fatalf("-S 12 sizes %v", one)
	}
}

func TestPingpong_ErrorsExitNonZero(t *testing.T) {
	bin := buildPerftest(t)
	cases := []struct {
		name   string
		args   []string
		rc     int
		stderr string
	}{
		{"unreachable server times out", []string{"pingpong", "-p", "shm", "-timeout", "1s", "-P", testPort(t), "127.0.0.1"}, 3, "peer unreachable"},
		{"unknown host", []string{"pingpong", "-p", "shm", "-timeout", "1s", "no-such-host.invalid"}, 3, "peer unreachable"},
		{"unknown provider", []string{"pingpong", "-p", "verbs", "127.0.0.1"}, 61, "provider not available"},
		{"message endpoints", []string{"pingpong", "-p", "shm", "-e", "msg", "127.0.0.1"}, 61, "FI_EP_RDM only"},
		{"bad size", []string{"pingpong", "-S", "eight"}, 2, `size "eight"`},
		{"bad endpoint type", []string{"pingpong", "-e", "rdma"}, 2, "unknown endpoint type"},
		{"bad mode", []string{"pingpong", "-m", "rma"}, 2, "want msg or tagged"},
		{"bad port", []string{"pingpong", "-B", "70000"}, 2, "not a port number"},
		{"negative settle", []string{"pingpong", "-settle", "-1ms"}, 2, "-settle -1ms: negative"},
		{"bad flag", []string{"pingpong", "-Z"}, 2, "flag provided but not defined: -Z"},
		{"two nodes", []string{"pingpong", "a", "b"}, 2, `unexpected argument "b"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc, out, errs := runBin(t, bin, 30*time.Second, nil, c.args...)
			if rc != c.rc || !strings.Contains(errs, c.stderr) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)\nstdout:\n%s", rc, c.rc, errs, c.stderr, out)
			}
		})
	}
}

// TestPingpong_TCPRunsOrSaysWhy: until the tcp provider opens endpoints,
// asking for it fails at once with a clear error; once it does, the same
// command runs.
func TestPingpong_TCPRunsOrSaysWhy(t *testing.T) {
	bin := buildPerftest(t)
	srvRC, _, cliRC, cliOut, cliErr := serverAndClient(t, bin, "-p", "tcp", "-I", "20", "-S", "64", "-timeout", "5s")
	if cliRC == 0 && srvRC == 0 {
		if !strings.HasPrefix(cliOut, fiPingpongHeader) {
			t.Fatalf("tcp output:\n%s", cliOut)
		}
		return
	}
	if !strings.Contains(cliErr, "provider not available") || !strings.Contains(cliErr, "tcp") {
		t.Fatalf("tcp failed (server %d, client %d) without saying the provider is unavailable:\n%s", srvRC, cliRC, cliErr)
	}
}
