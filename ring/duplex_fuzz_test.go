package ring_test

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/gofi-dev/fi/ring"
)

// dxPayloadWithin fails t unless p, a payload Peek handed out, lies
// within one slot of the turn line or within the data area of one of the
// two rings of the duplex of capacity c in mem.
func dxPayloadWithin(t *testing.T, mem []byte, c int, p []byte) {
	t.Helper()
	if len(p) == 0 {
		return
	}
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(p))) - uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
	end := off + len(p)
	for _, area := range [][2]int{
		{ring.DxOffTurn, ring.DxOffTurn + ring.DxSlotSize},
		{ring.DxOffTurn + ring.DxSlotSize, ring.DxOffTurn + 2*ring.DxSlotSize},
		{ring.DuplexHeaderSize + ring.OffData, ring.DuplexHeaderSize + ring.OffData + c},
		{ring.DuplexHeaderSize + ring.Size(c) + ring.OffData, ring.DuplexHeaderSize + ring.Size(c) + ring.OffData + c},
	} {
		if off >= area[0] && off < area[1] {
			if end > area[1] {
				t.Fatalf("Peek: %d bytes at offset %d run past the slot or ring data ending at %d", len(p), off, area[1])
			}
			return
		}
	}
	t.Fatalf("Peek: %d bytes at offset %d, outside every slot and ring data area", len(p), off)
}

// dxBatchedOps runs ops on end d of a duplex in mem of capacity c, the
// batched calls (Peek/Consume, Reserve/Commit/Publish) among the others,
// and fails t if a call hands out a payload longer than MaxPayload or
// reads more than its buffer, or a payload outside the slot or ring
// data it was read from (dxPayloadWithin). peer, when not nil, is the other end, which
// sends legitimately; forge, when not nil, rewrites the other end's slot,
// its ack word or a header of the ring it writes (a hostile peer).
func dxBatchedOps(t *testing.T, mem []byte, c int, d, peer *ring.Duplex, otherEnd int, ops, forge []byte) {
	slot, ack := ring.DxOffTurn+otherEnd*ring.DxSlotSize, ring.DxOffAck0
	data := ring.DuplexHeaderSize + ring.OffData // the data of the ring end 0 writes
	if otherEnd == 1 {
		ack, data = ring.DxOffAck1, data+ring.Size(c)
	}
	dst := make([]byte, d.MaxPayload()+8)
	for i, op := range ops {
		k := i % (len(dst) + 1)
		switch op % 9 {
		case 0:
			if _, p, err := d.Peek(); err == nil {
				if len(p) > d.MaxPayload() {
					t.Fatalf("Peek: %d bytes, MaxPayload %d", len(p), d.MaxPayload())
				}
				dxPayloadWithin(t, mem, c, p)
				_ = d.Consume()
			}
		case 1:
			if _, n, err := d.TryRead(dst[:k]); err == nil && n > k {
				t.Fatalf("TryRead: %d bytes into %d", n, k)
			}
		case 2:
			_ = d.TryWrite(uint16(i), dst[:k%(d.MaxPayload()+1)])
		case 3:
			if b, err := d.Reserve(k % (d.MaxPayload() + 1)); err == nil {
				clear(b)
				if i%2 == 0 {
					_ = d.CommitPublish(uint16(i), len(b)/2)
				} else {
					_ = d.Commit(uint16(i), len(b))
				}
			}
		case 4:
			d.Publish()
			d.Release()
			d.Ready()
			d.Empty()
			d.Corrupt()
		case 5:
			if peer != nil {
				_ = peer.TryWrite(uint16(i), make([]byte, i%24))
				peer.TryRead(make([]byte, 64))
			}
		case 6: // forge the other end's slot
			if forge != nil {
				copy(mem[slot:slot+ring.DxSlotSize], forge)
			}
		case 7: // forge the other end's ack word
			if len(forge) >= 8 {
				copy(mem[ack:], forge[:8])
			}
		case 8: // forge a header in the ring the other end writes
			if len(forge) >= 16 {
				off := int(binary.NativeEndian.Uint64(forge[8:]) % uint64(c/8) * 8)
				copy(mem[data+off:], forge[:8])
			}
		}
	}
}

// FuzzAttachDuplex rewrites bytes of a duplex region's header (magic,
// version, line separation, capacity, the turn line, the ack words) and
// of its rings' headers and first records, over a duplex end 0 has sent
// a slot record and a ring record into (patch: pairs of a byte index
// into those fields and the byte's new value): AttachDuplex must refuse
// the region or return an end whose every call returns records or
// errors, never panics, never hands out a payload longer than MaxPayload
// or outside its slot or ring data, and never reads more than its buffer.
func FuzzAttachDuplex(f *testing.F) {
	const c = 128
	good := alignedBuf(ring.DuplexSize(c))
	w, err := ring.InitDuplex(good, c)
	if err != nil {
		f.Fatal(err)
	}
	_ = w.TryWrite(7, []byte("abcdefgh")) // the slot
	_ = w.TryWrite(8, make([]byte, 40))   // the ring (the slot is taken)
	var fields []int                      // the offsets patch may rewrite
	for _, area := range [][2]int{
		{0, ring.DxOffCapacity + 8},
		{ring.DxOffTurn, ring.DxOffTurn + 2*ring.DxSlotSize},
		{ring.DxOffAck0, ring.DxOffAck0 + 8},
		{ring.DxOffAck1, ring.DxOffAck1 + 8},
		{ring.DuplexHeaderSize, ring.DuplexHeaderSize + ring.OffData + 64},
		{ring.DuplexHeaderSize + ring.Size(c), ring.DuplexHeaderSize + ring.Size(c) + ring.OffData + 16},
	} {
		for o := area[0]; o < area[1]; o++ {
			fields = append(fields, o)
		}
	}
	at := func(off int) byte {
		for i, o := range fields {
			if o == off {
				return byte(i)
			}
		}
		panic("no field")
	}
	f.Add([]byte{})
	f.Add([]byte{at(ring.DxOffTurn + 8), 8})                    // end 0's slot length
	f.Add([]byte{at(ring.DxOffCapacity), 64})                   // capacity
	f.Add([]byte{at(ring.DuplexHeaderSize + ring.OffData), 40}) // ring record length
	f.Fuzz(func(t *testing.T, patch []byte) {
		mem := alignedBuf(len(good))
		copy(mem, good)
		for i := 0; i+1 < len(patch); i += 2 {
			mem[fields[int(patch[i])%len(fields)]] = patch[i+1]
		}
		d, err := ring.AttachDuplex(mem)
		if err != nil {
			return
		}
		capacity := int(binary.NativeEndian.Uint64(mem[ring.DxOffCapacity:])) // as Attach checked it
		dxBatchedOps(t, mem, capacity, d, nil, 0, []byte{0, 1, 0, 1, 3, 4, 2, 3, 4, 0, 1}, nil)
	})
}

// FuzzDuplexBatched is FuzzDuplex for the batched calls: end 1 reads with
// Peek/Consume (and TryRead) and writes with Reserve/Commit/Publish (and
// TryWrite) while end 0 sends and reads legitimately and the fuzzer
// rewrites end 0's slot, ack word and ring headers between the calls.
func FuzzDuplexBatched(f *testing.F) {
	f.Add([]byte{6, 0, 5, 3, 4, 0, 1, 6, 0}, binary.NativeEndian.AppendUint64(binary.NativeEndian.AppendUint64(nil, 1), 16|3<<8))
	f.Add([]byte{5, 5, 0, 0, 7, 3, 3, 4}, binary.NativeEndian.AppendUint64(nil, 5))
	f.Add([]byte{5, 8, 0, 1, 4}, binary.NativeEndian.AppendUint64(binary.NativeEndian.AppendUint64(nil, 1<<48|40), 0))
	f.Fuzz(func(t *testing.T, ops, forge []byte) {
		const c = 128
		mem, a, b := dxRegion(t, c)
		dxBatchedOps(t, mem, c, b, a, 0, ops, forge)
	})
}
