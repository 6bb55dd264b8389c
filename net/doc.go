// Package net is gofi's tcp transport: it moves the engine's messages
// between endpoints over TCP, with a gnet v2 event loop per endpoint.
//
// It is an internal package of gofi: it carries no compatibility promise.
//
// # Shape
//
// Listen starts one gnet engine (an acceptor and one event loop) on the
// configured address. Outbound connections are made lazily on the first
// Send to a peer: a goroutine dials (with a timeout) and enrolls the socket
// in the loop, so the loop never blocks on connect. A dialed connection
// that is not open and through its handshake within the same timeout
// after its connect fails what was queued on it (ETIMEDOUT), whatever held
// it up: a dead peer gives errors, never a hang. A peer whose host
// vanishes (no FIN, no RST) is found by TCP keepalive when the connection
// is idle (Config.KeepAlive + 3 s); while bytes of ours wait for it, by
// Config.UserTimeout (TCP_USER_TIMEOUT) when set, else by the kernel's
// retransmission limit (~15 minutes): the kernel cannot tell such a peer
// from one stopped in a debugger with a full receive window, which the
// user timeout would cut off as well. Every connection starts
// with a handshake (HELLO carrying the listening address, pid, a random
// instance id, a nonce and the receive window; then, when an auth key is
// configured, an HMAC proof over both HELLOs). A peer is identified by the
// address it listens on; a peer whose instance id changes has restarted and
// replaces its old connections: everything owed on them fails with
// ECONNRESET, including frames still queued on a dial that reached the new
// process, and late bytes of the old connections are refused, so credit,
// window accounting and rendezvous state always belong to one incarnation.
// Two endpoints of one kernel (the HELLO's host id: its boot id) stamp
// every later frame with the CPU their polling thread runs on, and the
// one that should move leaves a CPU its peer polls on while the host is
// quiet (place.go): two processes that a wake-up put on one CPU
// otherwise hand it back and forth for the whole run. While messages of
// 32 KiB up to 256 KiB (or RMA of 32 KiB or more) flow, that side joins
// its peer's CPU instead, when it is its only same-host peer (a large
// payload's copies cost less on one CPU than across two); larger
// messages join only when the two CPUs are far apart, which the polling
// thread probes (a cache line's round trip, at most once a second;
// distance.go). An application
// polling for the answers of an idle target, whose loop serves them
// (its stamps say so), moves off the loop's CPU whatever the load.
// Two endpoints that dial each other at once converge to one connection
// (the dial of the side whose address and instance id sort first): the
// other side ends its dial with a RETIRE frame and switches, without
// losing or reordering a frame (peer.go, "Simultaneous connect").
//
// # Threads and ownership
//
//   - The gnet loop owns the read side of every socket. It decodes frames;
//     eager messages and ready-to-send headers go into a single-producer
//     single-consumer ring for Poll; control frames (clear-to-send, credit)
//     and rendezvous payloads are handled on the loop directly, the latter
//     copied from gnet's buffer straight into the destination given to
//     Fetch.
//   - An engine that keeps polling borrows the loop (own.go): Poll then
//     reads the sockets itself and hands each message to the engine from
//     inside the decoder, an eager payload as a slice of its read buffer
//     (no ring), a pushed payload read from the socket straight into the
//     receive the engine matched (push.go). While the loop is not
//     borrowed and must run for Poll to get anywhere (a handshake, a park
//     Poll asked for), Poll calls runtime.Gosched every few empty passes:
//     a busy-polling goroutine never enters Go's scheduler, and with the
//     other P held by a goroutine blocked in a system call the loop waited
//     for the runtime's monitor, up to 10-15 ms (own.go, "The loop needs
//     a P").
//   - An RMA write's payload is read from the socket straight into the
//     target's region (rma.go, readRMADirect); one of 64 KiB or more
//     leaves the initiator without a copy, by vmsplice and splice
//     through a pipe, while the two sides poll on two CPUs (splice.go):
//     its buffers are the transport's until the target's answer, which
//     comes after the target read every byte.
//   - After traffic the loop keeps polling its sockets for an adaptive
//     window (at most Config.SpinMax, 100 us) before it sleeps in
//     epoll_wait, yielding its CPU between empty passes (spin.go): a
//     one-sided request to an idle target then finds a running thread
//     instead of paying a wake-up.
//   - The application's goroutine (the engine) calls Send, Fetch, Discard,
//     Resolve and Poll. Send writes to the socket itself with a
//     non-blocking writev when nothing is queued ahead of it: no hop to the
//     loop, no wake-up of the loop on the send side.
//   - Writes are serialised by the peer's mutex (the app, the loop and the
//     flusher all write through it). gnet's own write path is never used,
//     so its unbounded outbound buffer stays empty. Bytes that do not fit
//     in the socket wait in a bounded per-connection queue; a flusher
//     goroutine sleeping in its own epoll set (EPOLLOUT, one-shot) drains it
//     when the socket becomes writable.
//
// # Protocols by size
//
//   - eager (up to MaxEager, 16 KiB): header and payload in one frame;
//   - pushed (up to PushMax, 1 MiB): one PUSH frame, header then
//     payload, written with one writev from the sender's buffers; the
//     receiver reads it into the matched receive, or buffers it when no
//     receive matches yet (push.go);
//   - rendezvous (larger, or when the peer's window is half spent):
//     ready-to-send, clear-to-send from the receiver once a receive
//     matched, then the payload from the sender's buffers.
//
// # Flow control
//
// gnet cannot pause reading a connection, so back-pressure is credit
// based: each side announces a receive window in HELLO, a sender spends
// credit for every eager or ready-to-send frame and Send returns EAgain
// when the window is exhausted; the receiver returns credit only when the
// engine accepted a message (Sink.Arrive returned true). A message the
// engine refuses stays with the transport (bounded by the window) and is
// offered again on a later Poll, in order, while other peers continue. A
// peer that ignores its window is a protocol error and is disconnected.
// Rendezvous payloads are only sent when the receiver asks for them
// (clear-to-send), so unexpected large messages cost a header each.
//
// RMA answers are bounded the same way, by the initiator: the answer
// bytes its requests in flight may bring back stay within
// rmaAnswerWindow (32 MiB) per peer, a request past it waits (a new
// operation gets EAgain, a read unless its first rmaReadWindow requests
// all fit: no later operation overtakes part of a read up to the
// MaxOrder sizes), and a target never stops reading a connection
// (the same socket brings the answers to its own requests: two peers
// reading each other would wait for each other). A peer with more than
// twice that of answers unread is disconnected (rma.go, "Flow control of
// RMA answers"). One within it that stops reading (stopped in a
// debugger, or hostile) holds its queued answers, at most twice the
// window, as long as its connection lives: until it reads or closes, or
// Config.UserTimeout, when set, gives it up (the kernel counts a receive
// window shut that long as bytes not taken), which frees them.
package net
