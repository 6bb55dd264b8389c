package fi

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/gofi-dev/fi/internal/tostr"
)

// Errno is a fabric error number. Its values mirror libfabric's fi_errno.h:
// the ones below 256 are the Linux errno values libfabric reuses (FI_EAGAIN
// is EAGAIN, 11), the ones from 256 up are libfabric's own (FI_ETRUNC is
// 265). Every failing gofi call returns an Errno, possibly wrapped in an
// *OpError for context, so errors.Is(err, fi.ErrNoData) always works.
//
// An Errno also matches the syscall.Errno with the same number below 256
// under errors.Is (errors.Is(fi.ErrAgain, syscall.EAGAIN) is true).
//
// Errno values are immutable and safe for concurrent use.
type Errno int

// Errno values (numbers as in libfabric's fi_errno.h on Linux). Each says
// when gofi returns it.
const (
	// ErrPerm: operation not permitted (e.g. opening a shared region owned
	// by another user).
	ErrPerm Errno = 1
	// ErrNoEnt: no such entry (a named AV or region that does not exist,
	// an address not in an AV).
	ErrNoEnt Errno = 2
	// ErrIntr: a blocking call was interrupted.
	ErrIntr Errno = 4
	// ErrIO: an I/O error from the transport.
	ErrIO Errno = 5
	// Err2Big: an argument list (vector, batch) is too long.
	Err2Big Errno = 7
	// ErrBadF: a bad descriptor or handle.
	ErrBadF Errno = 9
	// ErrAgain: try again: a queue is empty (cq.Read) or full (Send); the
	// caller progresses and retries.
	ErrAgain Errno = 11
	// ErrNoMem: memory or a fixed-size resource could not be allocated.
	ErrNoMem Errno = 12
	// ErrAccess: permission denied.
	ErrAccess Errno = 13
	// ErrFault: a bad buffer or address.
	ErrFault Errno = 14
	// ErrBusy: the object still has children open (Close of a fabric with
	// open domains, of a domain with open AVs, CQs or endpoints, of an AV
	// bound to endpoints).
	ErrBusy Errno = 16
	// ErrExist: the object already exists (creating a named AV that exists).
	ErrExist Errno = 17
	// ErrNoDev: no such device: the provider or fabric named does not exist.
	ErrNoDev Errno = 19
	// ErrInval: an invalid argument (nil attributes, a malformed address,
	// a service given together with an FI_ADDR_STR node, ...).
	ErrInval Errno = 22
	// ErrMFile: too many open files.
	ErrMFile Errno = 24
	// ErrNoSpc: no space left: an AV or table is full, or the shm
	// provider's directory (/dev/shm or GOFI_SHM_DIR) has no room for an
	// endpoint's region or a connection's ring (the error's detail names
	// the directory and the bytes needed).
	ErrNoSpc Errno = 28
	// ErrNoSys: not implemented: the requested API version is newer than
	// the library.
	ErrNoSys Errno = 38
	// ErrNoMsg: no message of the desired type (a peek found nothing).
	ErrNoMsg Errno = 42
	// ErrNoData: no data available: GetInfo found no provider matching the
	// request.
	ErrNoData Errno = 61
	// ErrOverflow: a value too large for its field.
	ErrOverflow Errno = 75
	// ErrMsgSize: a message longer than the endpoint's max_msg_size or the
	// inject size.
	ErrMsgSize Errno = 90
	// ErrNoProtoOpt: protocol option not available.
	ErrNoProtoOpt Errno = 92
	// ErrOpNotSupp: the operation is not supported by this endpoint or
	// provider (a capability that was not requested or is not provided).
	ErrOpNotSupp Errno = 95
	// ErrAddrInUse: the address is already in use.
	ErrAddrInUse Errno = 98
	// ErrAddrNotAvail: the address cannot be used (not local, not in the AV).
	ErrAddrNotAvail Errno = 99
	// ErrNetDown: the network is down.
	ErrNetDown Errno = 100
	// ErrNetUnreach: the network is unreachable.
	ErrNetUnreach Errno = 101
	// ErrConnAborted: the connection was aborted.
	ErrConnAborted Errno = 103
	// ErrConnReset: the peer reset the connection or died.
	ErrConnReset Errno = 104
	// ErrNoBufs: no buffer space available.
	ErrNoBufs Errno = 105
	// ErrIsConn: already connected.
	ErrIsConn Errno = 106
	// ErrNotConn: not connected.
	ErrNotConn Errno = 107
	// ErrShutdown: the endpoint was shut down.
	ErrShutdown Errno = 108
	// ErrTimedOut: a deadline passed (Sread timeout).
	ErrTimedOut Errno = 110
	// ErrConnRefused: the peer refused the connection.
	ErrConnRefused Errno = 111
	// ErrHostDown: the host is down.
	ErrHostDown Errno = 112
	// ErrHostUnreach: no route to host.
	ErrHostUnreach Errno = 113
	// ErrAlready: the operation is already in progress or done.
	ErrAlready Errno = 114
	// ErrInProgress: the operation is now in progress.
	ErrInProgress Errno = 115
	// ErrRemoteIO: a remote I/O error.
	ErrRemoteIO Errno = 121
	// ErrCanceled: the operation was canceled (ep.Cancel); reported in the
	// error completion.
	ErrCanceled Errno = 125
	// ErrKeyRejected: the authorization key was rejected.
	ErrKeyRejected Errno = 129

	// ErrOther: an unspecified error.
	ErrOther Errno = 256
	// ErrTooSmall: a provided buffer is too small.
	ErrTooSmall Errno = 257
	// ErrOpBadState: the operation is not permitted in the object's current
	// state (an endpoint not enabled, an object already closed).
	ErrOpBadState Errno = 258
	// ErrAvail: an error completion is available: cq.Read returns it when
	// the next entry is an error; read it with cq.ReadErr.
	ErrAvail Errno = 259
	// ErrBadFlags: flags not supported (unknown GetInfo flag bits, flags
	// that do not apply to the call).
	ErrBadFlags Errno = 260
	// ErrNoEQ: a missing or unavailable event queue.
	ErrNoEQ Errno = 261
	// ErrDomain: an invalid resource domain (objects from different
	// domains mixed).
	ErrDomain Errno = 262
	// ErrNoCQ: a missing or unavailable completion queue (an endpoint
	// enabled without the CQ it needs).
	ErrNoCQ Errno = 263
	// ErrCRC: a CRC error.
	ErrCRC Errno = 264
	// ErrTrunc: truncation: the message was longer than the receive buffer;
	// the error completion's OLen holds the overflow.
	ErrTrunc Errno = 265
	// ErrNoKey: a required key is not available.
	ErrNoKey Errno = 266
	// ErrNoAV: a missing or unavailable address vector (an endpoint
	// enabled without an AV).
	ErrNoAV Errno = 267
	// ErrOverrun: a queue has been overrun.
	ErrOverrun Errno = 268
	// ErrNoRx: the receiver is not ready: no receive buffers are available.
	ErrNoRx Errno = 269
)

// Error returns libfabric's fi_strerror text for e, such as
// "No data available". Unknown numbers read "Unknown error N".
func (e Errno) Error() string { return Strerror(int(e)) }

// Is reports whether target is the syscall.Errno with the same number, so
// an Errno below 256 also matches the corresponding system error.
func (e Errno) Is(target error) bool {
	if se, ok := target.(syscall.Errno); ok {
		return e > 0 && e < 256 && int(se) == int(e)
	}
	return false
}

// Strerror returns the text of a fabric error number, like fi_strerror(3).
// It accepts the number either positive or negated (libfabric calls return
// -FI_Exxx), so Strerror(61) and Strerror(-61) both read
// "No data available". Safe for concurrent use.
func Strerror(errnum int) string { return tostr.Strerror(errnum) }

// OpError is an Errno with context: the operation that failed and a detail
// saying why. It unwraps to its Errno, so errors.Is(err, fi.ErrNoData) and
// errors.As(err, &errno) see through it. Immutable once returned; safe for
// concurrent use.
type OpError struct {
	Op     string // the failing call, such as "GetInfo" or "Domain.Close"
	Errno  Errno  // the error number
	Detail string // why, for people; not meant to be parsed
}

// Error reads "fi: Op: errno text: detail".
func (e *OpError) Error() string {
	s := "fi: " + e.Op + ": " + e.Errno.Error()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns the Errno.
func (e *OpError) Unwrap() error { return e.Errno }

// opErr builds an *OpError. Not for hot paths: those return the bare,
// preallocated Errno values (ErrAgain, ErrAvail).
func opErr(op string, code Errno, format string, args ...any) error {
	return &OpError{Op: op, Errno: code, Detail: fmt.Sprintf(format, args...)}
}

// ErrnoOf returns the Errno carried by err (wrapped or not), or ErrOther
// when err carries none, and 0 for a nil err. Safe for concurrent use.
func ErrnoOf(err error) Errno {
	if err == nil {
		return 0
	}
	var e Errno
	if errors.As(err, &e) {
		return e
	}
	return ErrOther
}
