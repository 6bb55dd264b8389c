//go:build !race

package fi

import (
	"fmt"
	"testing"
	"time"

	"github.com/gofi-dev/fi/rma"
)

// TestRMA_NoAllocationOtherCalls: the RMA calls TestRMA_NoAllocationPerOperation
// does not cover (WriteV, ReadV, ReadMsg, WriteData, InjectWriteData, and
// counting with Cntr.Wait) allocate nothing per operation after warm-up,
// the target's remote-CQ-data completions read included.
func TestRMA_NoAllocationOtherCalls(t *testing.T) {
	for _, prov := range []string{"tcp", "shm", linkName} {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			a := openRMANode(t, prov, rmaNodeCfg{cntrs: Write | Read})
			b := openRMANode(t, prov, rmaNodeCfg{})
			dest := a.connect(t, b)
			mr, err := b.dom.RegMR(make([]byte, 1<<16), RemoteRead|RemoteWrite, 0, 9, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Close()
			ctx := new(int)
			for _, size := range []int{8, 4096} {
				buf := make([]byte, size)
				iov := [][]byte{buf[:size/2], buf[size/2:]}
				riov := []RMAIOV{{Len: uint64(size / 2), Key: 9}, {Addr: 8192, Len: uint64(size / 2), Key: 9}}
				msg := &RMAMsg{MsgIOV: iov, Addr: dest, RMAIOV: riov, Context: ctx}
				for _, op := range []string{"writev", "readv", "readmsg", "writedata", "injectwritedata", "cntrwait"} {
					if op == "injectwritedata" && size > a.info.TxAttr.InjectSize {
						continue
					}
					t.Run(fmt.Sprintf("%s/%d", op, size), func(t *testing.T) {
						var failed error
						var e [1]CQEntry
						target := func() { // the target's remote CQ data completion
							deadline := time.Now().Add(30 * time.Second)
							for {
								if k, _ := b.cq.Read(e[:]); k == 1 {
									return
								}
								a.cq.Read(e[:0])
								if time.Now().After(deadline) {
									failed = fmt.Errorf("no target completion")
									return
								}
							}
						}
						round := func() {
							if failed != nil {
								return
							}
							switch op {
							case "writev":
								failed = a.ep.WriteV(iov, nil, dest, 0, 9, ctx)
							case "readv":
								failed = a.ep.ReadV(iov, nil, dest, 0, 9, ctx)
							case "readmsg":
								failed = a.ep.ReadMsg(msg, Completion)
							case "writedata":
								failed = a.ep.WriteData(buf, nil, 7, dest, 0, 9, ctx)
							case "injectwritedata":
								failed = a.ep.InjectWriteData(buf, 7, dest, 0, 9)
								if failed == nil {
									target()
								}
								return
							case "cntrwait":
								c := a.cntr[Write]
								v := c.Read()
								failed = a.ep.Write(buf, nil, dest, 0, 9, ctx)
								if failed == nil {
									failed = c.Wait(v+1, 30*time.Second)
								}
								if failed == nil {
									failed = readOne(a.cq)
								}
								return
							}
							if failed == nil {
								failed = readOne(a.cq)
							}
							if failed == nil && op == "writedata" {
								target()
							}
						}
						for range 3 {
							round()
						}
						if n := testing.AllocsPerRun(20, round); n != 0 {
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

// TestLinkedDataPath_NoAllocationAtEverySize: over both routes of a
// linked shm+tcp endpoint, a tagged message of every size class (empty,
// inline, eager, rendezvous) and its receive allocate nothing in steady
// state (issue #12 item 7; TestLinkedRoundTripZeroAllocs covers 64 bytes).
func TestLinkedDataPath_NoAllocationAtEverySize(t *testing.T) {
	shmTestDir(t)
	a, b, c, aB, aC, _, _ := linkTrio(t, nodeCfg{})
	for _, r := range []struct {
		name string
		at   *node
		to   Addr
	}{{"shm", b, aB}, {"tcp", c, aC}} {
		for _, size := range []int{0, 8, 4 << 10, 64 << 10, 1 << 20} {
			t.Run(fmt.Sprintf("%s/size=%d", r.name, size), func(t *testing.T) {
				msg, buf := make([]byte, size), make([]byte, size)
				var failed error
				round := func() {
					if failed != nil {
						return
					}
					if failed = r.at.ep.TRecv(buf, AddrUnspec, 7, 0, nil); failed != nil {
						return
					}
					if failed = a.ep.TSend(msg, r.to, 7, nil); failed != nil {
						return
					}
					failed = pollBoth(r.at.rxcq, a.txcq)
				}
				for range 3 {
					round()
				}
				if n := testing.AllocsPerRun(20, round); n != 0 {
					t.Errorf("%v allocations per message", n)
				}
				if failed != nil {
					t.Fatal(failed)
				}
			})
		}
	}
}

// TestRMA_NoAllocationLargeTCP: RMA writes and reads of 1 MiB and of more
// than one read request carries (rma.MaxRead) allocate nothing over tcp
// either (TestRMA_NoAllocationPerOperation stops tcp at 64 KiB, from when
// re-parking the event loop every tick allocated; the park socket made it
// free: net/own.go startPark).
func TestRMA_NoAllocationLargeTCP(t *testing.T) {
	for _, prov := range []string{"tcp", linkName + "_remote"} {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			a := openRMANode(t, prov, rmaNodeCfg{})
			b := openRMANode(t, prov, rmaNodeCfg{})
			dest := a.connect(t, b)
			const max = 2*rma.MaxRead + 1<<20
			mr, err := b.dom.RegMR(make([]byte, max), RemoteRead|RemoteWrite, 0, 9, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Close()
			ctx := new(int)
			for _, size := range []int{1 << 20, max} {
				buf := make([]byte, size)
				for _, op := range []string{"write", "read"} {
					t.Run(fmt.Sprintf("%s/%d", op, size), func(t *testing.T) {
						var failed error
						round := func() {
							if failed != nil {
								return
							}
							if op == "write" {
								failed = a.ep.Write(buf, nil, dest, 0, 9, ctx)
							} else {
								failed = a.ep.Read(buf, nil, dest, 0, 9, ctx)
							}
							if failed == nil {
								failed = readOne(a.cq)
							}
						}
						for range 3 {
							round()
						}
						if n := testing.AllocsPerRun(10, round); n != 0 {
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
