package kernel

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/gofi-dev/fi/dtype"
)

// The only file that applies operations to target memory. Exec has
// checked lengths and alignment; every element pointer below lies inside
// mem.

// execInt runs integer operations: the ones the processor does in one
// instruction on 4- and 8-byte elements (add, and, or, swap, load) use
// it, everything else a compare-and-swap loop.
func execInt[T integer](op dtype.Op, mem, src, cmp, res []byte) {
	var zero T
	sz := int(unsafe.Sizeof(zero))
	if sz < 4 || !native(op) {
		execCAS[T, intFam[T]](op, mem, src, cmp, res)
		return
	}
	for i := 0; i+sz <= len(mem); i += sz {
		p := unsafe.Pointer(&mem[i])
		var s uint64
		if op != dtype.AtomicRead {
			s = uint64(get[T](src[i:]))
		}
		var old uint64
		if sz == 8 {
			w := (*atomic.Uint64)(p)
			switch op {
			case dtype.Sum:
				old = w.Add(s) - s
			case dtype.BAnd:
				old = w.And(s)
			case dtype.BOr:
				old = w.Or(s)
			case dtype.AtomicWrite:
				old = w.Swap(s)
			case dtype.AtomicRead:
				old = w.Load()
			}
		} else {
			w := (*atomic.Uint32)(p)
			s32 := uint32(s)
			switch op {
			case dtype.Sum:
				old = uint64(w.Add(s32) - s32)
			case dtype.BAnd:
				old = uint64(w.And(s32))
			case dtype.BOr:
				old = uint64(w.Or(s32))
			case dtype.AtomicWrite:
				old = uint64(w.Swap(s32))
			case dtype.AtomicRead:
				old = uint64(w.Load())
			}
		}
		if res != nil {
			put(res[i:], T(old))
		}
	}
}

// exec8 is Exec for one Int64 or Uint64 element and an operation whose
// result does not depend on the sign: the processor's add, and, or,
// swap and load, and a compare-and-swap loop for BXor, CSwap, CSwapNE and
// MSwap. That is the remote counter's and the remote lock's operation,
// and the generic path (dictionary calls, operands copied through
// memmove) cost it about 300 instructions where this takes about 30.
// It reports false, touching nothing, for anything else (other
// operations, several elements, short operands, misaligned mem), which
// Exec then checks and runs generically.
func exec8(op dtype.Op, mem, src, cmp, res []byte) bool {
	if len(mem) != 8 || uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%8 != 0 || res != nil && len(res) < 8 {
		return false
	}
	w := (*atomic.Uint64)(unsafe.Pointer(unsafe.SliceData(mem)))
	var old uint64
	if op == dtype.AtomicRead {
		old = w.Load()
	} else {
		if len(src) < 8 {
			return false
		}
		s := binary.NativeEndian.Uint64(src)
		switch op {
		case dtype.Sum:
			old = w.Add(s) - s
		case dtype.BAnd:
			old = w.And(s)
		case dtype.BOr:
			old = w.Or(s)
		case dtype.AtomicWrite:
			old = w.Swap(s)
		case dtype.BXor, dtype.CSwap, dtype.CSwapNE, dtype.MSwap:
			var c uint64
			if op != dtype.BXor {
				if len(cmp) < 8 {
					return false
				}
				c = binary.NativeEndian.Uint64(cmp)
			}
		cas:
			for {
				old = w.Load()
				var v uint64
				switch op {
				case dtype.BXor:
					v = old ^ s
				case dtype.MSwap:
					v = s&c | old&^c
				default:
					if (old == c) != (op == dtype.CSwap) {
						break cas // the comparison fails: nothing written
					}
					v = s
				}
				if w.CompareAndSwap(old, v) {
					break cas
				}
			}
		default:
			return false
		}
	}
	if res != nil {
		binary.NativeEndian.PutUint64(res, old)
	}
	return true
}

func native(op dtype.Op) bool {
	switch op {
	case dtype.Sum, dtype.BAnd, dtype.BOr, dtype.AtomicWrite, dtype.AtomicRead:
		return true
	}
	return false
}

// execCAS runs an operation element by element as a compare-and-swap
// loop on the element's 8-byte word, its 4-byte word, or (1- and 2-byte
// elements) the aligned 4-byte word holding it.
func execCAS[T elem, F family[T]](op dtype.Op, mem, src, cmp, res []byte) {
	var zero T
	sz := int(unsafe.Sizeof(zero))
	for i := 0; i+sz <= len(mem); i += sz {
		var s, c T
		if op != dtype.AtomicRead {
			s = get[T](src[i:])
		}
		if cmp != nil {
			c = get[T](cmp[i:])
		}
		old := rmw[T, F](unsafe.Pointer(&mem[i]), op, s, c)
		if res != nil {
			put(res[i:], old)
		}
	}
}

// rmw applies op to the element at p atomically and returns its old
// value. The element is read out of a copy of the word's bytes and the new
// value written into another copy, so the byte order of the host does not
// matter.
func rmw[T elem, F family[T]](p unsafe.Pointer, op dtype.Op, s, c T) T {
	var f F
	switch unsafe.Sizeof(s) {
	case 8:
		w := (*atomic.Uint64)(p)
		for {
			o := w.Load()
			d := *(*T)(unsafe.Pointer(&o))
			if op == dtype.AtomicRead {
				return d
			}
			v, ok := f.apply(op, d, s, c)
			if !ok || w.CompareAndSwap(o, *(*uint64)(unsafe.Pointer(&v))) {
				return d
			}
		}
	case 4:
		w := (*atomic.Uint32)(p)
		for {
			o := w.Load()
			d := *(*T)(unsafe.Pointer(&o))
			if op == dtype.AtomicRead {
				return d
			}
			v, ok := f.apply(op, d, s, c)
			if !ok || w.CompareAndSwap(o, *(*uint32)(unsafe.Pointer(&v))) {
				return d
			}
		}
	default: // 1 or 2 bytes: the aligned word around the element
		off := uintptr(p) & 3
		w := (*atomic.Uint32)(unsafe.Add(p, -int(off)))
		for {
			o := w.Load()
			b := *(*[4]byte)(unsafe.Pointer(&o))
			d := *(*T)(unsafe.Pointer(&b[off]))
			if op == dtype.AtomicRead {
				return d
			}
			v, ok := f.apply(op, d, s, c)
			if !ok {
				return d
			}
			*(*T)(unsafe.Pointer(&b[off])) = v
			if w.CompareAndSwap(o, *(*uint32)(unsafe.Pointer(&b))) {
				return d
			}
		}
	}
}

// execPlain runs an operation on 16-byte elements with plain loads and
// stores: atomic only under a lock every executor takes (package doc).
func execPlain[T any, F family[T]](op dtype.Op, mem, src, cmp, res []byte) {
	var f F
	var zero T
	sz := int(unsafe.Sizeof(zero))
	for i := 0; i+sz <= len(mem); i += sz {
		var s, c T
		if op != dtype.AtomicRead {
			s = get[T](src[i:])
		}
		if cmp != nil {
			c = get[T](cmp[i:])
		}
		d := get[T](mem[i:])
		if op != dtype.AtomicRead {
			if v, ok := f.apply(op, d, s, c); ok {
				put(mem[i:], v)
			}
		}
		if res != nil {
			put(res[i:], d)
		}
	}
}

func ptrOf[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }
