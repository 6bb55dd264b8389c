package fi_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"math"
	"sync"
	"time"

	"github.com/gofi-dev/fi"
)

// rankEP is one member of the example's job: in a real job each rank is
// its own process (started by mpiexec or srun; see package launch).
type rankEP struct {
	fab *fi.Fabric
	dom *fi.Domain
	av  *fi.AV
	cq  *fi.CQ
	ep  *fi.Endpoint
}

func openRank(info *fi.Info) *rankEP {
	r := &rankEP{}
	var err error
	must := func(err error) {
		if err != nil {
			log.Fatal(err)
		}
	}
	r.fab, err = fi.OpenFabric(info.FabricAttr)
	must(err)
	r.dom, err = r.fab.OpenDomain(info)
	must(err)
	r.av, err = r.dom.OpenAV(&fi.AVAttr{Type: fi.AVTable})
	must(err)
	r.cq, err = r.dom.OpenCQ(&fi.CQAttr{Format: fi.CQFormatContext, WaitObj: fi.WaitUnspec})
	must(err)
	r.ep, err = r.dom.OpenEndpoint(info)
	must(err)
	must(r.ep.BindAV(r.av))
	must(r.ep.BindCQ(r.cq, fi.Transmit|fi.Recv))
	must(r.ep.Enable())
	return r
}

func (r *rankEP) close() {
	r.ep.Close()
	r.cq.Close()
	r.av.Close()
	r.dom.Close()
	r.fab.Close()
}

// wait blocks until the next collective completion and returns its error.
func (r *rankEP) wait() error {
	var e [1]fi.CQEntry
	for {
		_, err := r.cq.Sread(e[:], time.Second)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, fi.ErrAvail):
			ee, _ := r.cq.ReadErr()
			return ee.Err
		case !errors.Is(err, fi.ErrAgain):
			return err
		}
	}
}

// Four ranks join a collective group and sum a gradient-like vector of
// float32 with Allreduce.
func ExampleEndpoint_Allreduce() {
	hints := fi.AllocInfo()
	hints.Caps = fi.Msg | fi.Collective
	hints.EpAttr.Type = fi.EpRDM
	infos, err := fi.GetInfo(fi.Version(2, 0), "", "", 0, hints)
	if err != nil {
		log.Fatal(err)
	}
	const ranks = 4
	eps := make([]*rankEP, ranks)
	var names [][]byte
	for i := range eps {
		eps[i] = openRank(infos[0])
		defer eps[i].close()
		name, _ := eps[i].ep.Name()
		names = append(names, name)
	}
	results := make([][]float32, ranks)
	var wg sync.WaitGroup
	for i, r := range eps {
		wg.Add(1)
		go func() { // every rank runs the same code
			defer wg.Done()
			// The same addresses in the same order on every rank: fi_addr i is rank i.
			if _, err := r.av.Insert(names, 0); err != nil {
				log.Fatal(err)
			}
			set, err := r.av.NewSet(&fi.AVSetAttr{StartAddr: 0, EndAddr: ranks - 1, Stride: 1})
			if err != nil {
				log.Fatal(err)
			}
			mc, err := r.ep.JoinCollective(set.Addr(), set, 0, "join")
			if err != nil {
				log.Fatal(err)
			}
			if err := r.wait(); err != nil { // the join completes on the CQ
				log.Fatal(err)
			}
			grad := make([]byte, 3*4)
			for k := 0; k < 3; k++ {
				binary.LittleEndian.PutUint32(grad[4*k:], math.Float32bits(float32(i+1)*float32(k+1)))
			}
			sum := make([]byte, len(grad))
			if err := r.ep.Allreduce(grad, 3, nil, sum, nil, mc.Addr(), fi.Float, fi.OpSum, 0, nil); err != nil {
				log.Fatal(err)
			}
			if err := r.wait(); err != nil {
				log.Fatal(err)
			}
			for k := 0; k < 3; k++ {
				results[i] = append(results[i], math.Float32frombits(binary.LittleEndian.Uint32(sum[4*k:])))
			}
			mc.Close()
		}()
	}
	wg.Wait()
	for i, s := range results {
		fmt.Println("rank", i, s)
	}
	// Output:
	// rank 0 [10 20 30]
	// rank 1 [10 20 30]
	// rank 2 [10 20 30]
	// rank 3 [10 20 30]
}
