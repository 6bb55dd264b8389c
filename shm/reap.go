package shm

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
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

// FileInfo describes one segment file of this user in Dir(). A plain value.
type FileInfo struct {
	Name  string // file name (a segment name)
	PID   int    // the creating process, from the name; 0 when the name has none
	Bytes int64  // bytes of the file system it holds
	Alive bool   // its owner holds its lock
	Temp  bool   // a segment still being built (file systems without O_TMPFILE)
}

// Scan lists this user's segment files in Dir(), sorted by name, and
// whether each one's owner is alive (its lock is held). It removes
// nothing. Files it cannot open or lock are reported alive.
func Scan() ([]FileInfo, error) {
	dir := Dir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("shm: scan %s: %w", dir, err)
	}
	prefix := Prefix()
	var out []FileInfo
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) || !e.Type().IsRegular() {
			continue
		}
		fi := FileInfo{Name: name, PID: namePID(name), Temp: strings.HasPrefix(name[len(prefix):], tmpMarker), Alive: true}
		fd, err := unix.Open(segPath(name), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			continue // gone meanwhile
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && int(st.Uid) == os.Geteuid() {
			fi.Bytes = st.Blocks * 512
			if alive, err := lockProbe(fd); err == nil {
				fi.Alive = alive
			}
			out = append(out, fi)
		}
		_ = unix.Close(fd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// namePID returns the pid a segment name made by NewName carries (the
// number after the user prefix, or after the temporary marker), or 0.
// Names chosen by users (named endpoints) may carry none.
func namePID(name string) int {
	s := strings.TrimPrefix(name, Prefix())
	s = strings.TrimPrefix(s, tmpMarker)
	i := strings.IndexByte(s, '-')
	if i <= 0 {
		return 0
	}
	pid, err := strconv.Atoi(s[:i])
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Reap removes the segment files of this user whose owner is dead (their
// lock can be taken) and returns how many it removed. Files of other users,
// files without our prefix and files whose owner lives are left alone; so
// are temporary files younger than a minute. Before unlinking, Reap checks
// that the name still refers to the file it locked. Errors on single files
// are skipped; only failing to read the directory is returned.
//
// Reap is cheap when nothing is dead, even next to a big job's thousands
// of files: a file whose name carries the pid of a running process is
// skipped without being opened (the lock stays the judge for the others;
// a pid reused by an unrelated process only delays reaping). Processes
// that reap at the same moment (a job starting) do not all walk the
// directory: while one holds the directory's reaping lock the others
// return 0 at once. Safe for concurrent use and across processes.
func Reap() (int, error) { return reap(false) }

// reapWait is Reap that waits for another process's reaping to finish
// instead of skipping, for a creator that just found the directory full.
func reapWait() (int, error) { return reap(true) }

func reap(wait bool) (int, error) {
	dir := Dir()
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("shm: reap %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	how := unix.LOCK_EX
	if !wait {
		how |= unix.LOCK_NB
	}
	if err := unix.Flock(dfd, how); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return 0, nil // someone else is reaping right now
		}
		// No directory locks here (an odd file system): reap unlocked.
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("shm: reap %s: %w", dir, err)
	}
	prefix := Prefix()
	live := map[int]bool{} // pid -> running, asked once per pid
	n := 0
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) || !e.Type().IsRegular() {
			continue
		}
		if pid := namePID(name); pid > 0 {
			alive, ok := live[pid]
			if !ok {
				alive = ProcessAlive(pid)
				live[pid] = alive
			}
			if alive {
				continue
			}
		}
		if reapOne(segPath(name), strings.HasPrefix(name[len(prefix):], tmpMarker)) {
			n++
		}
	}
	return n, nil
}

// RemoveStale removes the file of Scan's fi if its owner is still dead,
// as Reap would, and reports whether it did. For tools (perftest shm-gc).
func RemoveStale(fi FileInfo) bool {
	if ValidName(fi.Name) != nil {
		return false
	}
	return reapOne(segPath(fi.Name), fi.Temp)
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
