package shm

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/gofi-dev/fi/ring"
	"github.com/gofi-dev/fi/transport"
)

// headLine counts the payload bytes on the line of the ring header word
// just before them: 56 when the word starts a line, 0 when it ends one.
func TestHeadLine(t *testing.T) {
	mem := make([]byte, 4*int(lineSize))
	base := int(lineSize) - int(uintptr(unsafe.Pointer(&mem[0]))&(lineSize-1))
	for w := 0; w < int(lineSize); w += 8 { // header word's offset in its line
		b := mem[base+w+ring.RecordHeader:]
		if got, want := headLine(b), int(lineSize)-w-ring.RecordHeader; got != want {
			t.Errorf("header word at %d of its line: headLine %d, want %d", w, got, want)
		}
	}
}

// fillEager writes the same record whatever part of it shares the polled
// line and in whatever order it writes the parts: every split of the
// header line, with and without a data word, one and three iov entries,
// records ending on that line and past it.
func TestFillEager_SameRecordForEverySplit(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 20, 33, 40, 41, 100, 4096} {
		pay := make([]byte, n)
		for i := range pay {
			pay[i] = byte(i*7 + 1)
		}
		iovs := [][][]byte{{pay}}
		if n >= 3 {
			iovs = append(iovs, [][]byte{pay[:n/3], pay[n/3 : 2*n/3], pay[2*n/3:]})
		}
		for _, data := range []uint64{0, 0xfeedface12345678} {
			h := transport.Header{Kind: transport.KindMsg, Group: 77, Tag: 0xabcdef, Data: data, Len: uint64(n)}
			if data != 0 {
				h.Flags = transport.FlagRemoteData
			}
			hl := eagerHdrMin
			if data != 0 {
				hl = eagerHdrMax
			}
			for _, iov := range iovs {
				for _, slot := range []bool{false, true} {
					hl := hl
					if slot {
						hl = slotHdrLen
					}
					for head := 0; head <= 56; head += 8 {
						b := bytes.Repeat([]byte{0xee}, hl+n)
						var sh *slotHdr
						if slot {
							sh = &slotHdr{id: 9, rel: 1 << 40}
						}
						fillEager(b, &h, iov, head, sh)
						if slot {
							b = append(b, 0xdd, 0xdd, 0xdd) // the rest of the slot
						}
						got, off, ok := getEagerHdr(b)
						if !ok || off != hl {
							t.Fatalf("n %d data %v slot %v head %d: header decodes ok=%v at %d, want %d", n, data != 0, slot, head, ok, off, hl)
						}
						if got != h {
							t.Fatalf("n %d slot %v head %d: header %+v, want %+v", n, slot, head, got, h)
						}
						if !bytes.Equal(b[hl:hl+n], pay) {
							t.Fatalf("n %d data %v iov %d slot %v head %d: payload differs", n, data != 0, len(iov), slot, head)
						}
					}
				}
			}
		}
	}
}
