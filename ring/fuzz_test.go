package ring_test

import (
	"encoding/binary"
	"testing"

	"github.com/gofi-dev/fi/ring"
)

// FuzzAttach feeds arbitrary bytes as a shared region: Attach must refuse
// it or return a ring whose reads and writes return records or errors,
// never panic or read outside the region.
func FuzzAttach(f *testing.F) {
	good := alignedBuf(ring.Size(64))
	w, _ := ring.Init(good, 64)
	w.TryWrite(7, []byte("abc"))
	w.TryWrite(8, make([]byte, 20))
	f.Add(append([]byte(nil), good...), []byte{1, 2})
	f.Add(make([]byte, ring.Size(64)), []byte{0})
	broken := append([]byte(nil), good...)
	binary.NativeEndian.PutUint64(broken[ring.OffData:], 1<<48|40)
	f.Add(broken, []byte{3})
	f.Fuzz(func(t *testing.T, region []byte, ops []byte) {
		mem := alignedBuf(len(region))
		copy(mem, region)
		r, err := ring.Attach(mem)
		if err != nil {
			return
		}
		dst := make([]byte, r.MaxPayload())
		for _, op := range ops {
			switch op % 4 {
			case 0:
				_, p, err := r.Peek()
				if err == nil {
					if len(p) > 0 {
						_ = p[len(p)-1] // touch the payload
					}
					r.Consume()
				}
			case 1:
				r.TryRead(dst)
			case 2:
				r.TryWrite(uint16(op), dst[:int(op)%(len(dst)+1)])
			case 3:
				r.Release()
				r.Empty()
				r.Len()
				r.Free()
			}
		}
	})
}

// FuzzSharedRecords keeps a valid ring header and fuzzes what a peer
// writes: the two indices and the data area. Every read ends in a record
// inside the region or an error.
func FuzzSharedRecords(f *testing.F) {
	f.Add(uint64(24), uint64(0), []byte{3, 0, 0, 0, 7, 0, 0, 0, 'a', 'b', 'c'})
	f.Add(uint64(64), uint64(32), []byte{24, 0, 0, 0, 0, 0, 1, 0})
	f.Add(uint64(1<<40), uint64(8), []byte{})
	f.Fuzz(func(t *testing.T, tail, head uint64, data []byte) {
		const c = 64
		mem := alignedBuf(ring.Size(c))
		if _, err := ring.Init(mem, c); err != nil {
			t.Fatal(err)
		}
		copy(mem[ring.OffData:], data)
		binary.NativeEndian.PutUint64(mem[ring.OffTail:], tail)
		binary.NativeEndian.PutUint64(mem[ring.OffHead:], head)
		r, err := ring.Attach(mem)
		if err != nil {
			return
		}
		dst := make([]byte, c)
		for i := 0; i < 16; i++ {
			_, n, err := r.TryRead(dst)
			if err != nil {
				break
			}
			if n > r.MaxPayload() {
				t.Fatalf("record of %d bytes in a ring of max payload %d", n, r.MaxPayload())
			}
		}
		r.TryWrite(1, dst[:8])
	})
}
