package fi

import (
	"github.com/gofi-dev/fi/rma"
)

// The tcp domain's key table and AllocMR memory are process memory: only
// this process's event loops access them.

func (d *tcpDomain) makeKeyTable(slots, counters int) (*rma.Table, func() error, error) {
	size, err := rma.Size(slots, counters)
	if err != nil {
		return nil, nil, err
	}
	t, err := rma.NewTable(alignedBytes(size), slots, counters, "")
	if err != nil {
		return nil, nil, err
	}
	return t, nil, nil
}

func (d *tcpDomain) allocMem(_ *rma.Table, _ int, _ uint32, size int) ([]byte, func() error, error) {
	return alignedBytes(size), nil, nil
}

func (d *tcpDomain) holderAlive(pid int) bool { return rma.ProcessAlive(pid) }

// alignedBytes returns n zeroed bytes starting on a 64-byte boundary.
func alignedBytes(n int) []byte {
	b := make([]byte, n+64)
	off := int(-rma.Addr(b) & 63)
	return b[off : off+n : off+n]
}

// tcpRMACaps are the tcp provider's one-sided capabilities: the target's
// event loop executes RMA and atomic requests, so no application progress
// is needed at the target.
const tcpRMACaps = RMA | Atomic | Read | Write | RemoteRead | RemoteWrite | RMAEvent | Fence

// tcpRMAOrder is the ordering tcp keeps: one connection per peer pair
// carries every request in order and the target's loop executes RMA as it
// decodes it, before it hands later messages to the engine; atomics go in
// the same stream and are executed likewise. Reads above tcpOrderSize are
// split into requests a later operation may overtake, hence the MaxOrder
// sizes.
const tcpRMAOrder = OrderRAR | OrderRAW | OrderWAR | OrderWAW | OrderSAR | OrderSAW |
	OrderRMARAR | OrderRMARAW | OrderRMAWAR | OrderRMAWAW |
	OrderAtomicRAR | OrderAtomicRAW | OrderAtomicWAR | OrderAtomicWAW

// tcpOrderSize is the largest read whose requests are all in flight at
// once (net's read window): ordering holds up to it.
const tcpOrderSize = 16 << 20

func tcpRMATemplate(info *Info) {
	info.TxAttr.RMAIOVLimit = rmaIOVLimit
	info.TxAttr.MsgOrder |= tcpRMAOrder
	info.RxAttr.MsgOrder |= tcpRMAOrder
	info.EpAttr.MaxOrderRAWSize = tcpOrderSize
	info.EpAttr.MaxOrderWARSize = tcpOrderSize
	info.EpAttr.MaxOrderWAWSize = tcpOrderSize
}
