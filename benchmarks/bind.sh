# bind.sh: sourced by the vs_libfabric scripts of benchmarks/rma and
# benchmarks/atomic. With BIND=1 a benchmark's initiator runs on the first
# CPU of BIND_CPUS (default 0,1) and its target process on the second, for
# gofi's perftest and the C libfabric programs alike, so that both are
# compared in the same placement (unbound, on a loaded 2-CPU host, the
# scheduler often puts the two processes on one CPU for a while).
BIND=${BIND:-0}
BIND_CPUS=${BIND_CPUS:-0,1}
bind0=${BIND_CPUS%%,*}
bind1=${BIND_CPUS#*,}

# run [-t SECS] CMD...: CMD (under timeout SECS with -t); with BIND=1 on
# CPU bind0, and its target (CMD's first child process) on CPU bind1, the
# target's threads moved again for half a second to catch those it starts
# meanwhile (later ones inherit the CPU).
run() {
	local t=
	if [ "$1" = -t ]; then
		t=$2
		shift 2
	fi
	if [ "$BIND" != 1 ]; then
		${t:+timeout "$t"} "$@"
		return
	fi
	${t:+timeout "$t"} taskset -c "$bind0" "$@" &
	local p=$! ini c n=0
	ini=$p
	while [ -n "$t" ] && [ "$ini" = "$p" ] && kill -0 "$p" 2>/dev/null; do
		ini=$(pgrep -P "$p" | head -1 || true)
		ini=${ini:-$p}
	done
	while [ $n -lt 50 ] && kill -0 "$p" 2>/dev/null; do
		c=$(pgrep -P "$ini" | head -1 || true)
		if [ -n "$c" ]; then
			taskset -a -p -c "$bind1" "$c" >/dev/null 2>&1 || true
			n=$((n + 1))
			sleep 0.01
		else
			sleep 0.001
		fi
	done
	wait "$p"
}
bound=unbound
if [ "$BIND" = 1 ]; then
	bound="bound initiator CPU $bind0 target CPU $bind1"
fi
