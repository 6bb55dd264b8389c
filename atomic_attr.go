package fi

// AtomicAttr describes an atomic or collective datatype's limits (struct
// fi_atomic_attr): Count is the most elements one operation takes, Size
// the bytes of one element. Domain.QueryCollective fills one in
// (CollectiveAttr.DatatypeAttr); the atomics API (Domain.QueryAtomic)
// returns the same type.
type AtomicAttr struct {
	Count int
	Size  int
}
