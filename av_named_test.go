package fi

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/gofi-dev/fi/internal/avstore"
)

// testAVName returns a name unique to this test process.
func testAVName(t testing.TB, tag string) string {
	name := fmt.Sprintf("test-%d-%s", os.Getpid(), tag)
	path, err := avstore.NamedPath(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	return name
}

const avChildEnv = "GOFI_AV_TEST_CHILD"

// A named AV is shared with another process of the same user: it sees the
// same entries at the same indices, and its changes are seen here.
func TestNamedAV_TwoProcesses(t *testing.T) {
	if name := os.Getenv(avChildEnv); name != "" {
		namedAVChild(t, name)
		return
	}
	name := testAVName(t, "two")
	attr := &AVAttr{Name: name}
	av := openTCPAV(t, attr)
	if attr.MapAddr == 0 {
		t.Fatal("map_addr not reported")
	}
	if _, err := av.Insert(sas(t, "10.0.0.1:1", "10.0.0.2:2", "10.0.0.3:3"), 0); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if dl, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-5*time.Second))
		defer cancel()
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestNamedAV_TwoProcesses$", "-test.v")
	cmd.Env = append(os.Environ(), avChildEnv+"="+name, "GOFI_AV_TEST_MAPADDR="+strconv.FormatUint(attr.MapAddr, 10))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	// the child inserted 10.0.0.4:4 at index 3 and removed index 1
	if s := lookupStr(t, av, 3); s != "fi_sockaddr_in://10.0.0.4:4" {
		t.Fatalf("index 3 holds %s", s)
	}
	if _, err := av.Lookup(1); !errors.Is(err, ErrNoEnt) {
		t.Fatalf("index 1 removed by the child: %v", err)
	}
	if i, ok := av.reverse(sa(t, "10.0.0.4:4")); !ok || i != 3 {
		t.Fatalf("reverse of the child's address = %d, %v", i, ok)
	}
	got, _ := av.Insert(sas(t, "10.0.0.5:5"), 0)
	wantAddrs(t, got, 1)
	if av.Count() != 4 {
		t.Fatalf("Count %d, want 4", av.Count())
	}
}

func namedAVChild(t *testing.T, name string) {
	ma, _ := strconv.ParseUint(os.Getenv("GOFI_AV_TEST_MAPADDR"), 10, 64)
	attr := &AVAttr{Name: name, MapAddr: ma}
	av := openTCPAV(t, attr)
	for i, want := range []string{"10.0.0.1:1", "10.0.0.2:2", "10.0.0.3:3"} {
		if s := lookupStr(t, av, Addr(i)); s != "fi_sockaddr_in://"+want {
			t.Fatalf("child: index %d holds %s", i, s)
		}
	}
	got, err := av.Insert(sas(t, "10.0.0.4:4"), 0)
	if err != nil {
		t.Fatal(err)
	}
	wantAddrs(t, got, 3)
	if err := av.Remove([]Addr{1}, 0); err != nil {
		t.Fatal(err)
	}
	ro := openTCPAV(t, &AVAttr{Name: name, Flags: Read})
	if _, err := ro.Insert(sas(t, "10.0.0.9:9"), 0); !errors.Is(err, ErrAccess) {
		t.Fatalf("child: read-only insert: %v", err)
	}
}

// FI_READ: the AV must exist, and is read-only.
func TestNamedAV_ReadOnly(t *testing.T) {
	name := testAVName(t, "ro")
	_, fab, dom := openFirst(t, "tcp")
	defer fab.Close()
	defer dom.Close()
	if _, err := dom.OpenAV(&AVAttr{Name: name, Flags: Read}); !errors.Is(err, ErrNoEnt) {
		t.Fatalf("read-only open of a missing AV: %v", err)
	}
	rw := openTCPAV(t, &AVAttr{Name: name})
	rw.Insert(sas(t, "10.0.0.1:1"), 0)
	ro := openTCPAV(t, &AVAttr{Name: name, Flags: Read})
	if s := lookupStr(t, ro, 0); s != "fi_sockaddr_in://10.0.0.1:1" {
		t.Fatal(s)
	}
	if _, err := ro.Insert(sas(t, "10.0.0.2:1"), 0); !errors.Is(err, ErrAccess) {
		t.Fatalf("Insert on read-only AV: %v", err)
	}
	if _, err := ro.InsertSvc("10.0.0.2", "1", 0); !errors.Is(err, ErrAccess) {
		t.Fatalf("InsertSvc on read-only AV: %v", err)
	}
	if err := ro.Remove([]Addr{0}, 0); !errors.Is(err, ErrAccess) {
		t.Fatalf("Remove on read-only AV: %v", err)
	}
	rw.Insert(sas(t, "10.0.0.3:1"), 0)
	if s := lookupStr(t, ro, 1); s != "fi_sockaddr_in://10.0.0.3:1" {
		t.Fatalf("read-only view misses a later insert: %s", s)
	}
}

// map_addr is returned when 0 was given; a different one is refused.
func TestNamedAV_MapAddr(t *testing.T) {
	name := testAVName(t, "map")
	a1 := &AVAttr{Name: name}
	openTCPAV(t, a1)
	if a1.MapAddr == 0 {
		t.Fatal("map_addr 0 after open")
	}
	a2 := &AVAttr{Name: name}
	openTCPAV(t, a2)
	if a2.MapAddr != a1.MapAddr {
		t.Fatalf("second open reports %#x, first %#x", a2.MapAddr, a1.MapAddr)
	}
	_, fab, dom := openFirst(t, "tcp")
	defer fab.Close()
	defer dom.Close()
	if _, err := dom.OpenAV(&AVAttr{Name: name, MapAddr: a1.MapAddr + 8}); !errors.Is(err, ErrInval) {
		t.Fatalf("open with another map_addr: %v", err)
	}
	// map_addr is ignored without a name
	a3 := &AVAttr{MapAddr: 1234}
	openTCPAV(t, a3)
	if a3.MapAddr != 1234 {
		t.Fatalf("unnamed AV changed map_addr to %#x", a3.MapAddr)
	}
}

// The file is private (0600) and removed when the last user closes.
func TestNamedAV_FileModeAndRemoval(t *testing.T) {
	name := testAVName(t, "mode")
	path, _ := avstore.NamedPath(name)
	_, fab, dom := openFirst(t, "shm")
	defer fab.Close()
	defer dom.Close()
	av1, err := dom.OpenAV(&AVAttr{Name: name, Flags: Symmetric})
	if err != nil {
		t.Fatal(err)
	}
	av2, err := dom.OpenAV(&AVAttr{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("stat %s: %v %v", path, st, err)
	}
	got, err := av1.InsertSym("fi_shm://r0", 3, "", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := av2.Lookup(got[2]); string(b) != "fi_shm://r2" {
		t.Fatalf("second handle sees %q", b)
	}
	av1.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatal("file removed while still open")
	}
	av2.Close()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file left after the last close: %v", err)
	}
}

// A named AV holds max(2*Count, 65536) entries; more get FI_ENOSPC.
func TestNamedAV_Capacity(t *testing.T) {
	av := openTCPAV(t, &AVAttr{Name: testAVName(t, "cap"), Count: 40000, Flags: Symmetric})
	if av.named.Cap() != 80000 {
		t.Fatalf("capacity %d, want 80000", av.named.Cap())
	}
	if _, err := av.InsertSym("10.0.0.0", 79999, "1", 1, 0); err != nil {
		t.Fatal(err)
	}
	got, err := av.Insert(sas(t, "10.1.0.1:1", "10.1.0.2:1"), 0)
	var ie *InsertError
	if !errors.As(err, &ie) || ie.Inserted != 1 || !errors.Is(err, ErrNoSpc) || got[1] != AddrNotAvail {
		t.Fatalf("over capacity: %v %v", got, err)
	}
	small := openTCPAV(t, &AVAttr{Name: testAVName(t, "cap2"), Count: 10})
	if small.named.Cap() != avstore.MinCap {
		t.Fatalf("capacity %d, want %d", small.named.Cap(), avstore.MinCap)
	}
}

// A file whose processes all died is stale and replaced at open.
func TestNamedAV_StaleReplaced(t *testing.T) {
	name := testAVName(t, "stale")
	av := openTCPAV(t, &AVAttr{Name: name})
	av.Insert(sas(t, "10.0.0.1:1"), 0)
	// pretend the process died: a pid that is not running, file left
	dead := exec.Command("true")
	dead.Run()
	binary.LittleEndian.PutUint32(av.named.Mem()[avstore.OffPids+4*uint64(av.named.PidSlot()):], uint32(dead.Process.Pid))
	av2 := openTCPAV(t, &AVAttr{Name: name})
	if av2.Count() != 0 {
		t.Fatalf("stale AV reused with %d entries", av2.Count())
	}
}

// Foreign or corrupt files are refused with an error, never a panic.
func TestNamedAV_CorruptFileRefused(t *testing.T) {
	good := func() []byte {
		b := make([]byte, avstore.HdrSize+1024*24)
		copy(b, avstore.Magic)
		le := binary.LittleEndian
		le.PutUint32(b[avstore.OffVersion:], avstore.Version)
		le.PutUint32(b[avstore.OffHdrSize:], avstore.HdrSize)
		le.PutUint32(b[avstore.OffFormat:], uint32(SockaddrIn))
		le.PutUint32(b[avstore.OffSlotSize:], 24)
		le.PutUint32(b[avstore.OffCap:], 1024)
		le.PutUint32(b[avstore.OffPids:], uint32(os.Getpid()))
		return b
	}
	for _, c := range []struct {
		name string
		edit func([]byte) []byte
		mode os.FileMode
		want Errno
	}{
		{"bad magic", func(b []byte) []byte { b[0] = 'X'; return b }, 0o600, ErrInval},
		{"newer version", func(b []byte) []byte { b[avstore.OffVersion] = 9; return b }, 0o600, ErrInval},
		{"other format", func(b []byte) []byte { b[avstore.OffFormat] = byte(AddrStr); return b }, 0o600, ErrInval},
		{"bad slot size", func(b []byte) []byte { b[avstore.OffSlotSize] = 7; return b }, 0o600, ErrInval},
		{"capacity past the end", func(b []byte) []byte { b[avstore.OffCap+2] = 1; return b }, 0o600, ErrInval},
		{"short file", func(b []byte) []byte { return b[:100] }, 0o600, ErrInval},
		{"readable by others", func(b []byte) []byte { return b }, 0o644, ErrPerm},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := testAVName(t, "corrupt")
			path, _ := avstore.NamedPath(name)
			if err := os.WriteFile(path, c.edit(good()), c.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, c.mode)
			_, fab, dom := openFirst(t, "tcp")
			defer fab.Close()
			defer dom.Close()
			for _, fl := range []Flags{0, Read} {
				if av, err := dom.OpenAV(&AVAttr{Name: name, Flags: fl}); !errors.Is(err, c.want) {
					if av != nil {
						av.Close()
					}
					t.Fatalf("flags %v: OpenAV = %v, want %v", fl, err, c.want)
				}
			}
		})
	}
}

// Entries written by a corrupt or hostile peer are bounds-checked.
func TestNamedAV_HostileEntries(t *testing.T) {
	av := openTCPAV(t, &AVAttr{Name: testAVName(t, "hostile")})
	av.Insert(sas(t, "10.0.0.1:1"), 0)
	m := av.named.Mem()
	le := binary.LittleEndian
	le.PutUint16(m[avstore.HdrSize+4:], 0xffff)      // length past the slot
	le.PutUint32(m[avstore.OffHW:], 0xffffffff)      // high water past capacity
	le.PutUint32(m[avstore.OffLowFree:], 0xfffffff0) // hint past capacity
	le.PutUint32(m[avstore.HdrSize+24*5:], 1)        // slot 5 "in use"
	le.PutUint16(m[avstore.HdrSize+24*5+4:], 3)      // with 3 bytes
	b, err := av.Lookup(0)
	if err != nil || len(b) > 16 {
		t.Fatalf("Lookup of an over-long entry: %x, %v", b, err)
	}
	if b, err := av.Lookup(5); err != nil || len(b) != 3 {
		t.Fatalf("Lookup(5) = %x, %v", b, err)
	}
	if _, err := av.Lookup(avstore.MinCap + 5); !errors.Is(err, ErrNoEnt) {
		t.Fatalf("Lookup past capacity: %v", err)
	}
	got, err := av.Insert(sas(t, "10.0.0.2:1"), 0)
	if err != nil || got[0] != 1 {
		t.Fatalf("insert after corruption: %v %v", got, err)
	}
	av.reverse(sa(t, "10.0.0.2:1"))
	// range records: a count past the table and records that do not fit
	le.PutUint32(m[avstore.OffNRanges:], 1000)
	r0 := m[avstore.OffRanges:]
	le.PutUint32(r0[0:], 0xfffffff0) // start past capacity
	le.PutUint32(r0[4:], 100)
	le.PutUint32(r0[8:], 0) // no services
	r1 := m[avstore.OffRanges+avstore.RangeSize:]
	le.PutUint32(r1[0:], 10)
	le.PutUint32(r1[4:], 6)
	le.PutUint32(r1[8:], 4) // 6 is not a multiple of 4
	for i := range Addr(20) {
		av.Lookup(i)
	}
	av.reverse(sa(t, "10.0.0.9:1"))
	if _, err := av.Lookup(12); !errors.Is(err, ErrNoEnt) {
		t.Fatalf("a bad range record made index 12 valid: %v", err)
	}
	if !bytes.Equal(m[:8], []byte(avstore.Magic)) {
		t.Fatal("header changed")
	}
}

// User ids work on a named AV too (they are per process).
func TestNamedAV_UserIDs(t *testing.T) {
	av := openTCPAV(t, &AVAttr{Name: testAVName(t, "uid")})
	addrs := sas(t, "10.0.0.1:1", "10.0.0.2:1")
	got, err := av.InsertUserIDs(addrs, []Addr{11, 22}, SyncErr)
	if err != nil {
		t.Fatal(err)
	}
	wantAddrs(t, got, 0, 1)
	if id, ok := av.reverse(addrs[1]); !ok || id != 22 {
		t.Fatalf("reverse = %d, %v; want user id 22", id, ok)
	}
	buf := make([]byte, 16)
	if n, err := av.LookupTo(1, buf); err != nil || n != 16 || !bytes.Equal(buf, addrs[1]) {
		t.Fatalf("LookupTo on a named AV: %d %v", n, err)
	}
}

// FI_SYMMETRIC on a named AV: a range is one record, seen by every opener
// with the same indices; removal and re-insertion inside it work.
func TestNamedAV_SymmetricCompact(t *testing.T) {
	name := testAVName(t, "sym")
	av := openTCPAV(t, &AVAttr{Name: name, Flags: Symmetric, Count: 50000})
	other := openTCPAV(t, &AVAttr{Name: name})
	av.Insert(sas(t, "10.0.0.1:1"), 0)
	got, err := av.InsertSym("10.8.0.0", 20000, "6000", 4, 0)
	if err != nil || len(got) != 80000 || got[0] != 1 {
		t.Fatalf("InsertSym: %d, %v", len(got), err)
	}
	if n := binary.LittleEndian.Uint32(av.named.Mem()[avstore.OffNRanges:]); n != 1 {
		t.Fatalf("%d range records, want 1", n)
	}
	// slots of the range were not written
	off := av.named.SlotOff(40000)
	if !bytes.Equal(av.named.Mem()[off:off+av.named.SlotSize()], make([]byte, av.named.SlotSize())) {
		t.Fatal("range entry has slot storage")
	}
	want := "fi_sockaddr_in://10.8.39.16:6003" // index 1 + 4*10000 + 3
	if s := lookupStr(t, other, 1+4*10000+3); s != want {
		t.Fatalf("other handle: %s, want %s", s, want)
	}
	if i, ok := other.reverse(sa(t, "10.8.39.16:6003")); !ok || i != 1+4*10000+3 {
		t.Fatalf("reverse = %d, %v", i, ok)
	}
	if other.Count() != 80001 {
		t.Fatalf("Count %d", other.Count())
	}
	if err := other.Remove([]Addr{7}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := av.Lookup(7); !errors.Is(err, ErrNoEnt) {
		t.Fatalf("removed range entry: %v", err)
	}
	if _, ok := av.reverse(sa(t, "10.8.0.1:6002")); ok {
		t.Fatal("reverse found the removed range entry")
	}
	x, _ := av.Insert(sas(t, "10.9.9.9:9"), 0)
	wantAddrs(t, x, 7)
	if s := lookupStr(t, other, 7); s != "fi_sockaddr_in://10.9.9.9:9" {
		t.Fatal(s)
	}
	av.Remove([]Addr{7}, 0)
	if _, err := other.Lookup(7); !errors.Is(err, ErrNoEnt) {
		t.Fatalf("range entry revived after second removal: %v", err)
	}
	// no room for the range: stored per address, up to capacity
	if _, err := av.InsertSym("10.9.0.0", 30000, "1", 1, 0); !errors.Is(err, ErrNoSpc) {
		t.Fatalf("range past capacity: %v", err)
	}
}
