package getcpu

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Syscall returns the CPU the calling thread runs on from getcpu(2), or
// -1 if the system call fails. It is Current's fallback.
func Syscall() int {
	var c uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&c)), 0, 0); e != 0 {
		return -1
	}
	return int(c)
}

// cpuMask is the low 12 bits of IA32_TSC_AUX: the CPU (the node above).
const cpuMask = 1<<12 - 1

// How Current reads the CPU.
const (
	viaSyscall = iota
	viaRDTSCP
	viaRDPID
)

// Method names the way Current reads the CPU: "rdpid", "rdtscp" or
// "syscall".
func Method() string {
	switch method {
	case viaRDPID:
		return "rdpid"
	case viaRDTSCP:
		return "rdtscp"
	}
	return "syscall"
}

// agrees reports whether read gives the system call's answer: the
// system call, read and the system call again, up to 8 times, until the
// two system calls agree (a thread that moved between them says nothing).
func agrees(read func() int) bool {
	for range 8 {
		a := Syscall()
		r := read()
		if b := Syscall(); a >= 0 && a == b {
			return r == a
		}
	}
	return false
}
