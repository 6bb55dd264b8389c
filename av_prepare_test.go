package fi

import (
	"os"
	"strings"
	"testing"

	"github.com/gofi-dev/fi/shm"
)

// Inserting an shm peer's address into an endpoint's AV connects to it
// then (issue 12: the first message of a short run pays no connection):
// the ring each way exists before any message, each endpoint's two
// spare rings for the first growths, and the spare the first endpoint
// made for the second's first growth back.
func TestAVInsert_ShmConnectsAhead(t *testing.T) {
	shmTestDir(t)
	dir := os.Getenv(shm.DirEnv)
	a := openE2E(t, "shm", Msg|Tagged)
	b := openE2E(t, "shm", Msg|Tagged)
	nameA, _ := a.ep.Name()
	nameB, _ := b.ep.Name()
	files := func() int {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), shm.Prefix()) {
				n++
			}
		}
		return n
	}
	before := files() // the two regions
	if _, err := a.av.Insert([][]byte{nameB}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.av.Insert([][]byte{nameA}, 0); err != nil {
		t.Fatal(err)
	}
	if got := files() - before; got != 7 {
		t.Errorf("after both inserts %d new files in the shm directory, want a ring each way, two spares each and the return spare", got)
	}
}
