package benchmarks

import (
	"sync/atomic"
	"unsafe"

	"github.com/gofi-dev/fi/shm"
)

// shmBellWords lays the benchmark's shared words over a 4 KiB segment:
// ping at 0 and pong at 64 on their own lines, the child's doorbell at 128.
type shmBellWords struct {
	ping, pong *atomic.Uint32
	bell       *shm.Doorbell
}

func newShmBellWords(b []byte) shmBellWords {
	bell, err := shm.NewDoorbell(b, 128)
	if err != nil {
		panic(err)
	}
	return shmBellWords{
		ping: (*atomic.Uint32)(unsafe.Pointer(&b[0])),
		pong: (*atomic.Uint32)(unsafe.Pointer(&b[64])),
		bell: bell,
	}
}
