package engine

import (
	"bytes"
	"testing"

	"github.com/gofi-dev/fi/internal/pipetest"
	"github.com/gofi-dev/fi/transport"
)

// injectRec is a hub pipe that counts the sends the engine hands it
// through Send and through SendInject (transport.InjectSender).
type injectRec struct {
	*pipetest.Pipe
	sends, injects int
}

func (r *injectRec) Send(p transport.Peer, hdr *transport.Header, iov [][]byte, op transport.Op) (bool, transport.Code) {
	r.sends++
	return r.Pipe.Send(p, hdr, iov, op)
}

func (r *injectRec) SendInject(p transport.Peer, hdr *transport.Header, iov [][]byte, op transport.Op) (bool, transport.Code) {
	r.injects++
	return r.Pipe.Send(p, hdr, iov, op)
}

// TestEndpoint_InjectGoesThroughSendInject: with a transport whose Send
// may hold an eager-sized payload (shm to a far peer), an inject, whose
// caller reuses the buffer on return, goes through SendInject, which
// copies it; other sends still go through Send. Each is delivered once,
// the inject with no completion.
func TestEndpoint_InjectGoesThroughSendInject(t *testing.T) {
	old := makeTransports
	defer func() { makeTransports = old }()
	var rec *injectRec
	makeTransports = func(t *testing.T, maxEager int) (*hub, transport.Transport, transport.Transport) {
		h := newHub(maxEager)
		rec = &injectRec{Pipe: h.NewPipe("A")}
		return h, rec, h.NewPipe("B")
	}
	p := newPair(t, 64, nil)
	for i, flags := range []uint64{FlagInject, 0, FlagInject | FlagCompletion} {
		inject := flags&FlagInject != 0
		sends, injects := rec.sends, rec.injects
		payload := bytes.Repeat([]byte{byte(i + 1)}, 48)
		if c := p.a.Send(&SendArgs{Buf: payload, Dest: addrB, Kind: transport.KindTagged, Tag: uint64(i), Flags: flags}, i); c != 0 {
			t.Fatalf("send %d: %v", i, c)
		}
		if inject && (rec.injects != injects+1 || rec.sends != sends) {
			t.Fatalf("inject %d: %d SendInject, %d Send calls; want 1, 0", i, rec.injects-injects, rec.sends-sends)
		}
		if !inject && (rec.sends != sends+1 || rec.injects != injects) {
			t.Fatalf("send %d: %d Send, %d SendInject calls; want 1, 0", i, rec.sends-sends, rec.injects-injects)
		}
		got := make([]byte, 64)
		if c := p.b.Recv(&RecvArgs{Buf: got, Src: anySrc, Kind: transport.KindTagged, Tag: uint64(i)}, "r"); c != 0 {
			t.Fatalf("recv %d: %v", i, c)
		}
		ok, errs := drain(p.cb, 1)
		if len(errs) != 0 || len(ok) != 1 || !bytes.Equal(got[:ok[0].Len], payload) {
			t.Fatalf("message %d: completions %+v errors %+v, payload %v", i, ok, errs, got)
		}
		ok, errs = drain(p.ca)
		wantTx := 1
		if inject {
			wantTx = 0
		}
		if len(ok) != wantTx || len(errs) != 0 {
			t.Fatalf("send %d: sender completions %+v errors %+v, want %d", i, ok, errs, wantTx)
		}
	}
}
