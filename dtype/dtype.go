package dtype

// Type is an element datatype (enum fi_datatype).
type Type int32

// The datatypes, numbered as libfabric numbers them. Int128 to Float8E5M2
// are libfabric 2.x additions; Void (FI_VOID) is the collective-only type of
// operations that move no data (barrier).
const (
	Int8              Type = 0
	Uint8             Type = 1
	Int16             Type = 2
	Uint16            Type = 3
	Int32             Type = 4
	Uint32            Type = 5
	Int64             Type = 6
	Uint64            Type = 7
	Float             Type = 8 // IEEE 754 binary32
	Double            Type = 9 // IEEE 754 binary64
	FloatComplex      Type = 10
	DoubleComplex     Type = 11
	LongDouble        Type = 12 // x87 80-bit extended in 16 bytes (C long double on amd64)
	LongDoubleComplex Type = 13
	Int128            Type = 14
	Uint128           Type = 15
	Float16           Type = 16 // IEEE 754 binary16
	BFloat16          Type = 17 // bfloat16: the top half of a binary32
	Float8E4M3        Type = 18
	Float8E5M2        Type = 19

	// CollectiveOffset is where libfabric starts its collective-only values
	// (FI_COLLECTIVE_OFFSET).
	CollectiveOffset = 256

	Void Type = CollectiveOffset
)

var typeInfo = [...]struct {
	name string
	size int
}{
	Int8:              {"FI_INT8", 1},
	Uint8:             {"FI_UINT8", 1},
	Int16:             {"FI_INT16", 2},
	Uint16:            {"FI_UINT16", 2},
	Int32:             {"FI_INT32", 4},
	Uint32:            {"FI_UINT32", 4},
	Int64:             {"FI_INT64", 8},
	Uint64:            {"FI_UINT64", 8},
	Float:             {"FI_FLOAT", 4},
	Double:            {"FI_DOUBLE", 8},
	FloatComplex:      {"FI_FLOAT_COMPLEX", 8},
	DoubleComplex:     {"FI_DOUBLE_COMPLEX", 16},
	LongDouble:        {"FI_LONG_DOUBLE", 16},
	LongDoubleComplex: {"FI_LONG_DOUBLE_COMPLEX", 32},
	Int128:            {"FI_INT128", 16},
	Uint128:           {"FI_UINT128", 16},
	Float16:           {"FI_FLOAT16", 2},
	BFloat16:          {"FI_BFLOAT16", 2},
	Float8E4M3:        {"FI_FLOAT8_E4M3", 1},
	Float8E5M2:        {"FI_FLOAT8_E5M2", 1},
}

// Valid reports whether t names a datatype (Void included).
func (t Type) Valid() bool {
	return t == Void || (t >= 0 && int(t) < len(typeInfo))
}

// Size returns the bytes of one element of t: 0 for Void and for values
// that name no datatype.
func (t Type) Size() int {
	if t < 0 || int(t) >= len(typeInfo) {
		return 0
	}
	return typeInfo[t].size
}

// Name returns fi_tostr's spelling ("FI_UINT64"), or "Unknown".
func (t Type) Name() string {
	if t == Void {
		return "FI_VOID"
	}
	if t < 0 || int(t) >= len(typeInfo) {
		return "Unknown"
	}
	return typeInfo[t].name
}

// IsInteger reports whether t is a fixed-width integer type.
func (t Type) IsInteger() bool {
	return (t >= Int8 && t <= Uint64) || t == Int128 || t == Uint128
}

// IsSigned reports whether t is a signed integer type.
func (t Type) IsSigned() bool {
	switch t {
	case Int8, Int16, Int32, Int64, Int128:
		return true
	}
	return false
}

// IsFloat reports whether t is a real floating-point type.
func (t Type) IsFloat() bool {
	switch t {
	case Float, Double, LongDouble, Float16, BFloat16, Float8E4M3, Float8E5M2:
		return true
	}
	return false
}

// IsComplex reports whether t is a complex type.
func (t Type) IsComplex() bool {
	return t == FloatComplex || t == DoubleComplex || t == LongDoubleComplex
}

// Op is an atomic or reduction operation (enum fi_op).
type Op int32

// The operations, numbered as libfabric numbers them. Diff is a libfabric
// 2.x addition; Noop (FI_NOOP) is the collective-only "no reduction".
const (
	Min         Op = 0
	Max         Op = 1
	Sum         Op = 2
	Prod        Op = 3
	LOr         Op = 4
	LAnd        Op = 5
	BOr         Op = 6
	BAnd        Op = 7
	LXor        Op = 8
	BXor        Op = 9
	AtomicRead  Op = 10
	AtomicWrite Op = 11
	CSwap       Op = 12
	CSwapNE     Op = 13
	CSwapLE     Op = 14
	CSwapLT     Op = 15
	CSwapGE     Op = 16
	CSwapGT     Op = 17
	MSwap       Op = 18
	Diff        Op = 19

	Noop Op = CollectiveOffset
)

var opNames = [...]string{
	Min: "FI_MIN", Max: "FI_MAX", Sum: "FI_SUM", Prod: "FI_PROD",
	LOr: "FI_LOR", LAnd: "FI_LAND", BOr: "FI_BOR", BAnd: "FI_BAND",
	LXor: "FI_LXOR", BXor: "FI_BXOR",
	AtomicRead: "FI_ATOMIC_READ", AtomicWrite: "FI_ATOMIC_WRITE",
	CSwap: "FI_CSWAP", CSwapNE: "FI_CSWAP_NE", CSwapLE: "FI_CSWAP_LE",
	CSwapLT: "FI_CSWAP_LT", CSwapGE: "FI_CSWAP_GE", CSwapGT: "FI_CSWAP_GT",
	MSwap: "FI_MSWAP", Diff: "FI_DIFF",
}

// Valid reports whether o names an operation (Noop included).
func (o Op) Valid() bool { return o == Noop || (o >= 0 && int(o) < len(opNames)) }

// Name returns fi_tostr's spelling ("FI_CSWAP_GE"), or "Unknown".
func (o Op) Name() string {
	if o == Noop {
		return "FI_NOOP"
	}
	if o < 0 || int(o) >= len(opNames) {
		return "Unknown"
	}
	return opNames[o]
}

// Kind says which of fi_atomic(3)'s three call families an operation
// belongs to.
type Kind uint8

const (
	// KindBase: fi_atomic (no result): MIN ... BXOR, ATOMIC_WRITE.
	KindBase Kind = 1 << iota
	// KindFetch: fi_fetch_atomic: the base ops and ATOMIC_READ.
	KindFetch
	// KindCompare: fi_compare_atomic: CSWAP ... MSWAP.
	KindCompare
)

// Kinds returns the call families in which fi_atomic(3) allows o.
func (o Op) Kinds() Kind {
	switch {
	case o >= Min && o <= BXor, o == AtomicWrite:
		return KindBase | KindFetch
	case o == AtomicRead:
		return KindFetch
	case o >= CSwap && o <= MSwap:
		return KindCompare
	}
	return 0
}

// CollOp is a collective operation (enum fi_collective_op).
type CollOp int32

// The collective operations, numbered as libfabric numbers them.
const (
	Barrier       CollOp = 0
	Broadcast     CollOp = 1
	Alltoall      CollOp = 2
	Allreduce     CollOp = 3
	Allgather     CollOp = 4
	ReduceScatter CollOp = 5
	Reduce        CollOp = 6
	Scatter       CollOp = 7
	Gather        CollOp = 8
)

var collNames = [...]string{
	Barrier: "FI_BARRIER", Broadcast: "FI_BROADCAST", Alltoall: "FI_ALLTOALL",
	Allreduce: "FI_ALLREDUCE", Allgather: "FI_ALLGATHER",
	ReduceScatter: "FI_REDUCE_SCATTER", Reduce: "FI_REDUCE",
	Scatter: "FI_SCATTER", Gather: "FI_GATHER",
}

// Valid reports whether c names a collective operation.
func (c CollOp) Valid() bool { return c >= 0 && int(c) < len(collNames) }

// Name returns fi_tostr's spelling ("FI_ALLREDUCE"), or "Unknown".
func (c CollOp) Name() string {
	if !c.Valid() {
		return "Unknown"
	}
	return collNames[c]
}
