package shm

import (
	"bytes"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
	"unsafe"
)

func TestParseHugeMin(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{{"", hugeMinDefault}, {"off", 0}, {"OFF", 0}, {"0", 0}, {"256k", 256 << 10}, {"4m", 4 << 20}, {"nonsense", hugeMinDefault}, {"-1", hugeMinDefault}} {
		if got := parseHugeMin(c.in); got != c.want {
			t.Errorf("parseHugeMin(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// HugePages is a hint: whether or not the kernel gives huge pages, the
// memory and its neighbours keep their contents and stay usable.
func TestHugePages_KeepsContents(t *testing.T) {
	before := make([]byte, 1<<20)
	b := make([]byte, 3<<20+123)
	after := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte(i * 13)
	}
	for i := range before {
		before[i], after[i] = byte(i*7), byte(i*11)
	}
	want, wantBefore, wantAfter := bytes.Clone(b), bytes.Clone(before), bytes.Clone(after)
	ok := HugePages(b)
	t.Logf("collapsed: %v (HugeMin %d)", ok, HugeMin())
	if !bytes.Equal(b, want) || !bytes.Equal(before, wantBefore) || !bytes.Equal(after, wantAfter) {
		t.Fatal("HugePages changed memory")
	}
	b[0], b[len(b)-1] = 1, 2
	if b[0] != 1 || b[len(b)-1] != 2 {
		t.Fatal("memory not writable after HugePages")
	}
	if HugePages(b[:4096]) {
		t.Fatal("HugePages acted on 4 KiB (below HugeMin)")
	}
	// Single copy into it from this process still works.
	src := bytes.Repeat([]byte{0x5a}, len(b))
	if _, err := WritePeer(os.Getpid(), src, uintptr(unsafe.Pointer(&b[0]))); err == nil && !bytes.Equal(b, src) {
		t.Fatal("process_vm_writev into huge-page memory wrote wrong bytes")
	}
	runtime.KeepAlive(before)
	runtime.KeepAlive(after)
}

// BenchmarkWritePeerHuge: one 1 MiB process_vm_writev into 4 KiB pages
// and into memory HugePages collapsed (the target of a single-copy RMA
// write into registered Go memory; here this process is its own peer).
func BenchmarkWritePeerHuge(b *testing.B) {
	const size = 1 << 20
	src := bytes.Repeat([]byte{0xa5}, size)
	for _, huge := range []bool{false, true} {
		name := map[bool]string{false: "4k", true: "huge"}[huge]
		b.Run(name, func(b *testing.B) {
			dst := hugeAligned(b, size, huge)
			for i := range dst {
				dst[i] = 1
			}
			if huge && !hugeAdvise(uintptr(unsafe.Pointer(&dst[0])), size) {
				b.Skip("no huge page")
			}
			b.SetBytes(size)
			b.ReportAllocs()
			pid := os.Getpid()
			for b.Loop() {
				if _, err := WritePeer(pid, src, uintptr(unsafe.Pointer(&dst[0]))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// hugeAligned maps size bytes (at most hugeSize) that start on a 2 MiB
// boundary, in 4 KiB pages (MADV_NOHUGEPAGE) unless huge, unmapped when
// b's run ends; it skips b when the mapping fails.
func hugeAligned(b *testing.B, size int, huge bool) []byte {
	b.Helper()
	mem, err := unix.Mmap(-1, 0, 2*hugeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		b.Skip(err)
	}
	b.Cleanup(func() { _ = unix.Munmap(mem) })
	if !huge {
		_ = unix.Madvise(mem, unix.MADV_NOHUGEPAGE)
	}
	base := uintptr(unsafe.Pointer(&mem[0]))
	off := int((base+hugeSize-1)&^(hugeSize-1) - base)
	return mem[off : off+size]
}
