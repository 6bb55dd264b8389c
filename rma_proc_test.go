package fi

// RMA between processes: the target registers memory, says where it is
// and then makes no gofi call while the initiator writes and reads it
// (one-sided); a target killed with SIGKILL in the middle of a stream of
// operations makes them complete in error, never hang.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofi-dev/fi/internal/nocma"
	"github.com/gofi-dev/fi/shm"
)

// rmaProcCases: provider, target memory (Go slice or AllocMR), and
// whether single copy is refused (FI_SHM_DISABLE_CMA in both processes).
var rmaProcCases = []struct{ name, prov, mem string }{
	{"tcp", "tcp", "go"},
	{"shm", "shm", "go"},
	{"shm_alloc", "shm", "alloc"},
	{"shm_nocma", "shm_nocma", "go"},
	// the target polls its CQ (and so takes small operations itself)
	{"shm_spin", "shm_spin", "go"},
}

const rmaProcRegion = 16 << 20

func init() {
	// The target: registers rmaProcRegion bytes (with 64 guard bytes on
	// both sides for Go memory), sends "target <name> <key>", then only
	// answers "cmd crc <off> <len>" (a CRC of its memory, read without a
	// gofi call but MR.Bytes) and "cmd quit".
	peerRoles["rmatarget"] = func(t *testing.T, l *link, arg string) {
		prov, mem, _ := strings.Cut(arg, "/")
		n := openRMANode(t, prov, rmaNodeCfg{})
		var mr *MR
		var check func(testing.TB)
		var err error
		if mem == "alloc" {
			mr, err = n.dom.AllocMR(rmaProcRegion, RemoteRead|RemoteWrite)
			check = func(testing.TB) {}
		} else {
			var region []byte
			_, region, check = guarded(rmaProcRegion, 0)
			mr, err = n.dom.RegMR(region, RemoteRead|RemoteWrite, 0, 7, 0)
		}
		if err != nil {
			t.Fatal(err)
		}
		name, err := n.ep.Name()
		if err != nil {
			t.Fatal(err)
		}
		l.send("target", hex.EncodeToString(name), mr.Key())
		for {
			a := l.expect("cmd")
			if len(a) == 0 || a[0] == "quit" {
				return
			}
			off, _ := strconv.Atoi(a[1])
			k, _ := strconv.Atoi(a[2])
			b := mr.Bytes()
			check(t)
			l.send("crc", crc32.ChecksumIEEE(b[off:off+k]))
		}
	}
}

// startRMATarget starts a target process and returns it with the
// initiator's endpoint, the target's address and its key.
func startRMATarget(t *testing.T, prov, mem string) (*peerProc, *rmaNode, Addr, uint64) {
	t.Helper()
	if nocma.Active() {
		t.Skip("without single copy these are the shm_nocma rows, run outside the filter")
	}
	shmTestDir(t)
	var extra []string
	if prov == "shm_nocma" {
		extra = append(extra, shm.DisableCMAEnv+"=1")
	}
	p := startPeer(t, "rmatarget", prov+"/"+mem, 2*time.Minute, extra...)
	a := openRMANode(t, prov, rmaNodeCfg{})
	args := p.expect("target")
	name, err := hex.DecodeString(args[0])
	if err != nil {
		t.Fatal(err)
	}
	key, err := strconv.ParseUint(args[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := a.av.Insert([][]byte{name}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p, a, addrs[0], key
}

// TestRMA_TargetOnlySleeps: the initiator writes and reads 1 GiB in all
// (32 MiB, one pass over the region, under the race detector) into a target that makes no gofi call;
// every read returns what was written, and the target's CRC of its memory
// agrees with the initiator's after each pass over the region. The
// shm_spin row's target polls its CQ instead of sleeping: 4 KiB
// operations (8 MiB in all) it takes in its progress as quick requests,
// when it is running, or the initiator copies itself.
func TestRMA_TargetOnlySleeps(t *testing.T) {
	total := 1 << 30
	if rmaRace || testing.Short() {
		total = 2 * rmaProcRegion
	}
	for _, c := range rmaProcCases {
		t.Run(c.name, func(t *testing.T) {
			p, a, dest, key := startRMATarget(t, c.prov, c.mem)
			chunk, total := 4<<20, total
			if c.prov == "shm_spin" {
				// quick requests: small operations, 8 MiB in all
				chunk, total = 4096, min(total, 8<<20)
			}
			want := make([]byte, rmaProcRegion)
			got := make([]byte, chunk)
			moved := 0
			for i := 0; moved < total; i++ {
				off := (i * chunk) % rmaProcRegion
				src := want[off : off+chunk]
				fill(src, i)
				if err := a.ep.Write(src, nil, dest, uint64(off), key, "w"); err != nil {
					t.Fatal(err)
				}
				if _, err := waitTx(t, a, nil, "w"); err != nil {
					t.Fatalf("write %d: %v", i, err)
				}
				if err := a.ep.Read(got, nil, dest, uint64(off), key, "r"); err != nil {
					t.Fatal(err)
				}
				if _, err := waitTx(t, a, nil, "r"); err != nil {
					t.Fatalf("read %d: %v", i, err)
				}
				if crc32.ChecksumIEEE(got) != crc32.ChecksumIEEE(src) {
					t.Fatalf("read %d differs from what was written", i)
				}
				moved += 2 * chunk
				if off+chunk == rmaProcRegion {
					p.send("cmd", "crc", 0, rmaProcRegion)
					if v := p.expect("crc"); v[0] != fmt.Sprint(crc32.ChecksumIEEE(want)) {
						t.Fatalf("after pass %d the target's memory differs", i)
					}
				}
			}
			p.send("cmd", "crc", 0, rmaProcRegion)
			if v := p.expect("crc"); v[0] != fmt.Sprint(crc32.ChecksumIEEE(want)) {
				t.Fatal("at the end the target's memory differs")
			}
			p.send("cmd", "quit")
			p.wait(t)
		})
	}
}

// TestRMA_TargetKilled: SIGKILL to the target while writes and reads of
// 1 MiB (shm_spin: 4 KiB quick requests) stream to it: every operation completes, those after the first
// failure fail too (the death is noticed within the peer timeout), and
// nothing hangs.
func TestRMA_TargetKilled(t *testing.T) {
	for _, c := range rmaProcCases {
		t.Run(c.name, func(t *testing.T) {
			p, a, dest, key := startRMATarget(t, c.prov, c.mem)
			buf := make([]byte, 1<<20)
			if c.prov == "shm_spin" {
				buf = buf[:4096] // quick requests, taken by the target
			}
			const ahead = 4 // operations in flight
			var res []int   // per operation: 0 in flight, 1 done, 2 failed
			post := func() {
				i := len(res)
				res = append(res, 0)
				var err error
				for {
					if i%2 == 0 {
						err = a.ep.Write(buf, nil, dest, uint64(i%8)<<20, key, i)
					} else {
						err = a.ep.Read(buf, nil, dest, uint64(i%8)<<20, key, i)
					}
					if !errors.Is(err, ErrAgain) {
						break
					}
					a.cq.Read(nil)
				}
				if err != nil {
					res[i] = 2 // refused at once
				}
			}
			inflight := func() int {
				n := 0
				for _, r := range res {
					if r == 0 {
						n++
					}
				}
				return n
			}
			firstFail, killed := -1, false
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				for inflight() < ahead && (firstFail < 0 || len(res) < firstFail+16) {
					post()
				}
				if len(res) >= 16 && !killed {
					killed = true
					if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
						t.Fatal(err)
					}
					p.exited(t)
				}
				var e [4]CQEntry
				k, err := a.cq.Read(e[:])
				for _, x := range e[:k] {
					res[x.Context.(int)] = 1
				}
				if errors.Is(err, ErrAvail) {
					ee, err := a.cq.ReadErr()
					if err != nil {
						t.Fatal(err)
					}
					res[ee.Context.(int)] = 2
				} else if k == 0 && !errors.Is(err, ErrAgain) {
					t.Fatal(err)
				}
				if firstFail < 0 {
					for i, r := range res {
						if r == 2 {
							firstFail = i
							break
						}
					}
				}
				if firstFail >= 0 && len(res) >= firstFail+16 && inflight() == 0 {
					break
				}
			}
			if n := inflight(); n != 0 || firstFail < 0 {
				t.Fatalf("30 s after the kill: %d operations in flight, first failure %d", n, firstFail)
			}
			for i := firstFail + ahead + 1; i < len(res); i++ {
				if res[i] != 2 {
					t.Fatalf("operation %d after the first failure (%d) succeeded", i, firstFail)
				}
			}
		})
	}
}
