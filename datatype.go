package fi

import "github.com/gofi-dev/fi/dtype"

// Datatype is the element type of an atomic or collective operation (enum
// fi_datatype; fi_atomic(3)). Buffers hold elements in host byte order.
// String prints fi_tostr's spelling ("FI_UINT64").
type Datatype int

// The datatypes, with libfabric's values. Float16 to Float8E5M2 and the
// 128-bit integers are libfabric 2.x additions (AI datatypes for
// collectives); Void is FI_VOID, the datatype of operations that move no
// data. Which operations support which datatype: Endpoint.AtomicValid and
// friends, Domain.QueryAtomic, Domain.QueryCollective.
const (
	Int8              = Datatype(dtype.Int8)
	Uint8             = Datatype(dtype.Uint8)
	Int16             = Datatype(dtype.Int16)
	Uint16            = Datatype(dtype.Uint16)
	Int32             = Datatype(dtype.Int32)
	Uint32            = Datatype(dtype.Uint32)
	Int64             = Datatype(dtype.Int64)
	Uint64            = Datatype(dtype.Uint64)
	Float             = Datatype(dtype.Float)
	Double            = Datatype(dtype.Double)
	FloatComplex      = Datatype(dtype.FloatComplex)
	DoubleComplex     = Datatype(dtype.DoubleComplex)
	LongDouble        = Datatype(dtype.LongDouble)
	LongDoubleComplex = Datatype(dtype.LongDoubleComplex)
	Int128            = Datatype(dtype.Int128)
	Uint128           = Datatype(dtype.Uint128)
	Float16           = Datatype(dtype.Float16)
	BFloat16          = Datatype(dtype.BFloat16)
	Float8E4M3        = Datatype(dtype.Float8E4M3)
	Float8E5M2        = Datatype(dtype.Float8E5M2)
	Void              = Datatype(dtype.Void)
)

// Size returns the bytes of one element (0 for Void and unknown values).
func (d Datatype) Size() int { return dtype.Type(d).Size() }

// String spells the datatype like fi_tostr: "FI_DOUBLE_COMPLEX".
func (d Datatype) String() string { return dtype.Type(d).Name() }

// AtomicOp is an atomic or reduction operation (enum fi_op; fi_atomic(3)).
// String prints fi_tostr's spelling ("FI_SUM").
type AtomicOp int

// The operations, with libfabric's values. Atomic and FetchAtomic take
// OpMin to OpBXor and OpAtomicWrite (FetchAtomic also OpAtomicRead);
// CompareAtomic takes OpCSwap to OpMSwap. OpDiff is a libfabric 2.x
// addition; OpNoop is FI_NOOP, the collective-only "no reduction".
const (
	OpMin         = AtomicOp(dtype.Min)
	OpMax         = AtomicOp(dtype.Max)
	OpSum         = AtomicOp(dtype.Sum)
	OpProd        = AtomicOp(dtype.Prod)
	OpLOr         = AtomicOp(dtype.LOr)
	OpLAnd        = AtomicOp(dtype.LAnd)
	OpBOr         = AtomicOp(dtype.BOr)
	OpBAnd        = AtomicOp(dtype.BAnd)
	OpLXor        = AtomicOp(dtype.LXor)
	OpBXor        = AtomicOp(dtype.BXor)
	OpAtomicRead  = AtomicOp(dtype.AtomicRead)
	OpAtomicWrite = AtomicOp(dtype.AtomicWrite)
	OpCSwap       = AtomicOp(dtype.CSwap)
	OpCSwapNE     = AtomicOp(dtype.CSwapNE)
	OpCSwapLE     = AtomicOp(dtype.CSwapLE)
	OpCSwapLT     = AtomicOp(dtype.CSwapLT)
	OpCSwapGE     = AtomicOp(dtype.CSwapGE)
	OpCSwapGT     = AtomicOp(dtype.CSwapGT)
	OpMSwap       = AtomicOp(dtype.MSwap)
	OpDiff        = AtomicOp(dtype.Diff)
	OpNoop        = AtomicOp(dtype.Noop)
)

// String spells the operation like fi_tostr: "FI_CSWAP_GE".
func (o AtomicOp) String() string { return dtype.Op(o).Name() }

// CollectiveOp names a collective operation (enum fi_collective_op;
// fi_collective(3)), as Domain.QueryCollective takes it. String prints
// fi_tostr's spelling ("FI_ALLREDUCE").
type CollectiveOp int

// The collective operations, with libfabric's values.
const (
	CollBarrier       = CollectiveOp(dtype.Barrier)
	CollBroadcast     = CollectiveOp(dtype.Broadcast)
	CollAlltoall      = CollectiveOp(dtype.Alltoall)
	CollAllreduce     = CollectiveOp(dtype.Allreduce)
	CollAllgather     = CollectiveOp(dtype.Allgather)
	CollReduceScatter = CollectiveOp(dtype.ReduceScatter)
	CollReduce        = CollectiveOp(dtype.Reduce)
	CollScatter       = CollectiveOp(dtype.Scatter)
	CollGather        = CollectiveOp(dtype.Gather)
)

// String spells the operation like fi_tostr: "FI_ALLREDUCE".
func (c CollectiveOp) String() string { return dtype.CollOp(c).Name() }
