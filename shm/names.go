package shm

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
)

// DirEnv names the environment variable that overrides the directory holding
// segments (default /dev/shm). Tests point it at a private directory; it must
// be on a file system that supports mmap, fallocate and flock (tmpfs).
const DirEnv = "GOFI_SHM_DIR"

// DefaultDir is where segments live unless DirEnv says otherwise.
const DefaultDir = "/dev/shm"

// AddrScheme prefixes a segment name in an FI_ADDR_STR address.
const AddrScheme = "fi_shm://"

// MaxNameLen is the longest segment name, in bytes. Names are stored in
// fixed 64-byte fields of the region.
const MaxNameLen = 63

// Dir returns the directory holding segments: $GOFI_SHM_DIR or /dev/shm.
func Dir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	return DefaultDir
}

// Prefix returns the per-user prefix of every segment name, "gofi-<euid>-".
// Reap only ever considers files starting with it. It is built once per
// effective uid: every segment created or opened checks its name against
// it (a ring growing on a message's path did so several times).
func Prefix() string {
	euid := os.Geteuid()
	if p := prefix.Load(); p != nil && p.euid == euid {
		return p.s
	}
	p := &userPrefix{euid: euid, s: "gofi-" + strconv.Itoa(euid) + "-"}
	prefix.Store(p)
	return p.s
}

// prefix caches Prefix for one effective uid.
var prefix atomic.Pointer[userPrefix]

type userPrefix struct {
	euid int
	s    string
}

var nameCounter atomic.Uint64

// NewName returns a fresh segment name, unique across processes and time:
// the user prefix, the pid, a process-wide counter and 32 random bits, e.g.
// "gofi-1000-4711-3-9f86d081". It is printable and at most MaxNameLen bytes.
// Safe for concurrent use.
func NewName() string {
	var r [4]byte
	if _, err := rand.Read(r[:]); err != nil {
		// crypto/rand does not fail on Linux >= 3.17; keep names unique
		// by pid and counter regardless.
		r = [4]byte{}
	}
	return Prefix() + strconv.Itoa(os.Getpid()) + "-" +
		strconv.FormatUint(nameCounter.Add(1), 10) + "-" + hex.EncodeToString(r[:])
}

// ValidName reports whether name can name a segment of this user: it starts
// with Prefix(), is at most MaxNameLen bytes, and holds only [A-Za-z0-9._-]
// (so it is a single path element and prints cleanly).
func ValidName(name string) error {
	if len(name) == 0 || len(name) > MaxNameLen {
		return fmt.Errorf("%w: length %d not in 1..%d", ErrName, len(name), MaxNameLen)
	}
	if !strings.HasPrefix(name, Prefix()) {
		return fmt.Errorf("%w: %q lacks prefix %q", ErrName, name, Prefix())
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == '-':
		default:
			return fmt.Errorf("%w: %q has byte %#x at %d", ErrName, name, c, i)
		}
	}
	return nil
}

// Addr returns the FI_ADDR_STR form of a segment name: "fi_shm://" + name.
func Addr(name string) string { return AddrScheme + name }

// ParseAddr returns the segment name in an "fi_shm://<name>" address and
// checks it with ValidName.
func ParseAddr(addr string) (string, error) {
	name, ok := strings.CutPrefix(addr, AddrScheme)
	if !ok {
		return "", fmt.Errorf("%w: address %q does not start with %q", ErrName, addr, AddrScheme)
	}
	if err := ValidName(name); err != nil {
		return "", err
	}
	return name, nil
}

func segPath(name string) string { return filepath.Join(Dir(), name) }
