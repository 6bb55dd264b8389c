package net

import (
	"bytes"
	"testing"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/rma"
)

// closedConn stands in for the gnet connection of a tconn read by
// readConn outside a loop: nothing is buffered in it, and a failed
// connection is closed through it.
type closedConn struct {
	gnet.Conn
	closed int
}

func (c *closedConn) InboundBuffered() int       { return 0 }
func (c *closedConn) Read(p []byte) (int, error) { return 0, nil }
func (c *closedConn) Close() error               { c.closed++; return nil }

// fuzzBytes hands out the fuzzer's input a few bytes at a time (zeros once
// it runs out).
type fuzzBytes []byte

func (b *fuzzBytes) u8() byte {
	if len(*b) == 0 {
		return 0
	}
	v := (*b)[0]
	*b = (*b)[1:]
	return v
}

func (b *fuzzBytes) u16() int { return int(b.u8()) | int(b.u8())<<8 }

// FuzzReadConn_RMAWrites streams RMA write requests (one to three ranges
// in a writable region, a read-only one or under an unknown key; payloads
// of a few bytes to past directChunk) and CREDIT frames through a socket
// into readConn, the path that reads write payloads straight into the
// region (readRMADirect), headers alone after a large write (lastWrite)
// and request headers to their end (decoder.rmaHeadLeft), in chunks the
// input chooses, by Poll or by the loop's spin. Intact, the region must
// hold exactly what the accepted writes wrote in order (a refused write
// leaves it alone and the stream stays framed behind it); with the region
// deregistered between two reads, it does not change from then on and the
// stream stays framed; corrupted or cut short, nothing is written outside
// the region, and readConn never panics or reads forever.
func FuzzReadConn_RMAWrites(f *testing.F) {
	// Input: the op count, then per op a selector (3: CREDIT), the range
	// count and per range a key selector (6: read only, 7: unknown), the
	// address (u16 << 4) and the length (1, 2 or 3 bytes); then eight
	// chunk sizes (u16 << u8%6, plus one).
	big := []byte{255, 255, 2, 255, 255, 2, 0, 16, 3, 255, 255, 5, 7, 0, 0, 0, 2, 1, 255, 255, 2, 0, 64, 4}
	seed := func(ops ...byte) []byte { return append(ops, big...) }
	// Two large one-range writes back to back.
	f.Add(seed(1, 0, 0, 0, 0, 0, 2, 0, 128, 5, 0, 0, 0, 0, 64, 2, 0, 32, 0), uint16(0), uint8(0))
	// A refused two-range write, a CREDIT, a large write, by the loop.
	f.Add(seed(2, 0, 1, 6, 0, 0, 1, 0, 16, 0, 0, 1, 2, 0, 64, 0, 3, 0, 0, 0, 16, 0, 2, 0, 200, 7), uint16(0), uint8(1))
	// Three ranges (one under an unknown key), then a write past the region.
	f.Add(seed(2, 0, 2, 0, 0, 0, 2, 0, 16, 0, 7, 0, 1, 1, 0, 16, 0, 0, 2, 2, 0, 40, 9, 0, 0, 0, 255, 255, 2, 0, 32, 0), uint16(0), uint8(0))
	// Two large ranges in one write, then a small write.
	f.Add(seed(1, 0, 1, 0, 0, 0, 2, 0, 40, 9, 0, 0, 64, 2, 0, 40, 1, 0, 0, 0, 0, 32, 0, 200), uint16(0), uint8(0))
	// A large write, then two large ranges in one write, in chunks that
	// end inside headers.
	f.Add(append([]byte{1, 0, 0, 0, 0, 0, 2, 0, 128, 5, 0, 1, 0, 0, 64, 2, 0, 40, 9, 0, 0, 128, 2, 0, 40, 1},
		99, 0, 0, 255, 255, 2, 30, 0, 0, 255, 255, 5, 7, 0, 0, 255, 255, 3, 60, 0, 0, 255, 255, 4), uint16(0), uint8(0))
	// Large writes, the region deregistered in the middle of the first.
	f.Add(seed(1, 0, 0, 0, 0, 0, 2, 0, 128, 5, 0, 0, 0, 0, 64, 2, 0, 32, 0), uint16(1<<10), uint8(0x20))
	// Large writes, one header byte corrupted; cut short.
	f.Add(seed(1, 0, 0, 0, 0, 0, 2, 0, 128, 5, 0, 0, 0, 0, 64, 2, 0, 32, 0), uint16(300), uint8(0x80|33))
	f.Add(seed(1, 0, 0, 0, 0, 0, 2, 0, 128, 5, 0, 0, 0, 0, 64, 2, 0, 32, 0), uint16(9000), uint8(0x40|3))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16, mode uint8) {
		const (
			region = 1 << 20
			guard  = 4096
		)
		in := fuzzBytes(data)
		backing := make([]byte, guard+region+guard)
		for i := range backing {
			backing[i] = 0xee
		}
		mem := backing[guard : guard+region]
		want := bytes.Clone(mem)
		size, _ := rma.Size(4, 4)
		tab, err := rma.NewTable(make([]byte, size), 4, 4, "")
		if err != nil {
			t.Fatal(err)
		}
		slot, _, err := tab.Register(rma.Region{Mem: mem, Key: 9, Access: rma.AccessRemoteWrite}, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		ro := make([]byte, 4096)
		if _, _, err := tab.Register(rma.Region{Mem: ro, Key: 10, Access: rma.AccessRemoteRead}, false, nil); err != nil {
			t.Fatal(err)
		}

		// The stream, and what the region holds once it is executed.
		var stream []byte
		nops := int(in.u8()%12) + 1
		for op := 0; op < nops && len(stream) < 4<<20; op++ {
			if in.u8()%4 == 3 {
				var h [hdrSize]byte
				putHeader(h[:], &frame{op: opCredit, length: 1})
				stream = append(stream, h[:]...)
				continue
			}
			rq := rma.Request{Kind: rma.KindWrite, ID: uint64(op), NIOV: int(in.u8()%3) + 1}
			valid := true
			for i := 0; i < rq.NIOV; i++ {
				v := &rq.IOV[i]
				switch in.u8() % 8 {
				case 6:
					v.Key = 10 // read only: refused
				case 7:
					v.Key = 77 // unknown: refused
				default:
					v.Key = 9
				}
				v.Addr = uint64(in.u16()) << 4
				switch in.u8() % 4 {
				case 0:
					v.Len = uint64(in.u8())
				case 1:
					v.Len = uint64(in.u16())
				default: // up to past directChunk
					v.Len = uint64(in.u16())<<3 + uint64(in.u8())
				}
				if v.Key != 9 || v.Addr+v.Len > region {
					valid = false
				}
				rq.Payload += v.Len
			}
			hl := rq.HeaderLen()
			b := make([]byte, hdrSize+hl)
			putHeader(b, &frame{op: opRMA, cookie: uint64(op), length: uint64(hl) + rq.Payload})
			rq.Encode(b[hdrSize:])
			payload := pattern(int(rq.Payload), byte(op+1))
			if valid {
				rest := payload
				for i := 0; i < rq.NIOV; i++ {
					v := &rq.IOV[i]
					copy(want[v.Addr:v.Addr+v.Len], rest[:v.Len])
					rest = rest[v.Len:]
				}
			}
			stream = append(append(stream, b...), payload...)
		}
		intact := true
		if mode&0x80 != 0 && len(stream) > 0 { // corrupt one byte
			stream[int(cut)%len(stream)] ^= byte(mode&0x3f) | 1
			intact = false
		}
		if mode&0x40 != 0 && len(stream) > 0 { // cut the stream short
			stream = stream[:int(cut)%len(stream)]
			intact = false
		}
		var chunks [8]int
		for i := range chunks {
			chunks[i] = 1 + in.u16()<<int(in.u8()%6)
		}
		owner := mode&1 == 0
		// Deregistered before read pass dereg (mode bit 0x20), between
		// two passes of the one goroutine that reads: from then on the
		// region must not change, and refused writes keep the stream
		// framed.
		dereg := -1
		if mode&0x20 != 0 {
			dereg = int(cut >> 10)
		}
		var frozen []byte

		fds := socketPair(t)
		tr := &Transport{}
		tr.rmaTarget.Store(&rma.Target{Table: tab})
		p := &peer{t: tr, peerWindow: 1 << 40}
		gc := &closedConn{}
		tc := &tconn{t: tr, fd: fds[0], peer: p, state: stReady, gc: gc}

		// Write a chunk, read what readConn takes of it, and so on; then
		// read until the socket is empty and a pass takes nothing more.
		sent, passes := 0, 0 // passes once all is sent
		for i := 0; ; i++ {
			if sent < len(stream) {
				k := chunks[i%len(chunks)]
				if i >= 4096 {
					k = 256 << 10 // the rest in large chunks
				}
				k = min(k, len(stream)-sent)
				n, err := unix.Write(fds[1], stream[sent:sent+k])
				if n > 0 {
					sent += n
				} else if err != unix.EAGAIN {
					t.Fatal(err)
				}
			}
			if i == dereg {
				tab.Deregister(slot, nil)
				frozen = bytes.Clone(mem)
			}
			got := tr.readConn(tc, owner)
			if tc.dead {
				break
			}
			queued, err := unix.IoctlGetInt(fds[0], unix.SIOCINQ)
			if err != nil {
				t.Fatal(err)
			}
			if sent == len(stream) && queued == 0 && !got {
				break
			}
			if sent == len(stream) {
				passes++
			}
			if passes > 1<<16 {
				t.Fatalf("readConn does not finish: %d of %d bytes sent, %d queued", sent, len(stream), queued)
			}
		}
		for i := range guard {
			if backing[i] != 0xee || backing[guard+region+i] != 0xee {
				t.Fatal("a write landed outside its region")
			}
		}
		if frozen != nil && !bytes.Equal(mem, frozen) {
			t.Fatal("the region changed after it was deregistered")
		}
		if !intact {
			return
		}
		if tc.dead || gc.closed != 0 {
			t.Fatalf("an intact stream failed the connection: %v", tc.werr)
		}
		if tc.dec.have || len(tc.pre) != 0 {
			t.Fatalf("the stream ended inside a frame (op %d) or with %d bytes undecoded", tc.dec.f.op, len(tc.pre))
		}
		if frozen == nil && !bytes.Equal(mem, want) {
			i := 0
			for mem[i] == want[i] {
				i++
			}
			t.Fatalf("the region differs from the accepted writes first at %d (%d direct bytes)", i, tr.rmaDirect.Load())
		}
	})
}

// rmaHeadLeft says how many request-header bytes the decoder still needs
// inside an RMA frame: a one-range header's rest while the range count is
// unknown, the header's rest once it is, 0 outside a request header or
// when the range count is bad (the decoder then fails the frame).
func TestDecoder_RMAHeadLeft(t *testing.T) {
	oneRange := rma.ReqHeader + rma.IOVSize
	for _, c := range []struct {
		name string
		have bool
		op   uint8
		body bool
		rn   int
		niov byte
		want int
	}{
		{"no frame", false, opRMA, false, 0, 1, 0},
		{"not RMA", true, opData, false, 0, 1, 0},
		{"in the payload", true, opRMA, true, 4, 1, 0},
		{"count unknown", true, opRMA, false, 0, 0, oneRange},
		{"one range, count read", true, opRMA, false, 4, 1, oneRange - 4},
		{"three ranges, count read", true, opRMA, false, 4, 3, rma.ReqHeader + 3*rma.IOVSize - 4},
		{"most ranges", true, opRMA, false, 4, rma.MaxIOV, rma.MaxReqHeader - 4},
		{"header read", true, opRMA, false, oneRange, 1, 0},
		{"zero ranges", true, opRMA, false, 4, 0, 0},
		{"too many ranges", true, opRMA, false, 4, rma.MaxIOV + 1, 0},
	} {
		var d decoder
		d.have, d.f.op, d.rmaBody, d.rn = c.have, c.op, c.body, c.rn
		d.rh[3] = c.niov
		if got := d.rmaHeadLeft(); got != c.want {
			t.Errorf("%s: rmaHeadLeft %d, want %d", c.name, got, c.want)
		}
	}
}
