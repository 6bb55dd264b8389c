#!/usr/bin/env bash
# tailholes.sh: which tasks made perftest's slow round trips, one by one.
#
#   benchmarks/tailholes.sh                       # shm, 8 B and 4 KiB, 200k round trips
#   SIZES=8,4k,64k ITERS=500000 benchmarks/tailholes.sh
#   GOMAXPROCS=2 benchmarks/tailholes.sh          # the runtime's default scheduling
#   RT=50 benchmarks/tailholes.sh                 # perftest under chrt -f 50, pinned (see tail.sh)
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
# OUT keeps the files (default a temporary directory); MMAP is perf's
# buffer per CPU (default 32M; a run says when perf lost events anyway).
set -eu
SIZES=${SIZES:-8,4k}
ITERS=${ITERS:-200000}
PROV=${PROV:-shm}
X=${X:-5}
rt=()
if [ -n "${RT:-}" ]; then
	if [ "${GOMAXPROCS:-1}" != 1 ]; then
		echo "tailholes.sh: RT with GOMAXPROCS=$GOMAXPROCS: the runtime's second thread, pinned beside the real-time spinner, would never run (see tail.sh)" >&2
		exit 2
	fi
	rt=(timeout -k 2 60 chrt -f "$RT") # SIGKILL 2 s after SIGTERM: see tail.sh
fi
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-}
if [ -z "$out" ]; then
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
fi
serve=
# on any exit, the background perftest serve (RT) and its timeout (timeout
# leads its own process group) go too
trap '[ -n "$serve" ] && kill -KILL -- "-$serve" 2>/dev/null; [ -z "${OUT:-}" ] && rm -rf "$out"' EXIT
mkdir -p "$out"
(cd "$here/.." && go build -o "$out/perftest" ./cmd/perftest && go build -o "$out/tailholes" ./benchmarks/tailholes)
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)${RT:+, perftest under chrt -f $RT}"
if [ -n "${RT:-}" ]; then # other real-time busy loops starve the pair: see rtguard.sh
	. "$here/rtguard.sh"
	rt_lock
	rt_wait | sed 's/^  # /# /'
fi
lat=("$out/perftest" latency)
node=()
if [ -n "${RT:-}" ]; then
	# Under RT the two perftest processes are pinned, one to each CPU of
	# CPUS (default 0,1): perftest serve on the second, the client on the
	# first (see tail.sh), each under timeout 60 (SIGKILL 2 s later).
	CPUS=${CPUS:-0,1}
	port=$((47600 + $$ % 300))
	taskset -c "${CPUS#*,}" "${rt[@]}" "$out/perftest" serve -once -B "$port" >"$out/serve.out" 2>&1 &
	serve=$!
	sleep 0.5
	lat=(taskset -c "${CPUS%,*}" "${rt[@]}" "$out/perftest" latency -P "$port")
	node=(localhost)
fi
perf record -q -m "${MMAP:-32M}" -k CLOCK_MONOTONIC -a -o "$out/perf.data" \
	-e sched:sched_switch -e sched:sched_wakeup -e syscalls:sys_enter_nanosleep \
	-e irq:irq_handler_entry -e irq:softirq_entry -e timer:hrtimer_expire_entry \
	-e exceptions:page_fault_user -e exceptions:page_fault_kernel \
	-e irq_vectors:call_function_entry -e irq_vectors:call_function_single_entry \
	-e irq_vectors:reschedule_entry -e irq_vectors:irq_work_entry -e tlb:tlb_flush \
	-- "${lat[@]}" -p "$PROV" -S "$SIZES" -I "$ITERS" -dump "$out/dump.txt" "${node[@]}" 2>/dev/null
wait || echo "# perftest serve exited with status $?: $(cat "$out/serve.out" 2>/dev/null)"
serve=
[ -z "${RT:-}" ] || rt_check | sed 's/^  # /# /'
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
perf script -i "$out/perf.data" -F comm,pid,tid,cpu,time,event,trace >"$out/perf.txt" 2>/dev/null
# Events perf dropped (its buffer full) are missing below: their round
# trips count as "nothing the guest saw" and their tasks' runs as longer
# than they were (a lost switch out). With perf's default buffer, a loaded
# host lost ~15 000 samples a run (2026-11-25 15:58, none of the 4 KiB
# loop's first 700 ms of ticks left); MMAP (default 32M per CPU) sets it.
perf report -i "$out/perf.data" --stats 2>/dev/null |
	awk '/LOST/ { for (i = 1; i < NF; i++) if ($i == "events:") n += $(i + 1) } END { if (n) printf "# perf lost %d records or samples: the attribution below misses them (raise MMAP)\n", n }'
"$out/tailholes" -perf "$out/perf.txt" -dump "$out/dump.txt" -x "$X"
