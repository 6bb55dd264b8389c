package shm

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaxSegmentSize bounds every segment created or opened (1 GiB): a size
// read from a peer's file is untrusted.
const MaxSegmentSize = 1 << 30

// noTmpfile forces the temporary-name path, as on file systems without
// O_TMPFILE (tests only).
var noTmpfile = false

// fileMode is the only permission a segment file ever has.
const fileMode = 0o600

// Segment is a file under Dir() mapped shared and read-write.
//
// The creator (the owner) holds an exclusive flock on the file for the
// segment's lifetime: the file never appears under its name unlocked, so a
// failed non-blocking shared flock by anyone else means "owner alive" and a
// successful one means "owner dead" (this survives kill -9 and has no pid
// reuse race). The owner's Close unlinks the file; so does the process-wide
// SIGINT/SIGTERM handler installed by the first CreateSegment.
//
// Methods are safe for concurrent use. The memory returned by Bytes is valid
// until Close; touching it afterwards faults.
type Segment struct {
	name  string
	path  string
	owner bool
	// fd is the open file (and, for the owner, the flock). A raw
	// descriptor, not an os.File, and a mapping made with MmapPtr:
	// neither allocates, and a ring that grows makes one segment on
	// each side (issue 12: the first message of a size).
	fd  int
	mem []byte

	mu     sync.Mutex
	closed bool
}

// CreateSegment creates, sizes and maps a new segment named name (see
// NewName) of size bytes rounded up to the page size. Space is checked with
// statfs and reserved with fallocate, so a full /dev/shm fails here with
// ErrNoSpace rather than with SIGBUS later. The file is mode 0600 whatever
// the umask, exclusively locked, and appears under its name only once sized,
// locked and mapped. An existing file of that name fails with os.ErrExist.
// The memory is zeroed.
func CreateSegment(name string, size int) (*Segment, error) {
	return createSegment(name, size, nil)
}

// createSegment is CreateSegment with an init hook run on the mapped memory
// before the file becomes visible under its name. When the file system is
// full it reaps dead owners' files (a crashed job's) and, if that freed
// any, tries once more.
func createSegment(name string, size int, init func([]byte)) (*Segment, error) {
	s, err := createSegmentOnce(name, size, init)
	if errors.Is(err, ErrNoSpace) {
		if n, _ := reapWait(); n > 0 {
			s, err = createSegmentOnce(name, size, init)
		}
	}
	return s, err
}

func createSegmentOnce(name string, size int, init func([]byte)) (s *Segment, err error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if size <= 0 || size > MaxSegmentSize {
		return nil, fmt.Errorf("%w: %d not in 1..%d", ErrSize, size, MaxSegmentSize)
	}
	page := os.Getpagesize()
	size = (size + page - 1) &^ (page - 1)
	dir := Dir()
	path := segPath(name)

	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, fmt.Errorf("shm: statfs %s: %w", dir, err)
	}
	if free := uint64(st.Bavail) * uint64(st.Bsize); free < uint64(size) {
		return nil, noSpace(dir, name, size, fmt.Sprintf("%d bytes free", free))
	}

	// Create an anonymous file (O_TMPFILE), or, where the file system lacks
	// it, a temporary name that Reap leaves alone while young.
	tmpPath := ""
	fd, err := -1, unix.EOPNOTSUPP
	if !noTmpfile {
		fd, err = unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, fileMode)
	}
	if err != nil {
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("shm: create in %s: %w", dir, err)
		}
		tmpPath = segPath(Prefix() + tmpMarker + NewName()[len(Prefix()):])
		register(tmpPath)
		fd, err = unix.Open(tmpPath, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, fileMode)
		if err != nil {
			unregister(tmpPath)
			return nil, fmt.Errorf("shm: create %s: %w", tmpPath, err)
		}
	}
	var mem []byte
	defer func() {
		if tmpPath != "" {
			_ = unix.Unlink(tmpPath)
			unregister(tmpPath)
		}
		if err != nil {
			if mem != nil {
				_ = unmap(mem)
			}
			_ = unix.Close(fd)
		}
	}()
	// The umask may have narrowed the mode; set it exactly, then verify.
	if err = unix.Fchmod(fd, fileMode); err != nil {
		return nil, fmt.Errorf("shm: chmod %s: %w", name, err)
	}
	if err = checkPrivate(fd, name); err != nil {
		return nil, err
	}
	if err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil, fmt.Errorf("shm: lock %s: %w", name, err)
	}
	if err = unix.Fallocate(fd, 0, 0, int64(size)); err != nil {
		if errors.Is(err, unix.ENOSPC) {
			return nil, noSpace(dir, name, size, "fallocate: "+err.Error())
		}
		return nil, fmt.Errorf("shm: fallocate %s: %w", name, err)
	}
	mem, err = mapShared(fd, size)
	if err != nil {
		return nil, fmt.Errorf("shm: map %s: %w", name, err)
	}
	if init != nil {
		init(mem)
	}
	register(path)
	if tmpPath == "" {
		err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
	} else {
		err = unix.Link(tmpPath, path) // the deferred cleanup unlinks tmpPath
	}
	if err != nil {
		unregister(path)
		if errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("shm: create %s: %w", name, os.ErrExist)
		}
		return nil, fmt.Errorf("shm: publish %s: %w", name, err)
	}
	return &Segment{name: name, path: path, owner: true, fd: fd, mem: mem}, nil
}

// noSpace is the error of a segment that does not fit: it names the
// directory, the segment, the bytes it needs and what the file system said.
func noSpace(dir, name string, size int, why string) error {
	return fmt.Errorf("%w: %s (%s): segment %s needs %d bytes (free space there, or point %s at a larger tmpfs)",
		ErrNoSpace, dir, why, name, size, DirEnv)
}

// OpenSegment maps an existing segment of this user read-write. It refuses
// (ErrNotOwner) a file that is not a regular file, belongs to another uid or
// is accessible to group or others, and (ErrSize) an empty or oversized one.
// A missing file fails with an error wrapping os.ErrNotExist. The mapping
// covers the file's size at open; if the owner later shrinks the file,
// touching the lost pages faults: read through Guard.
func OpenSegment(name string) (s *Segment, err error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	path := segPath(name)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT):
			return nil, fmt.Errorf("shm: open %s: %w", name, os.ErrNotExist)
		case errors.Is(err, unix.EISDIR), errors.Is(err, unix.ELOOP):
			return nil, fmt.Errorf("%w: %s is not a regular file: %v", ErrNotOwner, name, err)
		}
		return nil, fmt.Errorf("shm: open %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			_ = unix.Close(fd)
		}
	}()
	if err = checkPrivate(fd, name); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err = unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shm: stat %s: %w", name, err)
	}
	if st.Size <= 0 || st.Size > MaxSegmentSize {
		return nil, fmt.Errorf("%w: %s has %d bytes", ErrSize, name, st.Size)
	}
	mem, err := mapShared(fd, int(st.Size))
	if err != nil {
		return nil, fmt.Errorf("shm: map %s: %w", name, err)
	}
	return &Segment{name: name, path: path, fd: fd, mem: mem}, nil
}

// mapShared maps size bytes of fd shared and read-write.
func mapShared(fd, size int) ([]byte, error) {
	p, err := unix.MmapPtr(fd, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), size), nil
}

// unmap undoes mapShared.
func unmap(b []byte) error {
	return unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
}

// checkPrivate refuses anything but a regular file of ours with mode 0600.
func checkPrivate(fd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("shm: stat %s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%w: %s is not a regular file", ErrNotOwner, name)
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: %s belongs to uid %d, we are %d", ErrNotOwner, name, st.Uid, os.Geteuid())
	}
	if st.Mode&0o077 != 0 {
		return fmt.Errorf("%w: %s has mode %#o", ErrNotOwner, name, st.Mode&0o777)
	}
	return nil
}

// Name returns the segment's name (a valid argument for OpenSegment).
func (s *Segment) Name() string { return s.name }

// Owner reports whether this process created the segment.
func (s *Segment) Owner() bool { return s.owner }

// Size returns the mapped length in bytes.
func (s *Segment) Size() int { return len(s.mem) }

// Bytes returns the mapped memory. It stays valid until Close. For an opened
// (not owned) segment every byte is written by another process: treat it as
// untrusted and access it through Guard if the owner may shrink the file.
func (s *Segment) Bytes() []byte { return s.mem }

// Alive reports whether the segment's owner process still holds its lock.
// It is always true for the owner itself. It costs one flock system call.
func (s *Segment) Alive() (bool, error) {
	if s.owner {
		return true, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, ErrClosed
	}
	return lockProbe(s.fd)
}

// Close unmaps the segment and closes its file. The owner also unlinks the
// file first (peers keep their mappings), then releases its lock. Closing
// twice returns ErrClosed.
func (s *Segment) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	var errs []error
	if s.owner {
		if err := unix.Unlink(s.path); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("shm: unlink %s: %w", s.name, err))
		}
		unregister(s.path)
	}
	if err := unmap(s.mem); err != nil {
		errs = append(errs, fmt.Errorf("shm: unmap %s: %w", s.name, err))
	}
	s.mem = nil
	if err := unix.Close(s.fd); err != nil {
		errs = append(errs, fmt.Errorf("shm: close %s: %w", s.name, err))
	}
	return errors.Join(errs...)
}

// lockProbe tries a non-blocking shared flock on fd: held exclusively by a
// live owner it fails (alive); otherwise it is taken and released (dead).
func lockProbe(fd int) (bool, error) {
	err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("shm: flock: %w", err)
	}
	_ = unix.Flock(fd, unix.LOCK_UN)
	return false, nil
}

// Alive reports whether the owner of the segment named name is alive. A
// missing file reports false. Use Segment.Alive on a segment already open:
// it saves the open and close.
func Alive(name string) (bool, error) {
	if err := ValidName(name); err != nil {
		return false, err
	}
	fd, err := unix.Open(segPath(name), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("shm: open %s: %w", name, err)
	}
	defer unix.Close(fd)
	if err := checkPrivate(fd, name); err != nil {
		return false, err
	}
	return lockProbe(fd)
}
