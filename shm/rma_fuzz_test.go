package shm

import (
	"bytes"
	"testing"

	"github.com/gofi-dev/fi/rma"
)

// FuzzParseChan: a channel header of any bytes is refused or accepted,
// never a panic; an accepted one names a valid region.
func FuzzParseChan(f *testing.F) {
	good := make([]byte, chanSize())
	ne.PutUint32(good[4:], chanVersion)
	ne.PutUint32(good[8:], 1234)
	ne.PutUint32(good[12:], ChanSlots)
	ne.PutUint32(good[16:], ChanData)
	name := NewName()
	ne.PutUint32(good[24:], uint32(len(name)))
	copy(good[32:], name)
	ne.PutUint32(good[0:], chanMagic)
	f.Add(good[:chanHdr])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, hdr []byte) {
		b := make([]byte, chanSize())
		copy(b, hdr)
		region, pid, err := parseChan(b)
		if err == nil && (ValidName(region) != nil || pid <= 0) {
			t.Fatalf("accepted region %q pid %d", region, pid)
		}
	})
}

// FuzzParseSvc: a service segment header of any bytes is refused or
// accepted, never a panic; an accepted one names a valid table and
// counters in range.
func FuzzParseSvc(f *testing.F) {
	good := make([]byte, svcBellOff)
	putSvcHeader(good, 1234, NewName(), 3, -1)
	f.Add(good)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, hdr []byte) {
		mem := make([]byte, svcSize())
		copy(mem, hdr)
		seg := &Segment{mem: mem}
		v, err := parseSvc(seg)
		if err != nil {
			return
		}
		if ValidName(v.table) != nil || v.cntrW < -1 || v.cntrW >= rma.MaxCounters || v.cntrR < -1 || v.cntrR >= rma.MaxCounters {
			t.Fatalf("accepted %+v", v)
		}
	})
}

// FuzzExecutorSlot: a channel slot of any bytes (request header, counting
// header, flags, data) run by the executor against a table with one
// region: the answer is a status, and no byte outside the region (guards
// on both sides) ever changes.
func FuzzExecutorSlot(f *testing.F) {
	size, _ := rma.Size(4, 4)
	tmem := make([]byte, size+64)
	off := int(-rma.Addr(tmem) & 63)
	tab, err := rma.NewTable(tmem[off:off+size], 4, 4, "")
	if err != nil {
		f.Fatal(err)
	}
	all := make([]byte, 4096+128)
	region := all[64 : 64+4096]
	if _, _, err := tab.Register(rma.Region{Mem: region, Key: 7, Base: 1000, Access: rma.AccessRemoteRead | rma.AccessRemoteWrite}, false, nil); err != nil {
		f.Fatal(err)
	}
	e := &executor{x: &rma.Target{Table: tab}}
	seed := func(k rma.Kind, addr, n uint64, pay int) []byte {
		s := make([]byte, slotData+pay)
		r := rma.Request{Kind: k, NIOV: 1, Payload: uint64(pay)}
		r.IOV[0] = rma.IOV{Addr: addr, Len: n, Key: 7}
		r.Encode(s[slotReq:])
		r.Encode(s[slotCount:])
		ne.PutUint32(s[slotFlags:], chanCount)
		return s
	}
	f.Add(seed(rma.KindWrite, 1000, 16, 16))
	f.Add(seed(rma.KindRead, 1000+4000, 96, 0))
	f.Add(seed(rma.KindWrite, 999, 16, 16))
	f.Add(seed(rma.KindAtomic, 1000, 8, 8))
	f.Fuzz(func(t *testing.T, in []byte) {
		slot := make([]byte, chanSlotSize)
		copy(slot, in)
		for i := range all {
			all[i] = 0xee
		}
		code, pay := e.execute(slot, slot[slotData:])
		if code != rma.OK && pay != 0 || pay > ChanData {
			t.Fatalf("answer %d with %d bytes", code, pay)
		}
		if !bytes.Equal(all[:64], bytes.Repeat([]byte{0xee}, 64)) || !bytes.Equal(all[64+4096:], bytes.Repeat([]byte{0xee}, 64)) {
			t.Fatal("a guard byte changed")
		}
	})
}
