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
