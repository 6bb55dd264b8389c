//go:build !amd64

package getcpu

const method = viaSyscall

// Current returns the CPU the calling thread runs on, or -1 if getcpu(2)
// fails.
func Current() int { return Syscall() }
