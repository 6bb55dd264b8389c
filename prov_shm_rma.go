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

func (d *shmDomain) holderAlive(pid int) bool { return rma.ProcessAlive(pid) }
