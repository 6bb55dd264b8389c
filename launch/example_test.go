package launch_test

import (
	"fmt"
	"log"

	"github.com/gofi-dev/fi"
	"github.com/gofi-dev/fi/launch"
)

// A rank joins its job, opens an endpoint and learns every rank's address.
// Run as is, it is a job of one; under mpiexec.hydra -n 4, srun -n 4
// --mpi=pmi2 or torchrun --nproc-per-node 4 it is rank r of 4, and
// addrs[r] reaches rank r.
func Example() {
	job, err := launch.Init()
	if err != nil {
		log.Fatal(err) // an fi.Errno says why: fi.ErrTimedOut, fi.ErrNoSys, ...
	}
	defer job.Finalize()

	hints := fi.AllocInfo()
	hints.Caps = fi.Msg | fi.Tagged
	hints.EpAttr.Type = fi.EpRDM
	infos, err := fi.GetInfo(fi.Version(2, 0), "", "", 0, hints)
	if err != nil {
		log.Fatal(err)
	}
	fab, err := fi.OpenFabric(infos[0].FabricAttr)
	if err != nil {
		log.Fatal(err)
	}
	defer fab.Close()
	dom, err := fab.OpenDomain(infos[0])
	if err != nil {
		log.Fatal(err)
	}
	defer dom.Close()
	av, err := dom.OpenAV(&fi.AVAttr{Type: fi.AVTable})
	if err != nil {
		log.Fatal(err)
	}
	defer av.Close()
	cq, err := dom.OpenCQ(&fi.CQAttr{Format: fi.CQFormatTagged, WaitObj: fi.WaitUnspec})
	if err != nil {
		log.Fatal(err)
	}
	defer cq.Close()
	ep, err := dom.OpenEndpoint(infos[0])
	if err != nil {
		log.Fatal(err)
	}
	defer ep.Close()
	if err := ep.BindAV(av); err != nil {
		log.Fatal(err)
	}
	if err := ep.BindCQ(cq, fi.Transmit|fi.Recv); err != nil {
		log.Fatal(err)
	}
	if err := ep.Enable(); err != nil {
		log.Fatal(err)
	}

	addrs, err := launch.Connect(job, ep, av) // addrs[r] is rank r
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rank %d of %d (%d on this host), %d addresses, started by %s\n",
		job.Rank(), job.Size(), job.LocalSize(), len(addrs), job.Launcher())
	// Output: rank 0 of 1 (1 on this host), 1 addresses, started by singleton
}
