package launch

import (
	"bytes"
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Abort's message must be read by the launcher's forwarder before the
// abort is sent: waitDrained returns once the pipe's reader took it all.
func TestWaitDrainedPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	msg := []byte("launch: rank 1 of 4 aborting the job\n")
	if _, err := w.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		b := make([]byte, 256)
		n, _ := r.Read(b)
		got <- b[:n]
	}()
	waitDrained(w, time.Minute)
	if n, err := unix.IoctlGetInt(int(w.Fd()), unix.TIOCINQ); err != nil || n != 0 {
		t.Fatalf("waitDrained returned with %d bytes unread (err %v)", n, err)
	}
	if b := <-got; !bytes.Equal(b, msg) {
		t.Fatalf("reader got %q", b)
	}
}

// Nobody reading, or something that is not a pipe or socket: it gives up
// (after max) or returns at once; it never hangs.
func TestWaitDrainedGivesUp(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := w.Write([]byte("nobody reads this")); err != nil {
		t.Fatal(err)
	}
	waitDrained(w, 10*time.Millisecond)
	waitDrained(io.Discard, time.Hour)
	var buf bytes.Buffer
	waitDrained(&buf, time.Hour)
}
