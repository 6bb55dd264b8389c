package engine

import "strconv"

// Code is a libfabric errno value (positive), the engine's error currency.
// The root package converts it to fi.Errno one to one. Code values are
// comparable and allocation-free to return.
type Code int32

// Codes the engine reports; numbers are libfabric's (rdma/fi_errno.h).
const (
	CodeIO           Code = 5   // FI_EIO
	CodeAgain        Code = 11  // FI_EAGAIN
	CodeNoMem        Code = 12  // FI_ENOMEM
	CodeBusy         Code = 16  // FI_EBUSY
	CodeInval        Code = 22  // FI_EINVAL
	CodeNoMsg        Code = 42  // FI_ENOMSG
	CodeNoData       Code = 61  // FI_ENODATA
	CodeMsgSize      Code = 90  // FI_EMSGSIZE
	CodeOpNotSupp    Code = 95  // FI_EOPNOTSUPP
	CodeAddrNotAvail Code = 99  // FI_EADDRNOTAVAIL
	CodeConnReset    Code = 104 // FI_ECONNRESET
	CodeNotConn      Code = 107 // FI_ENOTCONN
	CodeTimedOut     Code = 110 // FI_ETIMEDOUT
	CodeConnRefused  Code = 111 // FI_ECONNREFUSED
	CodeHostUnreach  Code = 113 // FI_EHOSTUNREACH
	CodeCanceled     Code = 125 // FI_ECANCELED
	CodeOther        Code = 256 // FI_EOTHER
	CodeAvail        Code = 259 // FI_EAVAIL
	CodeBadFlags     Code = 260 // FI_EBADFLAGS
	CodeTrunc        Code = 265 // FI_ETRUNC
	CodeOverrun      Code = 268 // FI_EOVERRUN
)

// Error implements error so a Code can travel as one; the root package
// gives the user-facing text.
func (c Code) Error() string { return "engine errno " + strconv.Itoa(int(c)) }
