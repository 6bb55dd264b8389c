package rma

import (
	"bytes"
	"testing"
)

// FuzzTargetAtomic feeds arbitrary request bytes (header, then payload)
// to the target's checks and atomic executor, as the tcp event loop does,
// against a table holding a read-write, a read-only and a write-only
// region inside guard bytes: nothing panics, guard bytes never change, a
// request Validate refuses changes nothing, and a request it accepts runs.
func FuzzTargetAtomic(f *testing.F) {
	seeds := []Request{
		{Kind: KindAtomic, Datatype: 7, Op: 2, NIOV: 1, Payload: 8, IOV: [MaxIOV]IOV{{Addr: 1000, Len: 8, Key: 1}}},
		{Kind: KindFetch, Datatype: 7, Op: opAtomicRead, NIOV: 2, IOV: [MaxIOV]IOV{{Addr: 1008, Len: 8, Key: 1}, {Len: 16, Key: 2}}},
		{Kind: KindCompare, Datatype: 11, Op: 12, NIOV: 1, Payload: 32, IOV: [MaxIOV]IOV{{Addr: 1016, Len: 16, Key: 1}}},
		{Kind: KindCompare, Datatype: 0, Op: 18, NIOV: 1, Payload: 6, IOV: [MaxIOV]IOV{{Addr: 1001, Len: 3, Key: 1}}},
		{Kind: KindAtomic, Datatype: 12, Op: 2, NIOV: 1, Payload: 16, IOV: [MaxIOV]IOV{{Addr: 1000, Len: 16, Key: 1}}},
		{Kind: KindAtomic, Datatype: 4, Op: 2, NIOV: 1, Payload: 4, IOV: [MaxIOV]IOV{{Addr: 2, Len: 4, Key: 3}}},
	}
	for _, r := range seeds {
		b := make([]byte, MaxReqHeader+64)
		n := r.Encode(b)
		for i := n; i < len(b); i++ {
			b[i] = byte(i * 7)
		}
		f.Add(b[:n+int(min(r.Payload, 64))])
	}
	tb := newTestTable(f, 4, 0)
	const guard, size = 64, 64
	mem := make([]byte, 3*(size+2*guard))
	regions := [3][]byte{}
	access := [3]uint64{AccessRemoteRead | AccessRemoteWrite, AccessRemoteRead, AccessRemoteWrite}
	base := [3]uint64{1000, 0, 0}
	for i := range regions {
		o := i*(size+2*guard) + guard
		regions[i] = mem[o : o+size]
		if _, _, err := tb.Register(Region{Mem: regions[i], Key: uint64(i + 1), Base: base[i], Access: access[i]}, false, nil); err != nil {
			f.Fatal(err)
		}
	}
	x := &Target{Table: tb}
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := range mem {
			mem[i] = byte(i)
		}
		before := append([]byte(nil), mem...)
		var r Request
		n, err := DecodeRequest(b, &r)
		if err != nil || !r.Kind.IsAtomic() || r.Payload > 2*MaxAtomic {
			return // the tcp target refuses larger operand payloads itself
		}
		payload := b[n:]
		if uint64(len(payload)) < r.Payload {
			payload = append(append([]byte(nil), payload...), make([]byte, r.Payload-uint64(len(payload)))...)
		}
		payload = payload[:r.Payload]
		c := x.Validate(&r)
		if c == OK {
			var res []byte
			if r.Kind != KindAtomic {
				res = make([]byte, r.Total())
			}
			c = x.Atomic(&r, payload, res)
			if c != OK {
				t.Fatalf("validated request failed with %d", c)
			}
		}
		for i := 0; i < 3; i++ {
			o := i * (size + 2*guard)
			if !bytes.Equal(mem[o:o+guard], before[o:o+guard]) || !bytes.Equal(mem[o+guard+size:o+2*guard+size], before[o+guard+size:o+2*guard+size]) {
				t.Fatalf("guard bytes of region %d changed", i)
			}
		}
		if c != OK && !bytes.Equal(mem, before) {
			t.Fatalf("refused request (%d) changed memory", c)
		}
		if c == OK && r.Kind == KindFetch && r.Op == opAtomicRead && !bytes.Equal(mem, before) {
			t.Fatal("atomic read changed memory")
		}
	})
}

// TestValidate_WireRefusals: atomic requests as a peer may send them,
// decoded from the wire, with values the target must refuse: each gets
// its status (EOpNotSupp for datatypes and operations it does not compute,
// LongDouble among them; EInval for counts and alignment; EAccess for keys
// and rights) from Validate, which every executor (tcp's event loop, shm's
// executor and quick slots) runs first, and no byte of the region changes.
func TestValidate_WireRefusals(t *testing.T) {
	tb := newTestTable(t, 4, 0)
	mem := make([]byte, 64+8) // region at an 8-aligned offset
	off := int(-Addr(mem) & 7)
	region := mem[off : off+64]
	if _, _, err := tb.Register(Region{Mem: region, Key: 1, Access: AccessRemoteRead | AccessRemoteWrite}, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Register(Region{Mem: make([]byte, 64), Key: 2, Access: AccessRemoteRead}, false, nil); err != nil {
		t.Fatal(err)
	}
	x := &Target{Table: tb}
	one := func(k Kind, dt, op uint8, addr, n, key uint64) Request {
		pay := n // the payload the wire format requires of the kind
		if k == KindCompare {
			pay = 2 * n
		}
		return Request{Kind: k, Datatype: dt, Op: op, NIOV: 1, Payload: pay, IOV: [MaxIOV]IOV{{Addr: addr, Len: n, Key: key}}}
	}
	cases := []struct {
		name string
		r    Request
		want Code
	}{
		{"long double", one(KindAtomic, 12, 2, 0, 16, 1), EOpNotSupp},
		{"long double complex", one(KindFetch, 13, 2, 0, 32, 1), EOpNotSupp},
		{"unknown datatype", one(KindAtomic, 99, 2, 0, 8, 1), EOpNotSupp},
		{"datatype 255", one(KindAtomic, 255, 2, 0, 8, 1), EOpNotSupp},
		{"unknown op", one(KindAtomic, 7, 19, 0, 8, 1), EOpNotSupp},
		{"op 255", one(KindFetch, 7, 255, 0, 8, 1), EOpNotSupp},
		{"atomic read of long double", Request{Kind: KindFetch, Datatype: 12, Op: opAtomicRead, NIOV: 1, IOV: [MaxIOV]IOV{{Len: 16, Key: 1}}}, EOpNotSupp},
		{"compare op in a base atomic", one(KindAtomic, 7, 12, 0, 8, 1), EOpNotSupp},
		{"atomic read in a base atomic", one(KindAtomic, 7, opAtomicRead, 0, 8, 1), EOpNotSupp},
		{"sum in a compare atomic", one(KindCompare, 7, 2, 0, 8, 1), EOpNotSupp},
		{"bitwise on double", one(KindAtomic, 9, 7, 0, 8, 1), EOpNotSupp},
		{"no elements", one(KindAtomic, 7, 2, 0, 0, 1), EInval},
		{"partial element", one(KindAtomic, 7, 2, 0, 12, 1), EInval},
		{"above MaxAtomic", one(KindAtomic, 0, 2, 0, MaxAtomic+1, 1), EInval},
		{"misaligned", one(KindAtomic, 7, 2, 4, 8, 1), EInval},
		{"past the end", one(KindAtomic, 7, 2, 56, 16, 1), EInval},
		{"unknown key", one(KindAtomic, 7, 2, 0, 8, 9), EAccess},
		{"no RemoteWrite", one(KindAtomic, 7, 2, 0, 8, 2), EAccess},
	}
	for i := range region {
		region[i] = byte(i)
	}
	before := append([]byte(nil), region...)
	for _, c := range cases {
		b := make([]byte, MaxReqHeader)
		var r Request
		if _, err := DecodeRequest(b[:c.r.Encode(b)], &r); err != nil {
			t.Fatalf("%s: decode: %v", c.name, err)
		}
		if got := x.Validate(&r); got != c.want {
			t.Errorf("%s: Validate = %d, want %d", c.name, got, c.want)
		}
	}
	if !bytes.Equal(region, before) {
		t.Fatal("a refused request changed the region")
	}
	// The same request with valid values passes (the cases differ from it
	// in the one value they name).
	ok := one(KindAtomic, 7, 2, 0, 8, 1)
	if got := x.Validate(&ok); got != OK {
		t.Fatalf("valid request: %d", got)
	}
}
