#!/usr/bin/env bash
# run.sh: gofi against MPICH on the all-to-all of a job on this host, side
# by side under the same launcher (mpiexec.hydra), alternating, at several
# job sizes. gofi's ranks get a private 64 MB tmpfs as their shm directory
# (a container's /dev/shm); MPICH gets the host's /dev/shm. Root is needed
# for the private tmpfs (unshare -m, mount).
#
# usage: benchmarks/alltoall/run.sh [-n "8 16 32 64"] [-r reps] [-s size] [-k msg|tagged] [-R rounds]
#
# It prints the placement (perftest place) first, then one line per run and
# a table of medians: the slowest rank's time for the timed rounds, and
# the whole job's wall time (start-up included) for each side, with the
# ratio gofi / MPICH (below 1: gofi faster).
set -euo pipefail
cd "$(dirname "$0")/../.."

ns="8 16 32 64"
reps=3
size=64
kind=msg
rounds=2
while getopts "n:r:s:k:R:" o; do
	case $o in
	n) ns=$OPTARG ;;
	r) reps=$OPTARG ;;
	s) size=$OPTARG ;;
	k) kind=$OPTARG ;;
	R) rounds=$OPTARG ;;
	*) exit 2 ;;
	esac
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/alltoall" ./benchmarks/alltoall
go build -o "$tmp/perftest" ./cmd/perftest
mpicc.mpich -O2 -o "$tmp/alltoall-mpi" benchmarks/mpi/alltoall.c

"$tmp/perftest" place 2>&1 | head -3 || true
echo "# $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); size $size, kind $kind, $rounds timed rounds"

now() { date +%s.%N; }

# mpich N: prints "time wall"
mpich() {
	local t0 t1 out
	t0=$(now)
	out=$(mpiexec.hydra -n "$1" "$tmp/alltoall-mpi" -size "$size" -rounds "$rounds")
	t1=$(now)
	echo "$out" >&2
	echo "$(echo "$out" | awk '{for(i=1;i<=NF;i++) if($i=="time") print $(i+1)}') $(echo "$t1 - $t0" | bc)"
}

# gofi N: prints "time wall"
gofi() {
	local t0 t1 out
	t0=$(now)
	out=$(unshare -m sh -c "mkdir -p $tmp/shm && mount -t tmpfs -o size=64m,mode=0700 tmpfs $tmp/shm &&
		GOFI_SHM_DIR=$tmp/shm mpiexec.hydra -n $1 $tmp/alltoall -size $size -kind $kind -rounds $rounds")
	t1=$(now)
	echo "$out" >&2
	echo "$(echo "$out" | awk '{for(i=1;i<=NF;i++) if($i=="time") print $(i+1)}') $(echo "$t1 - $t0" | bc)"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

printf "%-6s %12s %12s %8s %12s %12s %8s\n" ranks mpich_s gofi_s ratio mpich_wall gofi_wall ratio > "$tmp/table"
for n in $ns; do
	: > "$tmp/m" ; : > "$tmp/g"
	for _ in $(seq "$reps"); do
		mpich "$n" >> "$tmp/m"
		gofi "$n" >> "$tmp/g"
	done
	mt=$(cut -d' ' -f1 "$tmp/m" | median); mw=$(cut -d' ' -f2 "$tmp/m" | median)
	gt=$(cut -d' ' -f1 "$tmp/g" | median); gw=$(cut -d' ' -f2 "$tmp/g" | median)
	printf "%-6s %12.4f %12.4f %8.3f %12.2f %12.2f %8.3f\n" "$n" "$mt" "$gt" "$(echo "$gt / $mt" | bc -l)" \
		"$mw" "$gw" "$(echo "$gw / $mw" | bc -l)" >> "$tmp/table"
done
echo "# medians of $reps alternating runs"
cat "$tmp/table"
