package fi

import "testing"

// fi_tostr spells datatypes, operations and collective operations by their
// enum names (FI_TYPE_ATOMIC_TYPE, FI_TYPE_ATOMIC_OP,
// FI_TYPE_COLLECTIVE_OP); unknown values print "Unknown".
func TestToStr_AtomicAndCollectiveEnums(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{Uint64, "FI_UINT64"}, {Int8, "FI_INT8"}, {LongDoubleComplex, "FI_LONG_DOUBLE_COMPLEX"},
		{Float16, "FI_FLOAT16"}, {BFloat16, "FI_BFLOAT16"}, {Void, "FI_VOID"}, {Datatype(99), "Unknown"},
		{OpSum, "FI_SUM"}, {OpCSwapGE, "FI_CSWAP_GE"}, {OpMSwap, "FI_MSWAP"}, {OpAtomicRead, "FI_ATOMIC_READ"},
		{AtomicOp(-1), "Unknown"},
		{CollBarrier, "FI_BARRIER"}, {CollAllreduce, "FI_ALLREDUCE"}, {CollGather, "FI_GATHER"},
		{CollectiveOp(42), "Unknown"},
	} {
		if got := ToStr(c.v); got != c.want {
			t.Errorf("ToStr(%T(%d)) = %q, want %q", c.v, c.v, got, c.want)
		}
	}
	if Double.Size() != 8 || DoubleComplex.Size() != 16 || Void.Size() != 0 {
		t.Errorf("sizes: double %d, double complex %d, void %d", Double.Size(), DoubleComplex.Size(), Void.Size())
	}
}
