package launch

// The ring every real-launcher test runs: Init, open an endpoint on the
// provider named in the role argument, Connect, then pass messages around
// the ring (rank r sends to r+1 and receives from r-1) at a small and a
// large size, checking every byte.

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gofi-dev/fi"
	"github.com/gofi-dev/fi/internal/hosts"
)

func init() {
	roles["ring"] = ringRole
}

// testEP is an endpoint with its AV and CQ.
type testEP struct {
	fab *fi.Fabric
	dom *fi.Domain
	av  *fi.AV
	cq  *fi.CQ
	ep  *fi.Endpoint
}

// openTestEP opens an RDM endpoint of provider prov ("shm", "tcp",
// "shm+tcp").
func openTestEP(t testing.TB, prov string) *testEP {
	t.Helper()
	hints := fi.AllocInfo()
	hints.Caps = fi.Msg | fi.Tagged
	hints.EpAttr.Type = fi.EpRDM
	hints.FabricAttr.ProvName = prov
	infos, err := fi.GetInfo(fi.Version(2, 0), "", "", 0, hints)
	if err != nil {
		t.Fatalf("GetInfo(%s): %v", prov, err)
	}
	return openInfoEP(t, infos[0])
}

// openInfoEP opens an endpoint of info with an AV and one CQ for both
// directions.
func openInfoEP(t testing.TB, info *fi.Info) *testEP {
	t.Helper()
	var err error
	e := &testEP{}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	e.fab, err = fi.OpenFabric(info.FabricAttr)
	must(err)
	e.dom, err = e.fab.OpenDomain(info)
	must(err)
	e.av, err = e.dom.OpenAV(&fi.AVAttr{Type: fi.AVTable})
	must(err)
	e.cq, err = e.dom.OpenCQ(&fi.CQAttr{Size: 256, Format: fi.CQFormatMsg, WaitObj: fi.WaitUnspec})
	must(err)
	e.ep, err = e.dom.OpenEndpoint(info)
	must(err)
	must(e.ep.BindAV(e.av))
	must(e.ep.BindCQ(e.cq, fi.Transmit|fi.Recv))
	must(e.ep.Enable())
	t.Cleanup(e.close)
	return e
}

func (e *testEP) close() {
	e.ep.Close()
	e.cq.Close()
	e.av.Close()
	e.dom.Close()
	e.fab.Close()
}

// wait reads n completions, failing on an error entry or the deadline.
func (e *testEP) wait(n int, deadline time.Time) error {
	var ents [8]fi.CQEntry
	for n > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d completions missing at the deadline", n)
		}
		k, err := e.cq.Sread(ents[:], 100*time.Millisecond)
		switch {
		case errors.Is(err, fi.ErrAvail):
			ee, _ := e.cq.ReadErr()
			return fmt.Errorf("error completion: %v", ee.Err)
		case errors.Is(err, fi.ErrAgain):
			continue
		case err != nil:
			return err
		}
		n -= k
	}
	return nil
}

// poll reads what completions there are without waiting.
func (e *testEP) poll() (int, error) {
	var ents [8]fi.CQEntry
	k, err := e.cq.Read(ents[:])
	switch {
	case errors.Is(err, fi.ErrAgain):
		return 0, nil
	case errors.Is(err, fi.ErrAvail):
		ee, _ := e.cq.ReadErr()
		return 0, fmt.Errorf("error completion: %v", ee.Err)
	}
	return k, err
}

// ring passes rounds of messages of each size around the ring.
func ring(e *testEP, job *Job, addrs []fi.Addr, sizes []int, rounds int, deadline time.Time) error {
	me, n := job.Rank(), job.Size()
	right, left := addrs[(me+1)%n], addrs[(me+n-1)%n]
	from := (me + n - 1) % n
	for _, size := range sizes {
		out := make([]byte, size)
		in := make([]byte, size)
		for round := range rounds {
			fill(out, me, round)
			clear(in)
			if err := e.ep.Recv(in, left, nil); err != nil {
				return fmt.Errorf("recv: %w", err)
			}
			got := 0
			for {
				err := e.ep.Send(out, right, nil)
				if err == nil {
					break
				}
				if !errors.Is(err, fi.ErrAgain) || time.Now().After(deadline) {
					return fmt.Errorf("send: %w", err)
				}
				k, err := e.poll()
				if err != nil {
					return err
				}
				got += k
			}
			if err := e.wait(2-got, deadline); err != nil {
				return fmt.Errorf("size %d round %d: %w", size, round, err)
			}
			want := make([]byte, size)
			fill(want, from, round)
			if !bytes.Equal(in, want) {
				return fmt.Errorf("size %d round %d: message from rank %d is corrupt", size, round, from)
			}
		}
	}
	return nil
}

// fill writes a pattern naming the sender and round.
func fill(b []byte, rank, round int) {
	for i := range b {
		b[i] = byte(rank*31 + round*7 + i)
	}
}

// ringRole: arg is the provider.
func ringRole(t *testing.T, prov string) string {
	deadline := time.Now().Add(60 * time.Second)
	job, err := Init(Timeout(60 * time.Second))
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	e := openTestEP(t, prov)
	addrs, err := Connect(job, e.ep, e.av)
	if err != nil {
		t.Fatalf("rank %d: Connect: %v", job.Rank(), err)
	}
	if len(addrs) != job.Size() {
		t.Fatalf("Connect gave %d addresses for %d ranks", len(addrs), job.Size())
	}
	if job.Size() > 1 {
		if err := ring(e, job, addrs, []int{64, 256 << 10}, 3, deadline); err != nil {
			t.Fatalf("rank %d: ring: %v", job.Rank(), err)
		}
	}
	// Everyone's receives are complete before anyone closes.
	if err := job.Barrier(); err != nil {
		t.Fatalf("rank %d: Barrier: %v", job.Rank(), err)
	}
	if err := job.Finalize(); err != nil {
		t.Fatalf("rank %d: Finalize: %v", job.Rank(), err)
	}
	route := "-" // how the linked endpoint reaches the right neighbour
	if prov == "shm+tcp" {
		right := addrs[(job.Rank()+1)%job.Size()]
		if b, err := e.av.Lookup(right); err == nil {
			for _, via := range []string{"shm", "tcp"} {
				if strings.Contains(string(b), "via="+via) {
					route = via
				}
			}
		}
	}
	host := "-"
	if name, _, ok := hosts.Here(); ok {
		host = name
	}
	return fmt.Sprintf("%d ok size=%d local=%d/%d launcher=%s prov=%s host=%s right=%s",
		job.Rank(), job.Size(), job.LocalRank(), job.LocalSize(), job.Launcher(), prov, host, route)
}
