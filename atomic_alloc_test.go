//go:build !race

package fi

import (
	"testing"
)

// TestAtomic_NoAllocationPerOperation: after warm-up, each atomic form
// through the public API allocates nothing.
func TestAtomic_NoAllocationPerOperation(t *testing.T) {
	for _, prov := range atomicProviders {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			p := openAtomicPair(t, prov, 64)
			ep, d, k, ctx := p.a.ep, p.dest, p.key, new(int)
			one, cmp, res := make([]byte, 16), make([]byte, 16), make([]byte, 16)
			one[0] = 1
			msg := &AtomicMsg{MsgIOV: [][]byte{one[:8]}, Addr: d, RMAIOV: []AtomicIOV{{Addr: 8, Count: 1, Key: k}},
				Datatype: Uint64, Op: OpSum, Context: ctx}
			resv, cmpv := [][]byte{res[:8]}, [][]byte{cmp[:8]}
			ops := map[string]func() error{
				"fetch-add":  func() error { return ep.FetchAtomic(one, 1, nil, res, nil, d, 0, k, Uint64, OpSum, ctx) },
				"cswap":      func() error { return ep.CompareAtomic(one, 1, nil, cmp, nil, res, nil, d, 0, k, Uint64, OpCSwap, ctx) },
				"add":        func() error { return ep.Atomic(one, 1, nil, d, 0, k, Uint64, OpSum, ctx) },
				"read":       func() error { return ep.FetchAtomic(nil, 1, nil, res, nil, d, 0, k, Uint64, OpAtomicRead, ctx) },
				"complex":    func() error { return ep.Atomic(one, 1, nil, d, 16, k, DoubleComplex, OpProd, ctx) },
				"atomicmsg":  func() error { return ep.AtomicMsg(msg, Completion) },
				"fetchmsg":   func() error { return ep.FetchAtomicMsg(msg, resv, nil, 0) },
				"comparemsg": func() error { m := *msg; m.Op = OpCSwap; return ep.CompareAtomicMsg(&m, cmpv, nil, resv, nil, 0) },
				"inject+read": func() error {
					if err := ep.InjectAtomic(one, 1, d, 0, k, Uint64, OpSum); err != nil {
						return err
					}
					return ep.FetchAtomic(nil, 1, nil, res, nil, d, 0, k, Uint64, OpAtomicRead, ctx)
				},
			}
			for name, op := range ops {
				t.Run(name, func(t *testing.T) {
					var failed error
					round := func() {
						if failed == nil {
							failed = op()
						}
						if failed == nil {
							failed = readOne(p.a.cq)
						}
					}
					for range 3 {
						round()
					}
					if n := testing.AllocsPerRun(50, round); n != 0 {
						t.Errorf("%v allocations per operation", n)
					}
					if failed != nil {
						t.Fatal(failed)
					}
				})
			}
		})
	}
}
