package ring

// SetCopyPath forces every copy through path p (with segment length seg
// for PathSegmented) and returns a function restoring the measured plan.
// Tests only; not safe while copies run concurrently.
func SetCopyPath(p CopyPath, seg int) (restore func()) {
	old := plan
	switch p {
	case PathSegmented:
		plan = copyPlan{segFrom: 0, segTo: int(^uint(0) >> 1), seg: seg}
	default:
		plan = copyPlan{segFrom: int(^uint(0) >> 1), segTo: -1, seg: seg}
	}
	return func() { plan = old }
}

// Offsets of the shared layout, for corruption tests.
const (
	OffTail     = offTail
	OffHead     = offHead
	OffData     = offData
	OffVersion  = offVersion
	OffLineSep  = offLineSep
	OffCapacity = offCapacity
	OffDataOff  = offDataOff
	OffCorrupt  = offCorrupt
)

// Record kinds, for corruption tests.
const (
	KindData = kindData
	KindPad  = kindPad
)

// DataOf returns r's data area (tests only).
func DataOf(r *Ring) []byte { return r.data }

// Offsets of the duplex layout, for corruption tests.
const (
	DxOffTurn     = dxOffTurn
	DxSlotSize    = dxSlotSize
	DxOffAck0     = dxOffAck0
	DxOffAck1     = dxOffAck1
	DxOffVersion  = dxOffVersion
	DxOffLineSep  = dxOffLineSep
	DxOffCapacity = dxOffCapacity
	SlotMetaOff   = slotMeta
)

// ProducerPos returns the producer's next write position in r (tests
// only; the producer's goroutine).
func ProducerPos(r *Ring) uint64 { return r.p.tail }

// DuplexSlotFree reports whether d believes its slot free: the other end
// said it has received every record d sent (tests only; d's goroutine).
func DuplexSlotFree(d *Duplex) bool { return d.slotFree() }
