package engine

import (
	"syscall"
	"unsafe"
)

// osYield gives the CPU back to the OS scheduler (sched_yield(2)). The raw
// call: it never blocks, so the Go scheduler need not hand this thread's
// P to another.
func osYield() { syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }

// napTS is osNap's request: 1 us, which the kernel stretches to the
// thread's timer slack (50 us by default).
var napTS = syscall.Timespec{Nsec: 1000}

// osNap blocks the thread briefly (nanosleep(2)), so that the kernel
// places it again when it wakes. The raw call: too short for the Go
// scheduler to need this thread's P elsewhere.
func osNap() {
	syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&napTS)), 0, 0)
}
