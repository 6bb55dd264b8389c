package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// rowsOf returns the lines of out matching re.
func rowsOf(out string, re *regexp.Regexp) [][]string {
	var rows [][]string
	for _, l := range strings.Split(out, "\n") {
		if m := re.FindStringSubmatch(l); m != nil {
			rows = append(rows, m)
		}
	}
	return rows
}

var (
	num        = `(\d+\.\d+)`
	latencyRow = regexp.MustCompile(`^(\S+) +(\S+) +` + num + ` +` + num + ` +` + num + ` +` + num + ` +` + num + `$`)
	bwRow      = regexp.MustCompile(`^(\S+) +(\S+) +` + num + ` +` + num + `$`)
	sweepRowRE = regexp.MustCompile(`^(shm|tcp|go-net) +(\S+) +` + num + ` +` + num + ` +` + num + `$`)
)

func TestDefaultRun_SweepsShmThenTCPAndPrintsOneTable(t *testing.T) {
	bin := buildPerftest(t)
	rc, out, errs := runBin(t, bin, 120*time.Second, nil, "-I", "20")
	if rc != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", rc, out, errs)
	}
	rows := rowsOf(out, sweepRowRE)
	count := map[string]int{}
	for _, r := range rows {
		count[r[1]]++
	}
	if count["shm"] != len(sweepSizes) || count["go-net"] != len(sweepSizes) {
		t.Fatalf("rows per provider %v, want %d for shm and go-net:\n%s", count, len(sweepSizes), out)
	}
	if count["tcp"] != len(sweepSizes) && !strings.Contains(out, "tcp: skipped: provider not available") {
		t.Fatalf("tcp neither measured nor explained:\n%s", out)
	}
	if !strings.Contains(out, "provider bytes") || !strings.Contains(errs, "shm latency 8 bytes") {
		t.Fatalf("no table header or progress line\nstdout:\n%s\nstderr:\n%q", out, errs)
	}
	if !placementLine.MatchString(out) {
		t.Fatalf("no placement line:\n%s", out)
	}
}

// placementLine is the line above every table: the cache-line round trip
// between the two processes' CPUs, or why there is none.
var placementLine = regexp.MustCompile(`(?m)^# placement: (cache-line round trip \d+ ns between CPUs \d+ and \d+ \((near|far); (un)?pinned\)|both sides on CPU \d+.*)$`)

func TestLatency_PrintsPercentilesAndJSON(t *testing.T) {
	bin := buildPerftest(t)
	for i, mode := range []string{"msg", "tagged"} {
		wait := []string{"yield", "sread"}[i]
		rc, out, errs := runBin(t, bin, 60*time.Second, nil, "latency", "-m", mode, "-wait", wait, "-I", "50", "-S", "8,4k,64k")
		if rc != 0 {
			t.Fatalf("%s: exit %d\n%s", mode, rc, errs)
		}
		rows := rowsOf(out, latencyRow)
		if len(rows) != 3 || rows[0][1] != "8" || rows[1][1] != "4k" || rows[2][1] != "64k" || rows[0][2] != "50" {
			t.Fatalf("%s: latency rows %q:\n%s", mode, rows, out)
		}
		if !strings.Contains(out, "p50") || !strings.Contains(out, "p99.9") || !strings.Contains(out, "shm "+mode) {
			t.Fatalf("%s: header:\n%s", mode, out)
		}
		if !placementLine.MatchString(out) {
			t.Fatalf("%s: no placement line above the table:\n%s", mode, out)
		}
	}
	rc, out, errs := runBin(t, bin, 60*time.Second, nil, "latency", "-json", "-I", "30", "-S", "64")
	if rc != 0 {
		t.Fatalf("-json: exit %d\n%s", rc, errs)
	}
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-json output is not a report: %v\n%s", err, out)
	}
	if len(rep.Results) != 1 {
		t.Fatalf("results %+v", rep.Results)
	}
	r := rep.Results[0]
	if r.Tool != "gofi" || r.Test != "latency" || r.Provider != "shm" || r.Size != 64 || r.Iterations != 30 ||
		r.P50 <= 0 || r.P90 < r.P50 || r.P99 < r.P90 || r.P999 < r.P99 || r.Usec <= 0 {
		t.Fatalf("result %+v", r)
	}
	if p := rep.Placement; p == nil || (p.Class == "near" || p.Class == "far") != (p.RTNs > 0) || r.Placement != p.Class {
		t.Fatalf("placement %+v, result's %q: want the probe at the start, stamped on the result", p, r.Placement)
	}
	for _, field := range []string{`"p50_usec"`, `"p99_9_usec"`, `"usec_per_xfer"`, `"go_version"`, `"rt_ns"`} {
		if !strings.Contains(out, field) {
			t.Fatalf("JSON lacks %s:\n%s", field, out)
		}
	}
}

// -dump writes every timed round trip, in the order they ran, with its
// start on CLOCK_MONOTONIC: within the run's span of that clock.
func TestLatency_DumpWritesEveryTimedRoundTrip(t *testing.T) {
	bin := buildPerftest(t)
	path := filepath.Join(t.TempDir(), "dump.txt")
	before := monoNow(t)
	rc, out, errs := runBin(t, bin, 60*time.Second, nil, "latency", "-I", "40", "-S", "8,4k", "-dump", path)
	after := monoNow(t)
	if rc != 0 {
		t.Fatalf("exit %d\n%s\n%s", rc, out, errs)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 1+80 || !strings.HasPrefix(lines[0], "# perftest latency -dump") {
		t.Fatalf("%d lines, want a header and 80 round trips:\n%s", len(lines), b)
	}
	var last int64
	for i, l := range lines[1:] {
		var size, start, half int64
		if _, err := fmt.Sscan(l, &size, &start, &half); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		want := int64(8)
		if i >= 40 {
			want = 4096
		}
		if size != want || start < before || start > after || start < last || half <= 0 || start+2*half > after {
			t.Fatalf("line %d %q: want size %d, start in [%d, %d] after %d, half > 0", i, l, want, before, after, last)
		}
		last = start
	}
}

func monoNow(t *testing.T) int64 {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

func TestBWAndMsgrate_PrintRates(t *testing.T) {
	bin := buildPerftest(t)
	for _, c := range []struct {
		sub, hdr string
		args     []string
	}{
		{"bw", "MB/sec    Mmsgs/sec", []string{"-W", "16", "-I", "64", "-S", "64,1m"}},
		{"msgrate", "Mmsgs/sec       MB/sec", []string{"-W", "32", "-I", "100", "-S", "8,64"}},
		{"bw", "MB/sec    Mmsgs/sec", []string{"-p", "net", "-W", "8", "-I", "16", "-S", "4k,1m"}},
	} {
		rc, out, errs := runBin(t, bin, 60*time.Second, nil, append([]string{c.sub}, c.args...)...)
		if rc != 0 {
			t.Fatalf("%s %v: exit %d\n%s", c.sub, c.args, rc, errs)
		}
		rows := rowsOf(out, bwRow)
		if len(rows) != 2 || !strings.Contains(out, c.hdr) {
			t.Fatalf("%s %v: rows %q\n%s", c.sub, c.args, rows, out)
		}
		if !placementLine.MatchString(out) {
			t.Fatalf("%s %v: no placement line:\n%s", c.sub, c.args, out)
		}
		if c.sub == "msgrate" && rows[0][2] != "128" {
			t.Fatalf("msgrate: -I 100 with -W 32 should round up to whole windows (128): %q", rows[0])
		}
	}
}

func TestServe_AnswersAClientFromAnotherProcess(t *testing.T) {
	bin := buildPerftest(t)
	port := testPort(t)
	done := make(chan string, 1)
	go func() {
		rc, out, errs, err := runBinE(bin, 60*time.Second, nil, "serve", "-B", port, "-once")
		done <- fmt.Sprintf("%d\n%s\n%s\n%v", rc, out, errs, err)
	}()
	rc, out, errs := runBin(t, bin, 60*time.Second, nil, "latency", "-P", port, "-I", "20", "-S", "8", "-timeout", "5s", "127.0.0.1")
	srv := <-done
	if rc != 0 || !strings.HasPrefix(srv, "0\n") {
		t.Fatalf("client exit %d: %s\nserver: %s", rc, errs, srv)
	}
	if len(rowsOf(out, latencyRow)) != 1 || !strings.Contains(srv, "listening on port "+port) {
		t.Fatalf("client:\n%s\nserver:\n%s", out, srv)
	}
}

func TestTests_ErrorsExitNonZero(t *testing.T) {
	bin := buildPerftest(t)
	cases := []struct {
		name   string
		args   []string
		rc     int
		stderr string
	}{
		{"unreachable serve", []string{"latency", "-timeout", "1s", "-P", testPort(t), "127.0.0.1"}, 3, "peer unreachable"},
		{"unknown provider", []string{"bw", "-p", "verbs"}, 61, "provider not available"},
		{"bad sizes", []string{"latency", "-S", "8,x"}, 2, `size "x"`},
		{"bad window", []string{"bw", "-W", "0"}, 2, "-W 0"},
		{"bad wait mode", []string{"latency", "-wait", "poll"}, 2, "want spin, yield or sread"},
		{"size 0 over Go net", []string{"latency", "-p", "net", "-S", "0"}, 2, "needs sizes above 0"},
		{"bad iterations", []string{"msgrate", "-I", "-5"}, 2, "-I"},
		{"bad flag on the default run", []string{"-bogus"}, 2, "flag provided but not defined: -bogus"},
		{"bad plot name", []string{"latency", "-I", "5", "-S", "8", "-plot", "out.gif"}, 1, "want a .svg or .png"},
		{"plot without files", []string{"plot"}, 2, "no result files"},
		{"plot of a non-report", []string{"plot", "-o", "x.svg", "/etc/hostname"}, 1, "not a perftest -json file"},
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

func TestPlot_DrawsOverlaidResultFiles(t *testing.T) {
	bin := buildPerftest(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	own := filepath.Join(dir, "own.svg")
	for _, run := range []struct {
		file string
		args []string
	}{
		{a, []string{"latency", "-json", "-I", "20", "-S", "8,4k", "-plot", own}},
		{b, []string{"bw", "-json", "-p", "net", "-W", "4", "-I", "8", "-S", "8,4k"}},
	} {
		rc, out, errs := runBin(t, bin, 60*time.Second, nil, run.args...)
		if rc != 0 {
			t.Fatalf("%v: exit %d: %s", run.args, rc, errs)
		}
		if err := os.WriteFile(run.file, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if svg, err := os.ReadFile(own); err != nil || !bytes.Contains(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("Latency")) {
		t.Fatalf("-plot wrote no SVG with a latency plot (%v)", err)
	}
	svgFile, pngFile := filepath.Join(dir, "both.svg"), filepath.Join(dir, "both.png")
	for _, f := range []string{svgFile, pngFile} {
		rc, out, errs := runBin(t, bin, 60*time.Second, nil, "plot", "-o", f, a, b)
		if rc != 0 || !strings.Contains(out, "wrote "+f) {
			t.Fatalf("plot -o %s: exit %d: %s%s", f, rc, out, errs)
		}
	}
	svg, err := os.ReadFile(svgFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "Latency", "Bandwidth", "MB/s", "a: gofi shm latency msg", "b: go-net tcp bw stream", ">4k<"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Fatalf("SVG lacks %q", want)
		}
	}
	png, err := os.ReadFile(pngFile)
	if err != nil || len(png) < 1000 || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("PNG not written (%v, %d bytes)", err, len(png))
	}
}

func TestProfilingFlags_WriteProfiles(t *testing.T) {
	bin := buildPerftest(t)
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "mem.pprof")
	rc, _, errs := runBin(t, bin, 60*time.Second, nil, "latency", "-I", "20", "-S", "8", "-cpuprofile", cpu, "-memprofile", mem)
	if rc != 0 {
		t.Fatalf("exit %d: %s", rc, errs)
	}
	for _, f := range []string{cpu, mem} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Fatalf("profile %s not written (%v)", f, err)
		}
	}
}

func TestPingpongCompare_PrintsRatiosAgainstFiPingpong(t *testing.T) {
	bin := buildPerftest(t)
	rc, out, errs := runBin(t, bin, 120*time.Second, []string{"PERFTEST_ROUNDS=1"}, "pingpong", "-compare", "-p", "shm", "-S", "64", "-I", "100")
	if rc != 0 {
		t.Fatalf("exit %d\n%s\n%s", rc, out, errs)
	}
	row := regexp.MustCompile(`(?m)^64 +100 +` + num + ` +(\S+) +(\S+) +` + num + ` +(\S+) +` + num + ` +(\S+) +(\S+) +` + num + ` +(\S+) +\d+$`).FindStringSubmatch(out)
	if row == nil || !strings.Contains(out, "gofi usec") || !strings.Contains(out, "rt-ns") {
		t.Fatalf("no comparison row for 64 bytes:\n%s\n%s", out, errs)
	}
	if fiPingpongBin() != "" && (row[2] == "-" || row[3] == "-") {
		t.Fatalf("fi_pingpong is installed but its column is empty:\n%s", out)
	}
	if !regexp.MustCompile(`# placement .*: 1 of 1 rounds (near|far|mixed)`).MatchString(out) {
		t.Fatalf("no placement line for the round:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^# 64 x 100 gofi: ` + num + ` \[\d+\] (near|far|mixed); libfabric: `).MatchString(out) {
		t.Fatalf("no rounds line with gofi's context switches:\n%s", out)
	}
}
