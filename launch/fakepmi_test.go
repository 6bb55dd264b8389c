package launch

// A PMI server in the test process, speaking both wire formats the way
// Hydra and Slurm do (one key-value space, barriers, the process mapping),
// with hooks to misbehave. Each rank's Job reaches it through a real
// socketpair handed over in PMI_FD, as a launcher would.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

type fakePMI struct {
	t       *testing.T
	size    int
	mapping string

	mu      sync.Mutex
	kvs     map[string]string
	inBar   int
	gen     int
	barDone *sync.Cond
	aborted []int // exit codes of aborts received

	// fault, when set, sees each request first: it returns the raw bytes
	// to answer with (nil: serve normally), and whether to close the
	// socket afterwards. hang makes the server read on but never answer.
	fault func(rank int, m msg) (reply []byte, close bool)
	hang  func(rank int, m msg) bool
}

func newFakePMI(t *testing.T, size int) *fakePMI {
	f := &fakePMI{t: t, size: size, kvs: map[string]string{}, mapping: fmt.Sprintf("(vector,(0,1,%d))", size)}
	f.barDone = sync.NewCond(&f.mu)
	return f
}

// pair returns the client's fd and starts serving rank on the other end.
func (f *fakePMI) pair(rank int) int {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	sf := os.NewFile(uintptr(fds[1]), "fakepmi")
	c, err := net.FileConn(sf)
	sf.Close()
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	go f.serve(rank, c)
	return fds[0]
}

// env is the environment of rank: PMI_FD set to a fresh socketpair.
func (f *fakePMI) env(rank int, pmi string) func(string) string {
	m := map[string]string{
		"PMI_FD":   strconv.Itoa(f.pair(rank)),
		"PMI_RANK": strconv.Itoa(rank),
		"PMI_SIZE": strconv.Itoa(f.size),
		"GOFI_PMI": pmi,
	}
	return func(k string) string { return m[k] }
}

// job runs Init for rank against f with PMI version pmi.
func (f *fakePMI) job(rank int, pmi string, timeout time.Duration) (*Job, error) {
	getenv := f.env(rank, pmi)
	cfg, err := newConfig(getenv, []Option{Timeout(timeout)})
	if err != nil {
		return nil, err
	}
	cfg.exit = func(int) {}
	cfg.stderr = io.Discard
	return initFrom(getenv, cfg)
}

func (f *fakePMI) serve(rank int, c net.Conn) {
	r := bufio.NewReader(c)
	defer c.Close()
	var wmu sync.Mutex
	for {
		// PMI-1 requests start with "cmd="; PMI-2 with a length field.
		head, err := r.Peek(4)
		if err != nil {
			return
		}
		var m msg
		v2 := string(head) != "cmd="
		if v2 {
			var h [6]byte
			if _, err := io.ReadFull(r, h[:]); err != nil {
				return
			}
			n, err := parseV2Len(h[:])
			if err != nil {
				f.t.Errorf("fake PMI: bad length %q", h)
				return
			}
			body := make([]byte, n)
			if _, err := io.ReadFull(r, body); err != nil {
				return
			}
			if m, err = parseV2(body); err != nil {
				f.t.Errorf("fake PMI: %v", err)
				return
			}
		} else {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			if m, err = parseV1(line[:len(line)-1]); err != nil {
				f.t.Errorf("fake PMI: %v", err)
				return
			}
		}
		if f.hang != nil && f.hang(rank, m) {
			continue
		}
		if f.fault != nil {
			if reply, cl := f.fault(rank, m); reply != nil || cl {
				wmu.Lock()
				c.Write(reply)
				wmu.Unlock()
				if cl {
					return
				}
				continue
			}
		}
		if m.cmd == "barrier_in" || m.cmd == "kvs-fence" {
			// Like a launcher's event loop, read on while the barrier
			// waits (an abort may come).
			go func() {
				reply := f.answer(rank, m, v2)
				wmu.Lock()
				c.Write(reply)
				wmu.Unlock()
			}()
			continue
		}
		reply := f.answer(rank, m, v2)
		if reply != nil {
			wmu.Lock()
			_, err := c.Write(reply)
			wmu.Unlock()
			if err != nil {
				return
			}
		}
		if m.cmd == "finalize" {
			return
		}
	}
}

// answer serves m like Hydra would.
func (f *fakePMI) answer(rank int, m msg, v2 bool) []byte {
	v1 := func(cmd string, kv ...string) []byte { return appendV1(nil, cmd, kv...) }
	r2 := func(cmd string, kv ...string) []byte { return appendV2(nil, cmd, kv...) }
	switch m.cmd {
	case "init":
		v, _ := m.get("pmi_version")
		return v1("response_to_init", "pmi_version", v, "pmi_subversion", "0", "rc", "0")
	case "get_maxes":
		return v1("maxes", "kvsname_max", "256", "keylen_max", "64", "vallen_max", "1024")
	case "get_my_kvsname":
		return v1("my_kvsname", "kvsname", "kvs_fake_0")
	case "put":
		k, _ := m.get("key")
		v, _ := m.get("value")
		f.mu.Lock()
		f.kvs[k] = v
		f.mu.Unlock()
		return v1("put_result", "rc", "0", "msg", "success")
	case "barrier_in":
		f.barrier()
		return v1("barrier_out")
	case "get":
		k, _ := m.get("key")
		if k == "PMI_process_mapping" {
			return v1("get_result", "rc", "0", "msg", "success", "value", f.mapping)
		}
		f.mu.Lock()
		v, ok := f.kvs[k]
		f.mu.Unlock()
		if !ok {
			return v1("get_result", "rc", "-1", "msg", "key_"+k+"_not_found", "value", "unknown")
		}
		return v1("get_result", "rc", "0", "msg", "success", "value", v)
	case "abort":
		c, _ := m.get("exitcode")
		if !v2 {
			n, _ := strconv.Atoi(c)
			f.mu.Lock()
			f.aborted = append(f.aborted, n)
			f.mu.Unlock()
			return nil
		}
		f.mu.Lock()
		f.aborted = append(f.aborted, -1)
		f.mu.Unlock()
		return nil
	case "finalize":
		if v2 {
			return r2("finalize-response", "rc", "0")
		}
		return v1("finalize_ack")
	case "fullinit":
		return r2("fullinit-response", "pmi-version", "2", "pmi-subversion", "0", "rank", strconv.Itoa(rank),
			"size", strconv.Itoa(f.size), "appnum", "0", "debugged", "FALSE", "pmiverbose", "FALSE", "rc", "0")
	case "job-getid":
		return r2("job-getid-response", "jobid", "kvs_fake_0", "rc", "0")
	case "info-getjobattr":
		return r2("info-getjobattr-response", "found", "TRUE", "value", f.mapping, "rc", "0")
	case "kvs-put":
		k, _ := m.get("key")
		v, _ := m.get("value")
		f.mu.Lock()
		f.kvs[k] = v
		f.mu.Unlock()
		return r2("kvs-put-response", "rc", "0")
	case "kvs-fence":
		f.barrier()
		return r2("kvs-fence-response", "rc", "0")
	case "kvs-get":
		k, _ := m.get("key")
		f.mu.Lock()
		v, ok := f.kvs[k]
		f.mu.Unlock()
		if !ok {
			return r2("kvs-get-response", "found", "FALSE", "rc", "0")
		}
		return r2("kvs-get-response", "found", "TRUE", "value", v, "rc", "0")
	}
	f.t.Errorf("fake PMI: unexpected command %q", m.String())
	return nil
}

// barrier waits until all ranks are in.
func (f *fakePMI) barrier() {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.gen
	f.inBar++
	if f.inBar == f.size {
		f.inBar = 0
		f.gen++
		f.barDone.Broadcast()
		return
	}
	for f.gen == g {
		f.barDone.Wait()
	}
}
