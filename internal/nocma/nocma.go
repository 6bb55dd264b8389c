package nocma

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Env is the environment variable that carries the state: "exec" asks
// Init to install the filter and re-execute, "on" says it is installed.
const Env = "GOFI_NOCMA"

// Active reports whether this process runs under the filter.
func Active() bool { return os.Getenv(Env) == "on" }

// Environ returns the environment for a child that should run under the
// filter: the current one with Env=exec.
func Environ() []string { return withEnv("exec") }

// withEnv returns the environment with Env set to v (and only once: the
// first of duplicate entries is the one programs see).
func withEnv(v string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if len(kv) <= len(Env) || kv[:len(Env)+1] != Env+"=" {
			env = append(env, kv)
		}
	}
	return append(env, Env+"="+v)
}

// Init installs the filter and re-executes the program when Env is
// "exec"; otherwise it does nothing. On failure it exits with status 3
// and a message: a child that asked for the filter must not run without.
func Init() {
	if os.Getenv(Env) != "exec" {
		return
	}
	if err := install(); err != nil {
		fmt.Fprintf(os.Stderr, "nocma: %v\n", err)
		os.Exit(3)
	}
	err := unix.Exec("/proc/self/exe", os.Args, withEnv("on"))
	fmt.Fprintf(os.Stderr, "nocma: exec: %v\n", err)
	os.Exit(3)
}

// BPF instructions of a seccomp filter.
func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }

func jeq(k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: jt, Jf: jf, K: k}
}

// install puts a filter on the calling thread: process_vm_readv and
// process_vm_writev fail with EPERM, everything else is allowed.
func install() error {
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = unix.AUDIT_ARCH_X86_64
	case "arm64":
		arch = unix.AUDIT_ARCH_AARCH64
	default:
		return fmt.Errorf("no seccomp filter for %s", runtime.GOARCH)
	}
	const (
		offNr   = 0 // struct seccomp_data: int nr; __u32 arch; ...
		offArch = 4
	)
	prog := []unix.SockFilter{
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArch),
		jeq(arch, 1, 0),
		stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ALLOW), // foreign arch: leave it
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offNr),
		jeq(unix.SYS_PROCESS_VM_READV, 2, 0),
		jeq(unix.SYS_PROCESS_VM_WRITEV, 1, 0),
		stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ALLOW),
		stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM)),
	}
	runtime.LockOSThread() // the filter is per thread until the exec
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_SECCOMP): %w", err)
	}
	return nil
}
