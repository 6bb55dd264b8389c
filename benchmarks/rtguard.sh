# rtguard.sh: sourced by tail.sh and tailholes.sh when RT is set.
#
# Under RT their programs run SCHED_FIFO at priority RT, pinned, and a
# SCHED_FIFO thread keeps its CPU from every other thread of the same or a
# lower priority until it blocks (the kernel's real-time throttling leaves
# the normal ones 5% a second; a real-time one of the same priority gets
# nothing). So two such runs at once, or any other real-time busy loop on
# one of the CPUs, starve one side of the pair for as long as that loop
# runs: the side waiting on it times out and the other, when it runs
# again, finds it gone. perftest latency -S 8,4k,64k under RT=50 lost a
# size that way (helper tail6, 2026-11-25 16:09-16:17: 6 of 35 runs; the
# serve "timed out waiting for a completion after 40s", the client,
# resumed, "sending 65536 bytes: Connection reset by peer"; or the client
# "timed out waiting for a completion after 10s"), and a pinned chrt -f 50
# pair with `chrt -f 50 taskset -c 0 bash -c 'while :; do :; done'` beside
# it for 12-15 s gave exactly that (16:43-16:48 UTC, helper hang6: the
# loop takes the CPU when the perftest on it blocks, between two sizes,
# and keeps it; the client's threads ran 0 ns meanwhile, by their
# schedstat). gofi did not hang: without a foreign loop 69 of 69 such
# runs (16:28-16:48, load 17-37, near and far) were whole.
#
# rt_lock serialises the real-time runs of these scripts on this host (a
# lock file, GOFI_RT_LOCK, default /tmp/gofi-rt.lock); rt_wait, before a
# round, waits up to RTWAIT seconds (default 60) for other real-time user
# threads to go and names them if they stay; rt_check, after it, names
# any that came meanwhile: that round's stalls and any missing size are
# theirs. Kernel threads (irq threads run SCHED_FIFO 50) and this
# script's own processes are not counted.

# rt_lock takes the host's real-time benchmark lock for the rest of the
# script (waiting up to 10 minutes for another holder).
rt_lock() {
	if ! { exec {rt_lock_fd}>>"${GOFI_RT_LOCK:-/tmp/gofi-rt.lock}"; } 2>/dev/null; then
		echo "$(basename "$0"): cannot open ${GOFI_RT_LOCK:-/tmp/gofi-rt.lock} (another user's?): running without the lock" >&2
		return 0
	fi
	if ! flock -w 600 "$rt_lock_fd"; then
		echo "$(basename "$0"): another real-time benchmark held ${GOFI_RT_LOCK:-/tmp/gofi-rt.lock} for 10 minutes" >&2
		exit 3
	fi
}

# rt_others prints one line per real-time (SCHED_FIFO or SCHED_RR) user
# thread that is not of this script: pid, priority, CPU, command.
rt_others() {
	ps -eLo pid=,ppid=,tid=,cls=,rtprio=,psr=,comm= | awk -v me="$$" '
		{ parent[$1] = $2 }
		($4 == "FF" || $4 == "RR") && $1 != 2 && $2 != 2 { rt[$3] = $1 " prio " $5 " CPU " $6 " " $7 }
		END {
			for (t in rt) {
				split(rt[t], f, " "); p = f[1]; ours = 0
				for (i = 0; i < 64 && p > 1; i++) { if (p == me) { ours = 1; break }; p = parent[p] }
				if (!ours) print "pid " rt[t]
			}
		}' | sort -u
}

# rt_wait waits up to RTWAIT seconds for other real-time user threads to
# go; those that stay are named in the output.
rt_wait() {
	local t=0 o
	while o=$(rt_others) && [ -n "$o" ] && [ "$t" -lt "${RTWAIT:-60}" ]; do
		sleep 1
		t=$((t + 1))
	done
	if [ -n "$o" ]; then
		echo "  # other real-time threads present (after ${t} s): this round's stalls and timeouts may be theirs:"
		echo "$o" | sed 's/^/  #   /'
	elif [ "$t" -gt 0 ]; then
		echo "  # waited ${t} s for other real-time threads to go"
	fi
}

# rt_check names the real-time user threads of others running now.
rt_check() {
	local o
	o=$(rt_others)
	if [ -n "$o" ]; then
		echo "  # other real-time threads ran beside this round: its stalls and timeouts may be theirs:"
		echo "$o" | sed 's/^/  #   /'
	fi
}
