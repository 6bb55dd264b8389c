package net

import (
	"os"
	"reflect"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// Sockets out of gnet's epoll set while the loop is held.
//
// Every socket of an endpoint sits in its gnet loop's epoll set, so every
// segment the kernel delivers to it runs epoll's wake-up callback
// (ep_poll_callback: the set's lock with interrupts off, its ready list)
// in the sender's system call. While the loop does not wait in epoll_wait
// (Poll owns the sockets with the loop parked, own.go, or the loop spins
// on them itself, spin.go) nobody reads those events: the sockets leave
// the set, and go back before the loop can wait in it again. A C
// ping-pong over loopback (8 B, both sides spinning on non-blocking reads,
// pinned, near, 4 rounds): 8.00 us per round trip with both sockets in an
// epoll set, 7.72 without; far 12.1-12.4 against 11.8.
//
// Only the loop's goroutine changes its set (parkTask, loopSpin), so
// gnet, which runs on that goroutine, never waits in it meanwhile. A
// socket gnet closes or opens in between is not one of those taken out:
// gnet closes sockets on the loop, after they went back.

// epollQuietEnv set to "0" keeps the sockets in the set.
const epollQuietEnv = "GOFI_TCP_EPOLL_QUIET"

var epollQuiet = os.Getenv(epollQuietEnv) != "0"

// gnetEpoll returns the epoll descriptor of event loop el (gnet v2's
// eventloop.poller.fd, found by reflection as gnetTasks finds its task
// flag), or -1.
func gnetEpoll(el gnet.EventLoop) int {
	v := reflect.ValueOf(el)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return -1
	}
	p := v.Elem().FieldByName("poller")
	if !p.IsValid() || p.Kind() != reflect.Pointer || p.IsNil() || p.Elem().Kind() != reflect.Struct {
		return -1
	}
	f := p.Elem().FieldByName("fd")
	if !f.IsValid() || f.Kind() != reflect.Int || f.Int() <= 0 {
		return -1
	}
	return int(f.Int())
}

// epollOff takes the connections conns (a copy of fdv) out of the loop's
// epoll set (loop goroutine only), remembering them for epollOn.
func (t *Transport) epollOff(conns []*tconn) {
	if !epollQuiet || t.epfd <= 0 || len(t.epOut) > 0 {
		return
	}
	for _, tc := range conns {
		// fd only: it is set before tc enters fdv and never changes,
		// while Poll may be failing tc (dead) as the loop parks.
		if tc.fd <= 0 {
			continue
		}
		if unix.EpollCtl(t.epfd, unix.EPOLL_CTL_DEL, tc.fd, nil) == nil {
			t.epOut = append(t.epOut, tc.fd)
		}
	}
}

// epollOffAll is epollOff of every connection of fdv, copied under mu
// into the caller's scratch slice (left cleared, so that it holds no
// connection alive).
func (t *Transport) epollOffAll(scratch *[]*tconn) {
	t.mu.Lock()
	*scratch = append((*scratch)[:0], t.fdv...)
	t.mu.Unlock()
	t.epollOff(*scratch)
	clear(*scratch)
}

// epollOn puts back what epollOff took out (loop goroutine only), with
// the events gnet registers a connection for (netpoll.ReadEvents,
// level-triggered): bytes that came meanwhile are reported at once.
func (t *Transport) epollOn() {
	for i, fd := range t.epOut {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLPRI, Fd: int32(fd)}
		_ = unix.EpollCtl(t.epfd, unix.EPOLL_CTL_ADD, fd, &ev)
		t.epOut[i] = 0
	}
	t.epOut = t.epOut[:0]
}
