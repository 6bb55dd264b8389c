//go:build !race

package shm

import (
	"os"
	"testing"
	"time"
	"unsafe"
)

// The calls the engine makes per message or per idle poll allocate nothing.
func TestHotPaths_DoNotAllocate(t *testing.T) {
	r := newTestRegion(t, 1)
	d := r.Doorbell()
	seg, err := CreateSegment(NewName(), 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	flag := word32(seg.Bytes(), 0)
	flag.Store(1)
	cond := func() bool { return flag.Load() != 0 }
	src := make([]byte, 64<<10)
	dst := make([]byte, 64<<10)
	addr := uintptr(unsafe.Pointer(&src[0]))
	cases := []struct {
		what string
		f    func()
	}{
		{"Ring without sleepers", func() { _ = d.Ring() }},
		{"Wait with the condition met", func() { _, _ = d.Wait(time.Second, cond) }},
		{"Idle.Wait with the condition met", func() { _, _ = DefaultIdle.Wait(d, time.Second, cond) }},
		{"Guard without a fault", func() { _ = Guard(func() { _ = flag.Load() }) }},
		{"Segment.Alive", func() { _, _ = seg.Alive() }},
	}
	if ProbeCMA().Available {
		cases = append(cases, struct {
			what string
			f    func()
		}{"ReadPeer", func() { _, _ = ReadPeer(os.Getpid(), dst, addr) }})
	}
	for _, c := range cases {
		if n := testing.AllocsPerRun(100, c.f); n != 0 {
			t.Errorf("%s: %v allocs per call", c.what, n)
		}
	}
	// A Wait that really sleeps in the kernel and times out.
	never := func() bool { return false }
	if n := testing.AllocsPerRun(10, func() { _, _ = d.Wait(50*time.Microsecond, never) }); n != 0 {
		t.Errorf("sleeping Wait: %v allocs per call", n)
	}
	// Ring with a sleeper: another goroutine sleeps while we ring.
	flag.Store(0)
	done := make(chan struct{})
	go func() {
		_, _ = d.Wait(10*time.Second, func() bool { return flag.Load() != 0 })
		close(done)
	}()
	for d.Sleepers() == 0 {
		time.Sleep(time.Millisecond)
	}
	if n := testing.AllocsPerRun(100, func() { _ = d.Ring() }); n != 0 {
		t.Errorf("Ring with a sleeper: %v allocs per call", n)
	}
	flag.Store(1)
	_ = d.Ring()
	<-done
}
