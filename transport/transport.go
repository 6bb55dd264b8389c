package transport

import "time"

// Kind says which queue an inbound message matches against.
type Kind uint8

const (
	KindMsg    Kind = 1 // fi_msg: untagged
	KindTagged Kind = 2 // fi_tagged
	// KindColl is collective traffic (fi_collective): the engine hands it
	// to its collective sink, never to the message matchers.
	KindColl Kind = 3
)

// ValidKind reports whether k is a message kind (msg, tagged, coll) that
// may carry a payload; KindRMAData (rma.go) carries none and is checked
// apart.
func ValidKind(k Kind) bool { return k >= KindMsg && k <= KindColl }

// Header flag bits.
const (
	FlagRemoteData uint8 = 1 << 0 // Data is valid (FI_REMOTE_CQ_DATA)
)

// Header describes one message. Transports carry it to the peer unchanged.
type Header struct {
	Kind  Kind
	Flags uint8
	Group uint32 // peer group id (fi_av(3) PEER GROUPS); 0 when unused
	Tag   uint64
	Data  uint64
	Len   uint64 // total payload length in bytes
}

// Peer indexes a transport's table of peers. Indices are dense from 0 and
// stay valid until the transport is closed; a peer that restarts keeps its
// index (its address is the same) while its connection is replaced.
type Peer uint32

// Op is an opaque operation token chosen by the engine and handed back in
// completion callbacks. Transports store it and never interpret it.
type Op uint64

// Code is a libfabric errno value (positive); 0 is success. Transports
// report failures with the numbers of rdma/fi_errno.h: 11 EAGAIN,
// 104 ECONNRESET, 111 ECONNREFUSED, 110 ETIMEDOUT, 5 EIO, 22 EINVAL ...
type Code int32

// Well-known codes, numbered as in rdma/fi_errno.h.
const (
	OK          Code = 0
	EIO         Code = 5
	EAgain      Code = 11
	ENoSpc      Code = 28
	EInval      Code = 22
	EMsgSize    Code = 90
	EConnReset  Code = 104
	ENotConn    Code = 107
	ETimedOut   Code = 110
	EConnRefuse Code = 111
	EHostUnrch  Code = 113
	ECanceled   Code = 125
	ETrunc      Code = 265
)

// Sink receives what a transport's Poll delivers. The engine implements it.
// Every method is called only from inside Transport.Poll, on the goroutine
// that called Poll.
type Sink interface {
	// Arrive announces a message from peer. When the whole payload is
	// present, eager holds it (len(eager) == hdr.Len) and is valid only
	// during the call: the engine copies it out. Otherwise eager is nil and
	// cookie names the payload, which the engine later pulls with
	// Transport.Fetch (rendezvous / single copy).
	//
	// Arrive returns false when the engine cannot take the message now (its
	// completion queue or unexpected-message buffer is full). The transport
	// must then stop consuming this peer's inbound stream and deliver the
	// same message again on a later Poll: nothing is dropped, and flow
	// control pushes back on the sender.
	Arrive(peer Peer, hdr *Header, eager []byte, cookie uint64) bool

	// SendDone completes a Send that returned done == false.
	SendDone(op Op, c Code)

	// FetchDone completes a Fetch that returned done == false; n bytes
	// were written into the destination.
	FetchDone(op Op, n int, c Code)

	// PeerDown reports that a peer died, reset or could not be reached:
	// every operation the transport still held for it has already been
	// completed with an error through SendDone / FetchDone. Messages
	// announced earlier but never fetched fail on Fetch.
	PeerDown(peer Peer, c Code)
}

// Transport moves messages between this endpoint and its peers. Unless a
// method says otherwise, calls are serialised by the engine (one goroutine
// at a time), so implementations need no locks on these paths.
type Transport interface {
	// Name returns this endpoint's address in the provider's format (what
	// fi_getname reports and peers insert into their AVs).
	Name() []byte

	// Resolve maps a peer address to its Peer index, creating the entry on
	// first use. It must not block on the network: connections are made
	// lazily and their failure is reported through SendDone / PeerDown.
	Resolve(addr []byte) (Peer, Code)

	// PeerAddr returns the address a peer announced (its Name), so the
	// engine can find it in the address vector for FI_SOURCE.
	PeerAddr(p Peer) []byte

	// MaxEager is the largest payload Send may copy and complete at once.
	// It is fixed for the transport's life: the engine reads it once.
	MaxEager() int

	// Send starts a message. iov is the payload, sum of lengths == hdr.Len;
	// the engine owns iov itself and keeps it unchanged until the
	// operation completes, so the transport may hold it.
	// When done is true the payload has been copied (or fully handed over)
	// and the operation is complete; the engine may reuse the buffers. When
	// done is false the transport keeps the buffers until it calls
	// Sink.SendDone(op, ...). EAgain means "no room now, nothing was sent":
	// the caller progresses and retries.
	//
	// A payload of at most MaxEager bytes is copied before Send returns,
	// whatever done says, unless the transport implements InjectSender:
	// then Send may hold such a payload too (shm to a peer whose CPU shares
	// no cache with ours), and SendInject is the send that copies it (the
	// engine's inject reuses the caller's buffer at once). Completion, done or SendDone, means the message will
	// reach a live receiver that keeps progressing, with no further
	// progress of this side: a send that still needs ours (segments to
	// stream, a record waiting for room) is not complete yet (shm's bounce
	// sends, TestTransport_BounceSendNeedsNoSenderProgressAfterCompletion).
	Send(p Peer, hdr *Header, iov [][]byte, op Op) (done bool, c Code)

	// Fetch pulls the payload of a message announced with cookie into dst
	// (at most sum of len(dst) bytes; the message may be truncated, and the
	// transport still tells the sender it was consumed). done is true when
	// it finished synchronously, with n bytes written; otherwise
	// Sink.FetchDone(op, n, c) follows. As for Send, completion means
	// that what the sender waits for from us (an acknowledgement) needs
	// no further progress of ours (shm:
	// TestTransport_ReceiveCompletesOnlyWithItsACKWritten).
	Fetch(p Peer, cookie uint64, dst [][]byte, op Op) (done bool, n int, c Code)

	// Discard tells the sender a rendezvous message was dropped unread
	// (FI_DISCARD, or a truncated zero-length receive). A transport that
	// may have to wait before the sender is told implements Discarder,
	// which the engine uses for the drops it reports as complete.
	Discard(p Peer, cookie uint64)

	// Poll delivers inbound work to sink and reports whether it did any.
	Poll(sink Sink) bool

	// Wait sleeps until inbound work may be there, Wake is called, or the
	// timeout passes; spurious returns are allowed. Wait and Wake are safe
	// to call from any goroutine.
	Wait(timeout time.Duration)
	Wake()

	// Close releases the transport; operations still held fail with
	// ECanceled through the sink given to the last Poll, or are dropped
	// if Close is called after the engine stopped polling.
	Close() error
}

// InjectSender is an optional interface of a transport whose Send may
// keep a payload of at most MaxEager bytes until SendDone, reading the
// caller's buffers after Send returned (shm: eager sizes to a far peer by
// rendezvous). SendInject is Send for a payload of at most MaxEager bytes
// whose buffers the caller reuses once it returns (the engine's inject,
// fi_inject): it copies the payload before returning, whatever done says,
// and is otherwise Send (same codes, SendDone when done is false).
type InjectSender interface {
	SendInject(p Peer, hdr *Header, iov [][]byte, op Op) (done bool, c Code)
}

// EagerSender is an optional interface of a transport that can often
// finish a small send inside the call (shm: one record in the peer's
// ring). The engine then completes the operation without a transmit slot.
type EagerSender interface {
	// SendEager sends the message now when the transport can complete it
	// within this call, copying iov and keeping neither hdr nor iov: it
	// returns true. It returns false with code 0 when it cannot right now
	// (a rendezvous size, a connection or control traffic in progress, a
	// full or small ring): nothing was sent, and the caller uses Send,
	// which handles every case. A non-zero code is what Send would return.
	// Serialised by the engine like Send.
	SendEager(p Peer, hdr *Header, iov [][]byte) (sent bool, c Code)
}

// Poker is an optional interface of a transport whose peers on this host
// can be woken without a message (shm): collectives that synchronise
// through shared memory use it so that a rank asleep in Sread (on the
// transport's Wait) learns that the others arrived. Calls are serialised
// by the engine like the other methods.
type Poker interface {
	// Poke makes peer p's progress run soon: a Wait it sleeps in returns,
	// if it counts pokes (WaitPokes). Nothing is sent. False when p cannot
	// be poked (unknown, gone, or not on this host).
	Poke(p Peer) bool
	// WaitPokes adds delta to the number of waiters for pokes: while it is
	// above 0, Wait returns when this endpoint is poked.
	WaitPokes(delta int)
}

// Ringer is an optional interface of a transport whose Wait sleeps on a
// doorbell that peers on this host can ring without a message, and can
// also watch a condition of its user's (shm). Collectives that
// synchronise through shared memory use it instead of Poker: the waiting
// side's condition reads the shared flags directly, so the side that
// publishes an arrival wakes a peer only when that peer sleeps, and
// otherwise pays one shared load.
//
// The protocol has no lost wake-up: Wait announces itself as a sleeper
// (a sequentially consistent read-modify-write of its doorbell's waiter
// count) before it evaluates the condition, and the publisher stores its
// flag (sequentially consistent) before RingPeer loads that count: either
// the condition sees the flag, or RingPeer sees the sleeper.
type Ringer interface {
	// RingPeer wakes peer p's Wait if p sleeps in it (or is about to);
	// without sleepers it is a load. False when p cannot be rung
	// (unknown, gone, or not on this host). Serialised by the engine
	// like the other methods.
	RingPeer(p Peer) bool
	// SetWaitCond makes Wait also return when cond reports true; nil
	// removes it. cond runs on the goroutine in Wait, concurrently with
	// everything else (it must be safe for that, cheap, and must not
	// block), after Wait announced itself as a sleeper and after every
	// wake-up.
	SetWaitCond(cond func() bool)
}

// Discarder is an optional interface of a transport whose Discard may
// have to wait before the sender is told (shm: the acknowledgement waits
// for room in the ring to the sender, which the receiver's own unread
// messages may fill). The engine uses it for the drops it reports as
// complete (FI_DISCARD), and reports them only once the sender has been
// told: otherwise a receiver that stops progressing after its completion
// leaves the sender's send waiting for good.
type Discarder interface {
	// DiscardOp is Discard that reports whether the sender has been told
	// (or never will be: the peer is gone, the message unknown). When it
	// returns false, Sink.FetchDone(op, 0, c) follows once it has been
	// (or the transport gave up: the peer failed, Close).
	DiscardOp(p Peer, cookie uint64, op Op) (done bool)
}

// Preparer is an optional interface of a transport that can make a peer's
// state and its connection before the first message (shm: the peer's
// region mapped, our ring to it created and announced, its pending
// announcements to us accepted). The engine calls it when addresses are
// inserted into a bound address vector, so that the first message of a
// short run does not pay for it (issue 12: fi_pingpong's default runs).
type Preparer interface {
	// Prepare makes what a first send to p would make, if it can now
	// without blocking. It is a hint: a failure leaves nothing half made
	// and is not reported (the first Send tries again and reports it).
	// Serialised by the engine like Send.
	Prepare(p Peer)
}

// RecvPreparer is an optional interface of a transport that prepares a
// large receive buffer when it is posted, before any message lands in it
// (shm: backs its memory with huge pages, so that a peer's single copy
// into it pins 2 MiB at a time). A receive is usually posted before the
// peer sends, so the first message of a short run does not pay for it
// (issue 12).
type RecvPreparer interface {
	// RecvPrepareMin is the smallest buffer PrepareRecv acts on, 0 for
	// none; a fixed figure, read once.
	RecvPrepareMin() int
	// PrepareRecv is called with each posted receive buffer of at least
	// RecvPrepareMin bytes. A hint: nothing is reported. Serialised by the
	// engine like Send.
	PrepareRecv(b []byte)
}

// CPUSharer is an optional interface of a transport that learns on which
// CPU its peers' polling threads run (shm: each side writes its CPU into
// its region now and then). Safe for concurrent use with everything else.
type CPUSharer interface {
	// PeerShares reports whether a peer that should stay where it is
	// (by an order both sides agree on, so that only one of the two
	// moves) last polled on cpu: a busy-polling reader there that found
	// its CPU shared moves to another one (engine, move_linux.go).
	PeerShares(cpu int) bool
}
