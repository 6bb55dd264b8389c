package fi

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofi-dev/fi/coll/colltest"
	"github.com/gofi-dev/fi/dtype"
)

// Multi-process collectives: the parent test is rank 0 and starts ranks
// 1..n-1 as peer processes (role "coll"); they swap addresses over the
// control links, every rank inserts all of them in rank order, joins, and
// runs the same cases, each checking its own output against the serial
// reference (every rank can compute every rank's input).

// collJob is one rank's side of a multi-process job.
type collJob struct {
	r     *collRank
	n     int
	cases []colltest.Case
	kill  int // rank that exits in the middle of the last case (-1: none)
	// killed returns once the dying rank's process has exited (the
	// parent watches it; a peer is told over its control link).
	killed func()
}

func collJobArg(prov string, n, rank, kill int, seed uint64) string {
	return fmt.Sprintf("%s,%d,%d,%d,%d", prov, n, rank, kill, seed)
}

func parseCollJobArg(t *testing.T, arg string) (prov string, n, rank, kill int, seed uint64) {
	f := strings.Split(arg, ",")
	if len(f) != 5 {
		t.Fatalf("coll arg %q", arg)
	}
	n, _ = strconv.Atoi(f[1])
	rank, _ = strconv.Atoi(f[2])
	kill, _ = strconv.Atoi(f[3])
	seed, _ = strconv.ParseUint(f[4], 10, 64)
	return f[0], n, rank, kill, seed
}

// killCase is the collective a rank dies in: large enough that the others
// are mid-transfer (rendezvous) when it goes.
func killCase(n int) colltest.Case {
	return colltest.Case{Coll: dtype.Allreduce, Type: dtype.Double, Op: dtype.Sum, Count: 1 << 18, Ranks: n, Seed: 5}
}

// run runs the cases; the dying rank posts the kill case and exits at
// once, the others must see it fail within the timeout.
func (j *collJob) run() error {
	for _, c := range j.cases {
		if err := j.r.runCase(c); err != nil {
			return err
		}
	}
	if j.kill < 0 {
		return nil
	}
	c := killCase(j.n)
	buf, res := c.Input(j.r.rank), make([]byte, c.ResultLen(j.r.rank))
	if j.r.rank != j.kill {
		// The dying rank posts first and is gone before the others
		// post. Were the others already waiting, its post could run the
		// whole collective: a shared-memory step advances inside the post
		// through every phase the others have already arrived at, and the
		// others would then legitimately complete. So the others post
		// only once its process has exited, which is no guess about how
		// long its post takes.
		j.killed()
	}
	if err := j.r.post(c, buf, res, nil); err != nil {
		return err
	}
	if j.r.rank == j.kill {
		// Die without closing anything and without any progress after the
		// post (which sent the first round, or arrived at the first
		// shared-memory phase, where the others are not yet).
		time.Sleep(50 * time.Millisecond)
		os.Exit(0)
	}
	var err error
	if j.r.rank%2 == 1 {
		err = j.r.sreadColl(30 * time.Second) // asleep between progress passes
	} else {
		_, err = j.r.waitColl(30 * time.Second)
	}
	switch {
	case err == nil:
		return fmt.Errorf("rank %d: the collective a rank died in completed successfully", j.r.rank)
	case strings.Contains(err.Error(), "no collective completion"):
		return fmt.Errorf("rank %d: hung after a rank died: %w", j.r.rank, err)
	}
	// Every later collective fails at once.
	if err := j.r.ep.Barrier(j.r.mc.Addr(), nil); err == nil {
		return fmt.Errorf("rank %d: a barrier on the broken group was accepted", j.r.rank)
	}
	return nil
}

func init() {
	peerRoles["coll"] = func(t *testing.T, l *link, arg string) {
		prov, n, rank, kill, seed := parseCollJobArg(t, arg)
		j := &collJob{n: n, kill: kill, cases: collCases(n, seed, 1)}
		j.killed = func() { l.expect("killed") }
		j.r = &collRank{node: openNode(t, prov, nodeCfg{caps: collCaps}), rank: rank}
		l.send("addr", j.r.names())
		names := l.expect("names")
		for i, nm := range names {
			if a := j.r.insertNames(nm, false); a[0] != Addr(i) {
				t.Fatalf("rank %d inserted at %d", i, a[0])
			}
		}
		if err := j.join(); err != nil {
			l.send("fail", err)
			return
		}
		if err := j.run(); err != nil {
			l.send("fail", strings.ReplaceAll(err.Error(), "\n", " "))
			return
		}
		l.send("ok")
	}
}

func (j *collJob) join() error {
	r := j.r
	set, err := r.av.NewSet(&AVSetAttr{StartAddr: 0, EndAddr: Addr(j.n - 1), Stride: 1})
	if err != nil {
		return err
	}
	r.set = set
	if r.mc, err = r.ep.JoinCollective(set.Addr(), set, 0, "join"); err != nil {
		return err
	}
	if _, err = r.waitColl(waitLimit); err != nil {
		return err
	}
	return checkLocal(r)
}

// checkLocal checks that a group on shm runs over its node-local region
// (no point-to-point messages) and that one on tcp does not.
func checkLocal(r *collRank) error {
	want := 0
	if (r.prov == "shm" || r.prov == "shm+tcp") && r.mc.Size() > 1 {
		want = r.mc.Size() // every rank on this host
	}
	if got := r.mc.g.Local(); got != want {
		return fmt.Errorf("rank %d on %s: %d ranks share a region, want %d", r.rank, r.prov, got, want)
	}
	return nil
}

// runCollJob runs an n-rank job over prov with this process as rank 0
// (which never is the dying rank: kill is -1 or in 1..n-1).
func runCollJob(t *testing.T, prov string, n, kill int, seed uint64) {
	peers := make([]*peerProc, n)
	for i := 1; i < n; i++ {
		peers[i] = startPeer(t, "coll", collJobArg(prov, n, i, kill, seed), 90*time.Second)
	}
	j := &collJob{n: n, kill: kill, cases: collCases(n, seed, 1)}
	j.killed = func() {
		if err := peers[kill].exited(t); err != nil {
			var ee interface{ ExitCode() int }
			if errors.As(err, &ee) && ee.ExitCode() != 0 {
				t.Fatalf("dying rank exited with %v", err)
			}
		}
		for i := 1; i < n; i++ {
			if i != kill {
				peers[i].send("killed")
			}
		}
	}
	j.r = &collRank{node: openNode(t, prov, nodeCfg{caps: collCaps}), rank: 0}
	names := []string{j.r.names()}
	for i := 1; i < n; i++ {
		names = append(names, peers[i].expect("addr")[0])
	}
	for i := 1; i < n; i++ {
		peers[i].send("names", strings.Join(names, " "))
	}
	for i, nm := range names {
		if a := j.r.insertNames(nm, false); a[0] != Addr(i) {
			t.Fatalf("rank %d inserted at %d", i, a[0])
		}
	}
	if err := j.join(); err != nil {
		t.Fatalf("rank 0 join: %v", err)
	}
	if err := j.run(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		if i == kill {
			continue // j.killed saw it exit
		}
		peers[i].expect("ok")
		peers[i].wait(t)
	}
}

// TestCollectives_Processes runs the collectives between real processes
// over shm and tcp, on 2 and on 5 ranks.
func TestCollectives_Processes(t *testing.T) {
	for _, prov := range collProvs() {
		for _, n := range []int{2, 5} {
			t.Run(fmt.Sprintf("%s/ranks%d", prov, n), func(t *testing.T) {
				shmTestDir(t)
				runCollJob(t, prov, n, -1, 7)
			})
		}
	}
}

// TestCollectives_RankKilled: a rank that dies in the middle of an
// allreduce gives every other rank an error completion (not a hang), and
// the broken group refuses later collectives.
func TestCollectives_RankKilled(t *testing.T) {
	for _, prov := range collProvs() {
		t.Run(prov, func(t *testing.T) {
			shmTestDir(t)
			runCollJob(t, prov, 4, 2, 11)
		})
	}
}

// sreadColl waits in Sread for one collective completion and returns its
// error (nil for success).
func (r *collRank) sreadColl(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var buf [1]CQEntry
	for time.Now().Before(deadline) {
		k, err := r.txcq.Sread(buf[:], 100*time.Millisecond)
		switch {
		case k == 1:
			return nil
		case errors.Is(err, ErrAvail):
			e, err := r.txcq.ReadErr()
			if err != nil {
				return err
			}
			return e.Err
		case err != nil && !errors.Is(err, ErrAgain):
			return err
		}
	}
	return fmt.Errorf("rank %d: no collective completion within %v", r.rank, timeout)
}
