package rma

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Kind says what a request does (the values of transport.RMAKind).
type Kind uint8

// Request kinds.
const (
	KindWrite   Kind = 1
	KindRead    Kind = 2
	KindAtomic  Kind = 3
	KindFetch   Kind = 4
	KindCompare Kind = 5
)

// IsAtomic reports whether k is one of the atomic kinds.
func (k Kind) IsAtomic() bool { return k >= KindAtomic && k <= KindCompare }

// Limits of one request.
const (
	// MaxIOV is the most remote ranges one request names
	// (TxAttr.RMAIOVLimit).
	MaxIOV = 8
	// MaxAtomic is the most target bytes one atomic request covers: the
	// count an atomic call may take is MaxAtomic / the datatype's size.
	MaxAtomic = 4096
	// MaxRead is the most bytes one read request asks for; transports
	// split larger reads.
	MaxRead = 4 << 20
	// MaxWrite bounds the payload of one write request (1 TiB: larger
	// lengths are corruption).
	MaxWrite = 1 << 40
)

// Request wire format (little-endian; it crosses hosts):
//
//	0  kind u8
//	1  datatype u8 (atomics, else 0)
//	2  op u8       (atomics, else 0)
//	3  niov u8     (1..MaxIOV)
//	4  flags u32   FlagMore, FlagCont (other bits: malformed)
//	8  id u64      the initiator's name for the operation
//	16 payload u64 bytes that follow the range list: write data; atomic
//	               operands (and, for compare, as many compare operands);
//	               0 for reads and for atomic reads
//	24 niov x {addr u64, len u64, key u64}
//
// Response wire format:
//
//	0  status u32  0 or a libfabric errno (EACCES, EINVAL, EOPNOTSUPP...)
//	4  reserved u32, zero
//	8  id u64
//	16 payload u64 read data or atomic results that follow (0 on error)
const (
	ReqHeader  = 24
	IOVSize    = 24
	RespHeader = 24
	// MaxReqHeader is the longest request header (with MaxIOV ranges).
	MaxReqHeader = ReqHeader + MaxIOV*IOVSize
)

// Request flags, for an operation a transport splits into several
// requests (tcp reads above MaxRead): the target counts the operation
// once, as if it were one request.
const (
	// FlagMore: more requests of the operation follow; the target does
	// not count this one at the endpoint's counters.
	FlagMore uint32 = 1 << 0
	// FlagCont: the request's first range continues a range an earlier
	// request of the operation began; the target does not count it again
	// at its region's counters.
	FlagCont uint32 = 1 << 1

	flagsKnown = FlagMore | FlagCont
)

// IOV is one remote range of a request.
type IOV struct {
	Addr, Len, Key uint64
}

// Request is a decoded request header.
type Request struct {
	Kind     Kind
	Datatype uint8
	Op       uint8
	Flags    uint32 // FlagMore, FlagCont
	ID       uint64
	Payload  uint64
	NIOV     int
	IOV      [MaxIOV]IOV
}

// Total is the number of target bytes the request covers.
func (r *Request) Total() uint64 {
	var n uint64
	for i := 0; i < r.NIOV; i++ {
		n += r.IOV[i].Len
	}
	return n
}

// HeaderLen is the encoded length of the request's header.
func (r *Request) HeaderLen() int { return ReqHeader + r.NIOV*IOVSize }

// ErrMalformed marks a request or response that cannot be right: the
// channel it came on must be closed.
var ErrMalformed = errors.New("rma: malformed request")

var le = binary.LittleEndian

// Encode writes the request's header into b (at least HeaderLen bytes)
// and returns its length.
func (r *Request) Encode(b []byte) int {
	n := r.HeaderLen()
	b = b[:n]
	b[0], b[1], b[2], b[3] = byte(r.Kind), r.Datatype, r.Op, byte(r.NIOV)
	le.PutUint32(b[4:], r.Flags)
	le.PutUint64(b[8:], r.ID)
	le.PutUint64(b[16:], r.Payload)
	for i := 0; i < r.NIOV; i++ {
		o := ReqHeader + i*IOVSize
		le.PutUint64(b[o:], r.IOV[i].Addr)
		le.PutUint64(b[o+8:], r.IOV[i].Len)
		le.PutUint64(b[o+16:], r.IOV[i].Key)
	}
	return n
}

// PeekHeaderLen returns the length of the request header starting b (at
// least 4 bytes), so a decoder knows how much to wait for; an error for a
// range count that cannot be right.
func PeekHeaderLen(b []byte) (int, error) {
	if len(b) < 4 {
		return 0, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	n := int(b[3])
	if n < 1 || n > MaxIOV {
		return 0, fmt.Errorf("%w: %d ranges", ErrMalformed, n)
	}
	return ReqHeader + n*IOVSize, nil
}

// DecodeRequest parses a request header from b into r and returns its
// length. It checks structure only: the kind, the range count, zero
// bytes and unknown flags, and that the payload length agrees with the kind and
// the ranges (so a reader always knows how many bytes follow). What the
// target thinks of keys, ranges, datatypes and counts is Check's and the
// executor's business, answered with an error status, not a broken
// channel.
func DecodeRequest(b []byte, r *Request) (int, error) {
	n, err := PeekHeaderLen(b)
	if err != nil {
		return 0, err
	}
	if len(b) < n {
		return 0, fmt.Errorf("%w: %d of %d header bytes", ErrMalformed, len(b), n)
	}
	// Field by field: r.IOV beyond the ranges is left as it was (nothing
	// reads past NIOV), which saves clearing 192 bytes per request.
	b = b[:n]
	r.Kind, r.Datatype, r.Op, r.NIOV = Kind(b[0]), b[1], b[2], (n-ReqHeader)/IOVSize
	r.Flags, r.ID, r.Payload = le.Uint32(b[4:]), le.Uint64(b[8:]), le.Uint64(b[16:])
	if r.Flags&^flagsKnown != 0 {
		return 0, fmt.Errorf("%w: unknown flags %#x", ErrMalformed, r.Flags)
	}
	var total uint64
	for i := range r.NIOV {
		v := b[ReqHeader+i*IOVSize:]
		v = v[:IOVSize]
		d := &r.IOV[i]
		d.Addr, d.Len, d.Key = le.Uint64(v), le.Uint64(v[8:]), le.Uint64(v[16:])
		if d.Len > MaxWrite || total > MaxWrite-d.Len {
			return 0, fmt.Errorf("%w: range length %d", ErrMalformed, d.Len)
		}
		total += d.Len
	}
	switch r.Kind {
	case KindWrite:
		if r.Payload != total || r.Datatype|r.Op != 0 {
			return 0, fmt.Errorf("%w: write of %d bytes with payload %d", ErrMalformed, total, r.Payload)
		}
	case KindRead:
		if r.Payload != 0 || r.Datatype|r.Op != 0 {
			return 0, fmt.Errorf("%w: read with payload %d", ErrMalformed, r.Payload)
		}
	case KindAtomic, KindFetch, KindCompare:
		want := total
		switch {
		case r.Kind == KindCompare:
			want = 2 * total
		case r.Kind == KindFetch && r.Op == opAtomicRead:
			want = 0
		}
		if r.Payload != want {
			return 0, fmt.Errorf("%w: atomic over %d bytes with payload %d", ErrMalformed, total, r.Payload)
		}
	default:
		return 0, fmt.Errorf("%w: kind %d", ErrMalformed, r.Kind)
	}
	return n, nil
}

// opAtomicRead is dtype.AtomicRead's wire value.
const opAtomicRead = 10

// Response is a decoded response header.
type Response struct {
	Status  Code
	ID      uint64
	Payload uint64
}

// EncodeResponse writes a response header into b (at least RespHeader
// bytes).
func EncodeResponse(b []byte, r Response) {
	b = b[:RespHeader]
	le.PutUint32(b, uint32(r.Status))
	le.PutUint32(b[4:], 0)
	le.PutUint64(b[8:], r.ID)
	le.PutUint64(b[16:], r.Payload)
}

// DecodeResponse parses a response header: the payload must be empty on
// an error status and at most max bytes (what the initiator expects for
// that id) otherwise.
func DecodeResponse(b []byte, max uint64) (Response, error) {
	if len(b) < RespHeader {
		return Response{}, fmt.Errorf("%w: short response", ErrMalformed)
	}
	r := Response{Status: Code(le.Uint32(b)), ID: le.Uint64(b[8:]), Payload: le.Uint64(b[16:])}
	switch {
	case le.Uint32(b[4:]) != 0:
		return Response{}, fmt.Errorf("%w: response reserved bytes", ErrMalformed)
	case r.Status < 0 || r.Status > 1<<16:
		return Response{}, fmt.Errorf("%w: status %d", ErrMalformed, r.Status)
	case r.Status != OK && r.Payload != 0, r.Payload > max:
		return Response{}, fmt.Errorf("%w: response payload %d", ErrMalformed, r.Payload)
	}
	return r, nil
}
