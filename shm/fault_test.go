package shm

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A peer truncating its file under our mapping turns the next touch into
// an error from Guard, not a crash.
func TestGuard_TruncatedPeerFileIsAnErrorNotACrash(t *testing.T) {
	dir := testDir(t)
	owner, err := CreateSegment(NewName(), 4*os.Getpagesize())
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	peer, err := OpenSegment(owner.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	owner.Bytes()[3*os.Getpagesize()] = 7
	var v byte
	if err := Guard(func() { v = peer.Bytes()[3*os.Getpagesize()] }); err != nil || v != 7 {
		t.Fatalf("guarded read before truncation: %d, %v", v, err)
	}
	if err := os.Truncate(filepath.Join(dir, owner.Name()), int64(os.Getpagesize())); err != nil {
		t.Fatal(err)
	}
	err = Guard(func() { v = peer.Bytes()[3*os.Getpagesize()] })
	if !errors.Is(err, ErrFault) {
		t.Fatalf("read of a truncated page: %v, want ErrFault", err)
	}
	dst := make([]byte, 2*os.Getpagesize())
	if _, err := GuardedCopy(dst, peer.Bytes()[os.Getpagesize()/2:]); !errors.Is(err, ErrFault) {
		t.Fatalf("GuardedCopy across the truncation: %v, want ErrFault", err)
	}
	// The first page is still there and readable.
	if n, err := GuardedCopy(dst[:100], peer.Bytes()); n != 100 || err != nil {
		t.Fatalf("GuardedCopy of a live page: %d, %v", n, err)
	}
	// Guard restores the goroutine's previous mode.
	if err := Guard(func() {}); err != nil {
		t.Fatal(err)
	}
}

func TestGuard_OtherPanicsPropagate(t *testing.T) {
	defer func() {
		if r := recover(); r != "boom" {
			t.Fatalf("recovered %v, want the original panic", r)
		}
	}()
	_ = Guard(func() { panic("boom") })
	t.Fatal("Guard swallowed a panic")
}

func TestGuard_IndexOutOfRangeIsNotAFault(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	var b []byte
	i := 3
	_ = Guard(func() { _ = b[i] })
}

// The sender-side connection calls touch the receiver's file: a receiver
// that shrank it makes them fail with ErrFault instead of crashing.
func TestConnQueue_TruncatedReceiverRegionIsErrFault(t *testing.T) {
	dir := testDir(t)
	r, err := CreateRegion(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := OpenRegion(r.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := os.Truncate(filepath.Join(dir, r.Name()), 0); err != nil {
		t.Fatal(err)
	}
	q := p.ConnQueue()
	if _, err := q.Post(ConnRequest{SenderPID: os.Getpid(), SenderName: NewName(), RingName: NewName(), RingSize: 4096}); !errors.Is(err, ErrFault) {
		t.Errorf("Post: %v, want ErrFault", err)
	}
	if _, _, err := q.Reply(0); !errors.Is(err, ErrFault) {
		t.Errorf("Reply: %v, want ErrFault", err)
	}
	if err := q.Release(0); !errors.Is(err, ErrFault) {
		t.Errorf("Release: %v, want ErrFault", err)
	}
	if _, _, err := p.Peers().Get(0); !errors.Is(err, ErrFault) {
		t.Errorf("Peers().Get: %v, want ErrFault", err)
	}
	if err := Guard(func() { _ = p.Doorbell().Ring() }); !errors.Is(err, ErrFault) {
		t.Errorf("guarded Ring: %v, want ErrFault", err)
	}
}
