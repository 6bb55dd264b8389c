package launch

// Frames of the env rendezvous (env.go). Each is
//
//	length  uint32, big-endian: bytes after this field (type + body)
//	type    byte
//	body    fields by type: u32 (big-endian), str (u32 length + bytes)
//
//	hello   1  client->0: str magic, str job key, u32 rank, u32 size, str host
//	welcome 2  0->client: u32 local rank, u32 local size
//	fail    3  0->client: u32 errno, str why (the job failed, or this
//	           client was refused)
//	fence   4  client->0: u32 epoch, u32 n, n * (str key, str value)
//	fenced  5  0->client: u32 epoch, u32 n, n * (str key, str value)
//	abort   6  either way: u32 code, str why
//	fin     7  client->0: (empty)
//
// A frame comes from another process, possibly of another job or no job
// at all: the decoder checks every length against what is left of the
// frame, bounds the frame (maxFrame) and reads a large frame as its bytes
// arrive, so a lying length costs no memory.

import (
	"bufio"
	"encoding/binary"
	"io"
)

const (
	fHello   = 1
	fWelcome = 2
	fFail    = 3
	fFence   = 4
	fFenced  = 5
	fAbort   = 6
	fFin     = 7

	// maxFrame bounds one frame: everything the ranks put between two
	// fences travels in one fenced frame.
	maxFrame = 256 << 20

	rdzvMagic = "gofi-rdzv-1"
)

// frame is one decoded frame.
type frame struct {
	typ  byte
	body []byte
}

// readFrame reads one frame from r.
func readFrame(r *bufio.Reader) (frame, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(h[:4])
	if n == 0 || n > maxFrame {
		return frame{}, syntax("rendezvous frame length %d outside [1, %d]", n, maxFrame)
	}
	n-- // the type byte is read
	f := frame{typ: h[4]}
	if f.typ < fHello || f.typ > fFin {
		return frame{}, syntax("rendezvous frame type %d is unknown", f.typ)
	}
	// Grow with the data actually read, not with the length claimed.
	const step = 1 << 20
	for uint32(len(f.body)) < n {
		k := min(n-uint32(len(f.body)), step)
		old := len(f.body)
		f.body = append(f.body, make([]byte, k)...)
		if _, err := io.ReadFull(r, f.body[old:]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return frame{}, err
		}
	}
	return f, nil
}

// enc builds a frame.
type enc struct{ b []byte }

func newEnc(typ byte) *enc {
	e := &enc{b: make([]byte, 5, 64)}
	e.b[4] = typ
	return e
}

func (e *enc) u32(v uint32) *enc { e.b = binary.BigEndian.AppendUint32(e.b, v); return e }
func (e *enc) str(s []byte) *enc {
	e.b = binary.BigEndian.AppendUint32(e.b, uint32(len(s)))
	e.b = append(e.b, s...)
	return e
}

// bytes returns the frame with its length set.
func (e *enc) bytes() []byte {
	binary.BigEndian.PutUint32(e.b[:4], uint32(len(e.b)-4))
	return e.b
}

// dec reads a frame body; the first error sticks and later reads return
// zero values.
type dec struct {
	b   []byte
	err error
}

func (d *dec) u32() uint32 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 4 {
		d.err = syntax("rendezvous frame truncated")
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

// str returns the next string (aliasing the frame), at most max bytes.
func (d *dec) str(max int) []byte {
	n := d.u32()
	if d.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(d.b)) {
		d.err = syntax("rendezvous string of %d bytes in a frame with %d left", n, len(d.b))
		return nil
	}
	if int(n) > max {
		d.err = syntax("rendezvous string of %d bytes is longer than %d", n, max)
		return nil
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

// end checks the body was used up.
func (d *dec) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = syntax("rendezvous frame has %d bytes too many", len(d.b))
	}
	return d.err
}

// hello is a decoded hello frame.
type hello struct {
	magic, key, host string
	rank, size       int
}

func encHello(h hello) []byte {
	return newEnc(fHello).str([]byte(h.magic)).str([]byte(h.key)).
		u32(uint32(h.rank)).u32(uint32(h.size)).str([]byte(h.host)).bytes()
}

func decHello(body []byte) (hello, error) {
	d := dec{b: body}
	var h hello
	h.magic = string(d.str(64))
	h.key = string(d.str(4096))
	h.rank = int(d.u32())
	h.size = int(d.u32())
	h.host = string(d.str(4096))
	return h, d.end()
}

// kvPair is one key and value of a fence.
type kvPair struct{ key, val []byte }

func encKVs(typ byte, epoch uint32, kvs []kvPair) []byte {
	e := newEnc(typ).u32(epoch).u32(uint32(len(kvs)))
	for _, p := range kvs {
		e.str(p.key).str(p.val)
	}
	return e.bytes()
}

// decKVs decodes a fence or fenced body. The pairs alias body.
func decKVs(body []byte) (uint32, []kvPair, error) {
	d := dec{b: body}
	epoch := d.u32()
	n := d.u32()
	if d.err == nil && uint64(n)*8 > uint64(len(d.b)) { // each pair takes 8 bytes at least
		d.err = syntax("rendezvous frame claims %d pairs in %d bytes", n, len(d.b))
	}
	var out []kvPair
	if d.err == nil {
		out = make([]kvPair, 0, n)
	}
	for i := uint32(0); d.err == nil && i < n; i++ {
		k := d.str(1024)
		v := d.str(maxFrame)
		out = append(out, kvPair{key: k, val: v})
	}
	if err := d.end(); err != nil {
		return 0, nil, err
	}
	return epoch, out, nil
}

func encCodeWhy(typ byte, code uint32, why string) []byte {
	if len(why) > 4096 {
		why = why[:4096]
	}
	return newEnc(typ).u32(code).str([]byte(why)).bytes()
}

// decCodeWhy decodes a fail or abort body.
func decCodeWhy(body []byte) (uint32, string, error) {
	d := dec{b: body}
	c := d.u32()
	w := string(d.str(4096))
	return c, w, d.end()
}

func decWelcome(body []byte) (int, int, error) {
	d := dec{b: body}
	lr, ls := d.u32(), d.u32()
	return int(lr), int(ls), d.end()
}
