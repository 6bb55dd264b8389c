package transport

// One-sided operations (RMA and atomics) cross the boundary through an
// optional interface: a transport that carries them implements
// RMATransport, and the engine type-asserts it. A transport that wraps
// others (a linked shm+tcp endpoint) forwards RMA to the member that
// reaches the peer.

// KindRMAData is the kind of the zero-payload message that carries the
// remote CQ data of an RMA write (fi_writedata) to the target's engine
// after the write completed: Header.Data holds the CQ data, Header.Tag the
// number of bytes written, Header.Len is 0 and Flags has FlagRemoteData.
// Transports carry it like any message: Send accepts it and the peer's
// Poll delivers it through Sink.Arrive, in order with the peer's other
// messages.
const KindRMAData Kind = 4

// RMAKind says what an RMA request does.
type RMAKind uint8

// RMA request kinds.
const (
	RMAWrite   RMAKind = 1 // Local is copied into the remote ranges
	RMARead    RMAKind = 2 // the remote ranges are copied into Local
	RMAAtomic  RMAKind = 3 // fi_atomic: Local holds operands
	RMAFetch   RMAKind = 4 // fi_fetch_atomic: Local operands, Result gets old values
	RMACompare RMAKind = 5 // fi_compare_atomic: Local, Compare operands, Result
)

// RMAIOV is one remote range: Len bytes at address Addr (the region's
// offset plus a position in it) of the region registered under Key.
type RMAIOV struct {
	Addr, Len, Key uint64
}

// RMAReq describes one one-sided operation. The sum of the Remote lengths
// equals the sum of the Local lengths (for RMAFetch with AtomicRead, of
// the Result lengths); for atomics, Compare and Result have that length
// too and every length is a multiple of the datatype's size. The engine
// owns the request and everything it names and keeps them unchanged until
// the operation completes, except that with Inject the transport must not
// touch Local or Compare after RMA returns.
type RMAReq struct {
	Kind     RMAKind
	Inject   bool
	Datatype uint8 // atomics: dtype.Type value
	Op       uint8 // atomics: dtype.Op value
	Local    [][]byte
	Compare  [][]byte
	Result   [][]byte
	Remote   []RMAIOV
}

// RMATransport is implemented by transports that carry one-sided
// operations. Calls are serialised by the engine like Send.
type RMATransport interface {
	// RMA starts req to peer p. done == true means it finished at once
	// (successfully when c == OK; with c != OK it failed, and nothing was
	// written at the target). done == false with OK means
	// Sink.SendDone(op, code) follows; EAgain means no room now, nothing
	// was started. The code of a failed operation is a libfabric errno:
	// 13 EACCES (unknown or closed key, missing right), 22 EINVAL (range,
	// alignment, count), 95 EOPNOTSUPP (datatype or operation),
	// 104 ECONNRESET (peer died) and the transport's own.
	RMA(p Peer, req *RMAReq, op Op) (done bool, c Code)
}
