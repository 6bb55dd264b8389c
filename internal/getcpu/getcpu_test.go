package getcpu

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// readers are every way of reading the CPU this machine allows.
func readers() map[string]func() int {
	m := map[string]func() int{"Current": Current, "Syscall": Syscall}
	for name, r := range fastReaders() {
		m[name] = r
	}
	return m
}

// TestCurrent pins the thread to each CPU it may run on in turn and
// checks that Current, the system call and every fast reader the CPU has
// name that CPU.
func TestCurrent(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Skipf("sched_getaffinity: %v", err)
	}
	defer unix.SchedSetaffinity(0, &all)
	t.Logf("method %s", Method())
	rs := readers()
	n := 0
	for cpu := range 1024 {
		if !all.IsSet(cpu) {
			continue
		}
		var one unix.CPUSet
		one.Set(cpu)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			t.Fatalf("pin to CPU %d: %v", cpu, err)
		}
		n++
		for name, r := range rs {
			if got := r(); got != cpu {
				t.Errorf("pinned to CPU %d: %s = %d", cpu, name, got)
			}
		}
	}
	if n == 0 {
		t.Fatal("no CPU in the affinity mask")
	}
}

// TestMethod: where the CPU has RDPID or RDTSCP the fast path is chosen
// (the start-up check found it agrees with the system call).
func TestMethod(t *testing.T) {
	fast := fastReaders()
	switch {
	case len(fast) == 0 && Method() != "syscall":
		t.Errorf("no fast reader, method %s", Method())
	case len(fast) > 0 && Method() == "syscall":
		t.Errorf("fast readers %d, method syscall", len(fast))
	}
}

func TestAgrees(t *testing.T) {
	if !agrees(Syscall) {
		t.Error("the system call disagrees with itself")
	}
	if agrees(func() int { return -7 }) {
		t.Error("a reader answering -7 agrees")
	}
}

func BenchmarkGetCPU(b *testing.B) {
	for name, r := range readers() {
		b.Run(name, func(b *testing.B) {
			s := 0
			for b.Loop() {
				s += r()
			}
			sink = s
		})
	}
}

var sink int
