package shm

import "errors"

// Errors returned by this package. Functions wrap them with context, so test
// with errors.Is. The engine maps them to fi.Errno values.
var (
	// ErrName: a name is not a valid segment name of this user (wrong prefix,
	// empty, too long, or holding characters other than [A-Za-z0-9._-]).
	ErrName = errors.New("shm: invalid segment name")
	// ErrNotOwner: the file exists but belongs to another user, is not a
	// regular file, or is readable or writable by group or others.
	ErrNotOwner = errors.New("shm: segment not owned by this user or not private")
	// ErrNoSpace: the shared-memory file system lacks room for the segment
	// (checked with statfs before creating, and by fallocate).
	ErrNoSpace = errors.New("shm: not enough space in the shared-memory file system")
	// ErrSize: a requested or found segment size is zero, too large, or
	// smaller than the layout needs.
	ErrSize = errors.New("shm: invalid segment size")
	// ErrNotReady: the region exists but its creator has not published the
	// header yet (magic still zero). Retry shortly.
	ErrNotReady = errors.New("shm: region not initialised yet")
	// ErrCorrupt: the region is foreign (other magic), of another version, or
	// its header does not describe a consistent layout.
	ErrCorrupt = errors.New("shm: foreign or corrupt region")
	// ErrClosed: the object was closed.
	ErrClosed = errors.New("shm: closed")
	// ErrQueueFull: every connection-request slot is taken. Retry after
	// progress; nothing was written.
	ErrQueueFull = errors.New("shm: connection-request queue full")
	// ErrPeerDenied: the kernel refused process_vm_readv for this peer
	// (EPERM, EACCES, ENOSYS, seccomp). Fall back to copying through the
	// ring in segments.
	ErrPeerDenied = errors.New("shm: peer memory access denied")
	// ErrPeerGone: the peer process no longer exists (ESRCH).
	ErrPeerGone = errors.New("shm: peer process gone")
	// ErrFault: touching mapped memory faulted (for example the peer
	// truncated its file) or a peer address was invalid (EFAULT).
	ErrFault = errors.New("shm: memory fault")
)
