package net

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/gofi-dev/fi/rma"
	"github.com/gofi-dev/fi/transport"
)

// Frame header, little-endian, 48 bytes:
//
//	off size field
//	  0    2 magic (0x6667, "gf")
//	  2    1 op
//	  3    1 flags (transport.Header flags; for CTS: ctsDiscard)
//	  4    1 kind (transport.Kind for EAGER, RTS and PUSH, else 0)
//	  5    2 the writer's place (place.go: its CPU + 1) on a connection
//	         whose HELLOs agreed to exchange them, else 0
//	  7    1 reserved, zero
//	  8    8 tag
//	 16    8 data (remote CQ data; for CTS: the receiver's fetch id; for
//	         DATA with dataErr: the error status)
//	 24    8 length (payload bytes following the header for HELLO, AUTH,
//	         EAGER, PUSH, DATA and RMA; the message length for RTS; the
//	         bytes wanted for CTS; the credit returned for CREDIT; 0 for
//	         RETIRE)
//	 32    8 cookie (RTS and CTS: the sender's cookie; DATA: the fetch id;
//	         RMA: the initiator's fetch id its answer goes to)
//	 40    4 peer group id (EAGER, RTS and PUSH; fi_av(3) PEER GROUPS), else 0
//	 44    4 reserved, zero
//	 48      total
const (
	hdrSize  = 48
	magic    = 0x6667
	helloLen = 64
	authLen  = 32

	// maxWireEager caps an EAGER payload on the wire whatever either side
	// configured, so a receiver never needs more than this per message.
	maxWireEager = 64 << 10
	// maxMsgLen caps a rendezvous message (1 TiB): larger lengths are
	// corruption.
	maxMsgLen = 1 << 40
	// maxCredit caps one CREDIT frame.
	maxCredit = 1 << 32
)

// Operations.
const (
	opHello  uint8 = 1 // handshake: payload helloLen bytes
	opAuth   uint8 = 2 // HMAC proof: payload authLen bytes
	opEager  uint8 = 3 // a whole message: payload length bytes
	opRTS    uint8 = 4 // ready to send: header only, length = message length
	opCTS    uint8 = 5 // clear to send: length = bytes wanted
	opData   uint8 = 6 // rendezvous payload: length bytes, cookie = fetch id
	opCredit uint8 = 7 // receive-window credit returned
	opRetire uint8 = 8 // last frame on a duplicate connection (flags: retireAck)
	// opRMA is a one-sided request (package rma's request header, then
	// its payload), executed by the target's loop; the answer is a DATA
	// frame to the request's fetch id (dataErr with a status on failure).
	opRMA  uint8 = 9
	opPush uint8 = 10 // a whole message, header then length payload bytes read as a stream (push.go)
	opLast       = opPush
)

const (
	ctsDiscard uint8 = 1 << 0
	// retireAck: "your RETIRE was read", sent on the connection that stays.
	retireAck uint8 = 1 << 0
	// dataErr: a DATA frame without payload failing the fetch with the
	// status in data (an RMA request the target refused).
	dataErr uint8 = 1 << 0
)

// frame is a decoded header.
type frame struct {
	op, flags, kind uint8
	group           uint32
	place           uint32 // header bytes 5-6 (place.go)
	tag, data       uint64
	length, cookie  uint64
}

// errProto marks a frame that cannot be right; the connection is closed.
var errProto = errors.New("net: protocol error")

func putHeader(b []byte, f *frame) {
	b = b[:hdrSize]
	binary.LittleEndian.PutUint16(b[0:], magic)
	b[2] = f.op
	b[3] = f.flags
	b[4] = f.kind
	b[5], b[6], b[7] = 0, 0, 0
	binary.LittleEndian.PutUint64(b[8:], f.tag)
	binary.LittleEndian.PutUint64(b[16:], f.data)
	binary.LittleEndian.PutUint64(b[24:], f.length)
	binary.LittleEndian.PutUint64(b[32:], f.cookie)
	binary.LittleEndian.PutUint32(b[40:], f.group)
	binary.LittleEndian.PutUint32(b[44:], 0)
}

// decodeHeader parses and validates one header. Everything a peer can set
// is checked here, before any length is used to size or read anything.
func decodeHeader(b []byte, f *frame) error {
	if len(b) < hdrSize {
		return fmt.Errorf("%w: short header", errProto)
	}
	b = b[:hdrSize]
	if binary.LittleEndian.Uint16(b[0:]) != magic {
		return fmt.Errorf("%w: bad magic", errProto)
	}
	if b[7] != 0 || binary.LittleEndian.Uint32(b[44:]) != 0 {
		return fmt.Errorf("%w: reserved bytes set", errProto)
	}
	*f = frame{
		op:     b[2],
		flags:  b[3],
		kind:   b[4],
		tag:    binary.LittleEndian.Uint64(b[8:]),
		data:   binary.LittleEndian.Uint64(b[16:]),
		length: binary.LittleEndian.Uint64(b[24:]),
		cookie: binary.LittleEndian.Uint64(b[32:]),
		group:  binary.LittleEndian.Uint32(b[40:]),
		place:  uint32(b[5]) | uint32(b[6])<<8,
	}
	var maxLen uint64
	wantKind := false
	flagMask := uint8(0)
	switch f.op {
	case opHello:
		if f.length != helloLen {
			return fmt.Errorf("%w: hello length %d", errProto, f.length)
		}
		maxLen = helloLen
	case opAuth:
		if f.length != authLen {
			return fmt.Errorf("%w: auth length %d", errProto, f.length)
		}
		maxLen = authLen
	case opEager:
		maxLen, wantKind, flagMask = maxWireEager, true, transport.FlagRemoteData
	case opRTS:
		maxLen, wantKind, flagMask = maxMsgLen, true, transport.FlagRemoteData
	case opPush:
		maxLen, wantKind, flagMask = maxWirePush, true, transport.FlagRemoteData
	case opCTS:
		maxLen, flagMask = maxMsgLen, ctsDiscard
	case opData:
		maxLen, flagMask = maxMsgLen, dataErr
		if f.flags&dataErr != 0 && (f.length != 0 || f.data == 0 || f.data > 1<<16) {
			return fmt.Errorf("%w: DATA error frame with length %d status %d", errProto, f.length, f.data)
		}
	case opRMA:
		maxLen = maxMsgLen + rma.MaxReqHeader
		if f.length < rma.ReqHeader+rma.IOVSize {
			return fmt.Errorf("%w: RMA request of %d bytes", errProto, f.length)
		}
	case opCredit:
		maxLen = maxCredit
	case opRetire:
		maxLen, flagMask = 0, retireAck
	default:
		return fmt.Errorf("%w: op %d", errProto, f.op)
	}
	if f.length > maxLen {
		return fmt.Errorf("%w: op %d length %d", errProto, f.op, f.length)
	}
	if f.flags&^flagMask != 0 {
		return fmt.Errorf("%w: op %d flags %#x", errProto, f.op, f.flags)
	}
	if wantKind {
		if k := transport.Kind(f.kind); !transport.ValidKind(k) &&
			(k != transport.KindRMAData || f.op != opEager || f.length != 0) {
			return fmt.Errorf("%w: kind %d", errProto, f.kind)
		}
	} else if f.kind != 0 || f.group != 0 {
		return fmt.Errorf("%w: op %d kind %d group %d", errProto, f.op, f.kind, f.group)
	}
	return nil
}

// inbound is the part of gnet.Conn the decoder reads from: bytes already
// received and buffered by the loop.
type inbound interface {
	InboundBuffered() int
	Read(p []byte) (int, error)
}

// frameHandler receives decoded frames from a decoder.
type frameHandler interface {
	// frame handles a frame whose payload (HELLO, AUTH, EAGER) is fully
	// buffered in src; the handler reads exactly f.length payload bytes.
	// ok == false means "no room now": nothing was read and the decoder
	// stops, to resume with the same frame on the next run.
	frame(f *frame, src inbound) (ok bool, err error)
	// dataStart announces a DATA frame of f.length bytes; dataChunk
	// passes the next n bytes of it (n > 0), dataEnd its end.
	dataStart(f *frame) error
	dataChunk(src inbound, n int) error
	dataEnd() error
	// rmaStart announces an RMA request whose header (package rma) is
	// hdr; whole asks for its payload in one rmaChunk once fully buffered
	// (atomics), otherwise it comes in chunks as it arrives (writes).
	// rmaEnd follows the last chunk (or the header, without payload).
	rmaStart(f *frame, hdr []byte) (whole bool, err error)
	rmaChunk(src inbound, n int) error
	rmaEnd() error
}

// decoder turns a connection's byte stream into frames. It keeps only a
// header's worth of state and never allocates: payloads are read by the
// handler, directly into their destination, and only once fully buffered
// (EAGER payloads are at most maxWireEager) or chunk by chunk (DATA).
type decoder struct {
	raw  [hdrSize]byte
	f    frame
	have bool   // f holds a decoded header whose frame is not finished
	left uint64 // DATA (and RMA payload) bytes still to pass to the handler
	// RMA requests: the request header read so far, then how the payload
	// goes to the handler (rmaWhole: at once when fully buffered).
	rh       [rma.MaxReqHeader]byte
	rn       int
	rmaBody  bool
	rmaWhole bool
	// place receives the peer's place stamps (place.go); nil: the
	// connection does not exchange them and a stamp is an error.
	place *atomic.Uint32
}

// run decodes as many frames as src holds. stalled reports that the
// handler had no room; err a protocol or handler error (the connection must
// be closed).
func (d *decoder) run(src inbound, h frameHandler) (stalled bool, err error) {
	for {
		if !d.have {
			if src.InboundBuffered() < hdrSize {
				return false, nil
			}
			if err := readFull(src, d.raw[:]); err != nil {
				return false, err
			}
			if err := decodeHeader(d.raw[:], &d.f); err != nil {
				return false, err
			}
			if v := d.f.place; v != 0 {
				if d.place == nil {
					return false, fmt.Errorf("%w: reserved bytes set", errProto)
				}
				d.place.Store(v) // fresh: clears placeSeen
			}
			d.have = true
			if d.f.op == opData {
				if err := h.dataStart(&d.f); err != nil {
					return false, err
				}
				d.left = d.f.length
			}
		}
		switch d.f.op {
		case opData:
			for d.left > 0 {
				n := src.InboundBuffered()
				if n == 0 {
					return false, nil
				}
				if uint64(n) > d.left {
					n = int(d.left)
				}
				if err := h.dataChunk(src, n); err != nil {
					return false, err
				}
				d.left -= uint64(n)
			}
			if err := h.dataEnd(); err != nil {
				return false, err
			}
		case opRMA:
			if ok, err := d.rma(src, h); !ok || err != nil {
				return false, err
			}
		case opHello, opAuth, opEager:
			if uint64(src.InboundBuffered()) < d.f.length {
				return false, nil
			}
			fallthrough
		default:
			ok, err := h.frame(&d.f, src)
			if err != nil {
				return false, err
			}
			if !ok {
				return true, nil
			}
			if d.f.op == opPush { // its payload follows, read like DATA's
				d.f.op, d.left = opData, d.f.length
				continue
			}
		}
		d.have = false
	}
}

// rma advances an RMA request: its header (a few bytes first, to learn
// the range count), then its payload. ok reports that the request ended.
func (d *decoder) rma(src inbound, h frameHandler) (ok bool, err error) {
	if !d.rmaBody {
		if d.rn < 4 {
			if src.InboundBuffered() < 4 {
				return false, nil
			}
			if err := readFull(src, d.rh[:4]); err != nil {
				return false, err
			}
			d.rn = 4
		}
		hl, err := rma.PeekHeaderLen(d.rh[:4])
		if err != nil || uint64(hl) > d.f.length {
			return false, fmt.Errorf("%w: RMA header (%v)", errProto, err)
		}
		if src.InboundBuffered() < hl-d.rn {
			return false, nil
		}
		if err := readFull(src, d.rh[d.rn:hl]); err != nil {
			return false, err
		}
		d.rn = hl
		whole, err := h.rmaStart(&d.f, d.rh[:hl])
		if err != nil {
			return false, err
		}
		d.rmaBody, d.rmaWhole, d.left = true, whole, d.f.length-uint64(hl)
	}
	if d.rmaWhole {
		if uint64(src.InboundBuffered()) < d.left {
			return false, nil
		}
		if d.left > 0 {
			if err := h.rmaChunk(src, int(d.left)); err != nil {
				return false, err
			}
			d.left = 0
		}
	}
	for d.left > 0 {
		n := src.InboundBuffered()
		if n == 0 {
			return false, nil
		}
		if uint64(n) > d.left {
			n = int(d.left)
		}
		if err := h.rmaChunk(src, n); err != nil {
			return false, err
		}
		d.left -= uint64(n)
	}
	d.rmaBody, d.rn = false, 0
	return true, h.rmaEnd()
}

// dataLeft is the number of DATA payload bytes the decoder still expects
// (0 outside a DATA frame).
func (d *decoder) dataLeft() uint64 {
	if d.have && d.f.op == opData {
		return d.left
	}
	return 0
}

// rmaLeft is the number of RMA write payload bytes the decoder still
// expects in chunks (0 outside such a payload, and for atomics, whose
// operands are passed whole).
func (d *decoder) rmaLeft() uint64 {
	if d.have && d.f.op == opRMA && d.rmaBody && !d.rmaWhole {
		return d.left
	}
	return 0
}

// rmaHeadLeft is, inside an RMA frame whose request header the decoder
// has not taken in whole, how many more of the header's bytes it needs:
// the rest of a one-range header while the range count is not known yet
// (the common write), else the rest of the header. 0 elsewhere.
func (d *decoder) rmaHeadLeft() int {
	if !d.have || d.f.op != opRMA || d.rmaBody {
		return 0
	}
	if d.rn < 4 {
		return rma.ReqHeader + rma.IOVSize - d.rn
	}
	hl, err := rma.PeekHeaderLen(d.rh[:4])
	if err != nil || hl < d.rn {
		return 0
	}
	return hl - d.rn
}

// tookData accounts n DATA (or RMA write) payload bytes the handler took
// from the stream itself (n <= dataLeft() or rmaLeft()); the next run ends
// the frame when none are left.
func (d *decoder) tookData(n uint64) { d.left -= n }

func readFull(src inbound, p []byte) error {
	for len(p) > 0 {
		n, err := src.Read(p)
		if n == 0 {
			if err == nil {
				err = errProto
			}
			return fmt.Errorf("net: short read from buffer: %w", err)
		}
		p = p[n:]
	}
	return nil
}
