package fi

// Checks of issue #13's "done" lines that no other test asserted: the RMA
// attributes GetInfo fills and fi_info printing shows, the completion
// levels of WriteMsg and ReadMsg, the buffer of an injected write being
// free at return, remote CQ data leaving posted receives alone without
// RxCQData, and a registered Go slice kept alive until Close.

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"
)

// TestGetInfo_RMAAttributesAdvertisedAndPrinted: asked for (or left
// open), the RMA capabilities are advertised on shm, tcp and shm+tcp with
// their attributes filled (fi_rma(3), fi_domain(3), fi_endpoint(3)), and
// Info.String (fi_info -v's layout) prints them.
func TestGetInfo_RMAAttributesAdvertisedAndPrinted(t *testing.T) {
	const want = RMA | Read | Write | RemoteRead | RemoteWrite | RMAEvent
	for _, prov := range []string{"shm", "tcp", linkName} {
		for _, asked := range []Flags{0, want} {
			t.Run(fmt.Sprintf("%s/caps=%v", prov, asked), func(t *testing.T) {
				h := AllocInfo()
				h.FabricAttr.ProvName = prov
				h.Caps = asked
				infos := mustGetInfo(t, "", "", 0, h)
				for _, i := range infos {
					if i.Caps&want != want {
						t.Fatalf("caps %v lack %v", i.Caps, want&^i.Caps)
					}
					d, e, tx := i.DomainAttr, i.EpAttr, i.TxAttr
					switch {
					case d.MRMode&^MRProvKey != 0:
						t.Fatalf("MR mode %v: gofi needs none of the modes", d.MRMode)
					case d.MRKeySize != 8 || d.MRIOVLimit != mrIOVLimit || d.MRCnt != mrSlots || d.CntrCnt != cntrSlots:
						t.Fatalf("MR attributes %+v", d)
					case tx.RMAIOVLimit != rmaIOVLimit:
						t.Fatalf("RMAIOVLimit %d, want %d", tx.RMAIOVLimit, rmaIOVLimit)
					case e.MaxOrderRAWSize <= 0 || e.MaxOrderWARSize <= 0 || e.MaxOrderWAWSize <= 0:
						t.Fatalf("max order sizes %d/%d/%d", e.MaxOrderRAWSize, e.MaxOrderWARSize, e.MaxOrderWAWSize)
					case tx.MsgOrder&(OrderRMARAW|OrderRMAWAW) != OrderRMARAW|OrderRMAWAW:
						t.Fatalf("RMA order %v", tx.MsgOrder)
					}
					s := i.String()
					for _, line := range []string{
						"FI_RMA, ", "FI_READ, ", "FI_WRITE, ", "FI_REMOTE_READ, ", "FI_REMOTE_WRITE, ", "FI_RMA_EVENT",
						"        mr_key_size: 8\n",
						fmt.Sprintf("        mr_iov_limit: %d\n", mrIOVLimit),
						fmt.Sprintf("        rma_iov_limit: %d\n", rmaIOVLimit),
						fmt.Sprintf("        max_order_raw_size: %d\n", e.MaxOrderRAWSize),
						fmt.Sprintf("        mr_cnt: %d\n", mrSlots),
					} {
						if !strings.Contains(s, line) {
							t.Fatalf("fi_info printing lacks %q:\n%s", line, s)
						}
					}
				}
			})
		}
	}
	// An MR mode gofi does not serve leaves every provider out.
	for _, m := range []MRMode{MRBasic, MRBasic | MRLocal, MRScalable | MRProvKey} {
		h := AllocInfo()
		h.Caps = RMA
		h.DomainAttr.MRMode = m
		infos, err := GetInfo(v117, "", "", 0, h)
		wantNoData(t, infos, err)
	}
}

// TestRMA_CompletionLevels: WriteMsg and ReadMsg accept each completion
// level of fi_cq(3) with Completion under selective completion; each
// completes once with RMA|Write (RMA|Read), and the written bytes are at
// the target when the completion is read (every level is served as
// delivery complete). Without Completion no entry is written.
func TestRMA_CompletionLevels(t *testing.T) {
	for _, prov := range []string{"tcp", "shm", "shm_nocma", linkName} {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			a := openRMANode(t, prov, rmaNodeCfg{sel: true})
			b := openRMANode(t, prov, rmaNodeCfg{})
			dest := a.connect(t, b)
			_, region, check := guarded(1<<16, 0)
			mr, err := b.dom.RegMR(region, RemoteRead|RemoteWrite, 0, 4, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Close()
			levels := []Flags{0, InjectComplete, TransmitComplete, DeliveryComplete}
			for k, lvl := range levels {
				for _, size := range []int{8, 1 << 16} {
					src := pattern(size, 10*k+size)
					riov := []RMAIOV{{Len: uint64(size), Key: 4}}
					// without Completion: no entry (the next operation's is
					// the first one read)
					if err := a.ep.WriteMsg(&RMAMsg{MsgIOV: [][]byte{make([]byte, size)}, Addr: dest, RMAIOV: riov, Context: "silent"}, lvl); err != nil {
						t.Fatal(err)
					}
					ctx := fmt.Sprintf("w%v/%d", lvl, size)
					if err := a.ep.WriteMsg(&RMAMsg{MsgIOV: [][]byte{src}, Addr: dest, RMAIOV: riov, Context: ctx}, lvl|Completion); err != nil {
						t.Fatalf("WriteMsg(%v): %v", lvl, err)
					}
					if e, err := waitTx(t, a, nil, ctx); err != nil || e.Flags != RMA|Write {
						t.Fatalf("WriteMsg(%v) completion %v flags %v", lvl, err, e.Flags)
					}
					if !bytes.Equal(snapshot(mr)[:size], src) {
						t.Fatalf("WriteMsg(%v), %d bytes: not at the target when the completion arrived", lvl, size)
					}
					got := make([]byte, size)
					ctx = fmt.Sprintf("r%v/%d", lvl, size)
					if err := a.ep.ReadMsg(&RMAMsg{MsgIOV: [][]byte{got}, Addr: dest, RMAIOV: riov, Context: ctx}, lvl|Completion); err != nil {
						t.Fatalf("ReadMsg(%v): %v", lvl, err)
					}
					if e, err := waitTx(t, a, nil, ctx); err != nil || e.Flags != RMA|Read {
						t.Fatalf("ReadMsg(%v) completion %v flags %v", lvl, err, e.Flags)
					}
					if !bytes.Equal(got, src) {
						t.Fatalf("ReadMsg(%v), %d bytes: differs", lvl, size)
					}
				}
			}
			var e [1]CQEntry
			if k, _ := a.txCQ().Read(e[:]); k != 0 {
				t.Fatalf("extra completion %+v", e[0])
			}
			check(t)
		})
	}
}

// TestRMA_InjectBufferFreeAtReturn: the buffer of InjectWrite and
// InjectWriteData may be changed as soon as the call returns
// (fi_rma(3) FI_INJECT); the target gets the bytes of the call's time.
func TestRMA_InjectBufferFreeAtReturn(t *testing.T) {
	for _, prov := range []string{"tcp", "shm", "shm_nocma", linkName} {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			a := openRMANode(t, prov, rmaNodeCfg{})
			b := openRMANode(t, prov, rmaNodeCfg{})
			dest := a.connect(t, b)
			region := make([]byte, 4096)
			mr, err := b.dom.RegMR(region, RemoteRead|RemoteWrite, 0, 6, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Close()
			n := min(64, a.info.TxAttr.InjectSize)
			buf := make([]byte, n)
			var want []byte
			for i := range 8 {
				for j := range buf {
					buf[j] = byte(i + 1)
				}
				want = append(want, buf...)
				if i%2 == 0 {
					err = a.ep.InjectWrite(buf, dest, uint64(i*n), 6)
				} else {
					err = a.ep.InjectWriteData(buf, uint64(i), dest, uint64(i*n), 6)
				}
				if err != nil {
					t.Fatal(err)
				}
				clear(buf) // free at return
			}
			// A read after the writes (RMA RAW order) sees them.
			got := make([]byte, len(want))
			if err := a.ep.Read(got, nil, dest, 0, 6, "r"); err != nil {
				t.Fatal(err)
			}
			if _, err := waitTx(t, a, []*rmaNode{b}, "r"); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("injected writes landed %v, want %v", got, want)
			}
			if err := a.ep.InjectWrite(make([]byte, a.info.TxAttr.InjectSize+1), dest, 0, 6); !errors.Is(err, ErrMsgSize) {
				t.Fatalf("inject above InjectSize: %v, want ErrMsgSize", err)
			}
		})
	}
}

// TestRMA_RemoteCQDataLeavesReceives: without RxCQData, WriteData and
// WriteMsg(RemoteCQData) make target completions of their own (nil
// Context, RMA|RemoteWrite|RemoteCQData) and a receive posted at the
// target stays posted for the next message (fi_cq(3), fi_getinfo(3)
// FI_RX_CQ_DATA).
func TestRMA_RemoteCQDataLeavesReceives(t *testing.T) {
	for _, prov := range []string{"tcp", "shm", linkName} {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			a := openRMANode(t, prov, rmaNodeCfg{})
			b := openRMANode(t, prov, rmaNodeCfg{})
			if b.info.Mode&RxCQData != 0 {
				t.Fatalf("RxCQData mode without asking: %v", b.info.Mode)
			}
			dest := a.connect(t, b)
			mr, err := b.dom.RegMR(make([]byte, 64), RemoteWrite, 0, 3, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer mr.Close()
			rbuf := make([]byte, 16)
			if err := b.ep.Recv(rbuf, AddrUnspec, "rx"); err != nil {
				t.Fatal(err)
			}
			if err := a.ep.WriteData([]byte("one"), nil, 11, dest, 0, 3, "wd"); err != nil {
				t.Fatal(err)
			}
			if err := a.ep.WriteMsg(&RMAMsg{MsgIOV: [][]byte{[]byte("two!")}, Addr: dest,
				RMAIOV: []RMAIOV{{Addr: 8, Len: 4, Key: 3}}, Context: "wm", Data: 22}, RemoteCQData|Completion); err != nil {
				t.Fatal(err)
			}
			targetEntries := func(k int) []CQEntry {
				t.Helper()
				var out []CQEntry
				deadline := time.Now().Add(20 * time.Second)
				for len(out) < k && time.Now().Before(deadline) {
					var e [4]CQEntry
					a.cq.Read(e[:0])
					n, err := b.cq.Read(e[:])
					if err != nil && !errors.Is(err, ErrAgain) {
						t.Fatal(err)
					}
					out = append(out, e[:n]...)
				}
				if len(out) < k {
					t.Fatalf("%d target completions, want %d", len(out), k)
				}
				return out
			}
			got := map[uint64]CQEntry{}
			for _, e := range targetEntries(2) {
				want := RMA | RemoteWrite | RemoteCQData
				if e.Flags&want != want || e.Context != nil {
					t.Fatalf("target completion %+v: want flags %v and a nil Context", e, want)
				}
				got[e.Data] = e
			}
			if got[11].Len != 3 || got[22].Len != 4 {
				t.Fatalf("target completions %+v", got)
			}
			if s := snapshot(mr); string(s[:3]) != "one" || string(s[8:12]) != "two!" {
				t.Fatalf("region %q", s[:12])
			}
			// The receive is still posted: a message fills it.
			if err := a.ep.Send([]byte("msg"), dest, "s"); err != nil {
				t.Fatal(err)
			}
			e := targetEntries(1)[0]
			if e.Context != "rx" || e.Flags&RemoteCQData != 0 || string(rbuf[:e.Len]) != "msg" {
				t.Fatalf("receive after the writes: %+v %q", e, rbuf[:e.Len])
			}
		})
	}
}

// TestRegMR_KeepsSliceAlive: a Go slice registered with RegMR stays
// allocated while the region is open, although the application dropped
// every other reference to it, and peers' writes land in it.
func TestRegMR_KeepsSliceAlive(t *testing.T) {
	shmTestDir(t)
	for _, prov := range []string{"shm", "tcp"} {
		t.Run(prov, func(t *testing.T) {
			a := openRMANode(t, prov, rmaNodeCfg{})
			b := openRMANode(t, prov, rmaNodeCfg{})
			dest := a.connect(t, b)
			var wp weak.Pointer[[1 << 16]byte]
			mr := func() *MR {
				p := new([1 << 16]byte)
				wp = weak.Make(p)
				mr, err := b.dom.RegMR(p[:], RemoteRead|RemoteWrite, 0, 8, 0)
				if err != nil {
					t.Fatal(err)
				}
				return mr
			}()
			defer mr.Close()
			for range 3 {
				runtime.GC()
			}
			p := wp.Value()
			if p == nil {
				t.Fatal("registered memory was collected while the region is open")
			}
			if err := a.ep.Write([]byte("alive"), nil, dest, 100, 8, "w"); err != nil {
				t.Fatal(err)
			}
			if _, err := waitTx(t, a, nil, "w"); err != nil {
				t.Fatal(err)
			}
			mr.Bytes()
			if string(p[100:105]) != "alive" {
				t.Fatalf("write did not land in the registered slice: %q", p[100:105])
			}
		})
	}
}

// TestRMA_CloseRacesAccessAllocMR: TestRMA_CloseRacesAccess for AllocMR
// memory, which shm initiators copy into through their own mapping of the
// region: writes streaming while MR.Close runs complete or fail with
// ErrAccess; once Close returned, writes with the old key fail, and a
// region allocated next (in the freed slot) is never touched by them.
func TestRMA_CloseRacesAccessAllocMR(t *testing.T) {
	for _, prov := range rmaProviders {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			a := openRMANode(t, prov, rmaNodeCfg{})
			b := openRMANode(t, prov, rmaNodeCfg{})
			dest := a.connect(t, b)
			const size = 1 << 20
			mr, err := b.dom.AllocMR(size, RemoteWrite)
			if err != nil {
				t.Fatal(err)
			}
			key := mr.Key()
			src := pattern(size, 3)
			closed := make(chan struct{})
			var closeStart time.Time
			for i := 0; ; i++ {
				if i == 8 {
					closeStart = time.Now()
					go func() {
						if err := mr.Close(); err != nil {
							t.Error(err)
						}
						close(closed)
					}()
				}
				if err := a.ep.Write(src, nil, dest, 0, key, i); err != nil {
					t.Fatal(err)
				}
				if _, err := waitTx(t, a, nil, i); err != nil && !errors.Is(err, ErrAccess) {
					t.Fatalf("write %d: %v", i, err)
				}
				select {
				case <-closed:
				default:
					if i >= 8 && time.Since(closeStart) > closeWait {
						t.Fatalf("MR.Close did not return within %v while writes streamed", closeWait)
					}
					continue
				}
				break
			}
			next, err := b.dom.AllocMR(size, RemoteWrite|RemoteRead)
			if err != nil {
				t.Fatal(err)
			}
			defer next.Close()
			if next.Key() == key {
				t.Logf("the next region got the closed one's key %#x back: nothing to refuse", key)
				return
			}
			mem := next.Bytes()
			for i := range mem {
				mem[i] = 0xee
			}
			next.Bytes()
			for i := range 20 {
				if err := a.ep.Write(src[:4096<<(i%9)], nil, dest, 0, key, i); err != nil {
					t.Fatal(err)
				}
				if _, err := waitTx(t, a, nil, i); !errors.Is(err, ErrAccess) {
					t.Fatalf("write %d with the closed region's key: %v, want ErrAccess", i, err)
				}
			}
			for i, c := range snapshot(next) {
				if c != 0xee {
					t.Fatalf("byte %d of the next region changed by writes with the closed key", i)
				}
			}
		})
	}
}

// TestRMA_VectorRefusedWhole: a WriteMsg whose later remote range is
// refused (unknown key, no right, past the end) completes in error and
// writes none of its ranges, not even the valid ones before it (fi_rma(3)
// untrusted peers: "touches no target byte"); a ReadMsg likewise leaves
// the local buffers as they were.
func TestRMA_VectorRefusedWhole(t *testing.T) {
	for _, prov := range rmaProviders {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			a := openRMANode(t, prov, rmaNodeCfg{})
			b := openRMANode(t, prov, rmaNodeCfg{})
			dest := a.connect(t, b)
			_, r1, check1 := guarded(1<<20, 1)
			_, r2, check2 := guarded(1000, 2)
			m1, err := b.dom.RegMR(r1, RemoteRead|RemoteWrite, 0, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer m1.Close()
			m2, err := b.dom.RegMR(r2, RemoteRead, 0, 2, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer m2.Close()
			cases := []struct {
				name  string
				bad   RMAIOV
				write bool
				want  Errno
			}{
				{"unknown key", RMAIOV{Len: 10, Key: 99}, true, ErrAccess},
				{"no RemoteWrite", RMAIOV{Len: 10, Key: 2}, true, ErrAccess},
				{"past the end", RMAIOV{Addr: 1<<20 - 5, Len: 10, Key: 1}, true, ErrInval},
				{"read, unknown key", RMAIOV{Len: 10, Key: 99}, false, ErrAccess},
				{"read, past the end", RMAIOV{Addr: 995, Len: 10, Key: 2}, false, ErrInval},
			}
			for _, c := range cases {
				// a large valid range first (several frames and chunks over
				// tcp, the channel's slots over shm), a small one, the bad one
				riov := []RMAIOV{{Addr: 0, Len: 400000, Key: 1}, {Addr: 500000, Len: 100, Key: 1}, c.bad}
				local := [][]byte{pattern(400000, 7), pattern(100, 8), pattern(10, 9)}
				before := bytes.Join(local, nil)
				msg := &RMAMsg{MsgIOV: local, Addr: dest, RMAIOV: riov, Context: c.name}
				if c.write {
					err = a.ep.WriteMsg(msg, Completion)
				} else {
					err = a.ep.ReadMsg(msg, Completion)
				}
				if err != nil {
					t.Fatalf("%s: posting: %v", c.name, err)
				}
				if _, err := waitTx(t, a, nil, c.name); !errors.Is(err, c.want) {
					t.Fatalf("%s: completion %v, want %v", c.name, err, c.want)
				}
				for i, x := range snapshot(m1) {
					if x != 1 {
						t.Fatalf("%s: byte %d of the valid region changed", c.name, i)
					}
				}
				if !c.write && !bytes.Equal(bytes.Join(local, nil), before) {
					t.Fatalf("%s: a refused read changed the local buffers", c.name)
				}
			}
			check1(t)
			check2(t)
		})
	}
}
