package net

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// flusher drains send queues of sockets that were full. gnet offers no
// "writable" callback (it arms EPOLLOUT only for its own outbound buffer,
// which this package keeps empty), so one goroutine per transport sleeps
// in a private epoll set where a connection is armed (EPOLLOUT, one-shot)
// only while its queue has bytes the socket refused. It costs nothing
// while sockets keep up.
type flusher struct {
	t    *Transport
	epfd int
	efd  int
	done chan struct{}
}

func newFlusher(t *Transport) (*flusher, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(efd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, efd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(efd)
		return nil, err
	}
	f := &flusher{t: t, epfd: epfd, efd: efd, done: make(chan struct{})}
	go f.run()
	return f, nil
}

// arm asks for one EPOLLOUT event on tc, unless one is armed already.
// The peer's mu is held.
func (f *flusher) arm(tc *tconn) error {
	if tc.armed {
		return nil
	}
	ev := unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLONESHOT, Fd: int32(tc.fd)}
	if tc.inEpoll {
		err := unix.EpollCtl(f.epfd, unix.EPOLL_CTL_MOD, tc.fd, &ev)
		tc.armed = err == nil
		return err
	}
	err := unix.EpollCtl(f.epfd, unix.EPOLL_CTL_ADD, tc.fd, &ev)
	if err == unix.EEXIST {
		err = unix.EpollCtl(f.epfd, unix.EPOLL_CTL_MOD, tc.fd, &ev)
	}
	if err == nil {
		tc.inEpoll, tc.armed = true, true
	}
	return err
}

// del forgets tc before its descriptor is closed. The peer's mu is held.
func (f *flusher) del(tc *tconn) {
	if tc.inEpoll {
		_ = unix.EpollCtl(f.epfd, unix.EPOLL_CTL_DEL, tc.fd, nil)
		tc.inEpoll, tc.armed = false, false
	}
}

func (f *flusher) run() {
	defer close(f.done)
	var events [64]unix.EpollEvent
	for {
		n, err := unix.EpollWait(f.epfd, events[:], -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		for i := 0; i < n; i++ {
			fd := int(events[i].Fd)
			if fd == f.efd {
				return
			}
			f.t.mu.Lock()
			tc := f.t.fds[fd]
			f.t.mu.Unlock()
			if tc == nil || tc.peer == nil {
				continue
			}
			p := tc.peer
			p.mu.Lock()
			tc.armed = false // the one-shot fired
			if tc.ready && !tc.closed && tc.inEpoll {
				if err := p.flushLocked(tc); err != nil {
					p.breakLocked(tc, err)
				}
			}
			p.mu.Unlock()
		}
	}
}

func (f *flusher) close() {
	var one [8]byte
	one[0] = 1
	_, _ = unix.Write(f.efd, one[:])
	<-f.done
	unix.Close(f.epfd)
	unix.Close(f.efd)
}

// writev writes iovs to the socket fd without allocating (x/sys's Writev
// builds its iovec array on the heap), as a sendmsg (sys.go). Up to
// rawMax bytes in all it goes in as a RawSyscall (sys.go).
func writev(fd int, iovs []unix.Iovec) (int, error) {
	sys := unix.Syscall
	if iovecBytes(iovs) <= rawMax {
		sys = unix.RawSyscall
	}
	msg := unix.Msghdr{Iov: &iovs[0], Iovlen: uint64(len(iovs))}
	for {
		r, _, e := sys(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)), unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(r), nil
	}
}

// iovecBytes is the bytes iovs spans.
func iovecBytes(iovs []unix.Iovec) uint64 {
	n := uint64(0)
	for i := range iovs {
		n += iovs[i].Len
	}
	return n
}
