package fi

import (
	"errors"

	"github.com/gofi-dev/fi/rma"
	"github.com/gofi-dev/fi/shm"
)

// The shm domain's key table and AllocMR memory are shared-memory
// segments, so local peers read the table and map allocated regions.

func (d *shmDomain) makeKeyTable(slots, counters int) (*rma.Table, func() error, error) {
	size, err := rma.Size(slots, counters)
	if err != nil {
		return nil, nil, err
	}
	seg, err := shm.CreateSegment(shm.NewName(), size)
	if err != nil {
		return nil, nil, err
	}
	t, err := rma.NewTable(seg.Bytes(), slots, counters, seg.Name())
	if err != nil {
		_ = seg.Close()
		return nil, nil, err
	}
	return t, seg.Close, nil
}

func (d *shmDomain) allocMem(t *rma.Table, slot int, gen uint32, size int) ([]byte, func() error, error) {
	if t.Name() == "" {
		return nil, nil, errors.New("shm: key table has no segment")
	}
	seg, err := shm.CreateSegment(rma.AllocName(t.Name(), slot, gen), size)
	if err != nil {
		return nil, nil, err
	}
	return seg.Bytes()[:size], seg.Close, nil
}

// hintMem backs a large registered Go buffer with huge pages: local peers'
// single copies into it pin 2 MiB at a time (shm.HugePages).
func (d *shmDomain) hintMem(buf []byte) { shm.HugePages(buf) }

func (d *shmDomain) holderAlive(pid int) bool { return rma.ProcessAlive(pid) }

// shmRMACaps are the shm provider's one-sided capabilities: an initiator
// copies into or out of the target's registered memory itself (a mapping
// of AllocMR memory, or process_vm_writev/readv) and runs atomics on
// AllocMR memory with the processor's atomic instructions, or the
// target's executor goroutine does it for requests posted in shared
// memory (single copy refused, atomics on registered Go memory, 16-byte
// atomics); the target's application takes no part.
const shmRMACaps = RMA | Atomic | Read | Write | RemoteRead | RemoteWrite | RMAEvent | Fence

// shmRMAOrder is the ordering shm keeps between one-sided operations to
// one peer: an operation never passes one still in the peer's channel, and
// the others complete inside the call. Messages travel in rings and may
// pass an RMA still in the channel, so no send-after ordering is
// promised.
const shmRMAOrder = OrderRAR | OrderRAW | OrderWAR | OrderWAW |
	OrderRMARAR | OrderRMARAW | OrderRMAWAR | OrderRMAWAW |
	OrderAtomicRAR | OrderAtomicRAW | OrderAtomicWAR | OrderAtomicWAW

// shmOrderSize is MaxOrder*Size: ordering holds for any size (the largest
// region is MaxSegmentSize for AllocMR, and a Go slice has no smaller
// limit than that here).
const shmOrderSize = 1 << 30

func shmRMATemplate(info *Info) {
	info.TxAttr.RMAIOVLimit = rmaIOVLimit
	info.TxAttr.MsgOrder |= shmRMAOrder
	info.RxAttr.MsgOrder |= shmRMAOrder
	info.EpAttr.MaxOrderRAWSize = shmOrderSize
	info.EpAttr.MaxOrderWARSize = shmOrderSize
	info.EpAttr.MaxOrderWAWSize = shmOrderSize
}
