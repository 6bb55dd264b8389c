package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/gofi-dev/fi"
)

// fabricOpts selects the endpoint a test runs on: fi_pingpong's -p, -e,
// -d and -m.
type fabricOpts struct {
	prov   string
	epType string
	domain string
	tagged bool
	wait   string // how to wait for completions: spin, yield or sread (see waitModes)
}

// parseEpType accepts fi_pingpong's spellings (msg, rdm, dgram) and
// libfabric's (FI_EP_RDM).
func parseEpType(s string) (fi.EpType, error) {
	switch strings.ToLower(s) {
	case "rdm", "fi_ep_rdm":
		return fi.EpRDM, nil
	case "msg", "fi_ep_msg":
		return fi.EpMsg, nil
	case "dgram", "fi_ep_dgram":
		return fi.EpDgram, nil
	}
	return 0, fmt.Errorf("unknown endpoint type %q (msg, rdm or dgram)", s)
}

// waitModes are the ways to wait for a completion (-wait):
//   - spin: busy-poll CQ.Read, as fi_pingpong does: the lowest latency on
//     an idle host, the worst tails on a loaded one (a spinner that loses
//     its vCPU stalls its peer for a scheduler slice);
//   - yield: spin, and give up the CPU (sched_yield) every 256 empty
//     polls, so a peer waiting for this vCPU runs: a few µs more at the
//     median, far shorter tails on a busy host;
//   - sread: CQ.Sread, gofi's own spin-then-sleep on the provider's
//     doorbell.
var waitModes = []string{"spin", "yield", "sread"}

func checkWait(s string) error {
	for _, m := range waitModes {
		if s == m {
			return nil
		}
	}
	return fmt.Errorf("-wait %q: want spin, yield or sread", s)
}

// testTag is the tag tagged tests send with.
const testTag = 0x5ca1ab1e

// errProvider marks a failure to find or open the requested provider.
var errProvider = errors.New("provider not available")

// node is one side's open fabric objects: an endpoint with its own
// transmit and receive CQs (as fi_pingpong opens them) and the peer in
// its AV. Not safe for concurrent use.
type node struct {
	info       *fi.Info
	fab        *fi.Fabric
	dom        *fi.Domain
	av         *fi.AV
	txcq, rxcq *fi.CQ
	ep         *fi.Endpoint
	tagged     bool
	peer       fi.Addr
	injectSize int
	timeout    time.Duration // bound on each completion wait
	ent        [16]fi.CQEntry
	txctx      *int
	rxctx      *int
	sread      bool
	yield      bool
	coop       bool          // yield to the scheduler now and then (spinsched.go)
	polls      uint32        // poll calls, for coopYield
	lastYield  time.Duration // since spinEpoch
}

// getInfo finds the provider o names. For a provider that serves remote
// peers (tcp) it asks again with localIP as the source, so the endpoint
// listens on the interface the peer reached us through.
func getInfo(o fabricOpts, localIP string) (*fi.Info, error) {
	et, err := parseEpType(o.epType)
	if err != nil {
		return nil, err
	}
	hints := fi.AllocInfo()
	hints.Caps = fi.Msg
	if o.tagged {
		hints.Caps = fi.Tagged
	}
	hints.EpAttr.Type = et
	hints.FabricAttr.ProvName = o.prov
	hints.DomainAttr.Name = o.domain
	ver := fi.Version(fi.MajorVersion, fi.MinorVersion)
	infos, err := fi.GetInfo(ver, "", "", 0, hints)
	if err != nil {
		return nil, provErr(o, et, err)
	}
	info := infos[0]
	if info.Caps&fi.RemoteComm != 0 && localIP != "" {
		if src, err := fi.GetInfo(ver, localIP, "", fi.Source|fi.NumericHost, hints); err == nil {
			info = src[0]
		}
	}
	return info, nil
}

func provErr(o fabricOpts, et fi.EpType, err error) error {
	what := "any provider"
	if o.prov != "" {
		what = "provider " + o.prov
	}
	if et != fi.EpRDM {
		return fmt.Errorf("%w: %s with %s endpoints (gofi serves FI_EP_RDM only; use -e rdm): %w", errProvider, what, et, err)
	}
	return fmt.Errorf("%w: %s: %w", errProvider, what, err)
}

// openNode opens fabric, domain, AV, CQs and an enabled endpoint.
func openNode(o fabricOpts, localIP string, timeout time.Duration) (n *node, err error) {
	info, err := getInfo(o, localIP)
	if err != nil {
		return nil, err
	}
	n = &node{info: info, tagged: o.tagged, timeout: timeout, txctx: new(int), rxctx: new(int), sread: o.wait == "sread", yield: o.wait == "yield"}
	wait := fi.WaitNone // fi_pingpong's busy-polled CQs
	if n.sread {
		wait = fi.WaitUnspec
	}
	defer func() {
		if err != nil {
			n.Close()
			n = nil
		}
	}()
	prov := info.FabricAttr.ProvName
	if n.fab, err = fi.OpenFabric(info.FabricAttr); err != nil {
		return n, fmt.Errorf("%w: %s: OpenFabric: %w", errProvider, prov, err)
	}
	if n.dom, err = n.fab.OpenDomain(info); err != nil {
		return n, fmt.Errorf("%w: %s: OpenDomain: %w", errProvider, prov, err)
	}
	if n.av, err = n.dom.OpenAV(&fi.AVAttr{Type: fi.AVTable}); err != nil {
		return n, fmt.Errorf("%s: OpenAV: %w", prov, err)
	}
	if n.txcq, err = n.dom.OpenCQ(&fi.CQAttr{Format: fi.CQFormatContext, WaitObj: wait}); err != nil {
		return n, fmt.Errorf("%s: OpenCQ: %w", prov, err)
	}
	if n.rxcq, err = n.dom.OpenCQ(&fi.CQAttr{Format: fi.CQFormatMsg, WaitObj: wait}); err != nil {
		return n, fmt.Errorf("%s: OpenCQ: %w", prov, err)
	}
	if n.ep, err = n.dom.OpenEndpoint(info); err != nil {
		return n, fmt.Errorf("%w: %s: OpenEndpoint: %w", errProvider, prov, err)
	}
	if err = n.ep.BindAV(n.av); err != nil {
		return n, fmt.Errorf("%s: BindAV: %w", prov, err)
	}
	if err = n.ep.BindCQ(n.txcq, fi.Transmit); err != nil {
		return n, fmt.Errorf("%s: BindCQ: %w", prov, err)
	}
	if err = n.ep.BindCQ(n.rxcq, fi.Recv); err != nil {
		return n, fmt.Errorf("%s: BindCQ: %w", prov, err)
	}
	if err = n.ep.Enable(); err != nil {
		return n, fmt.Errorf("%s: Enable: %w", prov, err)
	}
	n.injectSize = n.ep.Info().TxAttr.InjectSize
	return n, nil
}

// provName is the provider the node runs on.
func (n *node) provName() string { return n.info.FabricAttr.ProvName }

// name is the endpoint's address, for the peer's AV.
func (n *node) name() ([]byte, error) { return n.ep.Name() }

// insertPeer puts the peer's name into the AV.
func (n *node) insertPeer(name []byte) error {
	a, err := n.av.Insert([][]byte{name}, 0)
	if err != nil {
		return fmt.Errorf("inserting the peer's address %q: %w", name, err)
	}
	n.peer = a[0]
	return nil
}

// Close closes everything opened, in reverse order.
func (n *node) Close() error {
	var errs []error
	if n.ep != nil {
		errs = append(errs, n.ep.Close())
	}
	for _, cq := range []*fi.CQ{n.rxcq, n.txcq} {
		if cq != nil {
			errs = append(errs, cq.Close())
		}
	}
	if n.av != nil {
		errs = append(errs, n.av.Close())
	}
	if n.dom != nil {
		errs = append(errs, n.dom.Close())
	}
	if n.fab != nil {
		errs = append(errs, n.fab.Close())
	}
	return errors.Join(errs...)
}

// errTimeout marks a completion that did not come in time.
var errTimeout = errors.New("timed out waiting for a completion (peer dead or unreachable?)")

// poll reads up to len(n.ent) completions from cq without blocking and
// returns how many; a completion error is returned as an error.
func (n *node) poll(cq *fi.CQ, max int) (int, error) {
	if n.coop {
		if n.polls++; n.polls&63 == 0 {
			n.coopYield()
		}
	}
	c, err := cq.Read(n.ent[:min(max, len(n.ent))])
	if c > 0 {
		return c, nil
	}
	// The empty read is the busy-poll loop's common case: the type
	// assertion costs a few instructions where errors.Is (reflection for
	// comparability, then the chain walk) took about 50 of a loop of 440
	// (callgrind), delaying the moment a message is seen.
	if e, ok := err.(fi.Errno); err == nil || ok && e == fi.ErrAgain || errors.Is(err, fi.ErrAgain) {
		return 0, nil
	}
	if errors.Is(err, fi.ErrAvail) {
		e, rerr := cq.ReadErr()
		if rerr != nil {
			return 0, fmt.Errorf("reading an error completion: %w", rerr)
		}
		return 0, fmt.Errorf("completion error: %w (provider errno %d)", e.Err, e.ProvErrno)
	}
	return 0, fmt.Errorf("reading a completion: %w", err)
}

// wait busy-polls cq (as fi_pingpong does), or blocks in Sread, until
// want completions have been read, failing after the node's timeout
// without progress.
func (n *node) wait(cq *fi.CQ, want int) error {
	if n.sread {
		return n.sreadWait(cq, want)
	}
	var deadline time.Time
	for spins := 0; want > 0; spins++ {
		c, err := n.poll(cq, want)
		if err != nil {
			return err
		}
		if c > 0 {
			want -= c
			deadline, spins = time.Time{}, 0
			continue
		}
		if n.yield && spins&255 == 255 {
			syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
		}
		if spins&1023 == 1023 && n.timeout > 0 {
			if err := peerExited(); err != nil {
				return err
			}
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(n.timeout)
			} else if now.After(deadline) {
				return fmt.Errorf("%w: %w after %v%s", errPeerUnreachable, errTimeout, n.timeout, rtNote())
			}
		}
	}
	return nil
}

func (n *node) sreadWait(cq *fi.CQ, want int) error {
	// Sleep in slices, so a spawned peer that exits is noticed at once.
	const slice = 100 * time.Millisecond
	var deadline time.Time
	if n.timeout > 0 {
		deadline = time.Now().Add(n.timeout)
	}
	for want > 0 {
		c, err := cq.Sread(n.ent[:min(want, len(n.ent))], slice)
		switch {
		case c > 0:
			want -= c
			if n.timeout > 0 {
				deadline = time.Now().Add(n.timeout)
			}
		case errors.Is(err, fi.ErrAgain):
			if perr := peerExited(); perr != nil {
				return perr
			}
			if !deadline.IsZero() && time.Now().After(deadline) {
				return fmt.Errorf("%w: %w after %v%s", errPeerUnreachable, errTimeout, n.timeout, rtNote())
			}
		case errors.Is(err, fi.ErrAvail):
			e, rerr := cq.ReadErr()
			if rerr != nil {
				return fmt.Errorf("reading an error completion: %w", rerr)
			}
			return fmt.Errorf("completion error: %w (provider errno %d)", e.Err, e.ProvErrno)
		case err != nil:
			return fmt.Errorf("reading a completion: %w", err)
		}
	}
	return nil
}

// postRecv posts buf for the next message from the peer.
func (n *node) postRecv(buf []byte) error {
	for {
		var err error
		if n.tagged {
			err = n.ep.TRecv(buf, fi.AddrUnspec, testTag, 0, n.rxctx)
		} else {
			err = n.ep.Recv(buf, fi.AddrUnspec, n.rxctx)
		}
		if !errors.Is(err, fi.ErrAgain) {
			if err != nil {
				return fmt.Errorf("posting a receive: %w", err)
			}
			return nil
		}
		if _, err := n.poll(n.rxcq, 0); err != nil {
			return err
		}
	}
}

// post sends buf to the peer: an inject (no completion) when inject is
// set, otherwise a send whose completion the caller reaps. A full queue
// is progressed and retried, as fi_pingpong's PP_POST does; reaped send
// completions are returned so the caller can account for them.
func (n *node) post(buf []byte, inject bool) (reaped int, err error) {
	var deadline time.Time
	for spins := 0; ; spins++ {
		switch {
		case inject && n.tagged:
			err = n.ep.TInject(buf, n.peer, testTag)
		case inject:
			err = n.ep.Inject(buf, n.peer)
		case n.tagged:
			err = n.ep.TSend(buf, n.peer, testTag, n.txctx)
		default:
			err = n.ep.Send(buf, n.peer, n.txctx)
		}
		if !errors.Is(err, fi.ErrAgain) {
			if err != nil {
				return reaped, fmt.Errorf("sending %d bytes: %w", len(buf), err)
			}
			return reaped, nil
		}
		c, perr := n.poll(n.txcq, len(n.ent))
		if perr != nil {
			return reaped, perr
		}
		reaped += c
		if spins&1023 == 1023 && n.timeout > 0 {
			if err := peerExited(); err != nil {
				return reaped, err
			}
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(n.timeout)
			} else if now.After(deadline) {
				return reaped, fmt.Errorf("%w: send queue stuck full for %v%s", errPeerUnreachable, n.timeout, rtNote())
			}
		}
	}
}
