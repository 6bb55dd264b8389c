package fi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gofi-dev/fi/dtype"
	"github.com/gofi-dev/fi/dtype/kernel/kref"
	"github.com/gofi-dev/fi/shm"
)

var ne64 = binary.NativeEndian

// atomicProviders are the providers advertising Atomic, each with the
// paths its atomics take: "shm" targets AllocMR memory (the initiator
// maps it and executes with the processor's atomics, 16-byte types
// excepted), "shm-reg" registered Go memory (the target's executor
// goroutine executes), "tcp" the target's event loop; "shm+tcp" and
// "shm+tcp-reg" are the same over the linked provider's shm route,
// "shm+tcp_remote" over its tcp route.
var atomicProviders = []string{"tcp", "shm", "shm-reg", "shm+tcp", "shm+tcp-reg", "shm+tcp_remote"}

// atomicSpec splits an atomicProviders entry into its provider and
// whether the target region comes from AllocMR.
func atomicSpec(s string) (prov string, alloc bool) {
	if prov, ok := strings.CutSuffix(s, "-reg"); ok {
		return prov, false
	}
	return s, s == "shm" || s == "shm+tcp"
}

// atomicPair is an initiator a and a target b with a region of n bytes
// (key key, offset-based addressing from 0) allowing every remote access.
type atomicPair struct {
	a, b *rmaNode
	dest Addr
	mr   *MR
	key  uint64
}

func openAtomicPair(t testing.TB, spec string, n int) *atomicPair {
	t.Helper()
	prov, alloc := atomicSpec(spec)
	caps := Msg | RMA | Atomic
	a := openRMANode(t, prov, rmaNodeCfg{caps: caps})
	b := openRMANode(t, prov, rmaNodeCfg{caps: caps})
	var mr *MR
	var err error
	if alloc {
		mr, err = b.dom.AllocMR(n, RemoteRead|RemoteWrite)
	} else {
		mr, err = b.dom.RegMR(alignedBytes(n), RemoteRead|RemoteWrite, 0, 7, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Close() })
	return &atomicPair{a: a, b: b, dest: a.connect(t, b), mr: mr, key: mr.Key()}
}

// setTarget stores b into the target region at off (the target's own
// plain store, ordered with its executors by MR.Bytes).
func (p *atomicPair) setTarget(off int, b []byte) {
	copy(p.mr.Bytes()[off:], b)
	p.mr.Bytes()
}

// atomicKindName names the three call families.
var atomicKindName = map[dtype.Kind]string{dtype.KindBase: "Atomic", dtype.KindFetch: "FetchAtomic", dtype.KindCompare: "CompareAtomic"}

// runAtomic issues one call of family k and waits for its completion.
func (p *atomicPair) runAtomic(t testing.TB, k dtype.Kind, buf, cmp, res []byte, count int, addr uint64, dt Datatype, op AtomicOp) (CQEntry, error) {
	t.Helper()
	ctx := fmt.Sprintf("%s %s %s", atomicKindName[k], dt, op)
	var err error
	switch k {
	case dtype.KindBase:
		err = p.a.ep.Atomic(buf, count, nil, p.dest, addr, p.key, dt, op, ctx)
	case dtype.KindFetch:
		err = p.a.ep.FetchAtomic(buf, count, nil, res, nil, p.dest, addr, p.key, dt, op, ctx)
	default:
		err = p.a.ep.CompareAtomic(buf, count, nil, cmp, nil, res, nil, p.dest, addr, p.key, dt, op, ctx)
	}
	if err != nil {
		return CQEntry{}, err
	}
	return waitTx(t, p.a, nil, ctx)
}

// TestAtomic_Differential runs every valid (datatype, op) of every call
// family against kref's plain-Go reference with random and special
// operands (NaN, -0, infinities, overflowing values), one element per
// call (shm's single-element path works on the caller's buffers) and
// three, checking target memory, fetched results and the bytes around.
func TestAtomic_Differential(t *testing.T) {
	for _, prov := range atomicProviders {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			p := openAtomicPair(t, prov, 256)
			rng := rand.New(rand.NewPCG(14, 1))
			const at = 64
			combos := 0
			for _, count := range []int{1, 3} {
				for _, dt := range kref.Types {
					sz := dt.Size()
					n := count * sz
					for op := dtype.Min; op <= dtype.MSwap; op++ {
						for _, k := range []dtype.Kind{dtype.KindBase, dtype.KindFetch, dtype.KindCompare} {
							v, err := atomicValidKind(p.a.ep, k, Datatype(dt), AtomicOp(op))
							if err != nil {
								if !errors.Is(err, ErrOpNotSupp) {
									t.Fatalf("%s valid(%s, %s): %v", atomicKindName[k], dt.Name(), op.Name(), err)
								}
								continue
							}
							if v != 4096/sz {
								t.Fatalf("%s valid(%s, %s) = %d", atomicKindName[k], dt.Name(), op.Name(), v)
							}
							combos++
							mem, src, cmp := make([]byte, n), make([]byte, n), make([]byte, n)
							for i := 0; i < count; i++ {
								copy(mem[i*sz:], kref.Special(dt, rng))
								copy(src[i*sz:], kref.Special(dt, rng))
								if rng.IntN(2) == 0 {
									copy(cmp[i*sz:], mem[i*sz:(i+1)*sz]) // equal: the swap happens
								} else {
									copy(cmp[i*sz:], kref.Special(dt, rng))
								}
							}
							guard := bytes.Repeat([]byte{0xa5}, 256)
							p.setTarget(0, guard)
							p.setTarget(at, mem)
							want := append([]byte(nil), mem...)
							wantOld := make([]byte, n)
							for i := 0; i < count; i++ {
								copy(wantOld[i*sz:], kref.Ref(dt, op, want[i*sz:(i+1)*sz], src[i*sz:(i+1)*sz], cmp[i*sz:(i+1)*sz]))
							}
							res := bytes.Repeat([]byte{0x5a}, n+8)
							e, err := p.runAtomic(t, k, src, cmp, res, count, at, Datatype(dt), AtomicOp(op))
							if err != nil {
								t.Fatalf("%s(%s, %s): %v", atomicKindName[k], dt.Name(), op.Name(), err)
							}
							wantFlags := Atomic | Read
							if k == dtype.KindBase {
								wantFlags = Atomic | Write
							}
							if e.Flags != wantFlags {
								t.Fatalf("%s completion flags %v, want %v", atomicKindName[k], e.Flags, wantFlags)
							}
							got := snapshot(p.mr)
							for i := 0; i < count; i++ {
								g, w := got[at+i*sz:at+(i+1)*sz], want[i*sz:(i+1)*sz]
								if !kref.SameBits(dt, g, w) {
									t.Fatalf("%s(%s, %s) elem %d: target %x, want %x (old %x src %x cmp %x)", atomicKindName[k], dt.Name(), op.Name(),
										i, g, w, mem[i*sz:(i+1)*sz], src[i*sz:(i+1)*sz], cmp[i*sz:(i+1)*sz])
								}
								if k != dtype.KindBase && !kref.SameBits(dt, res[i*sz:(i+1)*sz], wantOld[i*sz:(i+1)*sz]) {
									t.Fatalf("%s(%s, %s) elem %d: result %x, want %x", atomicKindName[k], dt.Name(), op.Name(), i, res[i*sz:(i+1)*sz], wantOld[i*sz:(i+1)*sz])
								}
							}
							if !bytes.Equal(got[:at], guard[:at]) || !bytes.Equal(got[at+n:], guard[at+n:]) {
								t.Fatalf("%s(%s, %s) touched bytes outside its elements", atomicKindName[k], dt.Name(), op.Name())
							}
							if !bytes.Equal(res[n:], bytes.Repeat([]byte{0x5a}, 8)) {
								t.Fatalf("%s(%s, %s) wrote past count elements of result", atomicKindName[k], dt.Name(), op.Name())
							}
						}
					}
				}
			}
			// 8 integers x 17 + float/double x 14 + 2 complex x 9 + 2 int128 x 17 families-ops, twice.
			if combos < 400 {
				t.Fatalf("only %d valid combinations", combos)
			}
		})
	}
}

func atomicValidKind(ep *Endpoint, k dtype.Kind, dt Datatype, op AtomicOp) (int, error) {
	switch k {
	case dtype.KindBase:
		return ep.AtomicValid(dt, op)
	case dtype.KindFetch:
		return ep.FetchAtomicValid(dt, op)
	}
	return ep.CompareAtomicValid(dt, op)
}

// TestAtomic_Valid checks the validity queries and QueryAtomic against
// fi_atomic(3)'s families, and the refusal of the long double types.
func TestAtomic_Valid(t *testing.T) {
	shmTestDir(t)
	p := openAtomicPair(t, "tcp", 64)
	ep := p.a.ep
	cases := []struct {
		k    dtype.Kind
		dt   Datatype
		op   AtomicOp
		want int // 0: ErrOpNotSupp
	}{
		{dtype.KindBase, Uint64, OpSum, 512},
		{dtype.KindBase, Int8, OpBXor, 4096},
		{dtype.KindBase, DoubleComplex, OpProd, 256},
		{dtype.KindBase, Double, OpBOr, 0},
		{dtype.KindBase, FloatComplex, OpMin, 0},
		{dtype.KindBase, Uint64, OpAtomicRead, 0},
		{dtype.KindFetch, Uint64, OpAtomicRead, 512},
		{dtype.KindBase, Uint64, OpCSwap, 0},
		{dtype.KindCompare, Uint64, OpCSwap, 512},
		{dtype.KindCompare, Uint64, OpSum, 0},
		{dtype.KindCompare, Float, OpCSwapGE, 1024},
		{dtype.KindCompare, DoubleComplex, OpCSwapGE, 0},
		{dtype.KindCompare, Double, OpMSwap, 0},
		{dtype.KindCompare, Int128, OpMSwap, 256},
		{dtype.KindBase, LongDouble, OpSum, 0},
		{dtype.KindFetch, LongDoubleComplex, OpSum, 0},
		{dtype.KindCompare, LongDouble, OpCSwap, 0},
		{dtype.KindBase, Float16, OpSum, 0},
		{dtype.KindBase, Datatype(99), OpSum, 0},
		{dtype.KindBase, Datatype(1 << 40), OpSum, 0},
		{dtype.KindBase, Uint8, AtomicOp(-1), 0},
		{dtype.KindBase, Uint8, OpDiff, 0},
	}
	for _, c := range cases {
		n, err := atomicValidKind(ep, c.k, c.dt, c.op)
		if c.want == 0 {
			if !errors.Is(err, ErrOpNotSupp) {
				t.Errorf("%s valid(%s, %s) = %d, %v; want ErrOpNotSupp", atomicKindName[c.k], c.dt, c.op, n, err)
			}
		} else if n != c.want || err != nil {
			t.Errorf("%s valid(%s, %s) = %d, %v; want %d", atomicKindName[c.k], c.dt, c.op, n, err, c.want)
		}
		flags := map[dtype.Kind]Flags{dtype.KindBase: 0, dtype.KindFetch: FetchAtomicFlag, dtype.KindCompare: CompareAtomicFlag}[c.k]
		a, err := p.a.dom.QueryAtomic(c.dt, c.op, flags)
		if c.want == 0 {
			if !errors.Is(err, ErrOpNotSupp) {
				t.Errorf("QueryAtomic(%s, %s, %v) = %v, %v; want ErrOpNotSupp", c.dt, c.op, flags, a, err)
			}
		} else if a.Count != c.want || a.Size != c.dt.Size() || err != nil {
			t.Errorf("QueryAtomic(%s, %s, %v) = %+v, %v", c.dt, c.op, flags, a, err)
		}
	}
	_, err := ep.AtomicValid(LongDouble, OpSum)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("FI_LONG_DOUBLE")) {
		t.Errorf("LongDouble refusal does not name it: %v", err)
	}
	if _, err := p.a.dom.QueryAtomic(Uint64, OpSum, FetchAtomicFlag|CompareAtomicFlag); !errors.Is(err, ErrBadFlags) {
		t.Errorf("QueryAtomic with both flags: %v", err)
	}
	// An endpoint without the capability refuses.
	n := openRMANode(t, "tcp", rmaNodeCfg{caps: Msg | RMA})
	if _, err := n.ep.AtomicValid(Uint64, OpSum); !errors.Is(err, ErrOpNotSupp) {
		t.Errorf("AtomicValid without Atomic: %v", err)
	}
	if err := n.ep.Atomic(make([]byte, 8), 1, nil, 0, 0, 7, Uint64, OpSum, nil); !errors.Is(err, ErrOpNotSupp) {
		t.Errorf("Atomic without Atomic: %v", err)
	}
}

// TestAtomic_Refusals: bad arguments are returned at once; what only the
// target can judge (key, rights, range, alignment) completes in error and
// touches no target byte.
func TestAtomic_Refusals(t *testing.T) {
	for _, prov := range atomicProviders {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			p := openAtomicPair(t, prov, 64)
			ro, err := p.b.dom.RegMR(alignedBytes(64), RemoteRead, 0, 8, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			wo, err := p.b.dom.RegMR(alignedBytes(64), RemoteWrite, 0, 9, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer wo.Close()
			fill := bytes.Repeat([]byte{0x3c}, 64)
			for _, mr := range []*MR{p.mr, ro, wo} {
				copy(mr.Bytes(), fill)
				mr.Bytes()
			}
			ep, d := p.a.ep, p.dest
			buf, res := make([]byte, 4096+16), make([]byte, 4096+16)
			immediate := []struct {
				name string
				err  error
				want Errno
			}{
				{"count 0", ep.Atomic(buf, 0, nil, d, 0, 7, Uint64, OpSum, nil), ErrInval},
				{"count too large", ep.Atomic(buf, 513, nil, d, 0, 7, Uint64, OpSum, nil), ErrInval},
				{"buffer short", ep.Atomic(buf[:15], 2, nil, d, 0, 7, Uint64, OpSum, nil), ErrInval},
				{"result short", ep.FetchAtomic(buf, 2, nil, res[:8], nil, d, 0, 7, Uint64, OpSum, nil), ErrInval},
				{"compare short", ep.CompareAtomic(buf, 2, nil, buf[:8], nil, res, nil, d, 0, 7, Uint64, OpCSwap, nil), ErrInval},
				{"long double", ep.Atomic(buf, 1, nil, d, 0, 7, LongDouble, OpSum, nil), ErrOpNotSupp},
				{"compare op in Atomic", ep.Atomic(buf, 1, nil, d, 0, 7, Uint64, OpCSwap, nil), ErrOpNotSupp},
				{"bitwise on double", ep.FetchAtomic(buf, 1, nil, res, nil, d, 0, 7, Double, OpBAnd, nil), ErrOpNotSupp},
				{"msg nil", ep.AtomicMsg(nil, 0), ErrInval},
				{"msg no ranges", ep.AtomicMsg(&AtomicMsg{MsgIOV: [][]byte{buf[:8]}, Datatype: Uint64, Op: OpSum}, 0), ErrInval},
				{"msg length mismatch", ep.AtomicMsg(&AtomicMsg{MsgIOV: [][]byte{buf[:8]}, RMAIOV: []AtomicIOV{{Count: 2, Key: 7}},
					Datatype: Uint64, Op: OpSum}, 0), ErrInval},
				{"msg partial element", ep.AtomicMsg(&AtomicMsg{MsgIOV: [][]byte{buf[:4], buf[:4]}, RMAIOV: []AtomicIOV{{Count: 1, Key: 7}},
					Datatype: Uint64, Op: OpSum}, 0), ErrInval},
				{"msg remote cq data", ep.AtomicMsg(&AtomicMsg{MsgIOV: [][]byte{buf[:8]}, RMAIOV: []AtomicIOV{{Count: 1, Key: 7}},
					Datatype: Uint64, Op: OpSum}, RemoteCQData), ErrBadFlags},
				{"fetch msg inject", ep.FetchAtomicMsg(&AtomicMsg{MsgIOV: [][]byte{buf[:8]}, RMAIOV: []AtomicIOV{{Count: 1, Key: 7}},
					Datatype: Uint64, Op: OpSum}, [][]byte{res[:8]}, nil, Inject), ErrBadFlags},
				{"msg too many ranges", ep.AtomicMsg(&AtomicMsg{MsgIOV: [][]byte{buf[:72]}, RMAIOV: make([]AtomicIOV, 9),
					Datatype: Uint64, Op: OpSum}, 0), ErrInval},
			}
			for _, c := range immediate {
				if !errors.Is(c.err, c.want) {
					t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
				}
			}
			remote := []struct {
				name string
				k    dtype.Kind
				addr uint64
				key  uint64
				dt   Datatype
				op   AtomicOp
				n    int
				want Errno
			}{
				{"unknown key", dtype.KindBase, 0, 99, Uint64, OpSum, 1, ErrAccess},
				{"atomic without RemoteWrite", dtype.KindBase, 0, 8, Uint64, OpSum, 1, ErrAccess},
				{"fetch without RemoteWrite", dtype.KindFetch, 0, 8, Uint64, OpSum, 1, ErrAccess},
				{"atomic read without RemoteRead", dtype.KindFetch, 0, 9, Uint64, OpAtomicRead, 1, ErrAccess},
				{"compare without RemoteRead", dtype.KindCompare, 0, 9, Uint64, OpCSwap, 1, ErrAccess},
				{"misaligned uint64", dtype.KindBase, 4, p.key, Uint64, OpSum, 1, ErrInval},
				{"misaligned uint32", dtype.KindFetch, 2, p.key, Uint32, OpSum, 1, ErrInval},
				{"misaligned double complex", dtype.KindBase, 4, p.key, DoubleComplex, OpSum, 1, ErrInval},
				{"past the end", dtype.KindBase, 56, p.key, Uint64, OpSum, 2, ErrInval},
				{"wrapping address", dtype.KindCompare, ^uint64(7), p.key, Uint64, OpCSwap, 2, ErrInval},
			}
			for _, c := range remote {
				var err error
				ctx := c.name
				switch c.k {
				case dtype.KindBase:
					err = ep.Atomic(buf, c.n, nil, d, c.addr, c.key, c.dt, c.op, ctx)
				case dtype.KindFetch:
					err = ep.FetchAtomic(buf, c.n, nil, res, nil, d, c.addr, c.key, c.dt, c.op, ctx)
				default:
					err = ep.CompareAtomic(buf, c.n, nil, buf, nil, res, nil, d, c.addr, c.key, c.dt, c.op, ctx)
				}
				if err != nil {
					t.Fatalf("%s: posting: %v", c.name, err)
				}
				if _, err := waitTx(t, p.a, nil, ctx); !errors.Is(err, c.want) {
					t.Errorf("%s: completion %v, want %v", c.name, err, c.want)
				}
			}
			for _, mr := range []*MR{p.mr, ro, wo} {
				if !bytes.Equal(snapshot(mr), fill) {
					t.Fatal("a refused atomic changed target memory")
				}
			}
			// A refused injected atomic still reports an error.
			if err := ep.InjectAtomic(buf, 1, d, 0, 8, Uint64, OpSum); err != nil {
				t.Fatal(err)
			}
			if _, err := waitTx(t, p.a, nil, nil); !errors.Is(err, ErrAccess) {
				t.Fatalf("refused inject: %v", err)
			}
		})
	}
}

// TestAtomic_MsgForms runs the ...Msg forms over several ranges and
// local buffers, and InjectAtomic, checking results element by element.
func TestAtomic_MsgForms(t *testing.T) {
	for _, prov := range atomicProviders {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			p := openAtomicPair(t, prov, 128)
			u64 := func(b []byte, i int) uint64 { return ne64.Uint64(b[8*i:]) }
			init := make([]byte, 128)
			for i := 0; i < 16; i++ {
				ne64.PutUint64(init[8*i:], uint64(100+i))
			}
			p.setTarget(0, init)
			ops := make([]byte, 32)
			for i := 0; i < 4; i++ {
				ne64.PutUint64(ops[8*i:], uint64(1000*(i+1)))
			}
			// Elements 1 and 5..7 of the target, from two local buffers.
			msg := &AtomicMsg{MsgIOV: [][]byte{ops[:8], ops[8:]}, Addr: p.dest,
				RMAIOV: []AtomicIOV{{Addr: 8, Count: 1, Key: p.key}, {Addr: 40, Count: 3, Key: p.key}}, Datatype: Uint64, Op: OpSum, Context: "am"}
			if err := p.a.ep.AtomicMsg(msg, Completion); err != nil {
				t.Fatal(err)
			}
			if _, err := waitTx(t, p.a, nil, "am"); err != nil {
				t.Fatal(err)
			}
			got := snapshot(p.mr)
			for i, want := range map[int]uint64{0: 100, 1: 1101, 4: 104, 5: 2105, 6: 3106, 7: 4107, 8: 108} {
				if u64(got, i) != want {
					t.Fatalf("AtomicMsg: element %d = %d, want %d", i, u64(got, i), want)
				}
			}
			// FetchAtomicMsg with OpAtomicRead: no operands, results split.
			r1, r2 := make([]byte, 16), make([]byte, 16)
			msg = &AtomicMsg{Addr: p.dest, RMAIOV: []AtomicIOV{{Addr: 40, Count: 2, Key: p.key}, {Addr: 8, Count: 2, Key: p.key}},
				Datatype: Uint64, Op: OpAtomicRead, Context: "fr"}
			if err := p.a.ep.FetchAtomicMsg(msg, [][]byte{r1[:8], r1[8:], r2}, nil, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := waitTx(t, p.a, nil, "fr"); err != nil {
				t.Fatal(err)
			}
			if u64(r1, 0) != 2105 || u64(r1, 1) != 3106 || u64(r2, 0) != 1101 || u64(r2, 1) != 102 {
				t.Fatalf("FetchAtomicMsg read %d %d %d %d", u64(r1, 0), u64(r1, 1), u64(r2, 0), u64(r2, 1))
			}
			// CompareAtomicMsg: swap element 1 (matches) but not element 2.
			cmp, val, res := make([]byte, 16), make([]byte, 16), make([]byte, 16)
			ne64.PutUint64(cmp, 1101)
			ne64.PutUint64(cmp[8:], 7)
			ne64.PutUint64(val, 1)
			ne64.PutUint64(val[8:], 2)
			msg = &AtomicMsg{MsgIOV: [][]byte{val}, Addr: p.dest, RMAIOV: []AtomicIOV{{Addr: 8, Count: 2, Key: p.key}},
				Datatype: Uint64, Op: OpCSwap, Context: "cs"}
			if err := p.a.ep.CompareAtomicMsg(msg, [][]byte{cmp}, nil, [][]byte{res}, nil, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := waitTx(t, p.a, nil, "cs"); err != nil {
				t.Fatal(err)
			}
			got = snapshot(p.mr)
			if u64(res, 0) != 1101 || u64(res, 1) != 102 || u64(got, 1) != 1 || u64(got, 2) != 102 {
				t.Fatalf("CompareAtomicMsg: old %d %d, now %d %d", u64(res, 0), u64(res, 1), u64(got, 1), u64(got, 2))
			}
			// InjectAtomic: the buffer is free on return; no completion.
			one := make([]byte, 8)
			ne64.PutUint64(one, 5)
			for i := 0; i < 10; i++ {
				if err := p.a.ep.InjectAtomic(one, 1, p.dest, 0, p.key, Uint64, OpSum); err != nil {
					t.Fatal(err)
				}
				one[0] = 0xff // the call copied it
				one[0] = 5
			}
			// An atomic read after them sees all ten (order per peer).
			rd := make([]byte, 8)
			if err := p.a.ep.FetchAtomic(nil, 1, nil, rd, nil, p.dest, 0, p.key, Uint64, OpAtomicRead, "rd"); err != nil {
				t.Fatal(err)
			}
			if _, err := waitTx(t, p.a, nil, "rd"); err != nil {
				t.Fatal(err)
			}
			if u64(rd, 0) != 150 {
				t.Fatalf("after 10 injected adds of 5: %d, want 150", u64(rd, 0))
			}
		})
	}
}

// TestAtomic_GetInfo: Atomic is advertised where it works, with the
// ordering bits, and asked-for Atomic gives every atomic modifier.
func TestAtomic_GetInfo(t *testing.T) {
	hints := AllocInfo()
	hints.Caps = Atomic
	infos, err := GetInfo(Version(2, 0), "", "", 0, hints)
	if err != nil {
		t.Fatal(err)
	}
	// The linked provider is offered when asked for by name.
	hints.FabricAttr.ProvName = linkName
	linked, err := GetInfo(Version(2, 0), "", "", 0, hints)
	if err != nil {
		t.Fatal(err)
	}
	infos = append(infos, linked...)
	got := map[string]bool{}
	for _, in := range infos {
		got[in.FabricAttr.ProvName] = true
		if in.Caps&(Atomic|Read|Write|RemoteRead|RemoteWrite) != Atomic|Read|Write|RemoteRead|RemoteWrite {
			t.Errorf("%s: caps %v", in.FabricAttr.ProvName, in.Caps)
		}
		if in.TxAttr.MsgOrder&OrderAtomicWAW == 0 {
			t.Errorf("%s: no atomic ordering in %v", in.FabricAttr.ProvName, in.TxAttr.MsgOrder)
		}
	}
	for _, spec := range atomicProviders {
		if prov, _ := atomicSpec(spec); !got[strings.TrimSuffix(prov, "_remote")] {
			t.Errorf("%s does not advertise Atomic", prov)
		}
	}
}

// TestAtomic_MaxCount: a call of the count AtomicValid reports works, on
// the smallest and largest elements, and one more element is refused.
func TestAtomic_MaxCount(t *testing.T) {
	for _, spec := range atomicProviders {
		t.Run(spec, func(t *testing.T) {
			shmTestDir(t)
			p := openAtomicPair(t, spec, 4096)
			for _, dt := range []Datatype{Uint8, DoubleComplex} {
				n, err := p.a.ep.FetchAtomicValid(dt, OpSum)
				if err != nil {
					t.Fatal(err)
				}
				ones := make([]byte, n*dt.Size())
				for i := 0; i < len(ones); i += dt.Size() {
					if dt == Uint8 {
						ones[i] = 1
					} else {
						ne64.PutUint64(ones[i:], math.Float64bits(1))
					}
				}
				p.setTarget(0, make([]byte, 4096))
				res := make([]byte, len(ones))
				if _, err := p.runAtomic(t, dtype.KindFetch, ones, nil, res, n, 0, dt, OpSum); err != nil {
					t.Fatalf("%s x %d: %v", dt, n, err)
				}
				if got := snapshot(p.mr); !bytes.Equal(got, ones) {
					t.Fatalf("%s x %d: target not updated throughout", dt, n)
				}
				if err := p.a.ep.FetchAtomic(append(ones, ones[:dt.Size()]...), n+1, nil, append(res, res[:dt.Size()]...), nil, p.dest, 0, p.key, dt, OpSum, nil); !errors.Is(err, ErrInval) {
					t.Fatalf("%s x %d: %v, want ErrInval", dt, n+1, err)
				}
			}
		})
	}
}

// TestAtomic_AllocSlotReused: after the target closes an AllocMR region
// and allocates another, which takes the freed slot of its key table
// under a new generation, the initiator's atomics reach the new memory,
// not its mapping of the old (shm caches the last key and mapping it
// used), and an atomic to the closed key is refused.
func TestAtomic_AllocSlotReused(t *testing.T) {
	shmTestDir(t)
	p := openAtomicPair(t, "shm", 64)
	one := make([]byte, 8)
	ne64.PutUint64(one, 1)
	res := make([]byte, 8)
	for round := 0; round < 3; round++ {
		for i := 0; i < 2; i++ {
			if _, err := p.runAtomic(t, dtype.KindFetch, one, nil, res, 1, 8, Uint64, OpSum); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if got := ne64.Uint64(res); got != uint64(i) {
				t.Fatalf("round %d add %d fetched %d (a stale mapping of an earlier region?)", round, i, got)
			}
		}
		if got := ne64.Uint64(snapshot(p.mr)[8:]); got != 2 {
			t.Fatalf("round %d: region word %d after two adds", round, got)
		}
		old := p.key
		if err := p.mr.Close(); err != nil {
			t.Fatal(err)
		}
		if err := p.a.ep.FetchAtomic(one, 1, nil, res, nil, p.dest, 8, old, Uint64, OpSum, nil); err == nil {
			if _, err := waitTx(t, p.a, nil, nil); !errors.Is(err, ErrAccess) {
				t.Fatalf("round %d: atomic to the closed key: %v, want ErrAccess", round, err)
			}
		} else if !errors.Is(err, ErrAccess) {
			t.Fatalf("round %d: atomic to the closed key: %v", round, err)
		}
		mr, err := p.b.dom.AllocMR(64, RemoteRead|RemoteWrite)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mr.Close() })
		p.mr, p.key = mr, mr.Key()
	}
}

// TestAtomic_OrderWithRMA checks atomic.go's ordering statement: atomics
// and RMA writes and reads from one endpoint to one peer, posted without
// waiting, execute at the target in the order posted (an atomic after a
// Write sees the written bytes, a Write after an atomic overwrites its
// result, a Read after an atomic sees its result), on every path.
func TestAtomic_OrderWithRMA(t *testing.T) {
	for _, spec := range atomicProviders {
		t.Run(spec, func(t *testing.T) {
			shmTestDir(t)
			p := openAtomicPair(t, spec, 64)
			ep, d := p.a.ep, p.dest
			u := func(v uint64) []byte {
				b := make([]byte, 8)
				ne64.PutUint64(b, v)
				return b
			}
			for round := uint64(0); round < 20; round++ {
				fetched, read := make([]byte, 8), make([]byte, 8)
				posts := []struct {
					ctx  string
					post func(ctx string) error
				}{
					{"write", func(c string) error { return ep.Write(u(100+round), nil, d, 0, p.key, c) }},
					{"add", func(c string) error { return ep.Atomic(u(5), 1, nil, d, 0, p.key, Uint64, OpSum, c) }},
					{"fetch", func(c string) error {
						return ep.FetchAtomic(u(1), 1, nil, fetched, nil, d, 0, p.key, Uint64, OpSum, c)
					}},
					{"overwrite", func(c string) error { return ep.Write(u(7), nil, d, 0, p.key, c) }},
					{"add2", func(c string) error { return ep.Atomic(u(3), 1, nil, d, 0, p.key, Uint64, OpSum, c) }},
					{"read", func(c string) error { return ep.Read(read, nil, d, 0, p.key, c) }},
				}
				for _, q := range posts {
					for {
						err := q.post(q.ctx)
						if err == nil {
							break
						}
						if !errors.Is(err, ErrAgain) {
							t.Fatalf("%s: %v", q.ctx, err)
						}
						p.a.txCQ().Read(nil)
					}
				}
				pending := map[any]bool{}
				for _, q := range posts {
					pending[q.ctx] = true
				}
				deadline := time.Now().Add(20 * time.Second)
				var e [4]CQEntry
				for len(pending) > 0 && time.Now().Before(deadline) {
					n, err := p.a.txCQ().Read(e[:])
					if err != nil && !errors.Is(err, ErrAgain) {
						t.Fatalf("round %d: %v", round, err)
					}
					for _, x := range e[:n] {
						delete(pending, x.Context)
					}
				}
				if len(pending) > 0 {
					t.Fatalf("round %d: no completion for %v", round, pending)
				}
				if got := ne64.Uint64(fetched); got != 105+round {
					t.Fatalf("round %d: fetch-add after write+add saw %d, want %d", round, got, 105+round)
				}
				if got := ne64.Uint64(read); got != 10 {
					t.Fatalf("round %d: read after overwrite+add saw %d, want 10", round, got)
				}
				if got := ne64.Uint64(snapshot(p.mr)); got != 10 {
					t.Fatalf("round %d: target word %d, want 10", round, got)
				}
			}
		})
	}
}

// TestAtomic_TruncatedAllocMR: a target that shrinks the file behind its
// AllocMR region (an untrusted peer can) makes the shm initiator's direct
// atomics on the lost pages fail with an error completion, one element or
// several, instead of crashing the initiator (SIGBUS under the guard).
func TestAtomic_TruncatedAllocMR(t *testing.T) {
	shmTestDir(t)
	p := openAtomicPair(t, "shm", 2*os.Getpagesize())
	pg := uint64(os.Getpagesize())
	one := make([]byte, 24)
	ne64.PutUint64(one, 1)
	res := make([]byte, 24)
	if _, err := p.runAtomic(t, dtype.KindFetch, one, nil, res, 1, pg+8, Uint64, OpSum); err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv(shm.DirEnv)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seg := regexp.MustCompile(`\.m[0-9]+\.[0-9]+$`)
	n := 0
	for _, e := range ents {
		if seg.MatchString(e.Name()) {
			if err := os.Truncate(filepath.Join(dir, e.Name()), int64(pg)); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d AllocMR segment files in %s, want 1", n, dir)
	}
	for _, count := range []int{1, 3} {
		if _, err := p.runAtomic(t, dtype.KindFetch, one, nil, res, count, pg+8, Uint64, OpSum); !errors.Is(err, ErrIO) {
			t.Fatalf("count %d: an atomic on a truncated page: %v, want ErrIO", count, err)
		}
	}
	// The page that is left still works.
	if _, err := p.runAtomic(t, dtype.KindFetch, one, nil, res, 1, 8, Uint64, OpSum); err != nil {
		t.Fatalf("atomic on the page left: %v", err)
	}
}
