#!/usr/bin/env bash
# vs_libfabric_shm.sh: gofi's shm provider against libfabric's on this host,
# in the same run, alternating, with the placement of every round and the
# ratios ours/libfabric of medians per placement.
#
#   benchmarks/vs_libfabric_shm.sh            # 5 alternating rounds
#   ROUNDS=9 benchmarks/vs_libfabric_shm.sh
#   PARTS=pingpong RUNS=default benchmarks/vs_libfabric_shm.sh
#
# Parts (PARTS, default "pingpong rate"; "cross" runs only when named):
#
#   pingpong: perftest pingpong -compare -p shm per size (SIZES, default
#     8 4 KiB 64 KiB 1 MiB), i.e. gofi, libfabric's fi_pingpong -p shm -e
#     rdm and Go net alternating, once per run length (RUNS, default "long
#     default"): long runs are 200k / 50k / 20k / 3k iterations, default
#     runs fi_pingpong's own counts (10k / 10k / 1k / 100). perftest probes
#     the placement before and after every round and prints a table per
#     placement when the run saw both. RUNS may also name "100": 100
#     iterations at every size (issue 12's first-use check: the first
#     hundred messages should cost what a long run's do); with "long" and
#     "100" both run, a last table gives per size the medians of both
#     and their ratio 100 / long, for gofi and for fi_pingpong (whose
#     C process has its own first-use costs).
#   rate: the go test benchmarks of this directory (built once),
#     BenchmarkFiMsgRate/size=8B/gofi (8 B, window 64: msgs/s) and
#     BenchmarkFiStream/size=1MiB/gofi (1 MiB, window 8: MB/s), against
#     fi_pingpong's 8 B and 1 MiB ping-pong (fi_pingpong has no rate mode
#     and Debian ships no fi_bw: libfabric's message rate is 1/one-way
#     latency, its bandwidth size/one-way time). Each round is placed by
#     `perftest place` before and after it; medians are printed per
#     placement (near, far; a round that moved counts as mixed).
#   cross: the rendezvous protocols' crossover per placement: perftest
#     latency per size (CROSS_SIZES, default 32k ... 1m) with single copy
#     forced, segments forced and the transport's own choice, alternated
#     (see the part below).
#
# libfabric-bin (fi_pingpong) is installed with apt-get when missing. The
# machine is bimodal (vCPU placement) and shared: only same-run ratios of
# medians in one placement mean anything. Needs bash, awk, sort, go.
set -u
ROUNDS=${ROUNDS:-5}
PARTS=${PARTS:-pingpong rate}
RUNS=${RUNS:-long default}
SIZES=${SIZES:-8 4096 65536 1048576}
PP8_ITERS=${PP8_ITERS:-100000}
PP1M_ITERS=${PP1M_ITERS:-1000}
RATE_N=${RATE_N:-500000}
STREAM_N=${STREAM_N:-1000}
PORT=${PORT:-47592}

here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! command -v fi_pingpong >/dev/null 2>&1; then
	echo "fi_pingpong missing: installing libfabric-bin" >&2
	SUDO=""
	[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo"
	$SUDO apt-get install -y libfabric-bin >&2 ||
		{ $SUDO apt-get update >&2 && $SUDO apt-get install -y libfabric-bin >&2; } ||
		echo "apt-get failed: libfabric figures will be missing" >&2
fi
have_fi=0
command -v fi_pingpong >/dev/null 2>&1 && have_fi=1

(cd "$here/.." && go build -o "$tmp/perftest" ./cmd/perftest) || { echo "build failed" >&2; exit 1; }
pt=$tmp/perftest

# long_iters SIZE -> the long run's iteration count
long_iters() {
	case $1 in
	8 | [0-9] | [0-9][0-9] | [0-9][0-9][0-9]) echo 200000 ;;
	*) if [ "$1" -lt 65536 ]; then echo 50000; elif [ "$1" -lt 1048576 ]; then echo 20000; else echo 3000; fi ;;
	esac
}

for part in $PARTS; do
	[ "$part" = pingpong ] || continue
	for run in $RUNS; do
		for size in $SIZES; do
			iflag=()
			[ "$run" = long ] && iflag=(-I "$(long_iters "$size")")
			[ "$run" = 100 ] && iflag=(-I 100)
			echo
			echo "## shm ping-pong, $run run, $size bytes"
			PERFTEST_ROUNDS=$ROUNDS "$pt" pingpong -compare -p shm -S "$size" "${iflag[@]}" 2>/dev/null | tee "$tmp/pp"
			# the table's row: bytes, iters, gofi usec, libfabric usec, ...
			awk -v r="$run" -v s="$size" '$1 ~ /^[0-9]+[kmg]?$/ && NF >= 5 { print r, s, $3, $4; exit }' "$tmp/pp" >>"$tmp/runs"
		done
	done
done
if [[ " $RUNS " == *" long "* && " $RUNS " == *" 100 "* ]] && [ -s "$tmp/runs" ]; then
	echo
	echo "## first use: medians of the 100-iteration run against the long run, usec/xfer (ratio 100 / long; 1 = no first-use penalty)"
	printf '%-8s %10s %10s %8s %10s %10s %8s\n' bytes "gofi 100" "gofi long" ratio "libfab 100" "libfab long" ratio
	for size in $SIZES; do
		awk -v s="$size" '$2 == s { v[$1 "g"] = $3; v[$1 "f"] = $4 }
			function r(a, b) { return (a + 0 > 0 && b + 0 > 0) ? sprintf("%.2f", a / b) : "-" }
			END { printf "%-8s %10s %10s %8s %10s %10s %8s\n", s, v["100g"], v["longg"], r(v["100g"], v["longg"]), v["100f"], v["longf"], r(v["100f"], v["longf"]) }' "$tmp/runs"
	done
fi

# cross: where single copy and segments cross over, per placement.
# perftest latency -p shm (p50 of CROSS_ITERS round trips) per size of
# CROSS_SIZES with single copy forced (GOFI_SHM_CMA_MIN=1), segments
# forced (FI_SHM_DISABLE_CMA=1) and the transport's own choice,
# alternated, ROUNDS times; a run counts under the placement its probes
# saw (near or far; dropped when it moved during the run).
if [[ " $PARTS " == *" cross "* ]]; then
	: >"$tmp/cross"
	for r in $(seq 1 "$ROUNDS"); do
		for size in ${CROSS_SIZES:-32k 64k 128k 256k 512k 1m}; do
			for mode in cma seg auto; do
				case $mode in
				cma) env=(GOFI_SHM_CMA_MIN=1) ;;
				seg) env=(FI_SHM_DISABLE_CMA=1) ;;
				*) env=() ;;
				esac
				env "${env[@]}" "$pt" latency -p shm -S "$size" -I "${CROSS_ITERS:-1000}" 2>&1 |
					awk -v m="$mode" '/^# placement/ { if (match($0, /\((near|far)/)) { c = substr($0, RSTART + 1, RLENGTH - 1); if (cls != "" && cls != c) moved = 1; cls = c } }
						$1 ~ /^[0-9]+[kmg]?$/ && NF == 7 { s = $1; p50 = $3 }
						END { if (s != "" && !moved && cls != "") print cls, s, m, p50 }' >>"$tmp/cross"
			done
		done
		echo "cross: round $r/$ROUNDS done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
	done
	echo
	echo "## shm rendezvous crossover: p50 half round trip (us), medians over runs per placement (n runs)"
	printf '%-5s %-6s %16s %16s %16s\n' placement size "single copy" segments "own choice"
	for cls in near far; do
		for size in ${CROSS_SIZES:-32k 64k 128k 256k 512k 1m}; do
			row=""
			for mode in cma seg auto; do
				v=$(awk -v c="$cls" -v s="$size" -v m="$mode" '$1 == c && $2 == s && $3 == m { print $4 }' "$tmp/cross" | sort -g |
					awk '{ a[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) printf "%.2f (%d)", a[(NR+1)/2], NR; else printf "%.2f (%d)", (a[NR/2] + a[NR/2+1]) / 2, NR }')
				row="$row$(printf ' %16s' "$v")"
			done
			printf '%-5s %-6s%s\n' "$cls" "$size" "$row"
		done
	done
fi

case " $PARTS " in *" rate "*) ;; *) exit 0 ;; esac

(cd "$here/.." && go test -c -o "$tmp/bench.test" ./benchmarks) || { echo "build failed" >&2; exit 1; }

# fi_pingpong SIZE ITERS -> "usec_per_xfer MB_per_s" (one-way; the line
# under fi_pingpong's "bytes ... usec/xfer" header, size printed as 8, 1m)
fi_pp() {
	local size=$1 iters=$2 try out
	for try in 1 2 3; do
		timeout 300 fi_pingpong -p shm -e rdm -S "$size" -I "$iters" -B "$PORT" >"$tmp/srv" 2>&1 &
		local srv=$!
		sleep 1
		out=$(timeout 300 fi_pingpong -p shm -e rdm -S "$size" -I "$iters" -P "$PORT" 127.0.0.1 2>&1)
		wait "$srv" 2>/dev/null
		local line
		line=$(printf '%s\n' "$out" | awk '/^bytes/ { getline; if (NF >= 8) print $7, $6 }' | tail -1)
		if [ -n "$line" ]; then
			echo "$line"
			return 0
		fi
		kill "$srv" 2>/dev/null
		sleep 1
	done
	echo "fi_pingpong failed: $out" >&2
	return 1
}

# go_bench REGEX N UNIT -> the value printed before UNIT
go_bench() {
	"$tmp/bench.test" -test.run '^$' -test.bench "$1" -test.benchtime "$2x" 2>&1 |
		awk -v u="$3" '/^Benchmark/ { for (i = 2; i <= NF; i++) if ($i == u) v = $(i-1) } END { if (v != "") print v; else exit 1 }'
}

# place -> "class rt_ns" of the placement now
place() {
	"$pt" place -json | awk -F'[:,]' '/"rt_ns"/ { rt = $2 + 0 } /"class"/ { gsub(/[" ]/, "", $2); c = $2 } END { printf "%s %.0f\n", c, rt }'
}

: >"$tmp/res"
: >"$tmp/place"
rec() { awk -v r="$r" '{ print $0, r }' >>"$tmp/res"; } # result line + round
for r in $(seq 1 "$ROUNDS"); do
	before=$(place)
	echo "round $r/$ROUNDS ($before)" >&2
	if [ $have_fi = 1 ]; then
		if v=$(fi_pp 8 "$PP8_ITERS"); then
			set -- $v
			echo "lib_lat8 $(awk -v x="$1" 'BEGIN{print x*1000}')" | rec
			echo "lib_rate8 $(awk -v x="$1" 'BEGIN{print 1e6/x}')" | rec
		fi
	fi
	v=$(go_bench 'FiPingPong/prov=shm/size=8B$' "$((PP8_ITERS * 2))" ns/oneway) && echo "our_lat8 $v" | rec
	v=$(go_bench 'FiMsgRate/size=8B/gofi$' "$RATE_N" msgs/s) && echo "our_rate8 $v" | rec
	if [ $have_fi = 1 ]; then
		if v=$(fi_pp 1048576 "$PP1M_ITERS"); then
			set -- $v
			echo "lib_bw1m $(awk -v x="$1" 'BEGIN{print 1048576/x}')" | rec
		fi
	fi
	v=$(go_bench 'FiPingPong/prov=shm/size=1MiB$' "$PP1M_ITERS" ns/oneway) &&
		echo "our_bw1m $(awk -v x="$v" 'BEGIN{print 1048576/x*1000}')" | rec
	v=$(go_bench 'FiStream/size=1MiB/gofi$' "$STREAM_N" MB/s) && echo "our_stream1m $v" | rec
	after=$(place)
	set -- $before $after
	cls=$1
	[ "$1" != "$3" ] && cls=mixed
	echo "$r $cls $(((${2:-0} + ${4:-0}) / 2))" >>"$tmp/place"
done

# med KEY CLASS -> median of KEY over the rounds of CLASS ("" = all)
med() {
	awk -v k="$1" -v c="$2" 'NR == FNR { cls[$1] = $2; next } $1 == k && (c == "" || cls[$3] == c) { print $2 }' "$tmp/place" "$tmp/res" | sort -g |
		awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2] + a[NR/2+1]) / 2 }'
}
all() {
	awk -v k="$1" -v c="$2" 'NR == FNR { cls[$1] = $2; next } $1 == k && (c == "" || cls[$3] == c) { printf "%s ", $2 }' "$tmp/place" "$tmp/res"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || b == 0) print "n/a"; else printf "%.2f", a / b }'; }
# median over rounds of ours/libfabric within the round: a round where the
# shared machine stalled both sides still gives a fair ratio
rmed() {
	awk -v o="$1" -v l="$2" -v c="$3" 'NR == FNR { cls[$1] = $2; next } c != "" && cls[$3] != c { next }
		$1 == o { a[$3] = $2 } $1 == l { b[$3] = $2 }
		END { for (r in a) if ((r in b) && b[r] > 0) printf "%.4f\n", a[r] / b[r] }' "$tmp/place" "$tmp/res" | sort -g |
		awk '{ a[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) printf "%.2f", a[(NR+1)/2]; else printf "%.2f", (a[NR/2] + a[NR/2+1]) / 2 }'
}
line() { # label ours lib target class
	local o l
	o=$(med "$2" "$5")
	l=$(med "$3" "$5")
	printf '%-34s %14s %14s %8s %8s   (%s)\n' "$1" "$o" "$l" "$(ratio "$o" "$l")" "$(rmed "$2" "$3" "$5")" "$4"
	echo "    gofi [$(all "$2" "$5")]  libfabric [$(all "$3" "$5")]"
}

echo
echo "## message rate and streaming: placement per round (round class rt-ns): $(awk '{ printf "%s %s %s; ", $1, $2, $3 }' "$tmp/place")"
for cls in "" near far mixed; do
	n=$(awk -v c="$cls" 'c == "" || $2 == c' "$tmp/place" | wc -l)
	[ "$n" -eq 0 ] && continue
	[ -n "$cls" ] && [ "$n" -eq "$ROUNDS" ] && continue # all rounds in one class: printed already
	rt=$(awk -v c="$cls" 'c == "" || $2 == c { print $3 }' "$tmp/place" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR+1)/2)] }')
	echo
	echo "medians of ${n} of $ROUNDS alternating rounds, placement: ${cls:-all rounds} (median cache-line round trip ${rt} ns)"
	printf '%-34s %14s %14s %8s %8s\n' "metric" "gofi" "libfabric" "ratio" "r-ratio"
	line "8 B one-way latency (ns)" our_lat8 lib_lat8 "target <= 0.70" "$cls"
	line "8 B message rate (msgs/s)" our_rate8 lib_rate8 "target >= 1.50; libfabric: ping-pong rate" "$cls"
	line "1 MiB ping-pong bandwidth (MB/s)" our_bw1m lib_bw1m "target >= 1.50" "$cls"
	line "1 MiB streaming bandwidth (MB/s)" our_stream1m lib_bw1m "target >= 1.50; libfabric: ping-pong" "$cls"
done
echo "ratio: of the medians; r-ratio: median of the per-round ratios"
