// Package getcpu owns one question: which CPU does the calling thread run
// on? Current answers it without a system call where the processor
// allows, and with getcpu(2) elsewhere.
//
// On amd64 Linux writes (node << 12) | cpu into every CPU's IA32_TSC_AUX
// register (that is how the vDSO's getcpu answers); RDPID reads it alone
// and RDTSCP with the time-stamp counter, both from user mode, so Current
// reads it with RDPID when cpuid says the CPU has it, or else RDTSCP, and
// keeps the low 12 bits. At start-up the package checks one such reading
// against the system call (a hypervisor or kernel that leaves the
// register unset would answer 0 everywhere) and falls back to getcpu(2)
// when they disagree, when the CPU has neither instruction, and on every
// other architecture. A thread may move between the reading and its use,
// as with the system call: the answer is a hint, never a pin.
//
// On the 2-vCPU AMD EPYC KVM guest (BenchmarkGetCPU, -count 10,
// 2026-11-25, load 3.8) medians were: Current (RDPID) 2.97 ns, RDPID
// alone 2.47, RDTSCP 18.95, getcpu(2) 155.35.
//
// It imports only golang.org/x/sys/unix and github.com/klauspost/cpuid/v2
// (the RDTSCP flag; RDPID, which cpuid v2.4.2 does not name, comes from
// CPUID leaf 7 ECX bit 22 read here). It is imported by net, shm, coll
// and engine. This is an internal package of gofi: it carries no
// compatibility promise. It is Linux only.
package getcpu
