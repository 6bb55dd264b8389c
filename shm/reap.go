package shm

import (
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// tmpMarker follows Prefix() in the temporary name a segment has while being
// built on file systems without O_TMPFILE.
const tmpMarker = "tmp-"

// tmpGrace is how long Reap leaves an unlocked temporary file alone: its
// creator may have created it and not yet locked it.
const tmpGrace = time.Minute

// Reap removes the segment files of this user whose owner is dead (their
// lock can be taken) and returns how many it removed. Files of other users,
// files without our prefix and files whose owner lives are left alone; so
// are temporary files younger than a minute. Before unlinking, Reap checks
// that the name still refers to the file it locked. Safe for concurrent use
// and across processes. Errors on single files are skipped; only failing to
// read the directory is returned.
func Reap() (int, error) {
	dir := Dir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("shm: reap %s: %w", dir, err)
	}
	prefix := Prefix()
	n := 0
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) || !e.Type().IsRegular() {
			continue
		}
		if reapOne(segPath(name), strings.HasPrefix(name[len(prefix):], tmpMarker)) {
			n++
		}
	}
	return n, nil
}

// reapOne removes path if its owner is dead and reports whether it did.
func reapOne(path string, tmp bool) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || int(st.Uid) != os.Geteuid() || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	if tmp && time.Since(time.Unix(st.Mtim.Unix())) < tmpGrace {
		return false
	}
	// A shared lock, like Alive's probe: it conflicts only with a live
	// owner's exclusive lock, so peers probing meanwhile still read "dead".
	if err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return false // alive (EWOULDBLOCK) or not lockable: leave it
	}
	// Holding the lock, make sure the name still points at this file.
	var cur unix.Stat_t
	if err := unix.Stat(path, &cur); err != nil || cur.Dev != st.Dev || cur.Ino != st.Ino {
		return false
	}
	return unix.Unlink(path) == nil
}
