// Package placement measures where two CPUs sit relative to each other:
// the round trip of one cache line between a thread pinned to each. On
// the 2-vCPU KVM guests gofi is developed on, the host moves the two
// vCPUs between a near placement (a round trip of about 70-110 ns) and a
// far one (250-400 ns), and every shared-memory figure moves with it, so
// every figure perftest prints carries this one.
//
// Probe pins two threads of the calling process to the two CPUs and bounces
// an atomic word between them; ProbeTail does the same timing every round
// trip, for comparing tails against the machine's own. Pair chooses the
// two CPUs from the affinity masks of two processes (the run's placement:
// pinned processes give their CPUs, unpinned ones the first two CPUs they
// may share), Allowed reads this thread's mask and Pin pins the calling
// goroutine's thread.
//
// It imports only the standard library and golang.org/x/sys/unix, and is
// imported by cmd/perftest, benchmarks and net (FarNs). This is an
// internal package of gofi: it carries no compatibility promise. It is
// Linux only.
package placement
