package rma

import (
	"errors"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// ProcessAlive reports whether a process with this pid exists (in this pid
// namespace). A zombie counts as dead: it holds nothing any more.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	if err != nil && !errors.Is(err, unix.EPERM) {
		return false
	}
	b, rerr := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if rerr != nil {
		return err == nil
	}
	// state is the field after the parenthesised command name
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for n >= 10 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	i--
	b[i] = byte('0' + n)
	return string(b[i:])
}

var pidNS struct {
	once sync.Once
	id   uint64
}

// PidNS returns the inode number of this process's pid namespace (0 when
// /proc does not tell), so peers can tell whether a pid names the same
// process for them.
func PidNS() uint64 {
	pidNS.once.Do(func() {
		var st unix.Stat_t
		if unix.Stat("/proc/self/ns/pid", &st) == nil {
			pidNS.id = st.Ino
		}
	})
	return pidNS.id
}
