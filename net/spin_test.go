package net

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gofi-dev/fi/dtype"
	"github.com/gofi-dev/fi/rma"
	"github.com/gofi-dev/fi/transport"
)

// rmaTarget registers a 4 KiB region under key 7 at address 0 and has tr
// serve it.
func rmaTarget(t *testing.T, tr *Transport) []byte {
	t.Helper()
	size, _ := rma.Size(4, 4)
	tab, err := rma.NewTable(make([]byte, size), 4, 4, "")
	if err != nil {
		t.Fatal(err)
	}
	mem := make([]byte, 4096)
	if _, _, err := tab.Register(rma.Region{Mem: mem, Key: 7, Access: rma.AccessRemoteRead | rma.AccessRemoteWrite}, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := tr.ServeRMA(&rma.Target{Table: tab}); err != nil {
		t.Fatal(err)
	}
	return mem
}

// One-sided operations against a target that never polls, with the
// target's loop busy-polling after every request and with it off: writes, reads and fetch-adds in a row, each
// waited for, then a window of them; every answer checked.
func TestSpin_IdleTargetServesOneSided(t *testing.T) {
	for _, spin := range []bool{true, false} {
		name := map[bool]string{true: "spin", false: "nospin"}[spin]
		t.Run(name, func(t *testing.T) {
			cfg := Config{}
			if !spin {
				cfg.SpinMax = -1
			}
			a := listen(t, Config{})
			b := listen(t, cfg)
			mem := rmaTarget(t, b)
			as := newSink()
			p, _ := a.Resolve(b.Name())
			op := transport.Op(0)
			run := func(req *transport.RMAReq) {
				t.Helper()
				op++
				done, c := a.RMA(p, req, op)
				if c != transport.OK {
					t.Fatalf("RMA %d: code %d", op, c)
				}
				if !done {
					pollUntil(t, "RMA completion", func() bool { _, ok := as.sendDone[op]; return ok }, a, as)
				}
				if c := as.sendDone[op]; c != transport.OK {
					t.Fatalf("RMA %d completed with %d", op, c)
				}
			}
			var buf, res [8]byte
			for i := range 200 {
				binary.LittleEndian.PutUint64(buf[:], uint64(i))
				off := uint64(i%64) * 8
				run(&transport.RMAReq{Kind: transport.RMAWrite, Local: [][]byte{buf[:]}, Remote: []transport.RMAIOV{{Addr: off, Len: 8, Key: 7}}})
				run(&transport.RMAReq{Kind: transport.RMARead, Local: [][]byte{res[:]}, Remote: []transport.RMAIOV{{Addr: off, Len: 8, Key: 7}}})
				if got := binary.LittleEndian.Uint64(res[:]); got != uint64(i) {
					t.Fatalf("read back %d, wrote %d", got, i)
				}
				binary.LittleEndian.PutUint64(buf[:], 1)
				run(&transport.RMAReq{Kind: transport.RMAFetch, Datatype: uint8(dtype.Uint64), Op: uint8(dtype.Sum),
					Local: [][]byte{buf[:]}, Result: [][]byte{res[:]}, Remote: []transport.RMAIOV{{Addr: 4088, Len: 8, Key: 7}}})
				if got := binary.LittleEndian.Uint64(res[:]); got != uint64(i) {
					t.Fatalf("fetch-add %d returned %d", i, got)
				}
			}
			// A window of 64 non-fetching adds in flight.
			first := op + 1
			binary.LittleEndian.PutUint64(buf[:], 1)
			for range 64 {
				op++
				req := &transport.RMAReq{Kind: transport.RMAAtomic, Datatype: uint8(dtype.Uint64), Op: uint8(dtype.Sum),
					Local: [][]byte{buf[:]}, Remote: []transport.RMAIOV{{Addr: 4088, Len: 8, Key: 7}}}
				for {
					_, c := a.RMA(p, req, op)
					if c == transport.OK {
						break
					}
					if c != transport.EAgain {
						t.Fatalf("atomic: code %d", c)
					}
					a.Poll(as)
				}
			}
			pollUntil(t, "the window's completions", func() bool {
				for o := first; o <= op; o++ {
					if _, ok := as.sendDone[o]; !ok {
						return false
					}
				}
				return true
			}, a, as)
			if got := atomic.LoadUint64((*uint64)(unsafe.Pointer(&mem[4088]))); got != 264 {
				t.Fatalf("word after 264 adds: %d", got)
			}
			// A window of 64 fetch-adds: the answers, gathered per
			// decoding pass (rma.go), each reach their own result.
			results := make([][8]byte, 64)
			first = op + 1
			for i := range results {
				op++
				req := &transport.RMAReq{Kind: transport.RMAFetch, Datatype: uint8(dtype.Uint64), Op: uint8(dtype.Sum),
					Local: [][]byte{buf[:]}, Result: [][]byte{results[i][:]}, Remote: []transport.RMAIOV{{Addr: 4088, Len: 8, Key: 7}}}
				for {
					_, c := a.RMA(p, req, op)
					if c == transport.OK {
						break
					}
					if c != transport.EAgain {
						t.Fatalf("fetch-add: code %d", c)
					}
					a.Poll(as)
				}
			}
			pollUntil(t, "the fetch window's completions", func() bool {
				for o := first; o <= op; o++ {
					if _, ok := as.sendDone[o]; !ok {
						return false
					}
				}
				return true
			}, a, as)
			seen := map[uint64]bool{}
			for i := range results {
				v := binary.LittleEndian.Uint64(results[i][:])
				if v < 264 || v >= 264+64 || seen[v] {
					t.Fatalf("fetch-add %d returned %d (seen before: %v)", i, v, seen[v])
				}
				seen[v] = true
			}
			if spin {
				// Every pass that read bytes yields before the next read
				// (the loop may still be in its last pass: wait for it).
				pollUntil(t, "the loop's yields after its passes", func() bool {
					return b.spin.hitYields.Load() == b.spin.hits.Load()
				}, a, as)
				if b.spin.hits.Load() == 0 {
					t.Fatal("no spin pass read bytes")
				}
			}
			t.Logf("spin passes that read bytes: %d", b.spin.hits.Load())
		})
	}
}

// Large writes to an idle target, whose loop (spinning or not) reads their
// payloads from the socket straight into the region (readRMADirect): three
// ranges at odd offsets, the bytes read back, and the guard bytes around
// the ranges untouched; a write to a key that does not exist is refused
// and the connection goes on.
func TestSpin_LargeWriteDirect(t *testing.T) {
	for _, spin := range []bool{true, false} {
		name := map[bool]string{true: "spin", false: "nospin"}[spin]
		t.Run(name, func(t *testing.T) {
			cfg := Config{}
			if !spin {
				cfg.SpinMax = -1
			}
			a := listen(t, Config{})
			b := listen(t, cfg)
			size, _ := rma.Size(4, 4)
			tab, err := rma.NewTable(make([]byte, size), 4, 4, "")
			if err != nil {
				t.Fatal(err)
			}
			const regLen = 3 << 20
			mem := make([]byte, regLen)
			for i := range mem {
				mem[i] = 0xee
			}
			if _, _, err := tab.Register(rma.Region{Mem: mem, Key: 9, Access: rma.AccessRemoteRead | rma.AccessRemoteWrite}, false, nil); err != nil {
				t.Fatal(err)
			}
			if err := b.ServeRMA(&rma.Target{Table: tab}); err != nil {
				t.Fatal(err)
			}
			as := newSink()
			p, _ := a.Resolve(b.Name())
			op := transport.Op(0)
			run := func(req *transport.RMAReq) transport.Code {
				t.Helper()
				op++
				done, c := a.RMA(p, req, op)
				if c != transport.OK || done {
					return c
				}
				pollUntil(t, "RMA completion", func() bool { _, ok := as.sendDone[op]; return ok }, a, as)
				return as.sendDone[op]
			}
			src := make([]byte, 1<<20+333)
			for round := range 3 {
				for i := range src {
					src[i] = byte(i*7 + round)
				}
				remote := []transport.RMAIOV{{Addr: 5, Len: 300 << 10, Key: 9}, {Addr: 1<<20 + 1, Len: 1, Key: 9}, {Addr: 2 << 20, Len: uint64(len(src)) - 300<<10 - 1, Key: 9}}
				if c := run(&transport.RMAReq{Kind: transport.RMAWrite, Local: [][]byte{src[:1000], src[1000:]}, Remote: remote}); c != transport.OK {
					t.Fatalf("round %d: write: code %d", round, c)
				}
				if c := run(&transport.RMAReq{Kind: transport.RMAWrite, Local: [][]byte{src[:4096]}, Remote: []transport.RMAIOV{{Addr: 0, Len: 4096, Key: 77}}}); c == transport.OK {
					t.Fatalf("round %d: write to an unknown key succeeded", round)
				}
				got := make([]byte, len(src))
				if c := run(&transport.RMAReq{Kind: transport.RMARead, Local: [][]byte{got}, Remote: remote}); c != transport.OK {
					t.Fatalf("round %d: read: code %d", round, c)
				}
				for i := range src {
					if got[i] != src[i] {
						t.Fatalf("round %d: byte %d read back %#x, wrote %#x", round, i, got[i], src[i])
					}
				}
				inRange := func(i uint64) bool {
					for _, v := range remote {
						if i >= v.Addr && i < v.Addr+v.Len {
							return true
						}
					}
					return false
				}
				for i := range mem {
					if !inRange(uint64(i)) && mem[i] != 0xee {
						t.Fatalf("round %d: guard byte %d changed to %#x", round, i, mem[i])
					}
				}
			}
		})
	}
}

// A spin session under continuous traffic returns to gnet only when gnet
// has tasks (spin.go): the reflection that finds gnet's task flag must
// keep working with the gnet version in go.mod.
func TestSpin_FindsGnetsTaskFlag(t *testing.T) {
	a := listen(t, Config{})
	b := listen(t, Config{})
	as, bs := newSink(), newSink()
	p, _ := a.Resolve(b.Name())
	sendAll(t, a, as, b, bs, p, &transport.Header{Kind: transport.KindMsg, Len: 8}, pattern(8, 1), 1)
	pollUntil(t, "the message", func() bool { return len(bs.arrivals) == 1 }, b, bs, a, as)
	for _, tr := range []*Transport{a, b} {
		if gnetTasks(tr.loopOf()) == nil {
			t.Fatal("gnet's task flag was not found: every spin session returns to gnet")
		}
	}
}
