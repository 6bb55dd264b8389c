package fi

import (
	"errors"
	"os"
	"strings"

	"github.com/gofi-dev/fi/shm"
	"github.com/gofi-dev/fi/transport"
)

// openTransport creates the endpoint's shared-memory region. A source
// address from the info (fi_shm://<name>) names the region; a name without
// the per-user prefix gets it, so the endpoint's Name may differ from the
// requested one.
func (d *shmDomain) openTransport(info *Info) (transport.Transport, error) {
	const op = "Domain.OpenEndpoint"
	cfg := shm.TransportConfig{}
	if len(info.SrcAddr) > 0 {
		a, err := shmParseAddr(info.SrcAddr)
		if err != nil {
			return nil, opErr(op, ErrInval, "source address %q: %v", info.SrcAddr, err)
		}
		name := strings.TrimPrefix(a, shmAddrPrefix+"://")
		if shm.ValidName(name) != nil {
			name = shm.Prefix() + name
		}
		if err := shm.ValidName(name); err != nil {
			return nil, opErr(op, ErrInval, "source address %q: %v", info.SrcAddr, err)
		}
		cfg.Name = name
	}
	if inj := info.TxAttr.InjectSize; inj > shm.DefaultMaxEager {
		cfg.MaxEager = inj
	}
	tr, err := shm.NewTransport(cfg)
	switch {
	case err == nil:
		return tr, nil
	case errors.Is(err, os.ErrExist):
		return nil, opErr(op, ErrAddrInUse, "shm: %v", err)
	case errors.Is(err, shm.ErrSize):
		return nil, opErr(op, ErrInval, "%v", err)
	case errors.Is(err, shm.ErrNoSpace):
		return nil, opErr(op, ErrNoSpc, "%v", err)
	}
	return nil, opErr(op, ErrIO, "shm: %v", err)
}
