#!/usr/bin/env bash
# tail.sh: gofi's latency tail beside the machine's own, in one run.
#
#   benchmarks/tail.sh                    # 3 rounds, shm, 8 B, 4 KiB, 64 KiB, 200k iterations
#   ROUNDS=5 ITERS=500000 SIZES=8,4k PROV=tcp benchmarks/tail.sh
#   FLAGSECS=0.3 RT=50 benchmarks/tail.sh
#
# Each round runs, back to back:
#   1. a C flag ping-pong: two threads pinned to the two CPUs perftest's
#      probe picks (CPUS, default the first two this shell may use), one
#      cache line bouncing, every round trip timed (clock_gettime), for
#      FLAGSECS seconds (default 0.5: as long as gofi's loops, so that
#      its stall rates rest on as many of the host's stalls; under RT
#      a second or more runs into the kernel's real-time throttling,
#      one 15-25 ms stall);
#   2. perftest place -tail ITERS: the same in Go (two pinned goroutine
#      threads of one process);
#   3. perftest latency -p PROV -S SIZES -I ITERS (two processes, the
#      default busy-polling);
#   4. per size of SIZES, a C copy ping-pong of that size for FLAGSECS:
#      the flag, each message also copied into a shared buffer by its
#      sender and out of it by its receiver, as a ring's records go (a
#      round trip about as long as gofi's, the same data crossing).
# and prints half round trips in usec: p50, p99, p99.9 and max for each,
# with the placement, the local timer interrupts per second on each CPU
# while the C flag and perftest ran, start-up included (the guest's tick
# and any timers a program arms: the Go runtime's sysmon sleeps would
# show as more), and
# for the C flag and each gofi size the stalls per second: round trips
# slower than 5 us each way, per second of the loop. Compare those, not
# the p99.9s: a stall of the host hits whatever round trip is running, so
# the same stalls per second are a larger share of gofi's round trips
# (1-20 us) than of the flag's (0.1-0.5 us). For the target (p99.9 <= 5x
# p50) a last line per size counts gofi's round trips over 5x their
# median beside the C flag's and the C copy ping-pong's over the same
# threshold per second, and the share of gofi's round trips that rate
# would hit; "same stall" counts instead the C round trips longer than
# their own median by more than gofi's threshold less gofi's median (a
# stall adds to the round trip it lands in, so gofi's longer round trip
# crosses its threshold with a shorter stall). What the C programs show
# is the floor: the hypervisor's and the kernel's interruptions; what
# gofi shows above it is gofi's (or the Go runtime's). Needs bash, awk,
# cc, go.
#
# Where perf can count tracepoints (root, or perf_event_paranoid <= -1),
# each line is followed by what happened to its processes during the run:
# signals sent to them (the Go runtime preempts a goroutine that runs for
# 10 ms with SIGURG), context switches, futex calls (thread hand-offs) and
# page faults. perftest's busy-polled shm runs use one P and yield every
# 2 ms (cmd/perftest/spinsched.go); GOMAXPROCS=2 benchmarks/tail.sh shows
# the runtime's default beside it.
#
# RT=50 runs the three under chrt -f 50 (SCHED_FIFO, needs root or
# CAP_SYS_NICE): no process of normal priority, nor the Go runtime's
# sysmon (real-time too, it waits until a spinner sleeps), takes their
# CPUs then, but for the 5% the kernel's real-time throttling leaves
# others each second: on a host loaded by others, the tail a quiet one
# would show. A measuring tool: while they run, the machine's other
# tasks, its kernel threads included, wait. Under RT the two perftest
# processes are also pinned, one to each CPU of CPUS (perftest serve on
# the second, perftest latency connecting to it from the first), so two
# real-time spinners can never share one CPU, and every program runs
# under timeout 60, with SIGKILL 2 s after its SIGTERM: a real-time Go
# spinner whose other threads wait on its CPU never runs the handler that
# SIGTERM needs. RT refuses a GOMAXPROCS above 1: a second P's thread,
# pinned beside the spinner at its priority, never runs, and perftest
# hangs. (Pinned without RT, a process's sysmon and its spinner share one
# CPU under the normal scheduler: p99.9 of hundreds of microseconds; so
# without RT the two processes are left unbound.)
set -eu
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-200000}
FLAGSECS=${FLAGSECS:-0.5}
SIZES=${SIZES:-8,4k,64k}
PROV=${PROV:-shm}
rt=()
if [ -n "${RT:-}" ]; then
	if [ "${GOMAXPROCS:-1}" != 1 ]; then
		echo "tail.sh: RT with GOMAXPROCS=$GOMAXPROCS: the runtime's second thread, pinned beside the real-time spinner, would never run (see above)" >&2
		exit 2
	fi
	rt=(timeout -k 2 60 chrt -f "$RT")
fi
here=$(cd "$(dirname "$0")" && pwd)
# Under RT, other real-time busy loops starve the pair (rtguard.sh): one
# RT benchmark at a time, and each round names those it ran beside.
if [ -n "${RT:-}" ]; then
	. "$here/rtguard.sh"
	rt_lock
fi
tmp=$(mktemp -d)
serve=
# on any exit, the background perftest serve (RT) and its timeout
# (timeout leads its own process group) goes too
trap '[ -n "$serve" ] && kill -KILL -- "-$serve" 2>/dev/null; rm -rf "$tmp"' EXIT

(cd "$here/.." && go build -o "$tmp/perftest" ./cmd/perftest)
if [ -z "${CPUS:-}" ]; then
	CPUS=$("$tmp/perftest" place -json | awk '/"cpus"/ { getline a; getline b; gsub(/[ ,]/, "", a); gsub(/[ ,]/, "", b); print a "," b; exit }')
fi

cat >"$tmp/flag.c" <<'EOF'
/* flag ping-pong: two pinned threads bounce one cache line; every round
 * trip is timed; prints half round trips (ns) p50 p99 p99.9 max, stalls
 * per second and round trips. With BYTES, each message also carries
 * BYTES: the sender copies them into a shared buffer before the flag,
 * the receiver out of it after, as a ring's records go (a copy
 * ping-pong, as long a round trip as gofi's of that size). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Alignas(128) _Atomic uint64_t flag;
static int cpu_b;
static size_t bytes;
static char *sh_a, *sh_b, *loc_a, *loc_b; /* shared each way; each side's own */

static void pin(int cpu) {
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (pthread_setaffinity_np(pthread_self(), sizeof s, &s)) {
		perror("pthread_setaffinity_np");
		exit(1);
	}
}

static void *echo(void *arg) {
	(void)arg;
	uint64_t last = 0;
	for (;;) {
		uint64_t v = atomic_load_explicit(&flag, memory_order_acquire);
		if (v == UINT64_MAX)
			return NULL;
		if ((v & 1) && v != last) {
			if (bytes) {
				memcpy(loc_b, sh_a, bytes);
				memcpy(sh_b, loc_b, bytes);
			}
			atomic_store_explicit(&flag, v + 1, memory_order_release);
			last = v;
		}
	}
}

static int cmp(const void *a, const void *b) {
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv) {
	if (argc < 4 || argc > 6) {
		fprintf(stderr, "usage: flag CPU_A CPU_B SECONDS [DUMP [BYTES]]\n");
		return 2;
	}
	int cpu_a = atoi(argv[1]);
	cpu_b = atoi(argv[2]);
	/* as long as gofi's loops last, not as many round trips: a stall
	 * rate per second needs seconds of each, and a flag round trip is
	 * 10-50 times shorter than gofi's */
	uint64_t dur = (uint64_t)(atof(argv[3]) * 1e9);
	long cap = 40000000;
	uint32_t *lat = malloc(sizeof *lat * (size_t)cap);
	if (argc == 6 && (bytes = (size_t)atol(argv[5])) > 0) {
		size_t sz = (bytes + 4095) & ~(size_t)4095;
		sh_a = aligned_alloc(4096, sz), sh_b = aligned_alloc(4096, sz);
		loc_a = aligned_alloc(4096, sz), loc_b = aligned_alloc(4096, sz);
		if (!sh_a || !sh_b || !loc_a || !loc_b)
			return 1;
		memset(sh_a, 0, sz), memset(sh_b, 0, sz), memset(loc_a, 1, sz), memset(loc_b, 0, sz);
	}
	pthread_t th;
	pthread_attr_t at;
	cpu_set_t s;
	pin(cpu_a);
	/* the echo thread starts on its own CPU: under a real-time policy
	 * (RT) it could not leave cpu_a, where this thread spins */
	CPU_ZERO(&s);
	CPU_SET(cpu_b, &s);
	pthread_attr_init(&at);
	if (!lat || pthread_attr_setaffinity_np(&at, sizeof s, &s) || pthread_create(&th, &at, echo, NULL)) {
		perror("pthread_create");
		return 1;
	}
	uint64_t seq = 0, start = 0;
	long n = 0;
	for (long i = -1000; n < cap; i++) {
		uint64_t t0 = now();
		seq += 2;
		if (bytes) {
			loc_a[0] = (char)seq;
			memcpy(sh_a, loc_a, bytes);
		}
		atomic_store_explicit(&flag, seq - 1, memory_order_release);
		while (atomic_load_explicit(&flag, memory_order_acquire) != seq)
			;
		if (bytes)
			memcpy(loc_a, sh_b, bytes);
		uint64_t t1 = now();
		if (i == 0)
			start = t0;
		if (i >= 0) {
			uint64_t d = t1 - t0;
			lat[n++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
			if (t1 - start >= dur)
				break;
		}
	}
	atomic_store(&flag, UINT64_MAX);
	pthread_join(th, NULL);
	uint64_t total = 0;
	long stalls = 0;
	for (long i = 0; i < n; i++) {
		total += lat[i];
		stalls += lat[i] > 10000;
	}
	if (argc >= 5 && strcmp(argv[4], "-")) { /* "# n total_ns", then every half round trip over 0.25 us (ns), in order */
		FILE *f = fopen(argv[4], "w");
		if (!f) {
			perror(argv[4]);
			return 1;
		}
		fprintf(f, "# %ld %llu\n", n, (unsigned long long)total);
		for (long i = 0; i < n; i++)
			if (lat[i] > 500)
				fprintf(f, "%.1f\n", lat[i] / 2.0);
		fclose(f);
	}
	qsort(lat, (size_t)n, sizeof *lat, cmp);
#define AT(p) (lat[(long)((p) * n + 0.999999) - 1] / 2.0)
	/* stalls: half round trips over 5 us, per second of the run */
	printf("%.1f %.1f %.1f %.1f %.0f %ld\n", AT(0.50), AT(0.99), AT(0.999), lat[n - 1] / 2.0, stalls / (total / 1e9), n);
	return 0;
}
EOF
cc -O2 -pthread -o "$tmp/flag" "$tmp/flag.c"

# counted CMD...: runs CMD under perf stat when it can count, leaving the
# counts in $tmp/stat; counts prints them.
events=signal:signal_generate,context-switches,syscalls:sys_enter_futex,page-faults
if perf stat -x, -e "$events" -o /dev/null true >/dev/null 2>&1; then
	counted() { perf stat -x, -e "$events" -o "$tmp/stat" -- "$@"; }
else
	counted() { rm -f "$tmp/stat"; "$@"; }
fi
counts() {
	[ -f "$tmp/stat" ] || return 0
	awk -F, '/^[0-9]/ { n[$3] = $1 }
		END { printf "    (%s signals, %s context switches, %s futex calls, %s page faults)\n",
			n["signal:signal_generate"], n["context-switches"], n["syscalls:sys_enter_futex"], n["page-faults"] }' "$tmp/stat"
}

a=${CPUS%,*}
b=${CPUS#*,}

# ticks_start / ticks_end: the local timer interrupts (the guest's tick
# and its hrtimers, /proc/interrupts LOC) per second on CPUs a and b
# while a program ran. A program that arms timers of its own (the Go
# runtime's sysmon sleeps, its timers) shows more than the C flag's.
loc() { awk -v a="$a" -v b="$b" '$1 == "LOC:" { print $(2 + a), $(2 + b) }' /proc/interrupts; }
ticks_start() { t0=$(date +%s%N) l0=$(loc); }
ticks_end() {
	awk -v t0="$t0" -v t1="$(date +%s%N)" -v l0="$l0" -v l1="$(loc)" 'BEGIN { split(l0, x, " "); split(l1, y, " "); s = (t1 - t0) / 1e9
		printf "    (timer interrupts per second: CPU '"$a"' %.0f, CPU '"$b"' %.0f, over %.2f s)\n", (y[1] - x[1]) / s, (y[2] - x[2]) / s, s }'
}
for r in $(seq 1 "$ROUNDS"); do
	echo
	echo "## round $r/$ROUNDS, load $(cut -d' ' -f1-3 /proc/loadavg)${RT:+, under chrt -f $RT}"
	[ -z "${RT:-}" ] || rt_wait
	"$tmp/perftest" place -cpus "$CPUS" | sed 's/^/  /'
	echo "  half round trip, usec:       p50      p99    p99.9      max   stalls/s"
	rm -f "$tmp/flagdump"
	ticks_start
	counted "${rt[@]}" "$tmp/flag" "$a" "$b" "$FLAGSECS" "$tmp/flagdump" >"$tmp/flag.out"
	awk '{ printf "  C flag (%s, pinned)     %8.3f %8.3f %8.3f %8.1f %8.0f   (%d round trips)\n", "'"$CPUS"'", $1/1e3, $2/1e3, $3/1e3, $4/1e3, $5, $6 }' "$tmp/flag.out"
	ticks_end
	counts
	"${rt[@]}" "$tmp/perftest" place -cpus "$CPUS" -tail "$ITERS" -json |
		awk -F'[:,]' '/p50_ns/ { p50 = $2 } /p99_ns/ { p99 = $2 } /p99_9_ns/ { p999 = $2 } /max_ns/ { mx = $2 }
			END { printf "  Go flag (pinned)          %8.3f %8.3f %8.3f %8.1f\n", p50/1e3, p99/1e3, p999/1e3, mx/1e3 }'
	rm -f "$tmp/dump"
	if [ -n "${RT:-}" ]; then # pinned: perftest serve on b, the client on a (see RT above)
		port=$((47600 + $$ % 300))
		taskset -c "$b" "${rt[@]}" "$tmp/perftest" serve -once -B "$port" >"$tmp/serve.out" 2>&1 &
		serve=$!
		sleep 0.5
		lat=(taskset -c "$a" "${rt[@]}" "$tmp/perftest" latency -P "$port")
		node=(localhost) # counts below: the client process only
	else
		lat=("$tmp/perftest" latency)
		node=()
	fi
	ticks_start
	counted "${lat[@]}" -p "$PROV" -S "$SIZES" -I "$ITERS" -dump "$tmp/dump" "${node[@]}" 2>"$tmp/lat.err" |
		awk '/^#/ { print "  " $0; next } /^bytes/ { next } { printf "  gofi %s %-6s             %8.3f %8.3f %8.3f   (mean %s)\n", "'"$PROV"'", $1, $3, $5, $6, $7 }'
	# perftest's errors (not its progress lines), e.g. a size that never finished
	grep -v '^perftest: [a-z]* latency: ' "$tmp/lat.err" | sed 's/^/  (perftest latency: /; s/$/)/' || true
	ticks_end
	# stalls per second of each size's timed loop, from -dump (size, start ns, half ns)
	[ -s "$tmp/dump" ] && awk '!/^#/ { if (!($1 in first)) { first[$1] = $2; order[++n] = $1 } last[$1] = $2 + 2 * $3; if ($3 > 5000) st[$1]++ }
		END { if (!n) exit; printf "    (stalls over 5 us per second:"
			for (i = 1; i <= n; i++) { s = order[i]; printf "%s %d B %.0f", (i > 1 ? "," : ""), s, st[s] / ((last[s] - first[s]) / 1e9) }
			print ")" }' "$tmp/dump"
	# The target's measure: round trips slower than 5x their size's
	# median, gofi's share of them beside the C flag's rate of stalls
	# over the same threshold (per second of its loop) and the share of
	# gofi's round trips that rate would hit: what the host alone
	# would put there. A stall adds to the round trip it lands in, so
	# gofi's longer round trip passes the threshold with a shorter
	# stall: the flag's rate of the same stalls (its round trips over
	# its own median by more than the threshold minus gofi's median) is
	# the fair comparison; "same stall" below.
	fp50=$(awk '{ print $1 }' "$tmp/flag.out")
	[ -s "$tmp/dump" ] && [ -s "$tmp/flagdump" ] && [ -n "$fp50" ] &&
		for s in $(awk '!/^#/ && !seen[$1]++ { print $1 }' "$tmp/dump"); do
			p50=$(awk -v s="$s" '!/^#/ && $1 == s { print $3 }' "$tmp/dump" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
			awk -v s="$s" -v thr="$((5 * p50))" -v p50="$p50" -v fp50="$fp50" '
				FNR == NR { if ($1 == "#") fsum = $3; else { if ($1 > thr) fslow++; if ($1 - fp50 > thr - p50) fstall++ }; next }
				!/^#/ && $1 == s { if (!n++) first = $2; last = $2 + 2 * $3; if ($3 > thr) slow++ }
				END { secs = (last - first) / 1e9; frate = fslow / (fsum / 1e9); srate = fstall / (fsum / 1e9)
					printf "    (%d B, over 5x p50 = %.2f us: gofi %d of %d (%.3f%%, %.0f/s); C flag %.0f/s, which is %.3f%% of gofi'"'"'s round trips; same stall %.0f/s, %.3f%%)\n",
						s, thr / 1e3, slow, n, 100 * slow / n, slow / secs, frate, 100 * frate * secs / n, srate, 100 * srate * secs / n }' "$tmp/flagdump" "$tmp/dump"
			# the C copy ping-pong of the same size, run now: a round
			# trip as long as gofi's, the same data crossing
			rm -f "$tmp/copydump"
			"$tmp/perftest" place -cpus "$CPUS" | sed 's/^/      /'
			"${rt[@]}" "$tmp/flag" "$a" "$b" "$FLAGSECS" "$tmp/copydump" "$s" >"$tmp/copy.out"
			cp50=$(awk '{ print $1 }' "$tmp/copy.out")
			[ -s "$tmp/copydump" ] && [ -n "$cp50" ] && awk -v s="$s" -v thr="$((5 * p50))" -v p50="$p50" -v cp50="$cp50" '
				FNR == NR { if ($1 == "#") fsum = $3; else { if ($1 > thr) fslow++; if ($1 - cp50 > thr - p50) fstall++ }; next }
				!/^#/ && $1 == s { if (!n++) first = $2; last = $2 + 2 * $3 }
				END { secs = (last - first) / 1e9; frate = fslow / (fsum / 1e9); srate = fstall / (fsum / 1e9)
					printf "      C copy ping-pong of %d B: p50 %.3f us; over %.2f us %.0f/s, same stall %.0f/s (%.3f%% of gofi'"'"'s round trips)\n",
						s, cp50 / 1e3, thr / 1e3, frate, srate, 100 * srate * secs / n }' "$tmp/copydump" "$tmp/dump"
		done
	counts
	wait || echo "  (perftest serve exited with status $?: $(cat "$tmp/serve.out" 2>/dev/null))" # the pinned server (RT) exits after its one client
	serve=
	[ -z "${RT:-}" ] || rt_check
done
