package shm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/gofi-dev/fi/rma"
)

// The RMA service segment: what an endpoint serving one-sided operations
// publishes for its local peers, next to its region. Its name follows from
// the region's (SvcName), so a peer finds it knowing only the endpoint's
// address, and nothing in it needs the owner's application to run.
//
// Layout, version 2, host byte order:
//
//	0   magic u32 (stored last)      4   version u32
//	8   owner pid u32                12  entries u32
//	16  endpoint remote-write counter+1 u32 (0 none)
//	20  endpoint remote-read counter+1 u32  (0 none)
//	24  table name length u32        28  zero u32
//	32  table name [64]byte (the domain's key table segment)
//	96  owner pid namespace u64 (0 unknown)
//	104 zero up to 256
//	256 doorbell (seq u32, waiters u32) on two lines of its own: the
//	    owner's executor sleeps on it; initiators ring it after posting
//	384 active u32 on a line of its own: set by the owner's progress
//	    (Poll), cleared by its Wait and by an initiator whose quick
//	    request the owner did not take in time (rmafast.go)
//	448 quick-slot claims u32 on a line of its own: bumped by every
//	    initiator claiming a quick slot (the owner then re-reads the
//	    owner words)
//	512 entries x 128 B, one per channel (see rmachan.go):
//	      +0  state u64: 0 free; pid<<32|1 claimed; pid<<32|2 ready;
//	          pid<<32|3 adopted by the executor; pid<<32|4 given up by
//	          the initiator (the executor unmaps and frees it)
//	      +8  name length u32, +12 zero
//	      +16 channel segment name [64]byte
//	16896 quick slot owners x u64: 0 free, pid<<32|serial of the
//	    initiator transport using it (see rmafast.go)
//	17920 quick slots x fastSlotSize
const (
	svcMagic     uint32 = 0x56534647 // "GFSV" in memory on little endian
	svcVersion   uint32 = 2
	svcBellOff          = 256
	svcActiveOff        = 384
	svcClaimsOff        = 448
	svcEntOff           = 512
	svcEntSize          = 128
	// SvcEntries is how many channels one service takes: initiators that
	// use the executor at once.
	SvcEntries = 128

	sMagic    = 0
	sVersion  = 4
	sPID      = 8
	sEntries  = 12
	sCntrW    = 16
	sCntrR    = 20
	sTblLen   = 24
	sTblName  = 32
	sPidNS    = 96
	sHdrEnd   = 104
	entState  = 0
	entLen    = 8
	entName   = 16
	entFree   = 0
	entClaim  = 1
	entReady  = 2
	entAdopt  = 3
	entGiveUp = 4
)

func svcSize() int { return svcFastOff + SvcEntries*fastSlotSize }

// SvcName returns the name of the RMA service segment of the endpoint
// whose region is named region: region+".r" when that fits, else a name
// derived from a hash of it.
func SvcName(region string) string {
	if len(region)+2 <= MaxNameLen {
		return region + ".r"
	}
	h := sha256.Sum256([]byte(region))
	return Prefix() + "r-" + hex.EncodeToString(h[:16])
}

// svc is a mapped service segment, the owner's or a peer's view.
type svc struct {
	seg   *Segment
	mem   []byte
	bell  *Doorbell
	pid   int
	pidNS uint64
	table string
	cntrW int // -1 none
	cntrR int
}

// createSvc creates the service segment of region for table, with the
// endpoint's remote counters (-1: none).
func createSvc(region, table string, cntrW, cntrR int) (*svc, error) {
	if len(table) > MaxNameLen {
		return nil, fmt.Errorf("%w: table name %q", ErrName, table)
	}
	pid := os.Getpid()
	seg, err := createSegment(SvcName(region), svcSize(), func(b []byte) { putSvcHeader(b, pid, table, cntrW, cntrR) })
	if err != nil {
		return nil, err
	}
	s, err := parseSvc(seg)
	if err != nil {
		_ = seg.Close()
		return nil, err
	}
	return s, nil
}

func putSvcHeader(b []byte, pid int, table string, cntrW, cntrR int) {
	ne.PutUint32(b[sVersion:], svcVersion)
	ne.PutUint32(b[sPID:], uint32(pid))
	ne.PutUint32(b[sEntries:], SvcEntries)
	ne.PutUint32(b[sCntrW:], uint32(cntrW+1))
	ne.PutUint32(b[sCntrR:], uint32(cntrR+1))
	ne.PutUint32(b[sTblLen:], uint32(len(table)))
	copy(b[sTblName:sTblName+MaxNameLen], table)
	ne.PutUint64(b[sPidNS:], PidNS())
	word32(b, sMagic).Store(svcMagic)
}

// openSvc maps the service segment of the endpoint whose region is named
// region: os.ErrNotExist when that endpoint serves no RMA.
func openSvc(region string) (*svc, error) {
	seg, err := OpenSegment(SvcName(region))
	if err != nil {
		return nil, err
	}
	s, err := parseSvc(seg)
	if err != nil {
		_ = seg.Close()
		return nil, err
	}
	return s, nil
}

// parseSvc validates a service segment's header (untrusted when a peer's).
func parseSvc(seg *Segment) (*svc, error) {
	b := seg.Bytes()
	if len(b) < svcSize() {
		return nil, fmt.Errorf("%w: service segment of %d bytes", ErrCorrupt, len(b))
	}
	if m := word32(b, sMagic).Load(); m != svcMagic {
		return nil, fmt.Errorf("%w: service magic %#x", ErrCorrupt, m)
	}
	var h [svcBellOff]byte
	copy(h[:], b)
	u32 := func(o int) uint32 { return ne.Uint32(h[o:]) }
	n := u32(sTblLen)
	pid := u32(sPID)
	switch {
	case u32(sVersion) != svcVersion, u32(sEntries) != SvcEntries, u32(28) != 0:
		return nil, fmt.Errorf("%w: service version or sizes", ErrCorrupt)
	case n == 0 || n > MaxNameLen, pid == 0 || pid > 1<<31-1:
		return nil, fmt.Errorf("%w: service header", ErrCorrupt)
	case u32(sCntrW) > rma.MaxCounters, u32(sCntrR) > rma.MaxCounters:
		return nil, fmt.Errorf("%w: service counters", ErrCorrupt)
	}
	for _, c := range h[sTblName+int(n) : sPidNS] {
		if c != 0 {
			return nil, fmt.Errorf("%w: bytes after the table name", ErrCorrupt)
		}
	}
	for _, c := range h[sHdrEnd:] {
		if c != 0 {
			return nil, fmt.Errorf("%w: service reserved bytes", ErrCorrupt)
		}
	}
	table := string(h[sTblName : sTblName+int(n)])
	if err := ValidName(table); err != nil {
		return nil, fmt.Errorf("%w: table name: %v", ErrCorrupt, err)
	}
	bell, err := NewDoorbell(b, svcBellOff)
	if err != nil {
		return nil, err
	}
	return &svc{seg: seg, mem: b, bell: bell, pid: int(pid), pidNS: ne.Uint64(h[sPidNS:]), table: table,
		cntrW: int(u32(sCntrW)) - 1, cntrR: int(u32(sCntrR)) - 1}, nil
}

func (s *svc) ent(i int) *atomic.Uint64 { return word64(s.mem, svcEntOff+i*svcEntSize+entState) }

// claim takes a free entry for a channel segment named name and marks it
// ready: the index, or -1 when every entry is taken.
func (s *svc) claim(name string) int {
	pid := uint64(selfPID)
	for i := 0; i < SvcEntries; i++ {
		w := s.ent(i)
		if w.Load() != entFree || !w.CompareAndSwap(entFree, pid<<32|entClaim) {
			continue
		}
		o := svcEntOff + i*svcEntSize
		clear(s.mem[o+entLen : o+svcEntSize])
		ne.PutUint32(s.mem[o+entLen:], uint32(len(name)))
		copy(s.mem[o+entName:o+entName+MaxNameLen], name)
		w.Swap(pid<<32 | entReady)
		_ = s.bell.Ring()
		return i
	}
	return -1
}

// giveUp tells the executor the initiator dropped the channel of entry i.
func (s *svc) giveUp(i int) {
	pid := uint64(selfPID)
	w := s.ent(i)
	for {
		v := w.Load()
		if v>>32 != pid || v&0xff == entGiveUp || v&0xff == entFree {
			return
		}
		if w.CompareAndSwap(v, pid<<32|entGiveUp) {
			_ = s.bell.Ring()
			return
		}
	}
}

// entName reads the channel name of entry i (untrusted).
func (s *svc) entName(i int) (string, error) {
	o := svcEntOff + i*svcEntSize
	var e [svcEntSize]byte
	copy(e[:], s.mem[o:o+svcEntSize])
	n := ne.Uint32(e[entLen:])
	if n == 0 || n > MaxNameLen {
		return "", fmt.Errorf("%w: channel name length %d", ErrCorrupt, n)
	}
	name := string(e[entName : entName+int(n)])
	if err := ValidName(name); err != nil {
		return "", err
	}
	return name, nil
}
