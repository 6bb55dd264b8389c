package dtype

import "testing"

// The numbers are libfabric's (rdma/fi_atomic.h, rdma/fi_collective.h):
// spot-check both ends of every enum and the collective offset.
func TestNumbersAreLibfabrics(t *testing.T) {
	for _, c := range []struct {
		got, want int
		what      string
	}{
		{int(Int8), 0, "FI_INT8"}, {int(Uint64), 7, "FI_UINT64"}, {int(Float), 8, "FI_FLOAT"},
		{int(LongDoubleComplex), 13, "FI_LONG_DOUBLE_COMPLEX"}, {int(Float16), 16, "FI_FLOAT16"},
		{int(BFloat16), 17, "FI_BFLOAT16"}, {int(Void), 256, "FI_VOID"},
		{int(Min), 0, "FI_MIN"}, {int(BXor), 9, "FI_BXOR"}, {int(MSwap), 18, "FI_MSWAP"},
		{int(Noop), 256, "FI_NOOP"},
		{int(Barrier), 0, "FI_BARRIER"}, {int(Gather), 8, "FI_GATHER"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, libfabric says %d", c.what, c.got, c.want)
		}
	}
}

func TestNamesAndSizes(t *testing.T) {
	for _, c := range []struct {
		t    Type
		name string
		size int
	}{
		{Int8, "FI_INT8", 1}, {Uint16, "FI_UINT16", 2}, {Int32, "FI_INT32", 4},
		{Uint64, "FI_UINT64", 8}, {Float, "FI_FLOAT", 4}, {Double, "FI_DOUBLE", 8},
		{FloatComplex, "FI_FLOAT_COMPLEX", 8}, {DoubleComplex, "FI_DOUBLE_COMPLEX", 16},
		{LongDouble, "FI_LONG_DOUBLE", 16}, {LongDoubleComplex, "FI_LONG_DOUBLE_COMPLEX", 32},
		{Float16, "FI_FLOAT16", 2}, {BFloat16, "FI_BFLOAT16", 2}, {Void, "FI_VOID", 0},
		{-1, "Unknown", 0}, {20, "Unknown", 0}, {255, "Unknown", 0}, {257, "Unknown", 0},
	} {
		if got := c.t.Name(); got != c.name {
			t.Errorf("Type(%d).Name() = %q, want %q", c.t, got, c.name)
		}
		if got := c.t.Size(); got != c.size {
			t.Errorf("Type(%d).Size() = %d, want %d", c.t, got, c.size)
		}
		if got, want := c.t.Valid(), c.name != "Unknown"; got != want {
			t.Errorf("Type(%d).Valid() = %v", c.t, got)
		}
	}
	for o, want := range map[Op]string{CSwapGE: "FI_CSWAP_GE", AtomicRead: "FI_ATOMIC_READ", Noop: "FI_NOOP", Diff: "FI_DIFF", 20: "Unknown", -3: "Unknown"} {
		if got := o.Name(); got != want {
			t.Errorf("Op(%d).Name() = %q, want %q", o, got, want)
		}
	}
	for c, want := range map[CollOp]string{Allreduce: "FI_ALLREDUCE", ReduceScatter: "FI_REDUCE_SCATTER", 9: "Unknown"} {
		if got := c.Name(); got != want {
			t.Errorf("CollOp(%d).Name() = %q, want %q", c, got, want)
		}
	}
}

// fi_atomic(3): fi_atomic takes MIN..BXOR and ATOMIC_WRITE; fi_fetch_atomic
// those and ATOMIC_READ; fi_compare_atomic the CSWAP family and MSWAP.
func TestKinds(t *testing.T) {
	for o := Min; o <= Diff; o++ {
		k := o.Kinds()
		base := o <= BXor || o == AtomicWrite
		fetch := base || o == AtomicRead
		cmp := o >= CSwap && o <= MSwap
		if (k&KindBase != 0) != base || (k&KindFetch != 0) != fetch || (k&KindCompare != 0) != cmp {
			t.Errorf("%s: kinds %03b", o.Name(), k)
		}
	}
}
