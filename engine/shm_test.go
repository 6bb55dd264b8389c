package engine

import (
	"testing"

	"github.com/gofi-dev/fi/shm"
	"github.com/gofi-dev/fi/transport"
)

// TestEndpointOverShm runs the endpoint table over the real shm transport:
// two regions in /dev/shm, rings, doorbells and (where the kernel allows)
// single copy.
func TestEndpointOverShm(t *testing.T) {
	for _, cma := range []bool{true, false} {
		name := "cma"
		if !cma {
			name = "segments"
		}
		t.Run(name, func(t *testing.T) {
			old := makeTransports
			defer func() { makeTransports = old }()
			makeTransports = func(t *testing.T, maxEager int) (*hub, transport.Transport, transport.Transport) {
				mk := func() transport.Transport {
					tr, err := shm.NewTransport(shm.TransportConfig{MaxEager: maxEager, NoCMA: !cma, CMAMin: 1})
					if err != nil {
						t.Fatal(err)
					}
					return tr
				}
				return nil, mk(), mk()
			}
			runEndpointTable(t)
		})
	}
}
