package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	fi "github.com/gofi-dev/fi"
	"github.com/gofi-dev/fi/launch"
	"github.com/gofi-dev/fi/shm"
	"golang.org/x/sys/unix"
)

const (
	tagData    = 1 << 40 // | round << 20 | sender
	tagBarrier = 2 << 40 // | step
	tagTime    = 3 << 40
)

type rankEnv struct {
	rank, size int
	dir        string
	timeout    time.Duration
	tagged     bool

	fab *fi.Fabric
	dom *fi.Domain
	av  *fi.AV
	cq  *fi.CQ
	ep  *fi.Endpoint
	to  []fi.Addr
	ent [64]fi.CQEntry
	got int // completions reaped while retrying sends, for waitFor
}

func main() {
	sizes := flag.String("size", "64", "bytes per message (at least 16); a comma-separated list runs each")
	rounds := flag.Int("rounds", 2, "timed rounds per kind and size")
	kinds := flag.String("kind", "msg", "msg (untagged), tagged, or both comma-separated")
	hold := flag.Bool("hold", false, "after the runs, report ready (file ready.<rank>) and wait to be killed")
	timeout := flag.Duration("timeout", 60*time.Second, "give up after this long without progress")
	flag.Parse()
	if err := run(*sizes, *kinds, *rounds, *hold, *timeout); err != nil {
		fmt.Fprintf(os.Stderr, "alltoall rank %s: %v\n", os.Getenv("PMI_RANK")+os.Getenv("A2A_RANK"), err)
		os.Exit(1)
	}
}

func envInt(names ...string) (int, error) {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("none of %v set", names)
}

// variant is one kind and size of message.
type variant struct {
	tagged bool
	size   int
}

func parseVariants(sizes, kinds string) ([]variant, int, error) {
	var vs []variant
	biggest := 16
	for _, k := range strings.Split(kinds, ",") {
		if k != "msg" && k != "tagged" {
			return nil, 0, fmt.Errorf("kind %q is neither msg nor tagged", k)
		}
		for _, z := range strings.Split(sizes, ",") {
			n, err := parseSize(z)
			if err != nil {
				return nil, 0, err
			}
			n = max(n, 16)
			biggest = max(biggest, n)
			vs = append(vs, variant{tagged: k == "tagged", size: n})
		}
	}
	return vs, biggest, nil
}

func parseSize(z string) (int, error) {
	mul := 1
	switch {
	case strings.HasSuffix(z, "k"):
		mul, z = 1<<10, z[:len(z)-1]
	case strings.HasSuffix(z, "m"):
		mul, z = 1<<20, z[:len(z)-1]
	}
	n, err := strconv.Atoi(z)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q", z)
	}
	return n * mul, nil
}

func run(sizes, kinds string, rounds int, hold bool, timeout time.Duration) error {
	vs, biggest, err := parseVariants(sizes, kinds)
	if err != nil {
		return err
	}
	r := &rankEnv{dir: os.Getenv("A2A_DIR"), timeout: timeout}
	var job *launch.Job
	if r.dir != "" {
		if r.rank, err = envInt("A2A_RANK"); err != nil {
			return err
		}
		if r.size, err = envInt("A2A_SIZE"); err != nil {
			return err
		}
	} else {
		if job, err = launch.Init(); err != nil {
			return err
		}
		defer job.Finalize()
		r.rank, r.size = job.Rank(), job.Size()
	}
	t0 := time.Now()
	if err := r.open(); err != nil {
		return err
	}
	defer r.close()
	tOpen := time.Since(t0)
	if job != nil {
		r.to, err = launch.Connect(job, r.ep, r.av)
	} else {
		err = r.exchange()
	}
	if err != nil {
		return err
	}
	tJoin := time.Since(t0)
	send := make([][]byte, r.size)
	recv := make([][]byte, r.size)
	for j := range r.size {
		send[j], recv[j] = make([]byte, biggest), make([]byte, biggest)
	}
	k := 0
	for _, v := range vs {
		r.tagged = v.tagged
		sb, rb := make([][]byte, r.size), make([][]byte, r.size)
		for j := range r.size {
			sb[j], rb[j] = send[j][:v.size], recv[j][:v.size]
		}
		if err := r.round(k, sb, rb); err != nil { // warm-up: connects everybody, grows rings
			return fmt.Errorf("warm-up round (tagged %v, %d bytes): %w", v.tagged, v.size, err)
		}
		if k == 0 && r.rank == 0 && os.Getenv("A2A_VERBOSE") != "" {
			fmt.Fprintf(os.Stderr, "rank 0: endpoint open %v, addresses in %v, first round done %v after start\n",
				tOpen, tJoin, time.Since(t0))
		}
		k++
		if err := r.barrier(); err != nil {
			return err
		}
		connected := shmUsed()
		start := time.Now()
		for range rounds {
			if err := r.round(k, sb, rb); err != nil {
				return fmt.Errorf("round %d (tagged %v, %d bytes): %w", k, v.tagged, v.size, err)
			}
			k++
		}
		el := time.Since(start)
		worst, err := r.gatherMax(el)
		if err != nil {
			return err
		}
		if r.rank == 0 {
			fmt.Printf("gofi alltoall ranks %d size %d rounds %d tagged %v time %.6f s per-round %.1f us shm-connected %d shm-end %d\n",
				r.size, v.size, rounds, v.tagged, worst.Seconds(), float64(worst.Microseconds())/float64(max(rounds, 1)),
				connected, shmUsed())
		}
	}
	if hold {
		if err := os.WriteFile(filepath.Join(r.dir, "ready."+strconv.Itoa(r.rank)), nil, 0o600); err != nil {
			return err
		}
		select {} // until killed
	}
	return r.barrier() // nobody closes while others still read
}

func (r *rankEnv) open() error {
	hints := fi.AllocInfo()
	hints.Caps = fi.Msg | fi.Tagged | fi.DirectedRecv
	hints.EpAttr.Type = fi.EpRDM
	hints.FabricAttr.ProvName = "shm"
	infos, err := fi.GetInfo(fi.Version(2, 0), "", "", 0, hints)
	if err != nil {
		return err
	}
	info := infos[0]
	info.TxAttr.Size = max(info.TxAttr.Size, 2*r.size)
	info.RxAttr.Size = max(info.RxAttr.Size, 2*r.size)
	if r.fab, err = fi.OpenFabric(info.FabricAttr); err != nil {
		return err
	}
	if r.dom, err = r.fab.OpenDomain(info); err != nil {
		return err
	}
	if r.av, err = r.dom.OpenAV(&fi.AVAttr{Type: fi.AVTable}); err != nil {
		return err
	}
	if r.cq, err = r.dom.OpenCQ(&fi.CQAttr{Size: 4 * r.size, WaitObj: fi.WaitUnspec}); err != nil {
		return err
	}
	if r.ep, err = r.dom.OpenEndpoint(info); err != nil {
		return err
	}
	if err := r.ep.BindAV(r.av); err != nil {
		return err
	}
	if err := r.ep.BindCQ(r.cq, fi.Transmit|fi.Recv); err != nil {
		return err
	}
	return r.ep.Enable()
}

func (r *rankEnv) close() {
	for _, c := range []interface{ Close() error }{r.ep, r.cq, r.av, r.dom, r.fab} {
		if c != nil {
			_ = c.Close()
		}
	}
}

// exchange publishes this rank's address as a file and reads everybody's.
func (r *rankEnv) exchange() error {
	name, err := r.ep.Name()
	if err != nil {
		return err
	}
	f := filepath.Join(r.dir, "addr."+strconv.Itoa(r.rank))
	if err := os.WriteFile(f+".tmp", name, 0o600); err != nil {
		return err
	}
	if err := os.Rename(f+".tmp", f); err != nil {
		return err
	}
	addrs := make([][]byte, r.size)
	deadline := time.Now().Add(r.timeout)
	for j := range r.size {
		for {
			b, err := os.ReadFile(filepath.Join(r.dir, "addr."+strconv.Itoa(j)))
			if err == nil {
				addrs[j] = b
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("rank %d never published its address: %w", j, err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	r.to, err = r.av.Insert(addrs, 0)
	return err
}

// post sends (retrying while the endpoint is full) or receives.
func (r *rankEnv) sendTo(j int, buf []byte, tag uint64) error {
	deadline := time.Now().Add(r.timeout)
	for {
		var err error
		if r.tagged || tag != tagData {
			err = r.ep.TSend(buf, r.to[j], tag, nil)
		} else {
			err = r.ep.Send(buf, r.to[j], nil)
		}
		if !errors.Is(err, fi.ErrAgain) {
			return err
		}
		k, err := r.reap(0)
		if err != nil {
			return err
		}
		r.got += k
		if time.Now().After(deadline) {
			return errors.New("send stuck: the transport stays full")
		}
	}
}

func (r *rankEnv) recvFrom(j int, buf []byte, tag uint64) error {
	if r.tagged || tag != tagData {
		return r.ep.TRecv(buf, r.to[j], tag, 0, nil)
	}
	return r.ep.Recv(buf, r.to[j], nil)
}

// reap reads completions, sleeping up to wait for the first; it returns
// how many it read.
func (r *rankEnv) reap(wait time.Duration) (int, error) {
	var n int
	var err error
	if wait > 0 {
		n, err = r.cq.Sread(r.ent[:], wait)
	} else {
		n, err = r.cq.Read(r.ent[:])
	}
	switch {
	case n > 0:
		return n, nil
	case err == nil, errors.Is(err, fi.ErrAgain):
		return 0, nil
	case errors.Is(err, fi.ErrAvail):
		e, rerr := r.cq.ReadErr()
		if rerr != nil {
			return 0, rerr
		}
		return 0, fmt.Errorf("completion error: %w", e.Err)
	}
	return 0, err
}

// waitFor reaps until n completions have come.
func (r *rankEnv) waitFor(n int) error {
	n -= r.got
	r.got = 0
	last := time.Now()
	for n > 0 {
		k, err := r.reap(100 * time.Millisecond)
		if err != nil {
			return err
		}
		if k > 0 {
			n -= k
			last = time.Now()
		} else if time.Since(last) > r.timeout {
			return fmt.Errorf("%d completions missing after %v", n, r.timeout)
		}
	}
	return nil
}

// round is one all-to-all: receives from everybody, sends to everybody.
func (r *rankEnv) round(k int, send, recv [][]byte) error {
	tag := func(from int) uint64 { return tagData }
	if r.tagged {
		tag = func(from int) uint64 { return tagData | uint64(k)<<20 | uint64(from) }
	}
	for d := 1; d < r.size; d++ {
		j := (r.rank - d + r.size) % r.size
		if err := r.recvFrom(j, recv[j], tag(j)); err != nil {
			return err
		}
	}
	for d := 1; d < r.size; d++ {
		j := (r.rank + d) % r.size
		binary.LittleEndian.PutUint64(send[j], uint64(k))
		binary.LittleEndian.PutUint64(send[j][8:], uint64(r.rank))
		if err := r.sendTo(j, send[j], tag(r.rank)); err != nil {
			return err
		}
	}
	if err := r.waitFor(2 * (r.size - 1)); err != nil {
		var missing []int
		for j := range r.size {
			if j != r.rank && (binary.LittleEndian.Uint64(recv[j]) != uint64(k) || binary.LittleEndian.Uint64(recv[j][8:]) != uint64(j)) {
				missing = append(missing, j)
			}
		}
		return fmt.Errorf("%w (nothing yet from ranks %v)", err, missing)
	}
	for j := range r.size {
		if j == r.rank {
			continue
		}
		rk, from := binary.LittleEndian.Uint64(recv[j]), binary.LittleEndian.Uint64(recv[j][8:])
		if rk != uint64(k) || from != uint64(j) {
			return fmt.Errorf("the receive from rank %d holds round %d from rank %d", j, rk, from)
		}
	}
	return nil
}

// barrier is a dissemination barrier of zero-byte tagged messages.
func (r *rankEnv) barrier() error {
	for step := 1; step < r.size; step *= 2 {
		tag := uint64(tagBarrier | step)
		if err := r.recvFrom((r.rank-step+r.size)%r.size, nil, tag); err != nil {
			return err
		}
		if err := r.sendTo((r.rank+step)%r.size, nil, tag); err != nil {
			return err
		}
		if err := r.waitFor(2); err != nil {
			return fmt.Errorf("barrier: %w", err)
		}
	}
	return nil
}

// gatherMax returns, at rank 0, the largest d of all ranks.
func (r *rankEnv) gatherMax(d time.Duration) (time.Duration, error) {
	if r.rank != 0 {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(d))
		if err := r.sendTo(0, b[:], tagTime); err != nil {
			return 0, err
		}
		return d, r.waitFor(1)
	}
	bufs := make([][]byte, r.size)
	for j := 1; j < r.size; j++ {
		bufs[j] = make([]byte, 8)
		if err := r.recvFrom(j, bufs[j], tagTime); err != nil {
			return 0, err
		}
	}
	if err := r.waitFor(r.size - 1); err != nil {
		return 0, err
	}
	worst := d
	for j := 1; j < r.size; j++ {
		worst = max(worst, time.Duration(binary.LittleEndian.Uint64(bufs[j])))
	}
	return worst, nil
}

// shmUsed returns the bytes in use on the shm directory's file system.
func shmUsed() int64 {
	var st unix.Statfs_t
	if unix.Statfs(shm.Dir(), &st) != nil {
		return -1
	}
	return int64(st.Blocks-st.Bfree) * int64(st.Bsize)
}
