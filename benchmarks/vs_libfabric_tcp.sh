#!/usr/bin/env bash
# vs_libfabric_tcp.sh: gofi's tcp provider against libfabric's tcp provider
# (fi_pingpong -p tcp -e rdm) and a plain Go net TCP ping-pong, in the same
# run, alternating, with ratios. It is perftest's -compare mode, size by
# size:
#
#   benchmarks/vs_libfabric_tcp.sh              # 5 rounds, 8 B, 4 KiB, 64 KiB, 1 MiB
#   ROUNDS=9 SIZES="8 65536" benchmarks/vs_libfabric_tcp.sh
#
# libfabric-bin (fi_pingpong) is installed with apt-get when missing; if
# that fails, perftest still measures gofi and Go net and says so.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v fi_pingpong >/dev/null 2>&1; then
	sudo=""
	if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then sudo=sudo; fi
	{ $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libfabric-bin; } ||
		echo "vs_libfabric_tcp.sh: warning: could not install libfabric-bin" >&2
fi

bin=$(mktemp -d)/perftest
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/perftest

export PERFTEST_ROUNDS=${ROUNDS:-5}
# Each size's table says the placement of its rounds (the cache-line round
# trip between the vCPUs, probed before and after every round); when the
# rounds saw both placements, a table per placement follows.
for size in ${SIZES:-8 4096 65536 1048576}; do
	iters=5000
	[ "$size" -ge 65536 ] && iters=500
	echo
	echo "## tcp ping-pong, $size bytes, $iters iterations"
	"$bin" pingpong -compare -p tcp -S "$size" -I "$iters" 2>/dev/null
done
