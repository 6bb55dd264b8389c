package main

import "syscall"

// rtNote is what a timeout waiting for the peer adds when this process
// runs real-time (SCHED_FIFO or SCHED_RR, as under chrt -f: tail.sh's RT):
// a real-time thread that has its CPU keeps it from every thread of its
// priority or below, so another real-time busy loop on the peer's CPU
// stops the peer for as long as it runs, and this side times out (the
// "hang" of 2026-11-25 16:09-16:17 UTC: a size lost in 6 of 35 pinned
// chrt -f 50 runs, gofi's rings idle, the peer's threads running 0 ns;
// benchmarks/rtguard.sh). Empty otherwise.
func rtNote() string {
	p, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETSCHEDULER, 0, 0, 0)
	if e != 0 {
		return ""
	}
	return rtNoteFor(int(p))
}

// rtNoteFor is rtNote for the scheduling policy p (sched_getscheduler's
// value, SCHED_RESET_ON_FORK included).
func rtNoteFor(p int) string {
	const resetOnFork = 0x40000000
	name := ""
	switch p &^ resetOnFork {
	case 1:
		name = "SCHED_FIFO"
	case 2:
		name = "SCHED_RR"
	default:
		return ""
	}
	return " (this process runs real-time, " + name + ": a real-time busy loop of its priority or above on the peer's CPU stops the peer for as long as it runs; see benchmarks/rtguard.sh)"
}
