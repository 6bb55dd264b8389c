#!/usr/bin/env bash
# vs_libfabric.sh: gofi's RMA against libfabric 1.17's, same run,
# alternating: perftest rma (gofi) and fi_rma_bench.c (libfabric, built
# here against libfabric-dev) writing and reading a target process's
# registered memory: latency (one in flight: median and p99 in µs) and
# bandwidth (window W in flight, MB/s) per size.
#
#   benchmarks/rma/vs_libfabric.sh                      # shm and tcp, 5 rounds
#   ROUNDS=9 PROVS=shm SIZES=8,1048576 benchmarks/rma/vs_libfabric.sh
#   MEM=alloc benchmarks/rma/vs_libfabric.sh            # gofi target memory from AllocMR
#   BIND=1 benchmarks/rma/vs_libfabric.sh               # initiator on CPU 0, target on CPU 1
#
# Two gofi rows: "gofi", whose target makes no gofi call (shm: the
# initiator copies with process_vm_writev/readv, or into AllocMR memory it
# maps; tcp: the target's event loop), and "gofi-spin", whose target polls
# its CQ in a loop (shm: small operations are then taken by its progress,
# the quick requests). libfabric's shm and tcp;ofi_rxm move RMA data in
# the target's progress, so its target spins on fi_cq_read. Each round
# prints its placement (perftest place: near/far cache-line round trip)
# and the load; the summary gives medians over rounds and the ratios
# gofi/libfabric and gofi-spin/libfabric (latency: < 1 gofi faster;
# bandwidth: > 1 gofi faster). On tcp, sizes from 64 KiB also get a Go
# net baseline (perftest bw -p net: the same window of messages streamed
# over TCP loopback to a peer process) and the ratio gofi/Go net of
# write bandwidth (> 1 gofi faster). The machine is shared: only same-run
# ratios mean anything.
#
# How the targets wait, tcp, 8 B (perf record of 22 000 operations each,
# fi_rma_bench -t write-lat,read-lat against perftest rma -tests
# write-lat,read-lat, 2026-11-25, load 14-30): libfabric's target calls
# fi_cq_read in a loop without a pause (fibench.h, serve), and each call
# runs tcp;ofi_rxm's progress, a poll(2) of its sockets with a zero
# timeout: 158-181 polls per operation on each side, no sleep and no
# yield, so each process always wants a whole CPU. gofi's target makes no
# call at all: its event loop reads the request, answers it and polls its
# sockets for at most 100 us after the last traffic (sched_yield between
# passes) before it sleeps in epoll_wait (net/spin.go): 1.3 reads and 1.3
# yields per operation. The gofi-spin target polls its CQ in a loop like
# libfabric's (Poll then reads the sockets itself, yielding when nothing
# came), so gofi-spin against libfabric is the like-for-like comparison
# (both targets spend a CPU); the gofi row is what libfabric's tcp cannot
# do (a target that makes no call), and it spends a CPU only while
# requests keep coming.
#
# Unbound (the default), the scheduler places the two processes, and on a
# loaded 2-CPU host it often puts both on one CPU for a while: an 8-byte
# tcp operation then costs both sides' system calls one after the other
# (gofi's spinners hand the CPU over with sched_yield, ~21 us against
# ~13 us on two CPUs; libfabric's never yield, so the load balancer moves
# them apart sooner, and when it does not they wait for a time slice).
# That is a property of the two waiting strategies under load, not of the
# transport. With BIND=1 every tool's initiator runs on the first CPU of
# BIND_CPUS (default 0,1) and its target process on the second (taskset;
# the target's threads are moved as it starts), so both tools are
# compared in the same placement; each round's header says which.
set -eu
ROUNDS=${ROUNDS:-5}
PROVS=${PROVS:-shm tcp}
SIZES=${SIZES:-8,4096,65536,1048576}
N=${N:-2000}
W=${W:-16}
MEM=${MEM:-go}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../bind.sh
. "$here/../bind.sh" # run, BIND, bound
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ ! -e /usr/include/rdma/fi_rma.h ]; then
	apt-get install -y libfabric-dev >/dev/null
fi
cc -O2 -o "$tmp/fi_rma_bench" "$here/fi_rma_bench.c" -lfabric
(cd "$root" && go build -o "$tmp/perftest" ./cmd/perftest)
alloc=false
[ "$MEM" = alloc ] && alloc=true
out=$tmp/results
: >"$out"
for r in $(seq 1 "$ROUNDS"); do
	for p in $PROVS; do
		lp=$p
		[ "$p" = tcp ] && lp='tcp;ofi_rxm'
		place=$("$tmp/perftest" place | sed -n 's/.*(\([a-z]*\);.*/\1/p' | head -1)
		echo "# round $r $p placement ${place:-?} load $(cut -d' ' -f1-3 /proc/loadavg) $bound"
		run "$tmp/perftest" rma -p "$p" -s "$SIZES" -n "$N" -w "$W" -alloc="$alloc" | grep -v '^#' | sed "s/^/gofi $p $place /" | tee -a "$out"
		run "$tmp/perftest" rma -p "$p" -s "$SIZES" -n "$N" -w "$W" -alloc="$alloc" -target-spin | grep -v '^#' | sed "s/^/gofi-spin $p $place /" | tee -a "$out"
		run -t 600 "$tmp/fi_rma_bench" -p "$lp" -s "$SIZES" -n "$N" -w "$W" | sed "s/^/libfabric $p $place /" | tee -a "$out"
		if [ "$p" = tcp ]; then
			# Go's net over TCP loopback, the same window of messages of
			# each large size streamed to a peer process (perftest bw -p
			# net): the baseline of tcp write bandwidth.
			for s in $(echo "$SIZES" | tr , ' '); do
				[ "$s" -ge 65536 ] || continue
				"$tmp/perftest" bw -p net -S "$s" -W "$W" -I $((W * 32)) 2>/dev/null | awk -v s="$s" '$1 !~ /^#/ && $1 != "bytes" {print "write-bw", s, $3}' |
					sed "s/^/gonet $p $place /" | tee -a "$out"
			done
		fi
	done
done
echo
echo "# medians over rounds (latency: median µs; bandwidth: MB/s), ratios to libfabric; $bound"
echo "# gofi: the target makes no gofi call; gofi-spin: it polls its CQ, as libfabric's must"
printf "%-5s %-6s %-10s %9s %10s %10s %10s %7s %7s %9s %7s\n" prov place test size gofi gofi-spin libfabric ratio spin-r go-net net-r
med() { sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}'; }
for p in $PROVS; do
	for place in near far; do
		for test in write-lat read-lat write-bw read-bw; do
			for s in $(echo "$SIZES" | tr , ' '); do
				sel() { awk -v who="$1" -v p="$p" -v pl="$place" -v t="$test" -v s="$s" '$1==who && $2==p && $3==pl && $4==t && $5==s {print $6}' "$out" | med; }
				g=$(sel gofi)
				sp=$(sel gofi-spin)
				l=$(sel libfabric)
				n=$(sel gonet)
				[ -z "$g" ] || [ -z "$l" ] && continue
				printf "%-5s %-6s %-10s %9s %10s %10s %10s %7.2f %7.2f %9s %7s\n" "$p" "$place" "$test" "$s" "$g" "${sp:-?}" "$l" \
					"$(awk -v g="$g" -v l="$l" 'BEGIN {print (l > 0 ? g/l : 0)}')" "$(awk -v g="${sp:-0}" -v l="$l" 'BEGIN {print (l > 0 ? g/l : 0)}')" \
					"${n:--}" "$(awk -v g="$g" -v n="${n:-0}" 'BEGIN {if (n > 0) printf "%.2f", g/n; else print "-"}')"
			done
		done
	done
done
