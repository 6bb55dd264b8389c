package rma

import (
	"errors"
	"testing"
)

func TestRequest_RoundTrip(t *testing.T) {
	r := Request{Kind: KindCompare, Datatype: 7, Op: 12, Flags: FlagMore | FlagCont, ID: 99, NIOV: 2, Payload: 32,
		IOV: [MaxIOV]IOV{{Addr: 8, Len: 8, Key: 1}, {Addr: 64, Len: 8, Key: 2}}}
	b := make([]byte, MaxReqHeader)
	n := r.Encode(b)
	if n != r.HeaderLen() {
		t.Fatalf("Encode = %d, want %d", n, r.HeaderLen())
	}
	var got Request
	m, err := DecodeRequest(b[:n], &got)
	if err != nil || m != n || got != r {
		t.Fatalf("DecodeRequest = %d, %v, %+v", m, err, got)
	}
}

func TestDecodeRequest_Refuses(t *testing.T) {
	base := Request{Kind: KindWrite, NIOV: 1, Payload: 10, IOV: [MaxIOV]IOV{{Len: 10, Key: 1}}}
	cases := []struct {
		name string
		mut  func(r *Request, b []byte)
	}{
		{"kind 0", func(r *Request, b []byte) { b[0] = 0 }},
		{"kind 6", func(r *Request, b []byte) { b[0] = 6 }},
		{"no ranges", func(r *Request, b []byte) { b[3] = 0 }},
		{"too many ranges", func(r *Request, b []byte) { b[3] = MaxIOV + 1 }},
		{"unknown flag", func(r *Request, b []byte) { b[5] = 1 }},
		{"flag 4", func(r *Request, b []byte) { b[4] = 4 }},
		{"write payload mismatch", func(r *Request, b []byte) { le.PutUint64(b[16:], 9) }},
		{"write with datatype", func(r *Request, b []byte) { b[1] = 7 }},
		{"read with payload", func(r *Request, b []byte) { b[0] = byte(KindRead) }},
		{"range too long", func(r *Request, b []byte) { le.PutUint64(b[ReqHeader+8:], MaxWrite+1) }},
		{"atomic payload mismatch", func(r *Request, b []byte) { b[0] = byte(KindCompare) }},
	}
	for _, c := range cases {
		r := base
		b := make([]byte, MaxReqHeader)
		n := r.Encode(b)
		c.mut(&r, b)
		var got Request
		if _, err := DecodeRequest(b[:n], &got); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", c.name, err)
		}
	}
	// Ranges whose sum overflows are refused, not wrapped.
	r := Request{Kind: KindRead, NIOV: 2, IOV: [MaxIOV]IOV{{Len: MaxWrite, Key: 1}, {Len: MaxWrite, Key: 1}}}
	b := make([]byte, MaxReqHeader)
	n := r.Encode(b)
	var got Request
	if _, err := DecodeRequest(b[:n], &got); !errors.Is(err, ErrMalformed) {
		t.Errorf("summed ranges beyond MaxWrite: %v", err)
	}
	if _, err := DecodeRequest(b[:n-1], &got); !errors.Is(err, ErrMalformed) {
		t.Errorf("short header: %v", err)
	}
}

func TestDecodeResponse(t *testing.T) {
	b := make([]byte, RespHeader)
	EncodeResponse(b, Response{Status: OK, ID: 5, Payload: 8})
	if r, err := DecodeResponse(b, 8); err != nil || r.ID != 5 || r.Payload != 8 {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := DecodeResponse(b, 7); !errors.Is(err, ErrMalformed) {
		t.Fatal("payload above the expected size accepted")
	}
	EncodeResponse(b, Response{Status: EAccess, ID: 5, Payload: 8})
	if _, err := DecodeResponse(b, 8); !errors.Is(err, ErrMalformed) {
		t.Fatal("error status with payload accepted")
	}
}

func FuzzDecodeRequest(f *testing.F) {
	for _, r := range []Request{
		{Kind: KindWrite, NIOV: 1, Payload: 10, IOV: [MaxIOV]IOV{{Len: 10, Key: 1}}},
		{Kind: KindRead, NIOV: 2, IOV: [MaxIOV]IOV{{Len: 10, Key: 1}, {Addr: 5, Len: 3, Key: 9}}},
		{Kind: KindRead, Flags: FlagMore | FlagCont, NIOV: 1, IOV: [MaxIOV]IOV{{Addr: 4 << 20, Len: 4 << 20, Key: 1}}},
		{Kind: KindFetch, Datatype: 7, Op: opAtomicRead, NIOV: 1, IOV: [MaxIOV]IOV{{Len: 8}}},
		{Kind: KindCompare, Datatype: 7, Op: 12, NIOV: 1, Payload: 16, IOV: [MaxIOV]IOV{{Len: 8}}},
	} {
		b := make([]byte, MaxReqHeader)
		f.Add(b[:r.Encode(b)])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Request
		n, err := DecodeRequest(b, &r)
		if err != nil {
			return
		}
		if n != r.HeaderLen() || n > len(b) {
			t.Fatalf("length %d, header %d, input %d", n, r.HeaderLen(), len(b))
		}
		// Structure holds: the payload length follows from the ranges.
		total := r.Total()
		switch r.Kind {
		case KindWrite:
			if r.Payload != total {
				t.Fatal("write payload")
			}
		case KindRead:
			if r.Payload != 0 {
				t.Fatal("read payload")
			}
		case KindCompare:
			if r.Payload != 2*total {
				t.Fatal("compare payload")
			}
		}
		// A decoded request re-encodes to the same bytes.
		out := make([]byte, MaxReqHeader)
		if m := r.Encode(out); string(out[:m]) != string(b[:n]) {
			t.Fatalf("re-encoding differs")
		}
		// Validation against an empty table refuses without panicking.
		tb := newTestTable(t, 1, 0)
		x := Target{Table: tb}
		if c := x.Validate(&r); c == OK && total > 0 {
			t.Fatal("a request validated against an empty table")
		}
	})
}

func FuzzDecodeResponse(f *testing.F) {
	b := make([]byte, RespHeader)
	EncodeResponse(b, Response{Status: OK, ID: 1, Payload: 4})
	f.Add(b, uint64(4))
	f.Fuzz(func(t *testing.T, b []byte, max uint64) {
		r, err := DecodeResponse(b, max)
		if err == nil && (r.Payload > max || r.Status != OK && r.Payload != 0) {
			t.Fatalf("%+v accepted with max %d", r, max)
		}
	})
}
