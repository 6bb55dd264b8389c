package fi

import "github.com/gofi-dev/fi/engine"

// epCntrs are the counters bound to an endpoint, by what they count.
type epCntrs struct {
	send, recv, read, write *Cntr
	remoteRead, remoteWrite *Cntr
}

// cntrFlags are the flags Endpoint.BindCntr accepts.
const cntrFlags = Send | Recv | Read | Write | RemoteRead | RemoteWrite

// BindCntr binds a counter to the endpoint (fi_ep_bind with a counter)
// before Enable. flags say what it counts: Send and Recv (message
// completions), Write and Read (this endpoint's RMA writes and reads, and
// its atomics: fetching ones count as reads), RemoteWrite and RemoteRead
// (peers' RMA and atomics targeting this endpoint, counted at the target
// as they execute; the endpoint needs the RMA or Atomic capability). One
// counter per flag; a counter may serve several flags and endpoints.
func (ep *Endpoint) BindCntr(c *Cntr, flags Flags) error {
	const op = "Endpoint.BindCntr"
	switch {
	case ep.closed:
		return opErr(op, ErrOpBadState, "endpoint closed")
	case c == nil:
		return opErr(op, ErrInval, "nil counter")
	case c.dom != ep.dom:
		return opErr(op, ErrInval, "counter belongs to another domain")
	case ep.enabled:
		return opErr(op, ErrOpBadState, "endpoint already enabled")
	case flags&^cntrFlags != 0 || flags == 0:
		return opErr(op, ErrBadFlags, "flags %s (Send, Recv, Read, Write, RemoteRead, RemoteWrite)", flags)
	case flags&(Read|Write|RemoteRead|RemoteWrite) != 0 && ep.caps&(RMA|Atomic) == 0:
		return opErr(op, ErrOpNotSupp, "endpoint lacks the RMA and Atomic capabilities")
	}
	slots := []struct {
		f Flags
		p **Cntr
	}{
		{Send, &ep.cntrs.send}, {Recv, &ep.cntrs.recv}, {Read, &ep.cntrs.read},
		{Write, &ep.cntrs.write}, {RemoteRead, &ep.cntrs.remoteRead}, {RemoteWrite, &ep.cntrs.remoteWrite},
	}
	for _, s := range slots {
		if flags&s.f != 0 && *s.p != nil {
			return opErr(op, ErrInval, "a counter is already bound for %s", s.f)
		}
	}
	for _, s := range slots {
		if flags&s.f == 0 {
			continue
		}
		if err := c.bind(); err != nil {
			return err
		}
		*s.p = c
	}
	return nil
}

// config hands the local counters to the engine.
func (k *epCntrs) config(cfg *engine.Config) {
	if k.send != nil {
		cfg.SendCntr = k.send.c
	}
	if k.recv != nil {
		cfg.RecvCntr = k.recv.c
	}
	if k.read != nil {
		cfg.ReadCntr = k.read.c
	}
	if k.write != nil {
		cfg.WriteCntr = k.write.c
	}
}

func (k *epCntrs) all() []*Cntr {
	return []*Cntr{k.send, k.recv, k.read, k.write, k.remoteRead, k.remoteWrite}
}

// enable makes the counters of local operations drive the endpoint's
// progress. RemoteRead and RemoteWrite counters are counted by whoever
// executes a peer's operation (the tcp event loop, a shm initiator or
// executor) without this endpoint's progress, so their Wait sleeps on the
// counter itself and wakes at the count.
func (k *epCntrs) enable(e *engine.Endpoint) {
	for _, c := range []*Cntr{k.send, k.recv, k.read, k.write} {
		if c != nil {
			c.addEp(e)
		}
	}
}

// release unbinds every counter (endpoint Close).
func (k *epCntrs) release(e *engine.Endpoint) {
	for _, c := range k.all() {
		if c != nil {
			if e != nil {
				c.removeEp(e)
			}
			c.unbind()
		}
	}
	*k = epCntrs{}
}
