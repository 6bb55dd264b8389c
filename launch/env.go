package launch

// The env rendezvous: a job started the way torchrun and Kubernetes
// training operators start one, with
//
//	RANK, WORLD_SIZE            this process's rank and the job size
//	MASTER_ADDR, MASTER_PORT    where rank 0 can be reached
//	LOCAL_RANK, LOCAL_WORLD_SIZE (optional) the ranks on this host
//
// Rank 0 listens on MASTER_PORT (GOFI_RDZV_PORT overrides it; when
// torchrun's agent serves its own store on MASTER_PORT, which it says with
// TORCHELASTIC_USE_AGENT_STORE=True, rank 0 uses MASTER_PORT+1) and serves
// the job's key-value exchange; the other ranks dial it, retrying until it
// listens, and say hello with the job key: GOFI_JOB_KEY, else
// torchrun's TORCHELASTIC_RUN_ID and TORCHELASTIC_RESTART_COUNT, else the
// world size. Rank 0 refuses a hello with another key, another size, a
// rank out of range or taken, so two jobs (or two restarts of one) never
// mix. Init returns once every rank has arrived, with the ranks sharing
// each host (same kernel and /dev/shm) counted from the hellos.
//
// A fence sends this rank's puts to rank 0, which answers every rank, once
// all have fenced, with all the puts (one frame: gets are then local). A
// rank that never arrives, or leaves (its connection closes) before it
// finalizes, fails the job: rank 0 tells every rank why, so no one waits
// out its timeout twice. Abort goes to rank 0, which passes it to every
// rank; each prints why and exits. The frames are in frame.go.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gofi-dev/fi"
)

// envConfig is what the environment says about the rendezvous.
type envConfig struct {
	rank, size int
	addr       string // MASTER_ADDR
	port       int    // the port rank 0 serves
	key        string // job key
	localRank  int    // -1 when the environment does not say
	localSize  int
}

func readEnv(getenv func(string) string) (envConfig, error) {
	const op = "Init"
	var c envConfig
	var err error
	if c.size, err = atoiRange(getenv("WORLD_SIZE"), 1, maxRanks); err != nil {
		return c, lerr(op, fi.ErrInval, "WORLD_SIZE=%q: %v", getenv("WORLD_SIZE"), err)
	}
	if c.rank, err = atoiRange(getenv("RANK"), 0, c.size-1); err != nil {
		return c, lerr(op, fi.ErrInval, "RANK=%q with WORLD_SIZE=%d: %v", getenv("RANK"), c.size, err)
	}
	c.addr = getenv("MASTER_ADDR")
	mp := getenv("MASTER_PORT")
	if c.size > 1 && (c.addr == "" || mp == "") {
		return c, lerr(op, fi.ErrInval, "RANK and WORLD_SIZE are set but MASTER_ADDR=%q MASTER_PORT=%q do not say where rank 0 is", c.addr, mp)
	}
	if mp != "" {
		if c.port, err = atoiRange(mp, 1, 65535); err != nil {
			return c, lerr(op, fi.ErrInval, "MASTER_PORT=%q: %v", mp, err)
		}
	}
	if strings.EqualFold(getenv("TORCHELASTIC_USE_AGENT_STORE"), "true") {
		c.port++ // MASTER_PORT is the agent's store
		if c.port > 65535 {
			return c, lerr(op, fi.ErrInval, "MASTER_PORT=%q leaves no port above it for gofi (set GOFI_RDZV_PORT)", mp)
		}
	}
	if s := getenv("GOFI_RDZV_PORT"); s != "" {
		if c.port, err = atoiRange(s, 1, 65535); err != nil {
			return c, lerr(op, fi.ErrInval, "GOFI_RDZV_PORT=%q: %v", s, err)
		}
	}
	switch {
	case getenv("GOFI_JOB_KEY") != "":
		c.key = "key=" + getenv("GOFI_JOB_KEY")
	case getenv("TORCHELASTIC_RUN_ID") != "":
		c.key = "torchelastic=" + getenv("TORCHELASTIC_RUN_ID") + "/" + getenv("TORCHELASTIC_RESTART_COUNT")
	default:
		c.key = "world"
	}
	c.key += "/" + strconv.Itoa(c.size)
	c.localRank = -1
	lr, err1 := atoiRange(getenv("LOCAL_RANK"), 0, maxRanks-1)
	ls, err2 := atoiRange(getenv("LOCAL_WORLD_SIZE"), 1, maxRanks)
	if err1 == nil && err2 == nil && lr < ls && ls <= c.size {
		c.localRank, c.localSize = lr, ls
	}
	return c, nil
}

// initEnv joins the env rendezvous.
func initEnv(getenv func(string) string, cfg config) (kvs, shape, error) {
	ec, err := readEnv(getenv)
	if err != nil {
		return nil, shape{}, err
	}
	var kv kvs
	var sh shape
	if ec.rank == 0 {
		kv, sh, err = serveRendezvous(ec, cfg, hostID())
	} else {
		kv, sh, err = dialRendezvous(ec, cfg, hostID())
	}
	if err != nil {
		return nil, sh, err
	}
	if ec.localRank >= 0 { // the launcher's word, as for PMI's mapping
		sh.localRank, sh.localSize = ec.localRank, ec.localSize
	}
	return kv, sh, nil
}

// hostID names what ranks that can share memory have in common: the
// kernel (boot id) and the /dev/shm file system.
func hostID() string {
	h, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	var st syscall.Stat_t
	dev := uint64(0)
	if syscall.Stat("/dev/shm", &st) == nil {
		dev = uint64(st.Dev)
	}
	return fmt.Sprintf("%s/%s/%x", h, strings.TrimSpace(string(boot)), dev)
}

// localOf counts the ranks on rank's host among hosts (index = rank).
func localOf(hosts []string, rank int) (int, int) {
	lr, ls := 0, 0
	for r, h := range hosts {
		if h == hosts[rank] {
			if r < rank {
				lr++
			}
			ls++
		}
	}
	return lr, ls
}

// ---- rank 0 ----

// rdzvServer is rank 0's side: it holds the job's key-value space.
type rdzvServer struct {
	ec      envConfig
	cfg     config
	ln      net.Listener
	mu      sync.Mutex
	peers   []*rdzvPeer // by rank; [0] is nil
	hosts   []string
	arrived int
	all     chan struct{} // closed when every rank has said hello
	failed  error         // the job failed: every call returns this
	failC   chan struct{} // closed when failed is set
	epoch   uint32        // fences completed
	inFence []bool        // by rank: has fenced in the current epoch
	nFence  int
	batch   []kvPair // puts of the current epoch
	mine    []kvPair // rank 0's puts since its last fence
	kv      map[string][]byte
	fenced  chan struct{} // closed and replaced when an epoch completes
	fins    int           // clients finalized (or gone after finalizing)
	finC    chan struct{} // signalled on each fin
	closing bool
	aborted bool           // an abort is being passed on: ranks leaving now fail nothing
	telling sync.WaitGroup // fail frames being written: shutdown waits
}

// rdzvPeer is rank 0's connection to one client.
type rdzvPeer struct {
	rank int
	c    net.Conn
	wmu  sync.Mutex
	fin  bool
}

func (p *rdzvPeer) write(b []byte, timeout time.Duration) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.c.SetWriteDeadline(time.Now().Add(timeout))
	_, err := p.c.Write(b)
	return err
}

func serveRendezvous(ec envConfig, cfg config, host string) (*rdzvServer, shape, error) {
	const op = "Init"
	sh := shape{rank: 0, size: ec.size}
	s := &rdzvServer{
		ec: ec, cfg: cfg,
		peers:   make([]*rdzvPeer, ec.size),
		hosts:   make([]string, ec.size),
		arrived: 1,
		all:     make(chan struct{}),
		failC:   make(chan struct{}),
		inFence: make([]bool, ec.size),
		kv:      map[string][]byte{},
		fenced:  make(chan struct{}),
		finC:    make(chan struct{}, 1),
	}
	s.hosts[0] = host
	if ec.size == 1 {
		close(s.all)
		sh.localRank, sh.localSize = 0, 1
		return s, sh, nil
	}
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(ec.port))
	if err != nil {
		code := fi.ErrIO
		if errors.Is(err, syscall.EADDRINUSE) {
			code = fi.ErrAddrInUse
		}
		return nil, sh, lerr(op, code, "rank 0 cannot serve the rendezvous on port %d: %v", ec.port, err)
	}
	s.ln = ln
	go s.accept()
	t := time.NewTimer(cfg.timeout)
	defer t.Stop()
	select {
	case <-s.all:
	case <-s.failC:
	case <-t.C:
		s.mu.Lock()
		var missing []int
		for r := 1; r < ec.size; r++ {
			if s.peers[r] == nil {
				missing = append(missing, r)
			}
		}
		s.failLocked(lerr(op, fi.ErrTimedOut, "ranks %s never joined the rendezvous on port %d within %v",
			rankList(missing), ec.port, cfg.timeout))
		s.mu.Unlock()
	}
	s.mu.Lock()
	err = s.failed
	s.mu.Unlock()
	if err != nil {
		s.shutdown()
		return nil, sh, err
	}
	// Everyone is here: tell each its place on its host.
	for r := 1; r < ec.size; r++ {
		lr, ls := localOf(s.hosts, r)
		if err := s.peers[r].write(newEnc(fWelcome).u32(uint32(lr)).u32(uint32(ls)).bytes(), cfg.timeout); err != nil {
			s.mu.Lock()
			s.failLocked(lerr(op, fi.ErrConnReset, "rank %d left the rendezvous before its welcome: %v", r, err))
			err = s.failed
			s.mu.Unlock()
			s.shutdown()
			return nil, sh, err
		}
	}
	sh.localRank, sh.localSize = localOf(s.hosts, 0)
	return s, sh, nil
}

// accept takes connections until the listener closes.
func (s *rdzvServer) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.greet(c)
	}
}

// greet reads a hello and admits the client, or refuses it.
func (s *rdzvServer) greet(c net.Conn) {
	to := min(s.cfg.timeout, 30*time.Second)
	c.SetDeadline(time.Now().Add(to))
	r := bufio.NewReader(c)
	refuse := func(code fi.Errno, format string, args ...any) {
		c.Write(encCodeWhy(fFail, uint32(code), fmt.Sprintf(format, args...)))
		c.Close()
	}
	f, err := readFrame(r)
	if err != nil {
		c.Close() // not one of ours, or gone: nothing to say
		return
	}
	if f.typ != fHello {
		refuse(fi.ErrRemoteIO, "expected a hello")
		return
	}
	h, err := decHello(f.body)
	if err != nil || h.magic != rdzvMagic {
		refuse(fi.ErrRemoteIO, "bad hello")
		return
	}
	if h.key != s.ec.key {
		refuse(fi.ErrKeyRejected, "the rendezvous on port %d serves job %q, not %q", s.ec.port, s.ec.key, h.key)
		return
	}
	if h.size != s.ec.size || h.rank < 1 || h.rank >= s.ec.size {
		refuse(fi.ErrInval, "rank %d of %d does not fit this job of %d ranks", h.rank, h.size, s.ec.size)
		return
	}
	s.mu.Lock()
	switch {
	case s.failed != nil:
		err := s.failed
		s.mu.Unlock()
		refuse(fi.ErrnoOf(err), "%v", err)
		return
	case s.peers[h.rank] != nil:
		s.mu.Unlock()
		refuse(fi.ErrAddrInUse, "rank %d has already joined this job", h.rank)
		return
	}
	p := &rdzvPeer{rank: h.rank, c: c}
	s.peers[h.rank] = p
	s.hosts[h.rank] = h.host
	s.arrived++
	if s.arrived == s.ec.size {
		close(s.all)
	}
	s.mu.Unlock()
	c.SetDeadline(time.Time{})
	s.serve(p, r)
}

// serve reads a client's frames until it finalizes or goes.
func (s *rdzvServer) serve(p *rdzvPeer, r *bufio.Reader) {
	for {
		f, err := readFrame(r)
		if err != nil {
			s.mu.Lock()
			if !p.fin && !s.closing {
				why := "its connection closed"
				if !errors.Is(err, io.EOF) {
					why = err.Error()
				}
				s.failLocked(lerr("Fence", fi.ErrConnAborted, "rank %d left the job before finalizing (%s)", p.rank, why))
			}
			s.mu.Unlock()
			return
		}
		switch f.typ {
		case fFence:
			epoch, pairs, err := decKVs(f.body)
			if err == nil {
				err = checkOwnKeys(pairs, p.rank)
			}
			s.mu.Lock()
			switch {
			case err != nil:
				s.failLocked(lerr("Fence", fi.ErrRemoteIO, "rank %d sent a bad fence: %v", p.rank, err))
			case epoch != s.epoch || s.inFence[p.rank]:
				s.failLocked(lerr("Fence", fi.ErrRemoteIO, "rank %d fenced epoch %d while the job is at %d", p.rank, epoch, s.epoch))
			default:
				for _, kv := range pairs { // copy: pairs alias the frame
					s.batch = append(s.batch, kvPair{key: append([]byte(nil), kv.key...), val: append([]byte(nil), kv.val...)})
				}
				s.arriveLocked(p.rank)
			}
			s.mu.Unlock()
		case fAbort:
			code, why, _ := decCodeWhy(f.body)
			fmt.Fprintf(s.cfg.stderr, "launch: rank %d aborted the job (code %d): %s\n", p.rank, int32(code), why)
			s.markAborted()
			s.abortAll(code, fmt.Sprintf("rank %d: %s", p.rank, why), p.rank)
			s.cfg.exit(exitCode(int(int32(code))))
			return
		case fFin:
			s.mu.Lock()
			p.fin = true
			s.fins++
			s.mu.Unlock()
			select {
			case s.finC <- struct{}{}:
			default:
			}
		default:
			s.mu.Lock()
			s.failLocked(lerr("Fence", fi.ErrRemoteIO, "rank %d sent an unexpected frame of type %d", p.rank, f.typ))
			s.mu.Unlock()
			return
		}
	}
}

// checkOwnKeys checks a client put only keys of its own rank.
func checkOwnKeys(pairs []kvPair, rank int) error {
	for _, kv := range pairs {
		user, rest, ok := strings.Cut(string(kv.key), ":")
		if !ok || checkKey("Put", user) != nil {
			return syntax("key %.40q is not a gofi key", kv.key)
		}
		if r, err := strconv.Atoi(rest); err != nil || r != rank {
			return syntax("rank %d put key %.40q of another rank", rank, kv.key)
		}
	}
	return nil
}

// arriveLocked counts rank into the current fence and completes it when
// every rank is in. Caller holds mu.
func (s *rdzvServer) arriveLocked(rank int) {
	s.inFence[rank] = true
	s.nFence++
	if s.nFence < s.ec.size {
		return
	}
	epoch := s.epoch
	out := encKVs(fFenced, epoch, s.batch)
	if len(out)-4 > maxFrame {
		s.failLocked(lerr("Fence", fi.ErrMsgSize, "the ranks put %d bytes before fence %d, more than the rendezvous carries (%d)",
			len(out), epoch, maxFrame))
		return
	}
	for _, kv := range s.batch {
		s.kv[string(kv.key)] = kv.val
	}
	s.batch = nil
	s.nFence = 0
	clear(s.inFence)
	s.epoch++
	close(s.fenced)
	s.fenced = make(chan struct{})
	for _, p := range s.peers[1:] {
		go func(p *rdzvPeer) {
			if err := p.write(out, s.cfg.timeout); err != nil {
				s.mu.Lock()
				if !s.closing {
					s.failLocked(lerr("Fence", fi.ErrConnAborted, "rank %d left the job during fence %d: %v", p.rank, epoch, err))
				}
				s.mu.Unlock()
			}
		}(p)
	}
}

// failLocked fails the job and tells every client why. Caller holds mu.
func (s *rdzvServer) failLocked(err error) {
	if s.failed != nil || s.aborted {
		return
	}
	s.failed = err
	close(s.failC)
	b := encCodeWhy(fFail, uint32(fi.ErrnoOf(err)), err.Error())
	for _, p := range s.peers[1:] {
		if p != nil && !p.fin {
			s.telling.Add(1)
			go func() { defer s.telling.Done(); p.write(b, 5*time.Second) }()
		}
	}
}

// markAborted records that the job is being aborted. The ranks told of
// it exit, and their connections close while rank 0's own process may
// still be in a fence: that must not fail the fence (rank 0 would return
// from it and run on) but wait for rank 0's exit.
func (s *rdzvServer) markAborted() {
	s.mu.Lock()
	s.aborted = true
	s.mu.Unlock()
}

// abortAll passes an abort to every client but from.
func (s *rdzvServer) abortAll(code uint32, why string, from int) {
	b := encCodeWhy(fAbort, code, why)
	s.mu.Lock()
	peers := append([]*rdzvPeer(nil), s.peers[1:]...)
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range peers {
		if p != nil && p.rank != from {
			wg.Add(1)
			go func() { defer wg.Done(); p.write(b, 5*time.Second) }()
		}
	}
	wg.Wait()
}

func (s *rdzvServer) name() string   { return "env" }
func (s *rdzvServer) limits() limits { return limits{keyMax: 1024, valMax: maxFrame / 2} }

func (s *rdzvServer) put(key string, val []byte) error {
	s.mine = append(s.mine, kvPair{key: []byte(key), val: val})
	return nil
}

func (s *rdzvServer) fence() error { return s.collective("Fence") }

func (s *rdzvServer) barrier() error { return s.collective("Barrier") }

func (s *rdzvServer) collective(op string) error {
	s.mu.Lock()
	if s.failed != nil {
		err := s.failed
		s.mu.Unlock()
		return err
	}
	s.batch = append(s.batch, s.mine...)
	s.mine = nil
	epoch := s.epoch
	done := s.fenced
	s.arriveLocked(0)
	s.mu.Unlock()
	t := time.NewTimer(s.cfg.timeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-s.failC:
	case <-t.C:
		s.mu.Lock()
		if s.epoch == epoch {
			var missing []int
			for r := range s.ec.size {
				if !s.inFence[r] {
					missing = append(missing, r)
				}
			}
			s.failLocked(lerr(op, fi.ErrTimedOut, "ranks %s did not reach fence %d within %v", rankList(missing), epoch, s.cfg.timeout))
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.epoch > epoch:
		return nil
	case s.failed == nil && s.aborted:
		return lerr(op, fi.ErrCanceled, "the job was aborted")
	}
	return s.failed
}

func (s *rdzvServer) get(key string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.kv[key]
	if !ok {
		return nil, false, nil
	}
	return append([]byte(nil), v...), true, nil
}

func (s *rdzvServer) abort(code int, why string) error {
	s.markAborted()
	s.abortAll(uint32(int32(code)), "rank 0: "+why, 0)
	return nil
}

// finalize waits (within the timeout) until every client has finalized or
// gone, then closes the rendezvous.
func (s *rdzvServer) finalize() error {
	deadline := time.Now().Add(s.cfg.timeout)
	for {
		s.mu.Lock()
		n, failed, closing := s.fins, s.failed, s.closing
		s.mu.Unlock()
		if n >= s.ec.size-1 || failed != nil || closing || time.Now().After(deadline) {
			break
		}
		select {
		case <-s.finC:
		case <-s.failC:
		case <-time.After(time.Until(deadline)):
		}
	}
	s.shutdown()
	return nil
}

func (s *rdzvServer) shutdown() {
	s.telling.Wait() // every rank hears why the job failed before it closes
	s.mu.Lock()
	s.closing = true
	peers := append([]*rdzvPeer(nil), s.peers...)
	s.mu.Unlock()
	if s.ln != nil {
		s.ln.Close()
	}
	for _, p := range peers {
		if p != nil {
			p.c.Close()
		}
	}
}

// ---- ranks 1 and up ----

// rdzvClient is a rank's connection to rank 0.
type rdzvClient struct {
	ec     envConfig
	cfg    config
	c      net.Conn
	wmu    sync.Mutex
	mine   []kvPair
	kv     map[string][]byte
	epoch  uint32
	frames chan frame // fenced frames from the reader
	mu     sync.Mutex
	failed error
	failC  chan struct{}
	closed bool
}

func dialRendezvous(ec envConfig, cfg config, host string) (*rdzvClient, shape, error) {
	const op = "Init"
	sh := shape{rank: ec.rank, size: ec.size}
	addr := net.JoinHostPort(ec.addr, strconv.Itoa(ec.port))
	deadline := time.Now().Add(cfg.timeout)
	var c net.Conn
	var err error
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, 100*time.Millisecond) {
		c, err = net.DialTimeout("tcp", addr, min(time.Until(deadline), 10*time.Second))
		if err == nil {
			break
		}
		if time.Until(deadline) < backoff {
			return nil, sh, lerr(op, fi.ErrTimedOut, "rank %d could not reach rank 0's rendezvous at %s within %v: %v",
				ec.rank, addr, cfg.timeout, err)
		}
		time.Sleep(backoff)
	}
	cl := &rdzvClient{ec: ec, cfg: cfg, c: c, kv: map[string][]byte{}, frames: make(chan frame, 1), failC: make(chan struct{})}
	// Rank 0 gives up on missing ranks at its own deadline and says who
	// is missing: wait a little longer to hear it.
	c.SetDeadline(deadline.Add(grace(cfg.timeout)))
	if _, err := c.Write(encHello(hello{magic: rdzvMagic, key: ec.key, rank: ec.rank, size: ec.size, host: host})); err != nil {
		c.Close()
		return nil, sh, lerr(op, fi.ErrConnReset, "rank %d: saying hello to rank 0 at %s: %v", ec.rank, addr, err)
	}
	r := bufio.NewReader(c)
	f, err := readFrame(r)
	if err != nil {
		c.Close()
		return nil, sh, cl.readErr(op, err, fmt.Sprintf("waiting at %s for every rank to join", addr))
	}
	switch f.typ {
	case fWelcome:
		lr, ls, err := decWelcome(f.body)
		if err != nil || ls < 1 || lr >= ls || ls > ec.size {
			c.Close()
			return nil, sh, lerr(op, fi.ErrRemoteIO, "rank 0 at %s sent a bad welcome", addr)
		}
		sh.localRank, sh.localSize = lr, ls
	case fFail:
		c.Close()
		code, why, _ := decCodeWhy(f.body)
		return nil, sh, lerr(op, errnoOr(code), "rank 0 at %s refused rank %d: %s", addr, ec.rank, why)
	default:
		c.Close()
		return nil, sh, lerr(op, fi.ErrRemoteIO, "rank 0 at %s answered hello with a frame of type %d", addr, f.typ)
	}
	c.SetDeadline(time.Time{})
	go cl.read(r)
	return cl, sh, nil
}

// read takes frames from rank 0 until the connection ends: fenced replies
// go to the waiting fence, a fail fails the job, an abort ends the
// process.
func (cl *rdzvClient) read(r *bufio.Reader) {
	for {
		f, err := readFrame(r)
		if err != nil {
			cl.fail(cl.readErr("Fence", err, "connected to rank 0"))
			return
		}
		switch f.typ {
		case fFenced:
			select {
			case cl.frames <- f: // one fence at a time: room unless rank 0 misbehaves
			default:
				cl.fail(lerr("Fence", fi.ErrRemoteIO, "rank %d: rank 0 answered a fence nobody asked for", cl.ec.rank))
				return
			}
		case fFail:
			code, why, _ := decCodeWhy(f.body)
			cl.fail(lerr("Fence", errnoOr(code), "the job failed: %s", why))
			return
		case fAbort:
			code, why, _ := decCodeWhy(f.body)
			fmt.Fprintf(cl.cfg.stderr, "launch: rank %d: the job was aborted (code %d) by %s\n", cl.ec.rank, int32(code), why)
			cl.cfg.exit(exitCode(int(int32(code))))
			return
		default:
			cl.fail(lerr("Fence", fi.ErrRemoteIO, "rank 0 sent an unexpected frame of type %d", f.typ))
			return
		}
	}
}

func (cl *rdzvClient) readErr(op string, err error, doing string) error {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return lerr(op, fi.ErrTimedOut, "rank %d: no word from rank 0 within %v while %s", cl.ec.rank, cl.cfg.timeout, doing)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return lerr(op, fi.ErrConnReset, "rank %d: rank 0 closed the rendezvous connection while %s", cl.ec.rank, doing)
	default:
		var se *errSyntax
		if errors.As(err, &se) {
			return lerr(op, fi.ErrRemoteIO, "rank %d: bad frame from rank 0: %v", cl.ec.rank, err)
		}
		return lerr(op, fi.ErrIO, "rank %d: rendezvous connection, %s: %v", cl.ec.rank, doing, err)
	}
}

func (cl *rdzvClient) fail(err error) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.failed == nil && !cl.closed {
		cl.failed = err
		close(cl.failC)
	}
}

func (cl *rdzvClient) name() string   { return "env" }
func (cl *rdzvClient) limits() limits { return limits{keyMax: 1024, valMax: maxFrame / 2} }

func (cl *rdzvClient) put(key string, val []byte) error {
	cl.mine = append(cl.mine, kvPair{key: []byte(key), val: val})
	return nil
}

func (cl *rdzvClient) fence() error { return cl.collective("Fence") }

func (cl *rdzvClient) barrier() error { return cl.collective("Barrier") }

func (cl *rdzvClient) collective(op string) error {
	cl.mu.Lock()
	err := cl.failed
	cl.mu.Unlock()
	if err != nil {
		return err
	}
	b := encKVs(fFence, cl.epoch, cl.mine)
	if len(b)-4 > maxFrame {
		return lerr(op, fi.ErrMsgSize, "this rank's puts since the last fence take %d bytes, more than %d", len(b), maxFrame)
	}
	cl.mine = nil
	if err := cl.write(b); err != nil {
		cl.fail(cl.readErr(op, err, "sending a fence"))
		cl.mu.Lock()
		defer cl.mu.Unlock()
		return cl.failed
	}
	t := time.NewTimer(cl.cfg.timeout + grace(cl.cfg.timeout))
	defer t.Stop()
	select {
	case f := <-cl.frames:
		epoch, pairs, err := decKVs(f.body)
		if err != nil || epoch != cl.epoch {
			cl.fail(lerr(op, fi.ErrRemoteIO, "rank %d: rank 0 answered fence %d with a bad frame (epoch %d, %v)", cl.ec.rank, cl.epoch, epoch, err))
			break
		}
		for _, kv := range pairs {
			cl.kv[string(kv.key)] = kv.val
		}
		cl.epoch++
		return nil
	case <-cl.failC:
	case <-t.C:
		cl.fail(lerr(op, fi.ErrTimedOut, "rank %d: fence %d did not complete within %v", cl.ec.rank, cl.epoch, cl.cfg.timeout))
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.failed
}

func (cl *rdzvClient) write(b []byte) error {
	cl.wmu.Lock()
	defer cl.wmu.Unlock()
	cl.c.SetWriteDeadline(time.Now().Add(cl.cfg.timeout))
	_, err := cl.c.Write(b)
	return err
}

func (cl *rdzvClient) get(key string) ([]byte, bool, error) {
	v, ok := cl.kv[key]
	if !ok {
		return nil, false, nil
	}
	return append([]byte(nil), v...), true, nil
}

func (cl *rdzvClient) abort(code int, why string) error {
	cl.wmu.Lock()
	defer cl.wmu.Unlock()
	cl.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := cl.c.Write(encCodeWhy(fAbort, uint32(int32(code)), why))
	return err
}

func (cl *rdzvClient) finalize() error {
	cl.mu.Lock()
	cl.closed = true
	cl.mu.Unlock()
	err := cl.write(newEnc(fFin).bytes())
	cl.c.Close()
	if err != nil {
		return lerr("Finalize", fi.ErrConnReset, "rank %d: telling rank 0: %v", cl.ec.rank, err)
	}
	return nil
}

// errnoOr maps an errno from a frame to an fi.Errno (fi.ErrOther when it
// is not one gofi knows).
func errnoOr(code uint32) fi.Errno {
	e := fi.Errno(code)
	if code == 0 || fi.Strerror(int(code)) == "Unknown error "+strconv.Itoa(int(code)) {
		return fi.ErrOther
	}
	return e
}

// grace is how much longer a client waits than rank 0, so that rank 0's
// account of a failure (which ranks are missing) arrives first.
func grace(timeout time.Duration) time.Duration { return min(timeout/10, 5*time.Second) }

// exitCode is the process exit status of an abort with code.
func exitCode(code int) int {
	if code == 0 {
		return 1
	}
	return code
}

// rankList formats ranks for a message, eliding long lists.
func rankList(r []int) string {
	sort.Ints(r)
	var b strings.Builder
	for i, x := range r {
		if i == 8 {
			fmt.Fprintf(&b, " and %d more", len(r)-8)
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(x))
	}
	return b.String()
}
