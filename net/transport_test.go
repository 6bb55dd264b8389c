package net

import (
	"testing"

	"github.com/gofi-dev/fi/transport"
)

func TestExchange_EagerAndRendezvousArriveIntact(t *testing.T) {
	a := listen(t, Config{})
	b := listen(t, Config{})
	as, bs := newSink(), newSink()
	p, c := a.Resolve(b.Name())
	if c != transport.OK {
		t.Fatalf("Resolve: %d", c)
	}
	sizes := []int{0, 1, 8, 4096, defaultMaxEager, defaultMaxEager + 1, 100 << 10, 1 << 20, 3<<20 + 7}
	msgs := make([][]byte, len(sizes))
	for i, n := range sizes {
		msgs[i] = pattern(n, byte(i))
		h := &transport.Header{Kind: transport.KindTagged, Flags: transport.FlagRemoteData, Tag: uint64(i), Data: uint64(1000 + i), Len: uint64(n)}
		done := sendAll(t, a, as, b, bs, p, h, msgs[i], transport.Op(i+1))
		if n > defaultMaxEager && done {
			t.Fatalf("rendezvous send of %d bytes completed at once", n)
		}
		if done {
			as.sendDone[transport.Op(i+1)] = transport.OK
		}
	}
	pollUntil(t, "arrivals", func() bool { return len(bs.arrivals) == len(sizes) }, b, bs, a, as)
	for i, ar := range bs.arrivals {
		if ar.hdr.Tag != uint64(i) || ar.hdr.Data != uint64(1000+i) || ar.hdr.Kind != transport.KindTagged || ar.hdr.Flags != transport.FlagRemoteData {
			t.Fatalf("arrival %d: header %+v out of order or altered", i, ar.hdr)
		}
		if got := b.PeerAddr(ar.peer); string(got) != string(a.Name()) {
			t.Fatalf("arrival %d: PeerAddr %x, want %x", i, got, a.Name())
		}
		checkArrival(t, b, bs, as, a, ar, msgs[i], transport.Op(100+i))
	}
	pollUntil(t, "SendDone", func() bool { return len(as.sendDone) == len(sizes) }, a, as, b, bs)
	for op, c := range as.sendDone {
		if c != transport.OK {
			t.Fatalf("SendDone(%d) = %d", op, c)
		}
	}
}
