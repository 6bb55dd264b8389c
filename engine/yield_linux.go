package engine

import "syscall"

// osYield gives the CPU back to the OS scheduler (sched_yield(2)). The raw
// call: it never blocks, so the Go scheduler need not hand this thread's
// P to another.
func osYield() { syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
