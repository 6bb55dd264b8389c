//go:build !race

package fi

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestRMA_NoAllocationPerOperation: after warm-up, RMA writes, reads and
// inject writes through the public API allocate nothing. tcp stops at
// 64 KiB: an operation long enough to span the parked event loop's 1 ms
// tick pays gnet's allocation for re-queuing the park (net/own.go), once
// per millisecond of waiting, not per operation.
func TestRMA_NoAllocationPerOperation(t *testing.T) {
	for _, name := range append(rmaProviders, "shm_alloc") {
		t.Run(name, func(t *testing.T) {
			shmTestDir(t)
			prov, alloc := name, name == "shm_alloc"
			if alloc { // target memory from AllocMR: shm copies into its mapping
				prov = "shm"
			}
			a := openRMANode(t, prov, rmaNodeCfg{})
			b := openRMANode(t, prov, rmaNodeCfg{})
			dest := a.connect(t, b)
			var mr *MR
			var err error
			if alloc {
				mr, err = b.dom.AllocMR(1<<20, RemoteRead|RemoteWrite)
			} else {
				mr, err = b.dom.RegMR(make([]byte, 1<<20), RemoteRead|RemoteWrite, 0, 9, 0)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Close()
			key := mr.Key()
			ctx := new(int)
			sizes := []int{8, 4096, 1 << 20}
			if name == "tcp" {
				sizes = []int{8, 4096, 64 << 10}
			}
			for _, size := range sizes {
				buf := make([]byte, size)
				for _, op := range []string{"write", "read", "inject", "writemsg"} {
					if op == "inject" && size > a.info.TxAttr.InjectSize {
						continue
					}
					riov := []RMAIOV{{Addr: 0, Len: uint64(size), Key: key}}
					msg := &RMAMsg{MsgIOV: [][]byte{buf}, Addr: dest, RMAIOV: riov, Context: ctx}
					t.Run(fmt.Sprintf("%s/%d", op, size), func(t *testing.T) {
						var failed error
						round := func() {
							if failed != nil {
								return
							}
							switch op {
							case "write":
								failed = a.ep.Write(buf, nil, dest, 0, key, ctx)
							case "read":
								failed = a.ep.Read(buf, nil, dest, 0, key, ctx)
							case "writemsg":
								failed = a.ep.WriteMsg(msg, Completion)
							case "inject":
								failed = a.ep.InjectWrite(buf, dest, 0, key)
								if failed == nil {
									// an inject makes no completion: order it behind a read
									failed = a.ep.Read(buf[:1], nil, dest, 0, key, ctx)
								}
							}
							if failed == nil {
								failed = readOne(a.cq)
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
			}
		})
	}
}

// readOne reads one successful completion from cq.
func readOne(cq *CQ) error {
	var e [1]CQEntry
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		k, err := cq.Read(e[:])
		if k == 1 {
			return nil
		}
		if err != nil && !errors.Is(err, ErrAgain) {
			return err
		}
		if i&(1<<12-1) == 0 && time.Now().After(deadline) {
			return errors.New("no completion within 30 s")
		}
	}
}
