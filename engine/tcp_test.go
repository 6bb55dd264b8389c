package engine

import (
	"testing"
	"time"

	fnet "github.com/gofi-dev/fi/net"
	"github.com/gofi-dev/fi/transport"
)

// TestEndpointOverTCP runs the endpoint table over the real tcp transport
// (gnet event loops on loopback sockets).
func TestEndpointOverTCP(t *testing.T) {
	old, oldIdle := makeTransports, drainIdle
	defer func() { makeTransports, drainIdle, warmUp = old, oldIdle, false }()
	drainIdle, warmUp = 200*time.Millisecond, true
	makeTransports = func(t *testing.T, maxEager int) (*hub, transport.Transport, transport.Transport) {
		mk := func() transport.Transport {
			cfg := fnet.Config{Addr: "127.0.0.1:0"}
			if maxEager >= 16 {
				cfg.MaxEager = maxEager
			}
			tr, err := fnet.Listen(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}
		return nil, mk(), mk()
	}
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"Delivery", TestEndpoint_DeliveryPostedOrUnexpected},
		{"Truncation", TestEndpoint_TruncationReportsOverflow},
		{"TagMatching", TestEndpoint_TagMatchingWithIgnoreAndOrder},
		{"DirectedRecv", TestEndpoint_DirectedRecvHonoursSource},
		{"SourceOff", TestEndpoint_SourceOffReportsUnknown},
		{"RemoteCQData", TestEndpoint_RemoteCQData},
		{"MultiRecv", TestEndpoint_MultiRecvPacksAndReleases},
		{"PeekClaimDiscard", TestEndpoint_PeekClaimDiscard},
		{"Cancel", TestEndpoint_CancelCompletesWithECANCELED},
		{"Selective", TestEndpoint_SelectiveCompletion},
		{"BackPressure", TestEndpoint_UnexpectedBackPressureLosesNothing},
		{"Close", TestEndpoint_CloseCancelsPostedReceives},
		{"PeerGroups", TestEndpoint_PeerGroupsMustAgree},
	} {
		t.Run(tc.name, tc.f)
	}
}
