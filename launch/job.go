package launch

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofi-dev/fi"
)

// DefaultTimeout bounds every exchange with the launcher (and, for the env
// rendezvous, the wait for all ranks to arrive) when neither the Timeout
// option nor GOFI_LAUNCH_TIMEOUT says otherwise. A fence waits for the
// slowest rank, so this is long.
const DefaultTimeout = 5 * time.Minute

// Job is this process's place in a job: its rank, the job size, the ranks
// on its host, and the job's key-value exchange. Get one with Init.
//
// A Job is safe for concurrent use; its calls are serialized (the launcher
// sees one request at a time). Put, Fence, Get, Barrier and Connect are
// collective in the launcher's sense: values put before a Fence are
// visible to every rank's Get after it, and every rank must call Fence
// (and Barrier, and Connect) the same number of times.
type Job struct {
	mu        sync.Mutex
	kv        kvs
	sh        shape
	lim       limits
	done      atomic.Bool     // finalized (written under mu; Abort reads it without)
	connects  int             // Connect calls so far: each uses its own key
	puts      map[string]bool // keys this rank has put: each once
	aborting  sync.Once
	timeout   time.Duration
	exit      func(int)
	stderr    io.Writer
	singleton bool
}

// config is what Options set.
type config struct {
	timeout time.Duration
	trace   io.Writer
	exit    func(int)
	stderr  io.Writer
	pmi     string // "1", "2" or "" (GOFI_PMI)
}

// Option configures Init.
type Option func(*config) error

// Timeout bounds each exchange with the launcher: a reply that does not
// come, a fence some rank never reaches, a rendezvous peer that never
// arrives. The call then fails with fi.ErrTimedOut. The default is
// GOFI_LAUNCH_TIMEOUT (a Go duration such as "90s") when set, else
// DefaultTimeout.
func Timeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return lerr("Init", fi.ErrInval, "timeout %v is not positive", d)
		}
		c.timeout = d
		return nil
	}
}

var (
	initMu  sync.Mutex
	initJob *Job
	initErr error
)

// Init learns how this process was started and joins its job:
//
//   - PMI_FD or PMI_PORT set (MPICH's mpiexec.hydra, Slurm's srun
//     --mpi=pmi2): the PMI wire protocol, PMI-2 unless GOFI_PMI=1 asks for
//     PMI-1 (both launchers serve both).
//   - RANK and WORLD_SIZE set (torchrun, Kubernetes training operators):
//     the env rendezvous with MASTER_ADDR and MASTER_PORT (see env.go).
//   - neither: a single process, rank 0 of 1.
//
// A process started by a launcher gofi does not speak (PMIx: Open MPI's
// mpirun, srun --mpi=pmix; plain srun of several tasks) gets an
// fi.ErrNoSys error that says which launcher to use, rather than a job of
// one.
//
// Init runs once per process: later calls return the same Job (or the same
// error). Errors carry an fi.Errno: fi.ErrTimedOut when the launcher or a
// peer does not answer in time, fi.ErrConnReset when the launcher closes
// the PMI socket, fi.ErrRemoteIO for a reply gofi cannot read, fi.ErrInval
// for a bad environment.
func Init(opts ...Option) (*Job, error) {
	initMu.Lock()
	defer initMu.Unlock()
	if initJob != nil || initErr != nil {
		return initJob, initErr
	}
	cfg, err := newConfig(os.Getenv, opts)
	if err != nil {
		return nil, err // a bad option is the caller's to fix: not cached
	}
	initJob, initErr = initFrom(os.Getenv, cfg)
	return initJob, initErr
}

// newConfig applies the environment's defaults, then opts.
func newConfig(getenv func(string) string, opts []Option) (config, error) {
	cfg := config{timeout: DefaultTimeout, exit: os.Exit, stderr: os.Stderr, pmi: getenv("GOFI_PMI")}
	if s := getenv("GOFI_LAUNCH_TIMEOUT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return cfg, lerr("Init", fi.ErrInval, "GOFI_LAUNCH_TIMEOUT=%q is not a positive duration", s)
		}
		cfg.timeout = d
	}
	if s := getenv("GOFI_PMI_DEBUG"); s != "" && s != "0" {
		cfg.trace = os.Stderr
	}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// initFrom is Init reading the environment through getenv.
func initFrom(getenv func(string) string, cfg config) (*Job, error) {
	const op = "Init"
	j := &Job{timeout: cfg.timeout, exit: cfg.exit, stderr: cfg.stderr, puts: map[string]bool{}}
	var err error
	fd, port := getenv("PMI_FD"), getenv("PMI_PORT")
	switch {
	case fd != "" || port != "":
		j.kv, j.sh, err = initPMI(getenv, cfg)
	case getenv("PMIX_RANK") != "" || getenv("PMIX_NAMESPACE") != "" || getenv("OMPI_COMM_WORLD_SIZE") != "":
		return nil, lerr(op, fi.ErrNoSys, "started by a PMIx launcher (Open MPI's mpirun or srun --mpi=pmix), "+
			"which gofi does not speak: start the job with mpiexec.hydra or srun --mpi=pmi2")
	case getenv("RANK") != "" || getenv("WORLD_SIZE") != "":
		j.kv, j.sh, err = initEnv(getenv, cfg)
	case getenv("SLURM_STEP_NUM_TASKS") != "" && getenv("SLURM_STEP_NUM_TASKS") != "1":
		return nil, lerr(op, fi.ErrNoSys, "started by srun as one of %s tasks without PMI: use srun --mpi=pmi2",
			getenv("SLURM_STEP_NUM_TASKS"))
	default:
		j.kv, j.sh = newSingleton(), shape{rank: 0, size: 1, localRank: 0, localSize: 1}
		j.singleton = true
	}
	if err != nil {
		return nil, err
	}
	j.lim = j.kv.limits()
	return j, nil
}

// initPMI connects to the PMI server and runs PMI-1 or PMI-2 start-up.
func initPMI(getenv func(string) string, cfg config) (kvs, shape, error) {
	const op = "Init"
	var sh shape
	id := -1 // PMI_ID: PMI_PORT mode
	rank, size := -1, -1
	var err error
	if s := getenv("PMI_ID"); s != "" && getenv("PMI_FD") == "" {
		if id, err = atoiRange(s, 0, maxRanks-1); err != nil {
			return nil, sh, lerr(op, fi.ErrInval, "PMI_ID=%q: %v", s, err)
		}
	}
	if id < 0 {
		if rank, err = atoiRange(getenv("PMI_RANK"), 0, maxRanks-1); err != nil {
			return nil, sh, lerr(op, fi.ErrInval, "PMI_RANK=%q: %v", getenv("PMI_RANK"), err)
		}
		if size, err = atoiRange(getenv("PMI_SIZE"), 1, maxRanks); err != nil {
			return nil, sh, lerr(op, fi.ErrInval, "PMI_SIZE=%q: %v", getenv("PMI_SIZE"), err)
		}
		if rank >= size {
			return nil, sh, lerr(op, fi.ErrInval, "PMI_RANK=%d is not below PMI_SIZE=%d", rank, size)
		}
	}

	var nc net.Conn
	if s := getenv("PMI_FD"); s != "" {
		n, err := atoiRange(s, 0, 1<<20)
		if err != nil {
			return nil, sh, lerr(op, fi.ErrInval, "PMI_FD=%q: %v", s, err)
		}
		if nc, err = connFromFD(n, "PMI_FD"); err != nil {
			return nil, sh, err
		}
	} else {
		if nc, err = dialPMI(getenv("PMI_PORT"), cfg.timeout); err != nil {
			return nil, sh, err
		}
	}
	tag := "launch pmi"
	if rank >= 0 {
		tag += " rank " + strconv.Itoa(rank)
	} else {
		tag += " id " + strconv.Itoa(id)
	}

	var kv kvs
	switch cfg.pmi {
	case "", "2":
		pmirank := rank
		if id >= 0 {
			pmirank = id
		}
		var p *pmi2
		p, sh, err = initPMI2(newConn(nc, cfg.timeout, cfg.trace, tag+" (PMI-2)"), pmirank, getenv("PMI_JOBID"))
		kv = p
		if err == nil && size >= 0 && (sh.size != size || sh.rank != rank) {
			err = lerr(op, fi.ErrRemoteIO, "launcher says rank %d of %d, environment rank %d of %d", sh.rank, sh.size, rank, size)
		}
	case "1":
		var p *pmi1
		p, sh, err = initPMI1(newConn(nc, cfg.timeout, cfg.trace, tag+" (PMI-1)"), id, rank, size)
		kv = p
	default:
		err = lerr(op, fi.ErrInval, "GOFI_PMI=%q: use 1 or 2", cfg.pmi)
	}
	if err != nil {
		nc.Close()
		return nil, sh, err
	}
	if err := localRanks(kv, &sh, getenv); err != nil {
		nc.Close()
		return nil, sh, err
	}
	return kv, sh, nil
}

// localRanks sets sh.localRank and sh.localSize: from the launcher's
// process mapping when it gave one, else from Hydra's MPI_LOCALRANKID and
// MPI_LOCALNRANKS, else by exchanging host identities through kv (one put,
// one fence, size gets).
func localRanks(kv kvs, sh *shape, getenv func(string) string) error {
	if sh.mapping != "" {
		if err := localFromMapping(sh); err != nil {
			return lerr("Init", fi.ErrRemoteIO, "launcher's PMI_process_mapping: %v", err)
		}
		return nil
	}
	lr, err1 := atoiRange(getenv("MPI_LOCALRANKID"), 0, maxRanks-1)
	ls, err2 := atoiRange(getenv("MPI_LOCALNRANKS"), 1, maxRanks)
	if err1 == nil && err2 == nil && lr < ls && ls <= sh.size {
		sh.localRank, sh.localSize = lr, ls
		return nil
	}
	if sh.size == 1 {
		sh.localRank, sh.localSize = 0, 1
		return nil
	}
	const key = "gofi.host"
	me := []byte(b64.EncodeToString([]byte(hostID())))
	if len(me) > kv.limits().valMax {
		me = me[:kv.limits().valMax]
	}
	if err := kv.put(storeKey(key, sh.rank, 0), me); err != nil {
		return err
	}
	if err := kv.fence(); err != nil {
		return err
	}
	sh.localRank, sh.localSize = 0, 0
	for r := 0; r < sh.size; r++ {
		v, ok, err := kv.get(storeKey(key, r, 0))
		if err != nil {
			return err
		}
		if !ok {
			return lerr("Init", fi.ErrRemoteIO, "rank %d's host identity is missing after the fence", r)
		}
		if string(v) == string(me) {
			if r < sh.rank {
				sh.localRank++
			}
			sh.localSize++
		}
	}
	return nil
}

// Rank returns this process's rank, 0 to Size()-1.
func (j *Job) Rank() int { return j.sh.rank }

// Size returns the number of ranks in the job.
func (j *Job) Size() int { return j.sh.size }

// LocalRank returns this process's index among the ranks on its host
// (those that can share memory with it), 0 to LocalSize()-1, in rank
// order.
func (j *Job) LocalRank() int { return j.sh.localRank }

// LocalSize returns the number of ranks on this host.
func (j *Job) LocalSize() int { return j.sh.localSize }

// Launcher says how the job was started: "pmi1" or "pmi2" (mpiexec.hydra,
// srun --mpi=pmi2), "env" (torchrun-style environment) or "singleton".
func (j *Job) Launcher() string { return j.kv.name() }

// usable checks the job can still be used. Caller holds mu.
func (j *Job) usable(op string) error {
	if j.done.Load() {
		return lerr(op, fi.ErrOpBadState, "the job was finalized")
	}
	return nil
}

// Put stores val (any bytes, any length up to 4096 of the launcher's
// values: 3 MiB under PMI, 128 MiB for the env rendezvous) under key for
// this rank. Other ranks read it with Get(thisRank, key) after the next
// Fence. key is 1 to 32 bytes of [A-Za-z0-9_.-] not starting with "PMI_"
// or "gofi." (fi.ErrInval otherwise). A rank puts each key once: launchers keep the
// first value (Hydra) or refuse a second (fi.ErrExist here, before the
// launcher sees it), so new data takes a new key. Too long a value is
// fi.ErrMsgSize.
func (j *Job) Put(key string, val []byte) error {
	if err := checkUserKey("Put", key); err != nil {
		return err
	}
	return j.put1("Put", key, val)
}

// put1 is Put of a checked key (Connect's too).
func (j *Job) put1(op, key string, val []byte) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usable(op); err != nil {
		return err
	}
	if j.puts[key] {
		return lerr(op, fi.ErrExist, "key %q was put already: launchers keep one value per key", key)
	}
	if !j.lim.text {
		if len(val) > j.lim.valMax {
			return lerr(op, fi.ErrMsgSize, "value of %d bytes is longer than %d", len(val), j.lim.valMax)
		}
		j.puts[key] = true
		return j.kv.put(storeKey(key, j.sh.rank, 0), append([]byte(nil), val...))
	}
	parts, err := chunks(val, j.lim.valMax)
	if err != nil {
		return err
	}
	if len(storeKey(key, j.sh.rank, len(parts)-1)) > j.lim.keyMax {
		return lerr(op, fi.ErrInval, "key %q is too long for the launcher's %d-byte keys", key, j.lim.keyMax)
	}
	j.puts[key] = true
	for i, p := range parts {
		if err := j.kv.put(storeKey(key, j.sh.rank, i), []byte(p)); err != nil {
			return err
		}
	}
	return nil
}

// Fence waits until every rank has called Fence; then the values each
// rank put before it are visible to Get everywhere. A rank that never
// arrives makes it fail with fi.ErrTimedOut after the timeout.
func (j *Job) Fence() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usable("Fence"); err != nil {
		return err
	}
	return j.kv.fence()
}

// Get returns the value rank put under key before the last Fence. A key
// that rank did not put is fi.ErrNoEnt; a rank outside the job is
// fi.ErrInval. The returned slice is the caller's.
func (j *Job) Get(rank int, key string) ([]byte, error) {
	if err := checkUserKey("Get", key); err != nil {
		return nil, err
	}
	return j.get1("Get", rank, key)
}

// get1 is Get of a checked key (Connect's too).
func (j *Job) get1(op string, rank int, key string) ([]byte, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usable(op); err != nil {
		return nil, err
	}
	if rank < 0 || rank >= j.sh.size {
		return nil, lerr(op, fi.ErrInval, "rank %d is not in the job of %d ranks", rank, j.sh.size)
	}
	first, ok, err := j.kv.get(storeKey(key, rank, 0))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, lerr(op, fi.ErrNoEnt, "rank %d put no key %q before the last fence", rank, key)
	}
	if !j.lim.text {
		return first, nil
	}
	n, data, err := chunkCount(first)
	if err != nil {
		return nil, lerr(op, fi.ErrRemoteIO, "value of key %q from rank %d: %v", key, rank, err)
	}
	enc := make([]byte, 0, n*j.lim.valMax)
	enc = append(enc, data...)
	for i := 1; i < n; i++ {
		part, ok, err := j.kv.get(storeKey(key, rank, i))
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, lerr(op, fi.ErrRemoteIO, "value of key %q from rank %d: chunk %d of %d is missing", key, rank, i, n)
		}
		enc = append(enc, part...)
	}
	val := make([]byte, b64.DecodedLen(len(enc)))
	m, err := b64.Decode(val, enc)
	if err != nil {
		return nil, lerr(op, fi.ErrRemoteIO, "value of key %q from rank %d is not gofi's encoding: %v", key, rank, err)
	}
	return val[:m], nil
}

// Barrier waits until every rank has called Barrier (fi.ErrTimedOut when
// one never does).
func (j *Job) Barrier() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usable("Barrier"); err != nil {
		return err
	}
	return j.kv.barrier()
}

// Abort ends the whole job: it prints msg to stderr, asks the launcher to
// stop every rank, and exits this process with code (1 when code is 0: an
// abort is a failure). It does not return. It may be called while another
// goroutine waits in a Fence or Barrier: it does not wait for it.
func (j *Job) Abort(code int, msg string) {
	j.aborting.Do(func() {
		fmt.Fprintf(j.stderr, "launch: rank %d of %d aborting the job (code %d): %s\n",
			j.sh.rank, j.sh.size, code, strings.TrimSpace(msg))
		if !j.done.Load() && !j.singleton {
			// The launcher tears the job down when it reads the abort,
			// and output still in the pipe to its proxy is lost then:
			// wait until the proxy has read the message.
			waitDrained(j.stderr, 2*time.Second)
			if err := j.kv.abort(code, msg); err != nil {
				fmt.Fprintf(j.stderr, "launch: rank %d: telling the launcher: %v\n", j.sh.rank, err)
			}
		}
	})
	if code == 0 {
		code = 1
	}
	j.exit(code)
}

// Finalize leaves the job: it tells the launcher this rank is done and
// releases the connection. Later calls on the Job fail with
// fi.ErrOpBadState; Finalize itself may be called again (it then does
// nothing).
func (j *Job) Finalize() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.done.Load() {
		return nil
	}
	j.done.Store(true)
	return j.kv.finalize()
}

// lerr builds launch's errors: an *fi.OpError whose Op names the call.
func lerr(op string, code fi.Errno, format string, args ...any) error {
	return &fi.OpError{Op: "launch." + op, Errno: code, Detail: fmt.Sprintf(format, args...)}
}

// atoiRange parses a decimal in [lo, hi].
func atoiRange(s string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("not a number")
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%d is outside [%d, %d]", n, lo, hi)
	}
	return n, nil
}

// attrInt reads an integer attribute of m in [lo, hi].
func attrInt(m msg, key string, lo, hi int) (int, error) {
	v, ok := m.get(key)
	if !ok {
		return 0, fmt.Errorf("no %s", key)
	}
	n, err := atoiRange(v, lo, hi)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %v", key, v, err)
	}
	return n, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// safeToken reports whether s can travel as a PMI value unescaped.
func safeToken(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c <= ' ', c == '=', c == ';', c == '\\', c >= 0x7f:
			return false
		}
	}
	return true
}
