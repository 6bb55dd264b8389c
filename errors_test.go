package fi

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// TestErrno_NumbersMirrorLibfabric pins the numbers of fi_errno.h on Linux.
func TestErrno_NumbersMirrorLibfabric(t *testing.T) {
	cases := []struct {
		name string
		got  Errno
		want int
	}{
		{"FI_EPERM", ErrPerm, 1}, {"FI_ENOENT", ErrNoEnt, 2}, {"FI_EAGAIN", ErrAgain, 11},
		{"FI_ENOMEM", ErrNoMem, 12}, {"FI_EBUSY", ErrBusy, 16}, {"EEXIST", ErrExist, 17},
		{"FI_ENODEV", ErrNoDev, 19}, {"FI_EINVAL", ErrInval, 22}, {"FI_ENOSPC", ErrNoSpc, 28},
		{"FI_ENOSYS", ErrNoSys, 38}, {"FI_ENOMSG", ErrNoMsg, 42}, {"FI_ENODATA", ErrNoData, 61},
		{"FI_EMSGSIZE", ErrMsgSize, 90}, {"FI_EOPNOTSUPP", ErrOpNotSupp, 95},
		{"FI_EADDRINUSE", ErrAddrInUse, 98}, {"FI_EADDRNOTAVAIL", ErrAddrNotAvail, 99},
		{"FI_ECONNRESET", ErrConnReset, 104}, {"FI_ETIMEDOUT", ErrTimedOut, 110},
		{"FI_ECONNREFUSED", ErrConnRefused, 111}, {"FI_ECANCELED", ErrCanceled, 125},
		{"FI_EOTHER", ErrOther, 256}, {"FI_ETOOSMALL", ErrTooSmall, 257},
		{"FI_EOPBADSTATE", ErrOpBadState, 258}, {"FI_EAVAIL", ErrAvail, 259},
		{"FI_EBADFLAGS", ErrBadFlags, 260}, {"FI_ENOEQ", ErrNoEQ, 261}, {"FI_EDOMAIN", ErrDomain, 262},
		{"FI_ENOCQ", ErrNoCQ, 263}, {"FI_ECRC", ErrCRC, 264}, {"FI_ETRUNC", ErrTrunc, 265},
		{"FI_ENOKEY", ErrNoKey, 266}, {"FI_ENOAV", ErrNoAV, 267}, {"FI_EOVERRUN", ErrOverrun, 268},
		{"FI_ENORX", ErrNoRx, 269},
	}
	for _, c := range cases {
		if int(c.got) != c.want {
			t.Errorf("%s = %d, want %d", c.name, int(c.got), c.want)
		}
	}
}

// TestErrno_SystemNumbersMatchSyscall checks the errno-derived values
// against the platform's own numbers.
func TestErrno_SystemNumbersMatchSyscall(t *testing.T) {
	pairs := []struct {
		e Errno
		s syscall.Errno
	}{
		{ErrAgain, syscall.EAGAIN}, {ErrNoData, syscall.ENODATA}, {ErrCanceled, syscall.ECANCELED},
		{ErrAddrNotAvail, syscall.EADDRNOTAVAIL}, {ErrNoMsg, syscall.ENOMSG}, {ErrBusy, syscall.EBUSY},
		{ErrInval, syscall.EINVAL}, {ErrNoSys, syscall.ENOSYS}, {ErrOpNotSupp, syscall.EOPNOTSUPP},
		{ErrNoEnt, syscall.ENOENT}, {ErrExist, syscall.EEXIST}, {ErrMsgSize, syscall.EMSGSIZE},
	}
	for _, p := range pairs {
		if int(p.e) != int(p.s) {
			t.Errorf("%v = %d, syscall says %d", p.e, int(p.e), int(p.s))
		}
		if !errors.Is(p.e, p.s) {
			t.Errorf("errors.Is(%d, syscall %d) = false", int(p.e), int(p.s))
		}
	}
	if errors.Is(ErrTrunc, syscall.Errno(265)) {
		t.Error("a libfabric-specific errno must not match a syscall errno")
	}
}

func TestStrerror_LibfabricText(t *testing.T) {
	cases := []struct {
		in   int
		want string
	}{
		{0, "Success"},
		{61, "No data available"},
		{-61, "No data available"},
		{11, "Resource temporarily unavailable"},
		{265, "Truncation error"},
		{-259, "Error available"},
		{260, "Flags not supported"},
		{9999, "Unknown error 9999"},
	}
	for _, c := range cases {
		if got := Strerror(c.in); got != c.want {
			t.Errorf("Strerror(%d) = %q, want %q", c.in, got, c.want)
		}
	}
	if ErrNoData.Error() != "No data available" {
		t.Errorf("ErrNoData.Error() = %q", ErrNoData.Error())
	}
}

func TestOpError_UnwrapsToErrno(t *testing.T) {
	err := opErr("GetInfo", ErrNoData, "no provider matched (%s)", "tcp: ep type")
	if !errors.Is(err, ErrNoData) {
		t.Fatal("errors.Is(opErr, ErrNoData) = false")
	}
	if errors.Is(err, ErrInval) {
		t.Fatal("errors.Is(opErr(ErrNoData), ErrInval) = true")
	}
	wrapped := fmt.Errorf("outer: %w", err)
	if ErrnoOf(wrapped) != ErrNoData {
		t.Fatalf("ErrnoOf = %v", ErrnoOf(wrapped))
	}
	var oe *OpError
	if !errors.As(wrapped, &oe) || oe.Op != "GetInfo" {
		t.Fatalf("errors.As OpError failed: %v", oe)
	}
	if want := "fi: GetInfo: No data available: no provider matched (tcp: ep type)"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if ErrnoOf(nil) != 0 || ErrnoOf(errors.New("x")) != ErrOther {
		t.Error("ErrnoOf of nil / foreign error wrong")
	}
}
