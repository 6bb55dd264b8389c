package net

import (
	"errors"
	"testing"

	"github.com/gofi-dev/fi/rma"
)

// chunked serves a byte string to the decoder a few bytes at a time, as
// TCP may deliver it.
type chunked struct {
	data  []byte
	avail int // bytes the "socket" has delivered so far
}

func (c *chunked) InboundBuffered() int { return c.avail }
func (c *chunked) Read(p []byte) (int, error) {
	n := copy(p, c.data[:c.avail])
	c.data, c.avail = c.data[n:], c.avail-n
	return n, nil
}

// fuzzHandler accepts frames like a connection would, within bounds, and
// tracks that the decoder never hands it more than the frame says.
type fuzzHandler struct {
	buf     [maxWireEager]byte
	dataLen uint64
	got     uint64
	frames  int
}

func (h *fuzzHandler) frame(f *frame, src inbound) (bool, error) {
	switch f.op {
	case opHello, opAuth, opEager:
		if uint64(src.InboundBuffered()) < f.length {
			return false, errors.New("payload not buffered")
		}
		if err := readFull(src, h.buf[:f.length]); err != nil {
			return false, err
		}
	}
	h.frames++
	if h.frames%7 == 0 {
		return false, nil // stall now and then
	}
	if f.op == opPush { // its payload follows as a stream, like DATA's
		h.dataLen, h.got = f.length, 0
	}
	return true, nil
}

func (h *fuzzHandler) dataStart(f *frame) error {
	if f.length > 1<<20 {
		return errProto // no fetch that large is pending
	}
	h.dataLen, h.got = f.length, 0
	return nil
}

func (h *fuzzHandler) dataChunk(src inbound, n int) error {
	h.got += uint64(n)
	if h.got > h.dataLen {
		return errors.New("decoder passed more DATA than announced")
	}
	for n > 0 {
		k := min(n, len(h.buf))
		if err := readFull(src, h.buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

func (h *fuzzHandler) rmaStart(f *frame, hdr []byte) (bool, error) {
	var r rma.Request
	n, err := rma.DecodeRequest(hdr, &r)
	if err != nil {
		return false, err
	}
	if uint64(n)+r.Payload != f.length {
		return false, errProto
	}
	h.dataLen, h.got = r.Payload, 0
	return r.Kind.IsAtomic() && r.Payload <= 2*rma.MaxAtomic, nil
}

func (h *fuzzHandler) rmaChunk(src inbound, n int) error { return h.dataChunk(src, n) }

func (h *fuzzHandler) rmaEnd() error { return h.dataEnd() }

func (h *fuzzHandler) dataEnd() error {
	if h.got != h.dataLen {
		return errors.New("DATA ended early")
	}
	return nil
}

func FuzzDecode(f *testing.F) {
	hdr := func(fr frame) []byte {
		b := make([]byte, hdrSize)
		putHeader(b, &fr)
		return b
	}
	eager := append(hdr(frame{op: opEager, kind: 1, length: 5}), "hello"...)
	f.Add(eager, uint8(3))
	f.Add(append(hdr(frame{op: opHello, length: helloLen}), make([]byte, helloLen)...), uint8(1))
	f.Add(append(hdr(frame{op: opData, length: 10, cookie: 1}), make([]byte, 10)...), uint8(4))
	f.Add(append(hdr(frame{op: opRTS, kind: 2, length: 1 << 30, cookie: 7}), hdr(frame{op: opCTS, length: 3})...), uint8(40))
	f.Add(hdr(frame{op: opCredit, length: 1 << 40}), uint8(1))
	f.Add(append(append(eager, hdr(frame{op: opRetire})...), hdr(frame{op: opRetire, flags: retireAck})...), uint8(7))
	f.Add(hdr(frame{op: opRetire, length: 1}), uint8(48))
	f.Add(hdr(frame{op: opRetire, flags: 2}), uint8(5))
	f.Add([]byte{0x67, 0x66, 9, 0, 0}, uint8(2))
	rq := rma.Request{Kind: rma.KindWrite, NIOV: 1, Payload: 5, IOV: [rma.MaxIOV]rma.IOV{{Addr: 1, Len: 5, Key: 2}}}
	rh := make([]byte, rq.HeaderLen())
	rq.Encode(rh)
	f.Add(append(append(hdr(frame{op: opRMA, cookie: 3, length: uint64(len(rh)) + 5}), rh...), "12345"...), uint8(9))
	aq := rma.Request{Kind: rma.KindCompare, Datatype: 7, Op: 12, NIOV: 1, Payload: 16, IOV: [rma.MaxIOV]rma.IOV{{Len: 8, Key: 2}}}
	ah := make([]byte, aq.HeaderLen())
	aq.Encode(ah)
	f.Add(append(append(hdr(frame{op: opRMA, cookie: 4, length: uint64(len(ah)) + 16}), ah...), make([]byte, 16)...), uint8(5))
	f.Add(append(hdr(frame{op: opData, flags: dataErr, data: 13, cookie: 4}), hdr(frame{op: opData, length: 8, cookie: 5})...), uint8(11))
	f.Add(append(append(hdr(frame{op: opPush, kind: 1, length: 100, tag: 3}), make([]byte, 100)...), eager...), uint8(9))
	f.Add(append(hdr(frame{op: opPush, kind: 2, flags: 1, length: maxWirePush}), make([]byte, 70)...), uint8(33))
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		src := &chunked{data: data}
		var d decoder
		var h fuzzHandler
		st := int(step%64) + 1
		for delivered := 0; delivered < len(data); {
			k := min(st, len(data)-delivered)
			delivered += k
			src.avail += k
			for {
				stalled, err := d.run(src, &h)
				if err != nil {
					return // a bad stream closes the connection; that is all
				}
				if !stalled {
					break
				}
			}
		}
		// All input either decoded or waiting for more: never more than a
		// frame's header plus an eager payload is held back.
		if src.avail > hdrSize+maxWireEager && !(d.have && (d.f.op == opData || d.f.op == opRMA)) {
			t.Fatalf("decoder left %d bytes unread", src.avail)
		}
	})
}

func TestDecodeHeader_RejectsImpossibleFrames(t *testing.T) {
	cases := []struct {
		name string
		f    frame
	}{
		{"UnknownOp", frame{op: 99}},
		{"ZeroOp", frame{op: 0}},
		{"EagerTooLong", frame{op: opEager, kind: 1, length: maxWireEager + 1}},
		{"EagerBadKind", frame{op: opEager, kind: 9, length: 1}}, // kinds 1-3 are msg, tagged, coll
		{"HelloWrongLength", frame{op: opHello, length: helloLen + 1}},
		{"RTSTooLong", frame{op: opRTS, kind: 1, length: maxMsgLen + 1}},
		{"DataUnknownFlags", frame{op: opData, flags: 0x80}},
		{"CreditKind", frame{op: opCredit, kind: 1}},
		{"RetireWithLength", frame{op: opRetire, length: 1}},
		{"RetireUnknownFlags", frame{op: opRetire, flags: 2}},
		{"RetireTag", frame{op: opRetire, kind: 1}},
		{"PushTooLong", frame{op: opPush, kind: 1, length: maxWirePush + 1}},
		{"PushBadKind", frame{op: opPush, kind: 0, length: 1}},
		{"PushCTSFlag", frame{op: opPush, kind: 1, flags: 2, length: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, hdrSize)
			putHeader(b, &tc.f)
			var f frame
			if err := decodeHeader(b, &f); !errors.Is(err, errProto) {
				t.Fatalf("decodeHeader(%+v) = %v, want a protocol error", tc.f, err)
			}
		})
	}
	b := make([]byte, hdrSize)
	putHeader(b, &frame{op: opEager, kind: 1, length: 3})
	b[0] ^= 1
	var f frame
	if err := decodeHeader(b, &f); !errors.Is(err, errProto) {
		t.Fatal("bad magic accepted")
	}
	for _, flags := range []uint8{0, retireAck} {
		putHeader(b, &frame{op: opRetire, flags: flags})
		if err := decodeHeader(b, &f); err != nil || f.op != opRetire || f.flags != flags {
			t.Fatalf("RETIRE flags %d: %v %+v", flags, err, f)
		}
	}
}
