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
	runEndpointTable(t)
}
