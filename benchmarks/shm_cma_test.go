package benchmarks

// Single copy with process_vm_readv (shm.ReadPeer) against copy(), the
// per-byte cost of the ring path, by size; and the fixed cost of shm.Guard.
// Reads our own pid: the kernel path is the one a peer read takes.
//
//	go test -run '^$' -bench 'ShmReadPeer|ShmGuard' -count 5 ./benchmarks/

import (
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gofi-dev/fi/shm"
)

func BenchmarkShmReadPeer(b *testing.B) {
	if info := shm.ProbeCMA(); !info.Available {
		b.Skipf("process_vm_readv unavailable: %v", info.Err)
	}
	pid := os.Getpid()
	for _, size := range []int{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20} {
		src := make([]byte, size)
		dst := make([]byte, size)
		addr := uintptr(unsafe.Pointer(&src[0]))
		b.Run("readv/"+strconv.Itoa(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for range b.N {
				if _, err := shm.ReadPeer(pid, dst, addr); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("copy/"+strconv.Itoa(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for range b.N {
				copy(dst, src)
			}
		})
	}
}

func BenchmarkShmGuard(b *testing.B) {
	var w atomic.Uint64
	b.Run("bare", func(b *testing.B) {
		for range b.N {
			w.Add(1)
		}
	})
	b.Run("guarded", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			_ = shm.Guard(func() { w.Add(1) })
		}
	})
}
