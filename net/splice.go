package net

import (
	"errors"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/transport"
)

// Large RMA write payloads go to the socket without a copy.
//
// A write(2) of a 1 MiB payload copies it into socket buffers on the
// initiator's CPU, and the target's read copies it again on the target's.
// The first copy writes into buffers the target's CPU last read (the
// socket's pages come back freed by the reader): in the far placement
// (two vCPUs 250-450 ns apart) every line of it is a cross-CPU write, and
// it was most of a 1 MiB write's time (perf record of a 1 MiB stream,
// pinned apart, far: _copy_from_iter 63% of the sender's samples).
// vmsplice(2) puts references to the payload's pages into a pipe and
// splice(2) moves them into the socket: over loopback the skbs carry the
// initiator's pages to the target's socket, and the target's read is the
// only copy, from the initiator's memory into the target's region.
//
// That is safe only while the payload stays unchanged until the target
// has read it: the kernel reads the pages when the target reads its
// socket, not when splice returns. An RMA write's buffers are the
// transport's until its completion, and that comes with the target's
// answer, after the target read every byte of the request; so only RMA
// write payloads (not injected ones, which are copied, nor messages,
// which complete once written, nor read answers, whose region may be
// closed and reused) take this path. A request whose connection breaks
// completes with an error while the peer may still read what its socket
// had received: for a failed write the target's bytes are undefined
// anyway (fi_rma(3)), but bytes the application put into that buffer
// after the error completion may then reach that peer.
//
// Only while the pair polls on two CPUs (peersApart: the place stamps of
// a same-host peer, place.go; never to another host). On one CPU splice
// lost: 1 MiB write bandwidth pinned together, far, nice -20, load 11,
// 2115/2059/2249 MB/s against 2391/2473/2748 by writev (perf record: more
// time in splice_to_socket's transmit than the copy it saves, which is
// cheap there: the receiver's CPU is the sender's). Apart it won: far,
// nice -20, load 10-12, 6 rounds alternated, medians 1096 against 506
// MB/s pinned apart, 2572 against 1989 unbound; near apart (load 12-14,
// 3 rounds) 1114 against 1136, no gain.
//
// The transport keeps one pipe, owned by one connection at a time while it
// holds bytes of that connection's payload (splicer.owner); another
// connection wanting it meanwhile writes its payload with writev as before.

const (
	// spliceMin is the smallest RMA write payload sent by splice.
	spliceMin = 64 << 10
	// pipeSize is the pipe's capacity asked for (fs.pipe-max-size is
	// 1 MiB by default; the pipe keeps its 64 KiB when refused).
	pipeSize = 1 << 20
)

// spliceAlways makes every large RMA write payload go by splice, the
// pair's placement aside (tests).
var spliceAlways = false

type splicer struct {
	owner atomic.Pointer[tconn]
	off   atomic.Bool  // no splicing: the pipe could not be made, or Close
	bytes atomic.Int64 // payload bytes spliced into sockets (tests)
	// The owner's:
	r, w  int  // the pipe's ends
	made  bool // r and w are open
	piped int  // bytes in the pipe, of the owner's head entry
}

// errPipeLost breaks a connection whose payload bytes the pipe no longer
// holds.
var errPipeLost = errors.New("net: splice found the pipe empty")

// closedSplicer owns the pipe after Close.
var closedSplicer = new(tconn)

// usable reports whether payloads may go by splice now.
func (s *splicer) usable() bool { return !s.off.Load() }

// acquire makes tc the pipe's owner (creating the pipe at first use), or
// reports false when another connection owns it.
func (s *splicer) acquire(tc *tconn) bool {
	if s.owner.Load() != tc && !s.owner.CompareAndSwap(nil, tc) {
		return false
	}
	if s.made {
		return true
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		s.off.Store(true)
		s.owner.Store(nil)
		return false
	}
	_, _ = unix.FcntlInt(uintptr(fds[1]), unix.F_SETPIPE_SZ, pipeSize)
	s.r, s.w, s.made = fds[0], fds[1], true
	return true
}

// release gives the pipe up when it holds nothing of tc's.
func (s *splicer) release(tc *tconn) {
	if s.piped == 0 && s.owner.Load() == tc {
		s.owner.Store(nil)
	}
}

// drop forgets what tc left in the pipe (its connection failed): the pipe
// is closed, the next owner makes another.
func (s *splicer) drop(tc *tconn) {
	if s.owner.Load() != tc {
		return
	}
	s.closePipe()
	s.owner.Store(nil)
}

func (s *splicer) closePipe() {
	if s.made {
		unix.Close(s.r)
		unix.Close(s.w)
		s.made = false
	}
	s.piped = 0
}

// close ends splicing (Transport.Close, after every connection's queue
// failed).
func (s *splicer) close() {
	s.off.Store(true)
	if s.owner.CompareAndSwap(nil, closedSplicer) {
		s.closePipe()
	}
}

// spliceLocked sends the head entry e of tc's queue (an RMA write
// payload, e.splice) through the pipe until it is all in the socket or
// the socket is full. handled false: the pipe is another connection's (or
// unusable) and nothing of e is in it; the caller writes e with writev.
// full: the socket took no more (arm the flusher). p.mu is held.
func (p *peer) spliceLocked(tc *tconn, e *outEntry) (handled, full bool, err error) {
	s := &p.t.sp
	if s.off.Load() && s.owner.Load() != tc || !s.acquire(tc) {
		return false, false, nil
	}
	for e.off < e.total {
		if s.piped == 0 {
			k, err := vmsplice(s.w, tc, e)
			if err != nil || k == 0 {
				// The pipe refused the pages (nothing of e is in it):
				// no more splicing on this transport.
				s.off.Store(true)
				s.closePipe()
				s.owner.Store(nil)
				return false, false, nil
			}
			s.piped = k
		}
		m, err := splice(s.r, tc.fd, s.piped)
		if m > 0 {
			s.piped -= m
			e.off += m
			s.bytes.Add(int64(m))
		}
		if err == unix.EAGAIN {
			s.release(tc)
			return true, true, nil
		}
		if err == nil && m == 0 {
			// The pipe said it was empty while it should hold piped
			// bytes: never seen; fail the connection rather than spin.
			err = errPipeLost
		}
		if err != nil {
			return true, false, err // the connection breaks; failQueue drops the pipe
		}
	}
	s.release(tc)
	tc.pop(transport.OK)
	return true, false, nil
}

// vmsplice puts references to e's payload pages from e.off on (at most the
// pipe's worth) into the pipe's write end w.
func vmsplice(w int, tc *tconn, e *outEntry) (int, error) {
	v := tc.iovs[:0]
	skip, n := e.off, 0
	for _, b := range e.iov {
		if skip >= len(b) {
			skip -= len(b)
			continue
		}
		if len(v) == cap(v) || n >= pipeSize {
			break
		}
		b = b[skip:]
		skip = 0
		v = append(v, iovec(b))
		n += len(b)
	}
	var r uintptr
	var e1 unix.Errno
	for {
		r, _, e1 = unix.Syscall6(unix.SYS_VMSPLICE, uintptr(w), uintptr(unsafe.Pointer(&v[0])), uintptr(len(v)), unix.SPLICE_F_NONBLOCK, 0, 0)
		if e1 != unix.EINTR {
			break
		}
	}
	clear(v)
	tc.iovs = v[:0]
	if e1 != 0 {
		return 0, e1
	}
	return int(r), nil
}

// splice moves up to n bytes from the pipe's read end r into the socket
// fd without blocking.
func splice(r, fd, n int) (int, error) {
	for {
		m, _, e1 := unix.Syscall6(unix.SYS_SPLICE, uintptr(r), 0, uintptr(fd), 0, uintptr(n), unix.SPLICE_F_NONBLOCK|unix.SPLICE_F_MOVE)
		if e1 == unix.EINTR {
			continue
		}
		if e1 != 0 {
			return 0, e1
		}
		return int(m), nil
	}
}
