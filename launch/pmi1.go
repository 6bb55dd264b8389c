package launch

// PMI-1 client: the simple PMI wire protocol (version 1.1) that MPICH's
// Hydra serves on PMI_FD or PMI_PORT and that Slurm's mpi/pmi2 plugin also
// serves. The exchange, as Hydra 4.0 and Slurm 22-24 answer it:
//
//	[PMI_PORT only] cmd=initack pmiid=ID  -> cmd=initack, then
//	                cmd=set size=N, cmd=set rank=R, cmd=set debug=D
//	cmd=init pmi_version=1 pmi_subversion=1 -> cmd=response_to_init rc=0 ...
//	cmd=get_maxes                    -> cmd=maxes kvsname_max= keylen_max= vallen_max=
//	cmd=get_my_kvsname               -> cmd=my_kvsname kvsname=K
//	cmd=put kvsname=K key=k value=v  -> cmd=put_result rc=0
//	cmd=barrier_in                   -> cmd=barrier_out
//	cmd=get kvsname=K key=k          -> cmd=get_result rc=0 value=v
//	                                    (rc!=0 or found=FALSE: no such key)
//	cmd=abort exitcode=C             (no reply: the launcher ends the job)
//	cmd=finalize                     -> cmd=finalize_ack
//
// Puts become visible to other ranks after the next barrier, so a fence is
// a barrier. Slurm reads each request with one read of at most 1024 bytes,
// so a whole put line is kept within that.

import (
	"strconv"

	"github.com/gofi-dev/fi"
)

// pmi1MaxLine is the longest request line: Slurm reads a PMI-1 request
// with a single read(2) of 1024 bytes.
const pmi1MaxLine = 1024

type pmi1 struct {
	c       *conn
	kvsname string
	keyMax  int // longest key the launcher takes
	valMax  int // longest value we put (launcher limit and line limit)
}

// initPMI1 runs the PMI-1 start-up on c. id >= 0 means PMI_PORT mode
// (rank and size come from the initack handshake); otherwise rank and
// size are the PMI_RANK and PMI_SIZE the caller read.
func initPMI1(c *conn, id, rank, size int) (*pmi1, shape, error) {
	const op = "Init"
	p := &pmi1{c: c}
	var sh shape
	if id >= 0 {
		if err := c.send(op, appendV1(nil, "initack", "pmiid", strconv.Itoa(id))); err != nil {
			return nil, sh, err
		}
		m, err := c.readV1(op)
		if err != nil {
			return nil, sh, err
		}
		if err := c.expect(op, m, "initack"); err != nil {
			return nil, sh, err
		}
		rank, size = -1, -1
		// Hydra follows initack with three set commands: size, rank, debug.
		for range 3 {
			m, err := c.readV1(op)
			if err != nil {
				return nil, sh, err
			}
			if m.cmd != "set" {
				return nil, sh, lerr(op, fi.ErrRemoteIO, "launcher answered %q, expected set", m.String())
			}
			if v, ok := m.get("size"); ok {
				if size, err = atoiRange(v, 1, maxRanks); err != nil {
					return nil, sh, lerr(op, fi.ErrRemoteIO, "launcher set size=%q: %v", v, err)
				}
			}
			if v, ok := m.get("rank"); ok {
				if rank, err = atoiRange(v, 0, maxRanks-1); err != nil {
					return nil, sh, lerr(op, fi.ErrRemoteIO, "launcher set rank=%q: %v", v, err)
				}
			}
		}
		if rank < 0 || size < 0 || rank >= size {
			return nil, sh, lerr(op, fi.ErrRemoteIO, "launcher gave rank %d of size %d", rank, size)
		}
	}
	sh.rank, sh.size = rank, size

	m, err := p.call(op, "response_to_init", "init", "pmi_version", "1", "pmi_subversion", "1")
	if err != nil {
		return nil, sh, err
	}
	if v, _ := m.get("pmi_version"); v != "" && v != "1" {
		return nil, sh, lerr(op, fi.ErrRemoteIO, "launcher speaks PMI version %s, not 1", v)
	}

	m, err = p.call(op, "maxes", "get_maxes")
	if err != nil {
		return nil, sh, err
	}
	kvsMax, err1 := attrInt(m, "kvsname_max", 1, maxMsg)
	keyMax, err2 := attrInt(m, "keylen_max", 8, maxMsg)
	valMax, err3 := attrInt(m, "vallen_max", 8, maxMsg)
	if err := firstErr(err1, err2, err3); err != nil {
		return nil, sh, lerr(op, fi.ErrRemoteIO, "bad maxes reply %q: %v", m.String(), err)
	}

	m, err = p.call(op, "my_kvsname", "get_my_kvsname")
	if err != nil {
		return nil, sh, err
	}
	p.kvsname, _ = m.get("kvsname")
	if p.kvsname == "" || len(p.kvsname) > kvsMax || !safeToken(p.kvsname) {
		return nil, sh, lerr(op, fi.ErrRemoteIO, "bad kvsname in %q", m.String())
	}

	// Keys and values are bounded by the launcher's maxima (less one for
	// the C string's NUL) and by the request line limit.
	p.keyMax = min(keyMax-1, 64)
	overhead := len("cmd=put kvsname= key= value=\n") + len(p.kvsname) + p.keyMax
	p.valMax = min(valMax-1, pmi1MaxLine-overhead)
	if p.valMax < 64 {
		return nil, sh, lerr(op, fi.ErrRemoteIO, "launcher's value limit %d is too small", valMax)
	}

	// The process mapping gives the ranks on this node.
	if mp, ok, err := p.get("PMI_process_mapping"); err != nil {
		return nil, sh, err
	} else if ok {
		sh.mapping = string(mp)
	}
	return p, sh, nil
}

// call sends cmd with kv and reads a reply that must be want with rc 0.
func (p *pmi1) call(op, want, cmd string, kv ...string) (msg, error) {
	p.c.wbuf = appendV1(p.c.wbuf[:0], cmd, kv...)
	if err := p.c.send(op, p.c.wbuf); err != nil {
		return msg{}, err
	}
	m, err := p.c.readV1(op)
	if err != nil {
		return m, err
	}
	if err := p.c.expect(op, m, want); err != nil {
		return m, err
	}
	return m, nil
}

func (p *pmi1) name() string { return "pmi1" }

func (p *pmi1) limits() limits { return limits{keyMax: p.keyMax, valMax: p.valMax, text: true} }

func (p *pmi1) put(key string, val []byte) error {
	_, err := p.call("Put", "put_result", "put", "kvsname", p.kvsname, "key", key, "value", string(val))
	return err
}

func (p *pmi1) fence() error {
	_, err := p.call("Fence", "barrier_out", "barrier_in")
	return err
}

func (p *pmi1) barrier() error {
	_, err := p.call("Barrier", "barrier_out", "barrier_in")
	return err
}

func (p *pmi1) get(key string) ([]byte, bool, error) {
	const op = "Get"
	p.c.wbuf = appendV1(p.c.wbuf[:0], "get", "kvsname", p.kvsname, "key", key)
	if err := p.c.send(op, p.c.wbuf); err != nil {
		return nil, false, err
	}
	m, err := p.c.readV1(op)
	if err != nil {
		return nil, false, err
	}
	if m.cmd != "get_result" {
		return nil, false, p.c.fail(lerr(op, fi.ErrRemoteIO, "launcher answered %q, expected get_result", m.String()))
	}
	if f, ok := m.get("found"); ok && f != "TRUE" && f != "true" {
		return nil, false, nil
	}
	if rc, ok := m.get("rc"); ok && rc != "0" {
		return nil, false, nil // Hydra: rc=-1 msg=key_K_not_found; Slurm: rc=1
	}
	v, ok := m.get("value")
	if !ok {
		return nil, false, lerr(op, fi.ErrRemoteIO, "get_result without a value: %q", m.String())
	}
	return []byte(v), true, nil
}

func (p *pmi1) abort(code int, _ string) error {
	return p.c.sendAbort(appendV1(nil, "abort", "exitcode", strconv.Itoa(code)))
}

func (p *pmi1) finalize() error {
	_, err := p.call("Finalize", "finalize_ack", "finalize")
	p.c.close()
	return err
}
