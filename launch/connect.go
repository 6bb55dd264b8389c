package launch

import (
	"errors"
	"strconv"

	"github.com/gofi-dev/fi"
)

// Connect exchanges endpoint names through job and inserts every rank's
// name into av, so that addrs[r] is rank r (addrs[job.Rank()] is ep
// itself). Every rank calls it, with one endpoint each, in the same order
// as its other collective calls. It costs one put, one fence and
// job.Size() gets (local lookups for the env rendezvous; the launcher's
// node-local cache under Hydra's PMI-1).
//
// It works with any endpoint whose names av accepts: shm, tcp, and the
// linked shm+tcp endpoint (whose name carries both addresses, so each
// peer is reached over shm on this host and over tcp elsewhere). Errors
// carry an fi.Errno: those of Put, Fence and Get (fi.ErrTimedOut when a
// rank never arrives), and of av.Insert (an *fi.InsertError unwrapping to
// the first failure) when a name does not fit av.
func Connect(job *Job, ep *fi.Endpoint, av *fi.AV) ([]fi.Addr, error) {
	if job == nil || ep == nil || av == nil {
		return nil, lerr("Connect", fi.ErrInval, "job, endpoint and AV are all needed")
	}
	name, err := ep.Name()
	if err != nil {
		return nil, err
	}
	job.mu.Lock()
	key := "gofi.ep." + strconv.Itoa(job.connects)
	job.connects++
	job.mu.Unlock()
	if err := job.put1("Connect", key, name); err != nil {
		return nil, err
	}
	if err := job.Fence(); err != nil {
		return nil, err
	}
	names := make([][]byte, job.Size())
	for r := range names {
		if names[r], err = job.get1("Connect", r, key); err != nil {
			if errors.Is(err, fi.ErrNoEnt) {
				return nil, lerr("Connect", fi.ErrNoEnt, "rank %d did not publish an endpoint name (did it call Connect?)", r)
			}
			return nil, err
		}
	}
	return av.Insert(names, 0)
}
