package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/gofi-dev/fi/internal/jobtest"
)

func TestRun_HelpPrintsUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"help"}, &out, &errb); rc != 0 {
		t.Fatalf("exit %d", rc)
	}
	if !strings.Contains(out.String(), "subcommands:") || !strings.Contains(out.String(), "  info ") {
		t.Fatalf("usage does not list subcommands:\n%s", out.String())
	}
}

func TestRun_UnknownSubcommandFails(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"bogus"}, &out, &errb); rc != 2 || !strings.Contains(errb.String(), `unknown subcommand "bogus"`) {
		t.Fatalf("exit %d, stderr %q", rc, errb.String())
	}
}

// The binary is built once per test run, into a temporary directory that
// TestMain removes.
var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	rc := m.Run()
	jobtest.StopSlurm() // the one-node Slurm of launched_test.go, if started
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(rc)
}

// buildPerftest builds the binary (once) and returns its path.
func buildPerftest(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH")
	}
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "perftest-test-"); buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "perftest")
		cmd := exec.Command(gobin, "build", "-o", buildBin, ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// exitCode runs bin with args and returns its exit status and output.
func exitCode(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(cmd.Environ(), "FI_PROVIDER=")
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	}
	t.Fatalf("run %v: %v", args, err)
	return 0, "", ""
}

var (
	listLine    = regexp.MustCompile(`^([a-z0-9_;+]+:|    version: \d+\.\d+)$`)
	shortFields = []string{"provider", "fabric", "domain", "version", "type", "protocol"}
)

func TestPerftestBinary_InfoLikeFiInfo(t *testing.T) {
	bin := buildPerftest(t)
	cases := []struct {
		name   string
		args   []string
		rc     int
		stdout []string // substrings
		stderr string
	}{
		{"help: usage, exit 0", []string{"help"}, 0, []string{"subcommands:", "info", "pingpong", "latency"}, ""},
		{"list providers", []string{"info", "-l"}, 0, []string{"shm:\n    version: 200.0\n", "tcp:\n    version: 200.0\n", "shm+tcp:\n    version: 200.0\n"}, ""},
		{"linked provider", []string{"info", "-p", "shm+tcp", "-v"}, 0, []string{"prov_name: shm+tcp\n", "FI_LOCAL_COMM, FI_REMOTE_COMM"}, ""},
		{"caps local and remote select shm+tcp first", []string{"info", "-c", "FI_MSG|FI_LOCAL_COMM|FI_REMOTE_COMM"}, 0, []string{"provider: shm+tcp\n"}, ""},
		{"tcp short", []string{"info", "-p", "tcp"}, 0, []string{"provider: tcp\n    fabric: ", "    type: FI_EP_RDM\n"}, ""},
		{"tcp verbose", []string{"info", "-p", "tcp", "-v"}, 0, []string{"---\nfi_info:\n", "    fi_fabric_attr:\n        name: 127.0.0.1/32\n"}, ""},
		{"layered provider name", []string{"info", "-p", "ofi_rxm;tcp", "-f", "127.0.0.1/32"}, 0, []string{"provider: tcp\n    fabric: 127.0.0.1/32\n    domain: "}, ""},
		{"caps select shm first", []string{"info", "-c", "FI_MSG|FI_TAGGED|FI_LOCAL_COMM"}, 0, []string{"provider: shm\n"}, ""},
		{"node and service", []string{"info", "-p", "tcp", "-n", "127.0.0.1", "-s", "7471", "-v"}, 0, []string{"dest_addr: fi_sockaddr_in://127.0.0.1:7471"}, ""},
		{"FI_ADDR_STR node", []string{"info", "-n", "fi_sockaddr_in://127.0.0.1:7471", "-v"}, 0, []string{"dest_addr: fi_sockaddr_in://127.0.0.1:7471"}, ""},
		{"endpoint type", []string{"info", "-t", "FI_EP_RDM", "-p", "shm"}, 0, []string{"provider: shm\n"}, ""},
		{"no match exits ENODATA", []string{"info", "-t", "FI_EP_MSG"}, 61, nil, "No data available"},
		{"unknown provider exits ENODATA", []string{"info", "-p", "verbs"}, 61, nil, "No data available"},
		{"bad capability exits EINVAL", []string{"info", "-c", "FI_BOGUS"}, 22, nil, "unrecognized capability: FI_BOGUS"},
		{"bad endpoint type exits EINVAL", []string{"info", "-t", "FI_EP_BOGUS"}, 22, nil, "unrecognized endpoint type"},
		{"bad flag exits 2", []string{"info", "-Z"}, 2, nil, "flag provided but not defined: -Z"},
		{"stray argument exits 2", []string{"info", "extra"}, 2, nil, `unexpected argument "extra"`},
		{"service with FI_ADDR_STR node exits EINVAL", []string{"info", "-n", "fi_shm://a", "-s", "1"}, 22, nil, "must be empty"},
		{"unknown subcommand exits 2", []string{"bogus"}, 2, nil, "unknown subcommand"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc, out, errs := exitCode(t, bin, c.args...)
			if rc != c.rc {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", rc, c.rc, out, errs)
			}
			for _, s := range c.stdout {
				if !strings.Contains(out, s) {
					t.Fatalf("stdout lacks %q:\n%s", s, out)
				}
			}
			if c.stderr != "" && !strings.Contains(errs, c.stderr) {
				t.Fatalf("stderr lacks %q:\n%s", c.stderr, errs)
			}
		})
	}

	// the short layout has fi_info's six fields per entry, in its order
	_, out, _ := exitCode(t, bin, "info")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines)%len(shortFields) != 0 {
		t.Fatalf("short output has %d lines, not a multiple of %d", len(lines), len(shortFields))
	}
	for k, l := range lines {
		key, _, _ := strings.Cut(strings.TrimSpace(l), ":")
		if key != shortFields[k%len(shortFields)] {
			t.Fatalf("line %d %q: want field %q", k, l, shortFields[k%len(shortFields)])
		}
	}
	// -l has fi_info -l's shape
	_, out, _ = exitCode(t, bin, "info", "-l")
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !listLine.MatchString(l) {
			t.Fatalf("-l line %q is not fi_info -l shaped", l)
		}
	}
}

// TestDifferential_FiInfoShapes compares the field names of perftest info
// (-l and the default listing) with libfabric's fi_info when installed.
func TestDifferential_FiInfoShapes(t *testing.T) {
	fiInfo, err := exec.LookPath("fi_info")
	if err != nil {
		t.Skip("fi_info not on PATH (install libfabric-bin, as .ci/run does): skipping")
	}
	out, err := exec.Command(fiInfo, "-l").Output()
	if err != nil {
		t.Skipf("fi_info -l: %v", err)
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if !listLine.MatchString(l) {
			t.Errorf("fi_info -l line %q does not have the shape perftest info -l prints", l)
		}
	}
	out, err = exec.Command(fiInfo, "-p", "tcp").Output()
	if err != nil {
		t.Skipf("fi_info -p tcp: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	for k, l := range lines {
		key, _, _ := strings.Cut(strings.TrimSpace(l), ":")
		if key != shortFields[k%len(shortFields)] {
			t.Fatalf("fi_info line %d %q: perftest prints field %q there", k, l, shortFields[k%len(shortFields)])
		}
	}
}
