#!/usr/bin/env bash
# vs_libfabric.sh: gofi's remote atomics against libfabric 1.17's, same run,
# alternating: perftest atomic (gofi) and fi_atomic_bench.c (libfabric,
# built here against libfabric-dev) on one uint64 of a target process:
# fetch-add and cswap latency (one in flight: median and p99 in µs) and
# the rate of non-fetching adds (window W in flight).
#
#   benchmarks/atomic/vs_libfabric.sh                # shm and tcp, 5 rounds
#   ROUNDS=9 PROVS=shm N=50000 benchmarks/atomic/vs_libfabric.sh
#   BIND=1 benchmarks/atomic/vs_libfabric.sh       # initiator on CPU 0, target on CPU 1 (../bind.sh)
#
# gofi shm targets AllocMR memory (the initiator maps it and uses the
# processor's atomics; the target runs nothing); libfabric's shm executes
# atomics in the target's progress, so its target spins on fi_cq_read.
# gofi tcp is compared with libfabric's tcp;ofi_rxm (its tcp provider has
# no atomics of its own). Each round prints its placement (perftest place:
# near/far cache-line round trip) and the load; the summary gives medians
# over rounds and the ratio gofi/libfabric (< 1: gofi faster). The machine
# is shared and bimodal: only same-run ratios mean anything.
set -eu
ROUNDS=${ROUNDS:-5}
PROVS=${PROVS:-shm tcp}
N=${N:-20000}
W=${W:-64}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=../bind.sh
. "$here/../bind.sh" # run, BIND, bound
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ ! -e /usr/include/rdma/fi_atomic.h ]; then
	apt-get install -y libfabric-dev >/dev/null
fi
cc -O2 -o "$tmp/fi_atomic_bench" "$here/fi_atomic_bench.c" -lfabric
(cd "$root" && go build -o "$tmp/perftest" ./cmd/perftest)
out=$tmp/results
: >"$out"
for r in $(seq 1 "$ROUNDS"); do
	for p in $PROVS; do
		lp=$p
		[ "$p" = tcp ] && lp='tcp;ofi_rxm'
		place=$("$tmp/perftest" place | sed -n 's/.*(\([a-z]*\);.*/\1/p' | head -1)
		echo "# round $r $p placement ${place:-?} load $(cut -d' ' -f1-3 /proc/loadavg) $bound"
		run "$tmp/perftest" atomic -p "$p" -n "$N" -w "$W" | grep -v '^#' | sed "s/^/gofi $p $place /" | tee -a "$out"
		run "$tmp/perftest" atomic -p "$p" -n "$N" -w "$W" -target-spin | grep -v '^#' | sed "s/^/gofi-spin $p $place /" | tee -a "$out"
		run -t 300 "$tmp/fi_atomic_bench" -p "$lp" -n "$N" -w "$W" | sed "s/^/libfabric $p $place /" | tee -a "$out"
	done
done
echo
echo "# medians over rounds (latency µs: median of per-round medians; rate ops/s), ratio gofi/libfabric; $bound"
echo "# gofi: the target makes no gofi call; gofi-spin: it polls its CQ, as libfabric's must"
med() { sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}'; }
printf "%-5s %-6s %-10s %10s %10s %10s %7s %7s\n" prov place op gofi gofi-spin libfabric ratio spin-r
for p in $PROVS; do
	for place in near far; do
		for op in fetch-add cswap rate; do
			sel() { awk -v who="$1" -v p="$p" -v pl="$place" -v op="$op" '$1==who && $2==p && $3==pl && $4==op {print $5}' "$out" | med; }
			g=$(sel gofi)
			s=$(sel gofi-spin)
			l=$(sel libfabric)
			[ -z "$g" ] || [ -z "$l" ] && continue
			printf "%-5s %-6s %-10s %10s %10s %10s %7.2f %7.2f\n" "$p" "$place" "$op" "$g" "$s" "$l" \
				"$(awk -v g="$g" -v l="$l" 'BEGIN {print g/l}')" "$(awk -v g="$s" -v l="$l" 'BEGIN {print g/l}')"
		done
	done
done
