package fi

import (
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// usedBytes is what the files of the tmpfs at dir occupy.
func usedBytes(t *testing.T, dir string) int {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Blocks-st.Bfree) * int(st.Bsize)
}

// joinErrs joins every rank and returns each rank's join error.
func joinErrs(rs []*collRank) []error {
	errs := make([]error, len(rs))
	_ = parallel(rs, func(r *collRank) error {
		set, err := r.av.NewSet(&AVSetAttr{StartAddr: AddrNotAvail, EndAddr: AddrNotAvail, Flags: Universe})
		if err == nil {
			r.set = set
			r.mc, err = r.ep.JoinCollective(set.Addr(), set, 0, "join")
		}
		if err == nil {
			_, err = r.waitColl(waitLimit)
		}
		errs[r.rank] = err
		return nil
	})
	return errs
}

// TestCollectives_ShmRegionSpace: a group's shared-memory region takes
// smaller slots when /dev/shm is short of space (the collectives stay
// correct) and leaves no file once joined; when even the smallest region
// does not fit, the join fails with ErrNoSpc on every rank, no hang.
func TestCollectives_ShmRegionSpace(t *testing.T) {
	for _, room := range []int{1 << 20, 8 << 10} {
		dir := mountShmDir(t, 64<<20)
		rs := openCollRanks(t, "shm", 3)
		// Connect every pair first (their rings), then leave room bytes.
		warm := parallel(rs, func(r *collRank) error {
			for i := range rs {
				if i != r.rank {
					if err := r.ep.Send([]byte{1}, Addr(i), nil); err != nil {
						return err
					}
				}
			}
			var es [4]CQEntry
			deadline := time.Now().Add(waitLimit)
			for got := 0; got < len(rs)-1; {
				k, err := r.txcq.Read(es[:])
				if err != nil && !errors.Is(err, ErrAgain) {
					return err
				}
				got += k
				if time.Now().After(deadline) {
					return errors.New("warm-up sends did not complete")
				}
			}
			return nil
		})
		if warm != nil {
			t.Fatal(warm)
		}
		files := dirEntries(t, dir)
		resizeShmDir(t, dir, usedBytes(t, dir)+room)
		errs := joinErrs(rs)
		if room == 8<<10 {
			for i, err := range errs {
				if err == nil {
					t.Fatalf("rank %d joined with %d bytes free for a region that needs more", i, room)
				}
				if !errors.Is(err, ErrNoSpc) && !strings.Contains(err.Error(), "space") {
					t.Errorf("rank %d: join error %v, want ErrNoSpc", i, err)
				}
			}
			continue
		}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: join with %d bytes free: %v", i, room, err)
			}
			if got := rs[i].mc.g.Local(); got != 3 {
				t.Fatalf("rank %d: %d ranks share a region, want 3", i, got)
			}
		}
		if got := dirEntries(t, dir); got != files {
			t.Errorf("%d files in the shm directory after the join, %d before: the region's name was left", got, files)
		}
		cases := collCases(3, 5, 1)
		if err := parallel(rs, func(r *collRank) error {
			for _, c := range cases {
				if err := r.runCase(c); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}
