package launch

// PMI-2 client: the wire protocol of MPICH's PMI-2 as Hydra and Slurm's
// srun --mpi=pmi2 serve it. The first message is PMI-1 styled; the rest
// carry a six-character length (wire.go):
//
//	cmd=init pmi_version=2 pmi_subversion=0 -> cmd=response_to_init rc=0 pmi_version=2 ...
//	cmd=fullinit;[pmijobid=J;]pmirank=R;threaded=FALSE;
//	                      -> cmd=fullinit-response;rc=0;rank=R;size=N;appnum=A;...
//	cmd=job-getid;        -> cmd=job-getid-response;rc=0;jobid=J;
//	cmd=info-getjobattr;key=PMI_process_mapping;
//	                      -> cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,...);
//	cmd=kvs-put;key=k;value=v;       -> cmd=kvs-put-response;rc=0;
//	cmd=kvs-fence;                   -> cmd=kvs-fence-response;rc=0;
//	cmd=kvs-get;jobid=J;srcid=-1;key=k; -> cmd=kvs-get-response;rc=0;found=TRUE;value=v;
//	cmd=abort;isworldabort=TRUE;msg=M;  (no reply: the launcher ends the job)
//	cmd=finalize;                    -> cmd=finalize-response;rc=0;
//
// Slurm requires pmijobid (from PMI_JOBID) and threaded in fullinit;
// Hydra takes them when present. The init line must go alone in one
// write: Slurm reads it with a single read(2) of under 64 bytes.

import (
	"strconv"
	"strings"

	"github.com/gofi-dev/fi"
)

// pmi2ValMax and pmi2KeyMax are PMI2_MAX_VALLEN and PMI2_MAX_KEYLEN of
// MPICH's pmi2.h, which Hydra and Slurm share; one byte stays free for the
// C string's NUL.
const (
	pmi2ValMax = 1024 - 1
	pmi2KeyMax = 64 - 1
)

type pmi2 struct {
	c     *conn
	jobid string
}

// initPMI2 runs the PMI-2 start-up on c. pmirank is PMI_ID (PMI_PORT mode)
// or PMI_RANK; jobid is PMI_JOBID (may be empty).
func initPMI2(c *conn, pmirank int, jobid string) (*pmi2, shape, error) {
	const op = "Init"
	p := &pmi2{c: c}
	var sh shape

	if err := c.send(op, appendV1(nil, "init", "pmi_version", "2", "pmi_subversion", "0")); err != nil {
		return nil, sh, err
	}
	m, err := c.readV1(op)
	if err != nil {
		return nil, sh, err
	}
	if err := c.expect(op, m, "response_to_init"); err != nil {
		return nil, sh, err
	}
	if v, ok := m.get("pmi_version"); ok && v != "2" {
		return nil, sh, lerr(op, fi.ErrRemoteIO, "launcher speaks PMI version %s, not 2 (try GOFI_PMI=1)", v)
	}

	kv := make([]string, 0, 6)
	if jobid != "" {
		if !safeToken(jobid) {
			return nil, sh, lerr(op, fi.ErrInval, "PMI_JOBID=%q holds characters PMI cannot carry", jobid)
		}
		kv = append(kv, "pmijobid", jobid)
	}
	kv = append(kv, "pmirank", strconv.Itoa(pmirank), "threaded", "FALSE")
	m, err = p.call(op, "fullinit-response", "fullinit", kv...)
	if err != nil {
		return nil, sh, err
	}
	size, err1 := attrInt(m, "size", 1, maxRanks)
	rank, err2 := attrInt(m, "rank", 0, maxRanks-1)
	if err := firstErr(err1, err2); err != nil || rank >= size {
		return nil, sh, lerr(op, fi.ErrRemoteIO, "bad fullinit reply %q", m.String())
	}
	sh.rank, sh.size = rank, size
	p.jobid = jobid

	// The job's id, which kvs-get names (Slurm's is PMI_JOBID; Hydra's its
	// kvs name).
	m, err = p.call(op, "job-getid-response", "job-getid")
	if err != nil {
		return nil, sh, err
	}
	if id, ok := m.get("jobid"); ok && id != "" {
		if !safeToken(id) || len(id) > 256 {
			return nil, sh, lerr(op, fi.ErrRemoteIO, "bad jobid in %q", m.String())
		}
		p.jobid = id
	}

	m, err = p.call(op, "info-getjobattr-response", "info-getjobattr", "key", "PMI_process_mapping")
	if err != nil {
		return nil, sh, err
	}
	if f, _ := m.get("found"); isTrue(f) {
		sh.mapping, _ = m.get("value")
	}
	return p, sh, nil
}

func (p *pmi2) call(op, want, cmd string, kv ...string) (msg, error) {
	p.c.wbuf = appendV2(p.c.wbuf[:0], cmd, kv...)
	if err := p.c.send(op, p.c.wbuf); err != nil {
		return msg{}, err
	}
	m, err := p.c.readV2(op)
	if err != nil {
		return m, err
	}
	if err := p.c.expect(op, m, want); err != nil {
		return m, err
	}
	return m, nil
}

func (p *pmi2) name() string { return "pmi2" }

func (p *pmi2) limits() limits { return limits{keyMax: pmi2KeyMax, valMax: pmi2ValMax, text: true} }

func (p *pmi2) put(key string, val []byte) error {
	_, err := p.call("Put", "kvs-put-response", "kvs-put", "key", key, "value", string(val))
	return err
}

// fence is kvs-fence followed by a get of a key no one puts. Slurm's
// kvs-fence is collective; Hydra 4.0's answers at once and instead holds a
// get of a missing key until every rank has fenced, then says not found.
// The get makes the fence a barrier under both, so a rank that never
// fences fails the fence (by timeout) rather than a later Get.
func (p *pmi2) fence() error { return p.collective("Fence") }

// barrier is a fence with nothing put: PMI-2 has no other barrier.
func (p *pmi2) barrier() error { return p.collective("Barrier") }

func (p *pmi2) collective(op string) error {
	if _, err := p.call(op, "kvs-fence-response", "kvs-fence"); err != nil {
		return err
	}
	_, _, err := p.getAs(op, pmi2NoKey)
	return err
}

// pmi2NoKey is never put (Job keys carry a rank after the ':').
const pmi2NoKey = "gofi.fence:-"

func (p *pmi2) get(key string) ([]byte, bool, error) { return p.getAs("Get", key) }

func (p *pmi2) getAs(op, key string) ([]byte, bool, error) {
	kv := []string{"srcid", "-1", "key", key}
	if p.jobid != "" {
		kv = append([]string{"jobid", p.jobid}, kv...)
	}
	m, err := p.call(op, "kvs-get-response", "kvs-get", kv...)
	if err != nil {
		return nil, false, err
	}
	if f, _ := m.get("found"); !isTrue(f) {
		return nil, false, nil
	}
	v, ok := m.get("value")
	if !ok {
		return nil, false, lerr(op, fi.ErrRemoteIO, "kvs-get-response without a value: %q", m.String())
	}
	return []byte(v), true, nil
}

func (p *pmi2) abort(code int, why string) error {
	// ';' cannot travel in a value that Slurm parses; newlines end nothing
	// in PMI-2 but read badly in logs.
	why = strings.Map(func(r rune) rune {
		if r == ';' || r == '\n' || r == '\r' || r == 0 {
			return ' '
		}
		return r
	}, why)
	if why == "" {
		why = "gofi job aborted with code " + strconv.Itoa(code)
	}
	if len(why) > pmi2ValMax {
		why = why[:pmi2ValMax]
	}
	return p.c.sendAbort(appendV2(nil, "abort", "isworldabort", "TRUE", "msg", why))
}

func (p *pmi2) finalize() error {
	_, err := p.call("Finalize", "finalize-response", "finalize")
	p.c.close()
	return err
}

func isTrue(s string) bool { return s == "TRUE" || s == "true" || s == "1" }
