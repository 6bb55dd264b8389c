package getcpu

import (
	"unsafe"

	"github.com/klauspost/cpuid/v2"
	"golang.org/x/sys/unix"
)

// Implemented in getcpu_amd64.s.
func cpuidex(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
func rdpid() uint32  // RDPID: IA32_TSC_AUX
func rdtscp() uint32 // RDTSCP's ECX: IA32_TSC_AUX

// hasRDPID reports CPUID.(EAX=7,ECX=0):ECX[22].
func hasRDPID() bool {
	if max, _, _, _ := cpuidex(0, 0); max < 7 {
		return false
	}
	_, _, c, _ := cpuidex(7, 0)
	return c&(1<<22) != 0
}

// tscAllowed reports whether RDTSCP may run: prctl(PR_SET_TSC) can make
// it fault (RDPID is not gated by that bit).
func tscAllowed() bool {
	var v int32
	err := unix.Prctl(unix.PR_GET_TSC, uintptr(unsafe.Pointer(&v)), 0, 0, 0)
	return err != nil || v == unix.PR_TSC_ENABLE
}

var method = pick()

func pick() int {
	if hasRDPID() && agrees(viaRDPIDRead) {
		return viaRDPID
	}
	if cpuid.CPU.Has(cpuid.RDTSCP) && tscAllowed() && agrees(viaRDTSCPRead) {
		return viaRDTSCP
	}
	return viaSyscall
}

func viaRDPIDRead() int  { return int(rdpid() & cpuMask) }
func viaRDTSCPRead() int { return int(rdtscp() & cpuMask) }

// Current returns the CPU the calling thread runs on, or -1 if the
// system call it falls back on fails.
func Current() int {
	switch method {
	case viaRDPID:
		return int(rdpid() & cpuMask)
	case viaRDTSCP:
		return int(rdtscp() & cpuMask)
	}
	return Syscall()
}
