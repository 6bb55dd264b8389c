package engine

import "github.com/gofi-dev/fi/transport"

// FlagCollective is FI_COLLECTIVE: the completion flag of a join and of
// every collective operation.
const FlagCollective uint64 = 1 << 6

// tokColl marks transport operations started by the collective sink
// (CollSend, CollFetch): the low 62 bits are the sink's own token.
const tokColl uint64 = 3 << 62

// CollSink is the collective engine attached to an endpoint (package
// coll). The endpoint hands it every message of kind transport.KindColl,
// the completions of the transport operations it started, peer failures,
// and a call on every progress pass, so collectives advance on the same
// progress path as messages and complete on the endpoint's CQ.
//
// Every method is called with the domain's Serial held (from inside
// Progress, or from Close), on the goroutine driving progress, and must
// not block.
type CollSink interface {
	// CollArrive is Sink.Arrive for a collective message from transport
	// peer p: eager holds the payload (valid only during the call) or is
	// nil and cookie names it for CollFetch. False pushes back (the
	// transport delivers the message again later).
	CollArrive(p transport.Peer, hdr *transport.Header, eager []byte, cookie uint64) bool
	// CollSendDone completes a CollSend that returned done == false.
	CollSendDone(tok uint64, c Code)
	// CollFetchDone completes a CollFetch that returned done == false.
	CollFetchDone(tok uint64, n int, c Code)
	// CollPeerDown reports a failed peer.
	CollPeerDown(p transport.Peer, c Code)
	// CollProgress advances work that no message drives (shared-memory
	// collectives, retries of sends that met a full transport); it
	// reports whether it did any.
	CollProgress() bool
	// CollShmWait reports whether an operation waits on shared memory
	// (its peers' flags), where CollProgress alone can advance it: the
	// endpoint then polls its transport on one pass in eight only.
	CollShmWait() bool
	// CollPeersElsewhere reports whether the operation waits on shared
	// memory only for ranks that last waited on another CPU than the
	// caller's: a yield cannot run them there (Sread in yield mode skips
	// it, collYieldSkips in a row at most).
	CollPeersElsewhere() bool
	// CollClose fails whatever is in flight: the endpoint is closing.
	CollClose()
}

// SetColl attaches the collective sink; nil detaches it. Without a sink,
// collective messages from peers are dropped (their senders' operations
// complete, as for a discarded message).
func (ep *Endpoint) SetColl(s CollSink) {
	ep.ser.Lock()
	ep.coll = s
	ep.ser.Unlock()
}

// Lock takes the domain's Serial, for the collective sink's calls that do
// not come from inside progress. Every Coll* method below needs it held.
func (ep *Endpoint) Lock() { ep.ser.Lock() }

// Unlock releases what Lock took.
func (ep *Endpoint) Unlock() { ep.ser.Unlock() }

// Closed reports whether Close ran. The caller holds the Serial.
func (ep *Endpoint) Closed() bool { return ep.closed }

// Transport returns the endpoint's transport (for its Name and limits).
func (ep *Endpoint) Transport() transport.Transport { return ep.tr }

// CollResolve maps fi_addr a to its transport peer, as sends do.
func (ep *Endpoint) CollResolve(a uint64) (transport.Peer, Code) {
	if ep.closed {
		return 0, CodeInval
	}
	return ep.peer(a)
}

// CollSend starts a collective message (hdr.Kind must be KindColl). The
// header and iov must stay unchanged until the operation completes: done
// true at once, or CollSendDone(tok) later. CodeAgain means no room now.
func (ep *Endpoint) CollSend(p transport.Peer, hdr *transport.Header, iov [][]byte, tok uint64) (bool, Code) {
	if ep.closed {
		return false, CodeCanceled
	}
	done, c := ep.tr.Send(p, hdr, iov, transport.Op(tokColl|tok&tokMask))
	return done, Code(c)
}

// CollFetch pulls the payload of a collective message announced with
// cookie into dst: done true with n bytes at once, or CollFetchDone(tok)
// later. While it is in flight the peer's inbound stream keeps moving
// (see Fetching); the sink calls CollFetchEnd when it completes later.
func (ep *Endpoint) CollFetch(p transport.Peer, cookie uint64, dst [][]byte, tok uint64) (bool, int, Code) {
	if ep.closed {
		return true, 0, CodeCanceled
	}
	for int(p) >= len(ep.fetching) {
		ep.fetching = append(ep.fetching, 0)
	}
	ep.fetching[p]++
	done, n, c := ep.tr.Fetch(p, cookie, dst, transport.Op(tokColl|tok&tokMask))
	if done {
		ep.fetching[p]--
	}
	return done, n, Code(c)
}

// CollFetchEnd tells the endpoint that a fetch from p which CollFetch
// left in flight has completed (the sink calls it from CollFetchDone).
func (ep *Endpoint) CollFetchEnd(p transport.Peer) {
	if int(p) < len(ep.fetching) && ep.fetching[p] > 0 {
		ep.fetching[p]--
	}
}

// CollDiscard drops an announced collective message unread.
func (ep *Endpoint) CollDiscard(p transport.Peer, cookie uint64) {
	if !ep.closed {
		ep.tr.Discard(p, cookie)
	}
}

// Fetching reports whether a fetch from peer p is in flight: then its
// inbound stream must not be stopped (the payload may follow on it).
func (ep *Endpoint) Fetching(p transport.Peer) bool {
	return int(p) < len(ep.fetching) && ep.fetching[p] > 0
}

// CollComplete pushes a collective completion onto the transmit CQ. A
// successful one is suppressed under FI_SELECTIVE_COMPLETION unless
// FlagCompletion is in flags; errors always report. It returns false when
// no transmit CQ is bound.
func (ep *Endpoint) CollComplete(ctx any, flags uint64, c Code) bool {
	cq := ep.cfg.TxCQ
	if cq == nil {
		return false
	}
	if c != 0 {
		cq.Push(&Entry{Context: ctx, Flags: FlagCollective, Err: c, Src: AddrUnknown})
		return true
	}
	if ep.cfg.TxSelective && flags&FlagCompletion == 0 {
		return true
	}
	e := cq.next() // filled in place, every field
	*e = Entry{Context: ctx, Flags: FlagCollective}
	return true
}

// HasTxCQ reports whether a transmit CQ is bound (collectives report
// there).
func (ep *Endpoint) HasTxCQ() bool { return ep.cfg.TxCQ != nil }

// Wake makes a sleeping Sread on this endpoint's CQs run progress again.
func (ep *Endpoint) Wake() { ep.tr.Wake() }

// collDone routes a transport completion of a collective operation.
func (ep *Endpoint) collSendDone(op transport.Op, c transport.Code) {
	if ep.coll != nil {
		ep.coll.CollSendDone(uint64(op)&tokMask, Code(c))
	}
}

func (ep *Endpoint) collFetchDone(op transport.Op, n int, c transport.Code) {
	if ep.coll != nil {
		ep.coll.CollFetchDone(uint64(op)&tokMask, n, Code(c))
	}
}

// collArrive hands a collective message to the sink, or drops it.
func (ep *Endpoint) collArrive(p transport.Peer, hdr *transport.Header, eager []byte, cookie uint64) bool {
	if ep.coll == nil {
		if eager == nil {
			ep.tr.Discard(p, cookie)
		}
		return true
	}
	return ep.coll.CollArrive(p, hdr, eager, cookie)
}
