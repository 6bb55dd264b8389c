#!/usr/bin/env bash
# tailholes.sh: which tasks made perftest's slow round trips, one by one.
#
#   benchmarks/tailholes.sh                       # shm, 8 B and 4 KiB, 200k round trips
#   SIZES=8,4k,64k ITERS=500000 benchmarks/tailholes.sh
#   GOMAXPROCS=2 benchmarks/tailholes.sh          # the runtime's default scheduling
#   RT=50 benchmarks/tailholes.sh                 # perftest under chrt -f 50 (see tail.sh)
#
# Runs perftest latency -dump under perf record -a -k CLOCK_MONOTONIC
# (context switches, wake-ups, nanosleep, interrupts, hrtimers, page
# faults, inter-processor interrupts (function calls, reschedules, irq
# work) and TLB flushes), then
# cmd tailholes, which matches every round trip slower than X times its
# size's median (default 5) with what the kernel ran on the CPUs while it
# lasted, and prints per size: the spinners' switches out, every other
# task that ran (the Go runtime's sysmon of each process, other Go
# threads, kernel threads, other processes) with its count and time, and
# the slow round trips grouped by what ran during them ("nothing the
# guest saw": no switch, interrupt or timer: the hypervisor or the
# hardware). Needs root (or perf_event_paranoid <= -1) and linux-perf.
# OUT keeps the files (default a temporary directory).
set -eu
SIZES=${SIZES:-8,4k}
ITERS=${ITERS:-200000}
PROV=${PROV:-shm}
X=${X:-5}
rt=()
if [ -n "${RT:-}" ]; then
	rt=(chrt -f "$RT")
fi
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-}
if [ -z "$out" ]; then
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
(cd "$here/.." && go build -o "$out/perftest" ./cmd/perftest && go build -o "$out/tailholes" ./benchmarks/tailholes)
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)${RT:+, perftest under chrt -f $RT}"
perf record -q -k CLOCK_MONOTONIC -a -o "$out/perf.data" \
	-e sched:sched_switch -e sched:sched_wakeup -e syscalls:sys_enter_nanosleep \
	-e irq:irq_handler_entry -e irq:softirq_entry -e timer:hrtimer_expire_entry \
	-e exceptions:page_fault_user -e exceptions:page_fault_kernel \
	-e irq_vectors:call_function_entry -e irq_vectors:call_function_single_entry \
	-e irq_vectors:reschedule_entry -e irq_vectors:irq_work_entry -e tlb:tlb_flush \
	-- "${rt[@]}" "$out/perftest" latency -p "$PROV" -S "$SIZES" -I "$ITERS" -dump "$out/dump.txt" 2>/dev/null
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
perf script -i "$out/perf.data" -F comm,pid,tid,cpu,time,event,trace >"$out/perf.txt" 2>/dev/null
"$out/tailholes" -perf "$out/perf.txt" -dump "$out/dump.txt" -x "$X"
