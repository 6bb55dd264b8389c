// Command tailholes attributes perftest's slow round trips to what the
// kernel ran on the CPUs while each lasted. It reads the round trips of
// `perftest latency -dump` (start on CLOCK_MONOTONIC, half round trip)
// and `perf script` of a `perf record -a -k CLOCK_MONOTONIC` taken over
// the same run (sched_switch, sys_enter_nanosleep, interrupts, hrtimers),
// and prints per message size: how often the two spinning threads were
// switched out, every other task that ran (the Go runtime's sysmon of
// each process, other threads of the two processes, kernel threads, other
// processes) with its count and time, and the round trips slower than -x
// times the median grouped by the tasks that ran during them.
// benchmarks/tailholes.sh runs the three steps.
//
// It imports nothing of gofi: it is a reader of two text formats.
package main
