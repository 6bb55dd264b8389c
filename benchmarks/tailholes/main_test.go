package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// A spinner per CPU (pids 100 and 200), pid 100's sysmon preempting the
// spinner on CPU 0, a shell on CPU 1, a tick on CPU 1; one slow round trip
// over each, and one over nothing.
func TestReport_AttributesEachSlowRoundTrip(t *testing.T) {
	sw := func(cpu int, at int64, pcomm string, ppid, ptid int, state, ncomm string, ntid int) string {
		return fmt.Sprintf("%16s %5d/%-5d [%03d] %d.%09d: sched:sched_switch: prev_comm=%s prev_pid=%d prev_prio=120 prev_state=%s ==> next_comm=%s next_pid=%d next_prio=120\n",
			pcomm, ppid, ptid, cpu, at/1e9, at%1e9, pcomm, ptid, state, ncomm, ntid)
	}
	const t0 = int64(1000e9)
	var perf strings.Builder
	perf.WriteString(sw(0, t0-1000, "swapper/0", 0, 0, "R", "perftest", 101))
	perf.WriteString(sw(1, t0-1000, "swapper/1", 0, 0, "R", "perftest", 201))
	for i := range 3 {
		fmt.Fprintf(&perf, "        perftest   100/102   [000] %d.%09d: syscalls:sys_enter_nanosleep: rqtp: 0x1, rmtp: 0x0\n", (t0-500+int64(i))/1e9, (t0-500+int64(i))%1e9)
	}
	perf.WriteString(sw(0, t0+10_000, "perftest", 100, 101, "R", "perftest", 102))
	perf.WriteString(sw(0, t0+30_000, "perftest", 100, 102, "S", "perftest", 101))
	perf.WriteString(sw(1, t0+100_000, "perftest", 200, 201, "R", "bash", 300))
	perf.WriteString(sw(1, t0+150_000, "bash", 300, 300, "S", "perftest", 201))
	fmt.Fprintf(&perf, "        perftest   200/201   [001] %d.%09d: timer:hrtimer_expire_entry: hrtimer=0x1 function=tick_nohz_handler now=1\n", (t0+300_500)/1e9, (t0+300_500)%1e9)
	perf.WriteString(sw(0, t0+1_000_000, "perftest", 100, 101, "S", "swapper/0", 0))
	perf.WriteString(sw(1, t0+1_000_000, "perftest", 200, 201, "S", "swapper/1", 0))

	var dump strings.Builder
	dump.WriteString("# perftest latency -dump: ...\n")
	slow := map[int64]int64{9_000: 12_000, 99_000: 30_000, 200_000: 5_000, 300_000: 4_000}
	for at := int64(0); at < 900_000; at += 1000 {
		half := int64(300)
		if h, ok := slow[at]; ok {
			half = h
		}
		fmt.Fprintf(&dump, "8 %d %d\n", t0+at, half)
	}
	tr, err := parsePerf(strings.NewReader(perf.String()))
	if err != nil {
		t.Fatal(err)
	}
	ph, err := parseDump(strings.NewReader(dump.String()))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	report(&out, tr, ph, 5)
	for _, want := range []string{
		"spinners' switches out: 2 preempted (R), 0 blocked",
		"  Go sysmon (pid 100)                      1 ",
		"  bash                                     1 ",
		"slow round trips (half > 1.50 us = 5x p50): 4 (0.444%)",
		"      1      12.0  the Go runtime's sysmon ran",
		"      1      30.0  another process ran (the machine's load)",
		"      1       5.0  nothing the guest saw",
		"      1       4.0  interrupt or timer only",
		"hrtimer_expire_entry function=tick_nohz_handler",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
