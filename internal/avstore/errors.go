package avstore

import "fmt"

// Error is a failure of this package: the operation users called (such
// as "Domain.OpenAV"), a libfabric error number and a detail for people.
// The root package turns it into an *fi.OpError with the same three.
type Error struct {
	Op     string
	Code   int
	Detail string
}

func (e *Error) Error() string { return e.Op + ": " + e.Detail }

// Error numbers this package reports (libfabric's, rdma/fi_errno.h).
const (
	CodePerm   = 1  // FI_EPERM
	CodeNoEnt  = 2  // FI_ENOENT
	CodeIO     = 5  // FI_EIO
	CodeAgain  = 11 // FI_EAGAIN
	CodeNoMem  = 12 // FI_ENOMEM
	CodeAccess = 13 // FI_EACCES
	CodeBusy   = 16 // FI_EBUSY
	CodeInval  = 22 // FI_EINVAL
	CodeNoSpc  = 28 // FI_ENOSPC
)

// ErrFull is returned for an address that does not fit the AV.
var ErrFull error = &Error{Op: "AV.Insert", Code: CodeNoSpc, Detail: "AV is full"}

func errf(op string, code int, format string, args ...any) error {
	return &Error{Op: op, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Format is an address format, numbered as libfabric's enum (and so as
// fi.AddrFormat): the four an AV stores.
type Format uint32

// Formats an AV stores.
const (
	FormatAny Format = 1 // FI_SOCKADDR: sockaddr_in or sockaddr_in6
	FormatIn  Format = 2 // FI_SOCKADDR_IN
	FormatIn6 Format = 3 // FI_SOCKADDR_IN6
	FormatStr Format = 9 // FI_ADDR_STR: strings of up to 248 bytes in a named AV
)

// String spells the format as fi_tostr does.
func (f Format) String() string {
	switch f {
	case FormatAny:
		return "FI_SOCKADDR"
	case FormatIn:
		return "FI_SOCKADDR_IN"
	case FormatIn6:
		return "FI_SOCKADDR_IN6"
	case FormatStr:
		return "FI_ADDR_STR"
	}
	return fmt.Sprintf("format %d", uint32(f))
}
