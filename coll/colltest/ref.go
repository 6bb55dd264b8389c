package colltest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gofi-dev/fi/dtype"
)

// The serial reference: elements decoded to int64 / float64 / complex128,
// combined in rank order, encoded back. Test inputs are small integers,
// so every order of combination gives the same exact result.

type elem struct {
	i    int64
	f    float64
	c    complex128
	bits uint64 // raw bits, for movable-only types
}

func decode(t dtype.Type, b []byte) elem {
	switch t {
	case dtype.Int8:
		return elem{i: int64(int8(b[0]))}
	case dtype.Uint8:
		return elem{i: int64(b[0])}
	case dtype.Int16:
		return elem{i: int64(int16(binary.LittleEndian.Uint16(b)))}
	case dtype.Uint16:
		return elem{i: int64(binary.LittleEndian.Uint16(b))}
	case dtype.Int32:
		return elem{i: int64(int32(binary.LittleEndian.Uint32(b)))}
	case dtype.Uint32:
		return elem{i: int64(binary.LittleEndian.Uint32(b))}
	case dtype.Int64, dtype.Uint64:
		return elem{i: int64(binary.LittleEndian.Uint64(b))}
	case dtype.Float:
		return elem{f: float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))}
	case dtype.Double:
		return elem{f: math.Float64frombits(binary.LittleEndian.Uint64(b))}
	case dtype.Float16:
		return elem{f: float64(halfToFloatRef(binary.LittleEndian.Uint16(b)))}
	case dtype.BFloat16:
		return elem{f: float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16))}
	case dtype.FloatComplex:
		re := math.Float32frombits(binary.LittleEndian.Uint32(b))
		im := math.Float32frombits(binary.LittleEndian.Uint32(b[4:]))
		return elem{c: complex(float64(re), float64(im))}
	case dtype.DoubleComplex:
		re := math.Float64frombits(binary.LittleEndian.Uint64(b))
		im := math.Float64frombits(binary.LittleEndian.Uint64(b[8:]))
		return elem{c: complex(re, im)}
	}
	panic("decode " + t.Name())
}

func encode(t dtype.Type, b []byte, e elem) {
	switch t {
	case dtype.Int8, dtype.Uint8:
		b[0] = byte(e.i)
	case dtype.Int16, dtype.Uint16:
		binary.LittleEndian.PutUint16(b, uint16(e.i))
	case dtype.Int32, dtype.Uint32:
		binary.LittleEndian.PutUint32(b, uint32(e.i))
	case dtype.Int64, dtype.Uint64:
		binary.LittleEndian.PutUint64(b, uint64(e.i))
	case dtype.Float:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(e.f)))
	case dtype.Double:
		binary.LittleEndian.PutUint64(b, math.Float64bits(e.f))
	case dtype.Float16:
		binary.LittleEndian.PutUint16(b, floatToHalfRef(e.f))
	case dtype.BFloat16:
		binary.LittleEndian.PutUint16(b, floatToBF16Ref(e.f))
	case dtype.FloatComplex:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(real(e.c))))
		binary.LittleEndian.PutUint32(b[4:], math.Float32bits(float32(imag(e.c))))
	case dtype.DoubleComplex:
		binary.LittleEndian.PutUint64(b, math.Float64bits(real(e.c)))
		binary.LittleEndian.PutUint64(b[8:], math.Float64bits(imag(e.c)))
	default:
		panic("encode " + t.Name())
	}
}

func unsigned(t dtype.Type) bool {
	return t == dtype.Uint8 || t == dtype.Uint16 || t == dtype.Uint32 || t == dtype.Uint64
}

func b01(v bool) int64 {
	if v {
		return 1
	}
	return 0
}

func combine(t dtype.Type, op dtype.Op, x, y elem) elem {
	switch {
	case t.IsInteger():
		a, b := x.i, y.i
		less := a < b
		if unsigned(t) {
			less = uint64(a) < uint64(b)
		}
		switch op {
		case dtype.Min:
			if less {
				return x
			}
			return y
		case dtype.Max:
			if less {
				return y
			}
			return x
		case dtype.Sum:
			return elem{i: a + b}
		case dtype.Prod:
			return elem{i: a * b}
		case dtype.LOr:
			return elem{i: b01(a != 0 || b != 0)}
		case dtype.LAnd:
			return elem{i: b01(a != 0 && b != 0)}
		case dtype.LXor:
			return elem{i: b01((a != 0) != (b != 0))}
		case dtype.BOr:
			return elem{i: a | b}
		case dtype.BAnd:
			return elem{i: a & b}
		case dtype.BXor:
			return elem{i: a ^ b}
		}
	case t.IsComplex():
		switch op {
		case dtype.Sum:
			return elem{c: x.c + y.c}
		case dtype.Prod:
			return elem{c: x.c * y.c}
		}
	default:
		switch op {
		case dtype.Min:
			return elem{f: math.Min(x.f, y.f)}
		case dtype.Max:
			return elem{f: math.Max(x.f, y.f)}
		case dtype.Sum:
			return elem{f: x.f + y.f}
		case dtype.Prod:
			return elem{f: x.f * y.f}
		}
	}
	panic("combine")
}

// refReduce reduces inputs[r] (count elements each) over the ranks.
func refReduce(t dtype.Type, op dtype.Op, inputs [][]byte, count int) []byte {
	es := t.Size()
	out := make([]byte, count*es)
	for i := 0; i < count; i++ {
		acc := decode(t, inputs[0][i*es:])
		for r := 1; r < len(inputs); r++ {
			acc = combine(t, op, acc, decode(t, inputs[r][i*es:]))
		}
		encode(t, out[i*es:], acc)
	}
	return out
}

// gen fills count elements of small integer values (exact in every
// datatype and every order of combination; products stay small).
func gen(rng *rand.Rand, t dtype.Type, op dtype.Op, count int) []byte {
	es := t.Size()
	b := make([]byte, count*es)
	for i := 0; i < count; i++ {
		v := int64(rng.IntN(17) - 8)
		if op == dtype.Prod {
			v = int64(rng.IntN(3) - 1) // -1, 0, 1: products stay exact
			if rng.IntN(4) == 0 {
				v = 2
			}
		}
		if unsigned(t) && v < 0 && op != dtype.Sum && op != dtype.Prod {
			v = -v
		}
		switch {
		case t.IsInteger():
			encode(t, b[i*es:], elem{i: v})
		case t.IsComplex():
			encode(t, b[i*es:], elem{c: complex(float64(v), float64(rng.IntN(5)-2))})
		case t.IsFloat() && t != dtype.LongDouble:
			encode(t, b[i*es:], elem{f: float64(v)})
		default:
			for k := 0; k < es; k++ {
				b[i*es+k] = byte(rng.Uint32())
			}
		}
	}
	return b
}

// Case is one collective operation of a test, the same on every rank.
type Case struct {
	Coll  dtype.CollOp
	Type  dtype.Type
	Op    dtype.Op
	Count int
	Root  int
	Ranks int
	Seed  uint64
}

// Input returns rank r's input buffer for c: deterministic in (c, r), so
// every process of a test can compute every rank's input. Broadcast's
// input is the root's buffer (other ranks pass a buffer of the same size).
func (c Case) Input(r int) []byte {
	rng := rand.New(rand.NewPCG(c.Seed, uint64(r)*7919+1))
	n := c.Count
	switch c.Coll {
	case dtype.ReduceScatter, dtype.Alltoall, dtype.Scatter:
		n *= c.Ranks
	case dtype.Barrier:
		return nil
	}
	return gen(rng, c.Type, c.Op, n)
}

// ResultLen is the bytes of the result buffer rank r passes.
func (c Case) ResultLen(r int) int {
	bs := c.Count * c.Type.Size()
	switch c.Coll {
	case dtype.Allgather, dtype.Alltoall:
		return bs * c.Ranks
	case dtype.Gather:
		if r == c.Root {
			return bs * c.Ranks
		}
		return 0
	case dtype.Reduce:
		if r == c.Root {
			return bs
		}
		return 0
	case dtype.Allreduce, dtype.ReduceScatter, dtype.Scatter:
		return bs
	}
	return 0
}

// Want returns what rank r must see: Broadcast's buffer, other
// collectives' result; nil when the rank's output is not defined.
func (c Case) Want(r int) []byte { return c.WantFrom(c.Inputs(), r) }

// Inputs returns every rank's input.
func (c Case) Inputs() [][]byte {
	in := make([][]byte, c.Ranks)
	for q := range in {
		in[q] = c.Input(q)
	}
	return in
}

// WantFrom is Want given Inputs() (computed once for all ranks).
func (c Case) WantFrom(in [][]byte, r int) []byte {
	n := c.Ranks
	bs := c.Count * c.Type.Size()
	switch c.Coll {
	case dtype.Broadcast:
		return in[c.Root]
	case dtype.Allreduce:
		return refReduce(c.Type, c.Op, in, c.Count)
	case dtype.Reduce:
		if r != c.Root {
			return nil
		}
		return refReduce(c.Type, c.Op, in, c.Count)
	case dtype.ReduceScatter:
		blocks := make([][]byte, n)
		for q := range blocks {
			blocks[q] = in[q][r*bs : (r+1)*bs]
		}
		return refReduce(c.Type, c.Op, blocks, c.Count)
	case dtype.Allgather:
		return bytes.Join(in, nil)
	case dtype.Gather:
		if r != c.Root {
			return nil
		}
		return bytes.Join(in, nil)
	case dtype.Alltoall:
		var out []byte
		for q := 0; q < n; q++ {
			out = append(out, in[q][r*bs:(r+1)*bs]...)
		}
		return out
	case dtype.Scatter:
		return in[c.Root][r*bs : (r+1)*bs]
	}
	return nil
}

// Diff returns the first element where got differs from want, or -1.
// Reduced floating-point values compare as numbers (-0 equals +0: the
// sign of a zero product depends on the order of combination); the rest
// compares bit for bit.
func (c Case) Diff(want, got []byte) int {
	if len(want) != len(got) {
		return 0
	}
	t := c.Type
	es := t.Size()
	numeric := (t.IsFloat() || t.IsComplex()) && t != dtype.LongDouble &&
		(c.Coll == dtype.Allreduce || c.Coll == dtype.Reduce || c.Coll == dtype.ReduceScatter)
	for i := 0; i+es <= len(want); i += es {
		w, g := want[i:i+es], got[i:i+es]
		if numeric {
			if decode(t, w) != decode(t, g) {
				return i / es
			}
		} else if !bytes.Equal(w, g) {
			return i / es
		}
	}
	return -1
}

func (c Case) String() string {
	return fmt.Sprintf("%s %s %s count %d root %d ranks %d", c.Coll.Name(), c.Type.Name(), c.Op.Name(), c.Count, c.Root, c.Ranks)
}

// Reducible mirrors the pairs the collectives must support (issue 17 and
// fi_collective(3)); the tests check coll.Reducible against it.
func Reducible(t dtype.Type, op dtype.Op) bool {
	switch {
	case t >= dtype.Int8 && t <= dtype.Uint64:
		return op >= dtype.Min && op <= dtype.BXor
	case t == dtype.Float || t == dtype.Double:
		return op >= dtype.Min && op <= dtype.Prod
	case t == dtype.FloatComplex || t == dtype.DoubleComplex:
		return op == dtype.Sum || op == dtype.Prod
	case t == dtype.Float16 || t == dtype.BFloat16:
		return op == dtype.Min || op == dtype.Max || op == dtype.Sum
	}
	return false
}

// Pairs returns every reducible (datatype, op) pair.
func Pairs() [][2]int32 {
	var out [][2]int32
	for t := dtype.Int8; t <= dtype.Float8E5M2; t++ {
		for op := dtype.Min; op <= dtype.BXor; op++ {
			if Reducible(t, op) {
				out = append(out, [2]int32{int32(t), int32(op)})
			}
		}
	}
	return out
}
