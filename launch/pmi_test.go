package launch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofi-dev/fi"
)

// valueSizes cross the chunk boundaries: empty, one chunk, just over, many.
var valueSizes = []int{0, 1, 700, 765, 766, 767, 2000, 5000, 100_000}

func testValue(rank, size int) []byte {
	rng := rand.New(rand.NewPCG(uint64(rank), uint64(size)))
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// exchange runs Put of every value size, Fence and Get of every rank's
// values on each job, concurrently, and checks the bytes.
func exchange(t *testing.T, jobs []*Job) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = func() error {
				for _, n := range valueSizes {
					if err := j.Put(fmt.Sprintf("v%d", n), testValue(j.Rank(), n)); err != nil {
						return fmt.Errorf("Put %d bytes: %w", n, err)
					}
				}
				if err := j.Fence(); err != nil {
					return fmt.Errorf("Fence: %w", err)
				}
				for r := range j.Size() {
					for _, n := range valueSizes {
						got, err := j.Get(r, fmt.Sprintf("v%d", n))
						if err != nil {
							return fmt.Errorf("Get(%d, v%d): %w", r, n, err)
						}
						if !bytes.Equal(got, testValue(r, n)) {
							return fmt.Errorf("Get(%d, v%d): %d bytes differ from what was put", r, n, len(got))
						}
					}
				}
				return j.Barrier()
			}()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", i, err)
		}
	}
}

// startJobs runs Init for every rank of f concurrently.
func startJobs(t *testing.T, f *fakePMI, pmi string) []*Job {
	t.Helper()
	jobs := make([]*Job, f.size)
	errs := make([]error, f.size)
	var wg sync.WaitGroup
	for r := range f.size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jobs[r], errs[r] = f.job(r, pmi, 10*time.Second)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: Init: %v", r, err)
		}
	}
	return jobs
}

func TestPMIJob(t *testing.T) {
	for _, pmi := range []string{"1", "2"} {
		t.Run("pmi"+pmi, func(t *testing.T) {
			f := newFakePMI(t, 4)
			f.mapping = "(vector,(0,2,2))" // ranks 0,1 on node 0; 2,3 on node 1
			jobs := startJobs(t, f, pmi)
			for r, j := range jobs {
				if j.Rank() != r || j.Size() != 4 || j.Launcher() != "pmi"+pmi {
					t.Errorf("rank %d: Rank %d Size %d Launcher %s", r, j.Rank(), j.Size(), j.Launcher())
				}
				if j.LocalRank() != r%2 || j.LocalSize() != 2 {
					t.Errorf("rank %d: local %d/%d, want %d/2", r, j.LocalRank(), j.LocalSize(), r%2)
				}
			}
			exchange(t, jobs)

			j := jobs[0]
			if _, err := j.Get(1, "nope"); !errors.Is(err, fi.ErrNoEnt) {
				t.Errorf("Get of a key never put: %v, want ErrNoEnt", err)
			}
			if _, err := j.Get(4, "v0"); !errors.Is(err, fi.ErrInval) {
				t.Errorf("Get of rank 4 of 4: %v, want ErrInval", err)
			}
			for _, k := range []string{"", "a b", "a:b", "PMI_x", strings.Repeat("k", 33), "a=b", "a;b", "gofi.ep.0"} {
				if err := j.Put(k, []byte("x")); !errors.Is(err, fi.ErrInval) {
					t.Errorf("Put(%q): %v, want ErrInval", k, err)
				}
			}
			if err := j.Put("huge", make([]byte, 4<<20)); !errors.Is(err, fi.ErrMsgSize) {
				t.Errorf("Put of 4 MiB: %v, want ErrMsgSize", err)
			}
			// A key is put once (Hydra would keep the first value).
			if err := j.Put("v1", []byte("again")); !errors.Is(err, fi.ErrExist) {
				t.Errorf("second Put of a key: %v, want ErrExist", err)
			}
			for r, j := range jobs {
				if err := j.Finalize(); err != nil {
					t.Errorf("rank %d: Finalize: %v", r, err)
				}
				if err := j.Finalize(); err != nil {
					t.Errorf("rank %d: second Finalize: %v", r, err)
				}
				if err := j.Put("a", nil); !errors.Is(err, fi.ErrOpBadState) {
					t.Errorf("Put after Finalize: %v, want ErrOpBadState", err)
				}
				if err := j.Fence(); !errors.Is(err, fi.ErrOpBadState) {
					t.Errorf("Fence after Finalize: %v, want ErrOpBadState", err)
				}
			}
		})
	}
}

// TestPMIAbort: Abort sends the launcher's abort and exits non-zero.
func TestPMIAbort(t *testing.T) {
	for _, pmi := range []string{"1", "2"} {
		f := newFakePMI(t, 1)
		j, err := f.job(0, pmi, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var code int
		var out bytes.Buffer
		j.exit = func(c int) { code = c }
		j.stderr = &out
		j.Abort(0, "because")
		if code != 1 || !strings.Contains(out.String(), "because") {
			t.Errorf("pmi%s: Abort(0) exited %d and said %q", pmi, code, out.String())
		}
		waitFor(5*time.Second, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.aborted) > 0 })
		f.mu.Lock()
		if len(f.aborted) != 1 {
			t.Errorf("pmi%s: the launcher saw %d aborts", pmi, len(f.aborted))
		}
		f.mu.Unlock()
	}
}

// TestPMIFaults: what a launcher does wrong becomes a clear fi.Errno
// within the timeout, never a hang or a panic.
func TestPMIFaults(t *testing.T) {
	const timeout = time.Second // long enough for a loaded machine, short for the no-answer rows
	type fault struct {
		name  string
		on    string // request command the fault answers
		reply func(v2 bool) []byte
		close bool
		hang  bool
		want  fi.Errno
		keeps bool // the conversation stays in step: later calls work
	}
	frame := func(v2 bool, s string) []byte {
		if v2 {
			return []byte(fmt.Sprintf("%-6d%s", len(s), s))
		}
		return []byte(s + "\n")
	}
	faults := []fault{
		{name: "garbage", on: "put", reply: func(v2 bool) []byte { return frame(v2, "hello world") }, want: fi.ErrRemoteIO},
		{name: "wrong-command", on: "put", reply: func(v2 bool) []byte { return frame(v2, "cmd=barrier_out") }, want: fi.ErrRemoteIO},
		{name: "refused", on: "put", reply: func(v2 bool) []byte {
			if v2 {
				return frame(true, "cmd=kvs-put-response;rc=1;errmsg=no room;")
			}
			return frame(false, "cmd=put_result rc=1 msg=no_room")
		}, want: fi.ErrRemoteIO, keeps: true},
		{name: "truncated", on: "put", reply: func(v2 bool) []byte {
			if v2 {
				return []byte("    40cmd=kvs-put")
			}
			return []byte("cmd=put_res")
		}, close: true, want: fi.ErrConnReset},
		{name: "bad-length", on: "put", reply: func(v2 bool) []byte {
			if v2 {
				return []byte("  x12 cmd=kvs-put-response;rc=0;")
			}
			return []byte("cmd=put_result rc=0 \x00\n")
		}, want: fi.ErrRemoteIO},
		{name: "oversized", on: "put", reply: func(v2 bool) []byte {
			if v2 {
				return []byte("999999")
			}
			return []byte("cmd=put_result rc=0 msg=" + strings.Repeat("x", maxMsg+10) + "\n")
		}, want: fi.ErrRemoteIO},
		{name: "closed", on: "put", close: true, want: fi.ErrConnReset},
		{name: "no-answer", on: "put", hang: true, want: fi.ErrTimedOut},
		{name: "no-fence-answer", on: "fence", hang: true, want: fi.ErrTimedOut},
	}
	for _, pmi := range []string{"1", "2"} {
		for _, fl := range faults {
			t.Run("pmi"+pmi+"/"+fl.name, func(t *testing.T) {
				f := newFakePMI(t, 1)
				v2 := pmi == "2"
				match := func(m msg) bool {
					switch fl.on {
					case "put":
						return m.cmd == "put" || m.cmd == "kvs-put"
					case "fence":
						return m.cmd == "barrier_in" || m.cmd == "kvs-fence"
					}
					return false
				}
				if fl.hang {
					f.hang = func(_ int, m msg) bool { return match(m) }
				} else {
					f.fault = func(_ int, m msg) ([]byte, bool) {
						if !match(m) {
							return nil, false
						}
						var b []byte
						if fl.reply != nil {
							b = fl.reply(v2)
						}
						return b, fl.close
					}
				}
				j, err := f.job(0, pmi, timeout)
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				if fl.on == "put" {
					err = j.Put("k", []byte("v"))
				} else {
					err = j.Fence()
				}
				took := time.Since(start)
				if !errors.Is(err, fl.want) {
					t.Fatalf("got %v, want %v", err, fl.want)
				}
				if took > timeout+10*time.Second {
					t.Errorf("the error took %v (timeout %v)", took, timeout)
				}
				// After a fault that may leave a reply in flight the
				// connection is not used again; after a refusal it is.
				if err2 := j.Barrier(); (err2 == nil) != fl.keeps {
					t.Errorf("Barrier after the fault: %v", err2)
				}
				t.Logf("%v", err)
			})
		}
	}
}

// TestPMIRankNeverArrives: a fence of a job whose other rank never comes
// fails with ErrTimedOut after the timeout.
func TestPMIRankNeverArrives(t *testing.T) {
	for _, pmi := range []string{"1", "2"} {
		f := newFakePMI(t, 2)
		j, err := f.job(0, pmi, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = j.Fence()
		if !errors.Is(err, fi.ErrTimedOut) || time.Since(start) > 15*time.Second {
			t.Errorf("pmi%s: Fence without rank 1: %v after %v, want ErrTimedOut", pmi, err, time.Since(start))
		}
	}
}

// TestPMIInitFaults: bad environments and bad start-up replies.
func TestPMIInitFaults(t *testing.T) {
	cfg := config{timeout: time.Second}
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	cases := []struct {
		name string
		env  func(string) string
		want fi.Errno
	}{
		{"fd-not-number", env("PMI_FD", "x", "PMI_RANK", "0", "PMI_SIZE", "1"), fi.ErrInval},
		{"fd-closed", env("PMI_FD", "987", "PMI_RANK", "0", "PMI_SIZE", "1"), fi.ErrBadF},
		{"rank-missing", env("PMI_FD", "0", "PMI_SIZE", "1"), fi.ErrInval},
		{"rank-too-big", env("PMI_FD", "0", "PMI_RANK", "2", "PMI_SIZE", "2"), fi.ErrInval},
		{"port-bad", env("PMI_PORT", "nowhere", "PMI_ID", "0"), fi.ErrInval},
		{"port-refused", env("PMI_PORT", "127.0.0.1:1", "PMI_ID", "0"), fi.ErrConnRefused},
		{"pmix", env("PMIX_RANK", "0"), fi.ErrNoSys},
		{"srun-no-pmi", env("SLURM_STEP_NUM_TASKS", "4"), fi.ErrNoSys},
		{"env-no-master", env("RANK", "1", "WORLD_SIZE", "2"), fi.ErrInval},
		{"env-rank-out", env("RANK", "2", "WORLD_SIZE", "2", "MASTER_ADDR", "x", "MASTER_PORT", "1"), fi.ErrInval},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := initFrom(c.env, cfg)
			if !errors.Is(err, c.want) {
				t.Errorf("got %v, want %v", err, c.want)
			}
		})
	}
	if _, err := newConfig(env("GOFI_LAUNCH_TIMEOUT", "soon"), nil); !errors.Is(err, fi.ErrInval) {
		t.Errorf("bad GOFI_LAUNCH_TIMEOUT: %v", err)
	}
	if _, err := newConfig(env(), []Option{Timeout(-1)}); !errors.Is(err, fi.ErrInval) {
		t.Errorf("negative Timeout: %v", err)
	}

	// Start-up replies a launcher gets wrong.
	for _, bad := range []struct {
		pmi   string
		on    string
		reply string
	}{
		{"1", "init", "cmd=response_to_init rc=1 pmi_version=1 pmi_subversion=1"},
		{"2", "init", "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1"},
		{"2", "init", "cmd=init_response"},
		{"1", "get_maxes", "cmd=maxes kvsname_max=256 keylen_max=64"},
		{"1", "get_maxes", "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=20"},
		{"1", "get_my_kvsname", "cmd=my_kvsname kvsname=a;b"},
		{"1", "get", "cmd=get_result rc=0 value=(vector,(0,x,1))"},
		{"2", "fullinit", "    cmd=fullinit-response;rank=3;size=2;rc=0;"},
		{"2", "fullinit", "    cmd=fullinit-response;"},
		{"2", "info-getjobattr", "    cmd=info-getjobattr-response;found=TRUE;value=(vector,(0,0,0));rc=0;"},
	} {
		f := newFakePMI(t, 2)
		f.fault = func(_ int, m msg) ([]byte, bool) {
			if m.cmd != bad.on {
				return nil, false
			}
			if body, ok := strings.CutPrefix(bad.reply, "    "); ok { // PMI-2: frame it
				return []byte(fmt.Sprintf("%6d%s", len(body), body)), false
			}
			return []byte(bad.reply + "\n"), false
		}
		_, err := f.job(0, bad.pmi, time.Second)
		if !errors.Is(err, fi.ErrRemoteIO) {
			t.Errorf("pmi%s, %s answered %q: %v, want ErrRemoteIO", bad.pmi, bad.on, bad.reply, err)
		}
	}
}

// TestPMIAbortDuringFence: Abort does not wait for a Fence another
// goroutine is blocked in; the launcher hears the abort at once.
func TestPMIAbortDuringFence(t *testing.T) {
	for _, pmi := range []string{"1", "2"} {
		f := newFakePMI(t, 2) // rank 1 never comes: the fence blocks
		j, err := f.job(0, pmi, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		exited := make(chan int, 1)
		j.exit = func(c int) { exited <- c }
		j.stderr = io.Discard
		go j.Fence()
		time.Sleep(100 * time.Millisecond)
		go j.Abort(5, "while fencing")
		select {
		case c := <-exited:
			if c != 5 {
				t.Errorf("pmi%s: exit %d, want 5", pmi, c)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("pmi%s: Abort waited for the blocked Fence", pmi)
		}
		if err := waitFor(5*time.Second, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.aborted) == 1 }); err != nil {
			t.Errorf("pmi%s: the launcher did not hear the abort", pmi)
		}
	}
}
