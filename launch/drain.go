package launch

import (
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// waitDrained waits, at most max, until the reader at the other end of w
// (a launcher's output forwarder) has taken every byte written to it, so
// that a message written just before the job is torn down is not lost in
// the pipe. It knows pipes (FIONREAD, alias TIOCINQ, counts what is unread, from either
// end) and sockets (SIOCOUTQ, alias TIOCOUTQ, counts what the peer has not acknowledged);
// for anything else (a terminal, a file, a test's buffer) it returns at
// once. A short grace follows, for the forwarder to pass the bytes on.
func waitDrained(w io.Writer, max time.Duration) {
	f, ok := w.(*os.File)
	if !ok {
		return
	}
	fd := int(f.Fd())
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return
	}
	var req uint
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO:
		req = unix.TIOCINQ
	case unix.S_IFSOCK:
		req = unix.TIOCOUTQ
	default:
		return
	}
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		n, err := unix.IoctlGetInt(fd, req)
		if err != nil || n == 0 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
}
