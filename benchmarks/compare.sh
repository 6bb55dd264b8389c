#!/bin/sh
# Benchmark regression guard: runs the go test -bench suites in
# benchmarks/ (ring, match, copy path, shm, the public API: AV and shm
# round trips; tcp once its benchmarks land there), compares the run with
# a baseline using benchstat, and exits 1 when a benchmark got slower
# beyond the noise: benchstat finds the difference significant (p < 0.05)
# AND time per op grew by more than the threshold (default 10%), or
# allocations per op grew at all. Benchmarks the baseline has no row for
# are listed as UNGUARDED on stderr.
#
#   benchmarks/compare.sh                 compare with benchmarks/baseline.txt
#   benchmarks/compare.sh -update         measure and store a new baseline.txt
#   benchmarks/compare.sh -ref main       A/B in one run: build REV's suite and
#                                         the working tree's, run them
#                                         alternately, compare (use this on a
#                                         machine whose speed moves, like the
#                                         2-vCPU hosts: see MEASURED.md)
#
# Options: -count N (runs per side, default 6), -benchtime T (default
# 100ms), -bench REGEXP (default .), -threshold PCT (default 10),
# -keep DIR (keep the raw results there).
# Exit status: 0 no regression, 1 regression, 2 usage or build error.
set -eu

BENCHSTAT=${BENCHSTAT:-"go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"}
count=6
benchtime=100ms
bench=.
threshold=10
update=0
ref=
keep=

usage() { sed -n '2,/^set -eu/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit 2; }

while [ $# -gt 0 ]; do
	case $1 in
	-update) update=1 ;;
	-ref) ref=${2:?-ref needs a revision}; shift ;;
	-count) count=${2:?}; shift ;;
	-benchtime) benchtime=${2:?}; shift ;;
	-bench) bench=${2:?}; shift ;;
	-threshold) threshold=${2:?}; shift ;;
	-keep) keep=${2:?}; shift ;;
	-h|-help|--help) usage ;;
	*) echo "compare.sh: unknown argument $1" >&2; usage ;;
	esac
	shift
done
case $count in ''|*[!0-9]*) echo "compare.sh: -count $count: want a number" >&2; exit 2 ;; esac
case $threshold in ''|*[!0-9.]*) echo "compare.sh: -threshold $threshold: want a percentage" >&2; exit 2 ;; esac

root=$(cd "$(dirname "$0")/.." && pwd)
baseline=$root/benchmarks/baseline.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# build DIR OUT: compile DIR's benchmark suite into OUT.
build() {
	(cd "$1" && go test -c -o "$2" ./benchmarks/) || { echo "compare.sh: building the suite in $1 failed" >&2; exit 2; }
}

# run BIN OUT: one pass of the suite (-count 1), appended to OUT.
run() {
	(cd "$root/benchmarks" && "$1" -test.run '^$' -test.bench "$bench" -test.benchtime "$benchtime" \
		-test.benchmem -test.count 1) >>"$2" || { echo "compare.sh: benchmark run failed" >&2; exit 2; }
}

build "$root" "$tmp/new.test"
old=$baseline
if [ -n "$ref" ]; then
	mkdir "$tmp/ref"
	(cd "$root" && git archive --format=tar "$ref") | tar -x -C "$tmp/ref" ||
		{ echo "compare.sh: cannot extract $ref" >&2; exit 2; }
	build "$tmp/ref" "$tmp/old.test"
	old=$tmp/old.txt
	: >"$old"
fi
: >"$tmp/new.txt"
i=1
while [ "$i" -le "$count" ]; do
	printf '\rcompare.sh: pass %d/%d' "$i" "$count" >&2
	if [ -n "$ref" ]; then
		run "$tmp/old.test" "$old"
	fi
	run "$tmp/new.test" "$tmp/new.txt"
	i=$((i + 1))
done
printf '\r%40s\r' '' >&2
if [ -n "$keep" ]; then
	mkdir -p "$keep"
	cp "$tmp/new.txt" "$keep/new.txt"
	[ -n "$ref" ] && cp "$old" "$keep/old.txt"
fi

if [ "$update" = 1 ]; then
	{
		echo "# benchmarks/baseline.txt: written by benchmarks/compare.sh -update"
		echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo unknown) $(go version | cut -d' ' -f3) -count $count -benchtime $benchtime"
		cat "$tmp/new.txt"
	} >"$baseline"
	echo "compare.sh: wrote $baseline"
	exit 0
fi
[ -f "$old" ] || { echo "compare.sh: no baseline ($baseline): run with -update first" >&2; exit 2; }

$BENCHSTAT "$old" "$tmp/new.txt" || { echo "compare.sh: benchstat failed" >&2; exit 2; }

# A benchmark with no row in the baseline is compared with nothing
# (benchstat prints "?"): name it, so a new benchmark does not go
# unguarded silently. Its rows belong in the baseline, measured on a quiet
# machine (-update, or appended with a comment saying when and how).
names() { awk '/^Benchmark/ { n = $1; sub(/-[0-9]+$/, "", n); print n }' "$1" | sort -u; }
unguarded=$(names "$old" >"$tmp/old.names"; names "$tmp/new.txt" | comm -23 - "$tmp/old.names")
if [ -n "$unguarded" ]; then
	echo "compare.sh: UNGUARDED (no baseline row, not compared):" >&2
	echo "$unguarded" | sed 's/^/  /' >&2
fi
$BENCHSTAT -format csv "$old" "$tmp/new.txt" 2>/dev/null >"$tmp/stat.csv" || { echo "compare.sh: benchstat failed" >&2; exit 2; }

# Each CSV table starts with a ",sec/op,CI,..." row naming its unit; data
# rows end with the change ("+12.34%", "~" when not significant) and P.
awk -F, -v th="$threshold" '
	$1 == "" && $3 == "CI" { unit = $2; next }
	$1 == "" || $1 == "geomean" || NF < 7 { next }
	{
		delta = $(NF-1)
		if (delta == "~" || delta == "?") next
		pct = delta; sub(/%$/, "", pct)
		if (unit == "sec/op" && (pct == "+Inf" || pct + 0 > th + 0)) {
			printf "REGRESSION %s: %s slower (%s)\n", $1, delta, $NF; bad = 1
		}
		if (unit == "allocs/op" && (pct == "+Inf" || pct + 0 > 0)) {
			printf "REGRESSION %s: allocations %s (%s)\n", $1, delta, $NF; bad = 1
		}
	}
	END { exit bad ? 1 : 0 }
' "$tmp/stat.csv" && { echo "compare.sh: no regression beyond ${threshold}% (p < 0.05)"; exit 0; }
echo "compare.sh: regression (threshold ${threshold}%, p < 0.05)" >&2
exit 1
