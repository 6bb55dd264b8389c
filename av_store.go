package fi

import (
	"errors"

	"github.com/gofi-dev/fi/internal/avstore"
)

// An AV keeps its entries in internal/avstore: a Table for a private AV,
// a Named file for a named one.
type (
	avTable = avstore.Table
	namedAV = avstore.Named
)

const (
	// maxSockaddrLen is the largest fixed-size address (sockaddr_in6).
	maxSockaddrLen = avstore.MaxAddrLen
	// avIndexLimit bounds AV indices.
	avIndexLimit = avstore.IndexLimit
)

func newAVTable(format AddrFormat, hint int) *avTable {
	return avstore.NewTable(avstore.Format(format), hint)
}

// openNamedAV opens or creates the named AV; a.MapAddr is set to the AV's.
func openNamedAV(name string, format AddrFormat, a *AVAttr) (*namedAV, error) {
	o := avstore.NamedOpts{ReadOnly: a.Flags&Read != 0, Symmetric: a.Flags&Symmetric != 0, Count: a.Count, MapAddr: a.MapAddr}
	n, err := avstore.OpenNamed(name, avstore.Format(format), &o)
	if err != nil {
		return nil, storeErr(err)
	}
	a.MapAddr = o.MapAddr
	return n, nil
}

// storeErr turns an avstore error into the *OpError users see.
func storeErr(err error) error {
	var e *avstore.Error
	if errors.As(err, &e) {
		if err == avstore.ErrFull {
			return errAVFull
		}
		return &OpError{Op: e.Op, Errno: Errno(e.Code), Detail: e.Detail}
	}
	return err
}
