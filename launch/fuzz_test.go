package launch

// Fuzz tests of every decoder that reads what a launcher or a rendezvous
// peer sends: PMI-1 lines, PMI-2 messages with their length field, the
// process mapping, rendezvous frames, and the chunked value encoding.
// Seeds are real messages captured from Hydra 4.0.2 and Slurm 22.05
// (testdata/fuzz holds more).

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gofi-dev/fi"
)

var pmiSeeds = []string{
	"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0",
	"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024",
	"cmd=my_kvsname kvsname=kvs_30232_0_1540910151_vm",
	"cmd=get_result rc=0 msg=success value=(vector,(0,1,1))",
	"cmd=get_result rc=-1 msg=key_x_not_found value=unknown",
	"cmd=put_result rc=1 msg=Keys\\ with\\ PMI_\\ prefix\\ are\\ reserved",
	"cmd=set size=4",
	"cmd=barrier_out",
	"cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0",
	"cmd=fullinit-response;pmi-version=2;pmi-subversion=0;rank=0;size=2;appnum=0;debugged=FALSE;pmiverbose=FALSE;rc=0;",
	"cmd=kvs-get-response;found=TRUE;value=1.Zmlfc2htOi8vZ29maS0w;rc=0;",
	"cmd=kvs-get-response;rc=0;found=FALSE;",
	"cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,1,2));",
	"cmd=abort;isworldabort=TRUE;msg=a;;b;",
}

func FuzzParseV1(f *testing.F) {
	for _, s := range pmiSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseV1(b)
		if err != nil {
			return
		}
		if m.cmd == "" || len(m.keys) != len(m.vals) {
			t.Fatalf("parsed %q into %+v", b, m)
		}
		// What we encode we decode (values without separators).
		var kv []string
		for i, k := range m.keys {
			if safeToken(k) && safeToken(m.vals[i]) && m.vals[i] != "" && !strings.Contains(k, "=") {
				kv = append(kv, k, m.vals[i])
			}
		}
		if !safeToken(m.cmd) {
			return
		}
		enc := appendV1(nil, m.cmd, kv...)
		m2, err := parseV1(enc[:len(enc)-1])
		if err != nil || m2.cmd != m.cmd || len(m2.keys)*2 != len(kv) {
			t.Fatalf("round trip of %q: %+v %v", enc, m2, err)
		}
	})
}

func FuzzParseV2(f *testing.F) {
	for _, s := range pmiSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseV2(b)
		if err == nil && (m.cmd == "" || len(m.keys) != len(m.vals)) {
			t.Fatalf("parsed %q into %+v", b, m)
		}
		if err == nil && safeToken(m.cmd) {
			var kv []string
			for i, k := range m.keys {
				if safeToken(k) && !strings.ContainsAny(k, ";=") {
					kv = append(kv, k, m.vals[i])
				}
			}
			enc := appendV2(nil, m.cmd, kv...)
			n, err := parseV2Len(enc[:6])
			if err != nil || n != len(enc)-6 {
				t.Fatalf("length field of %q: %d %v", enc, n, err)
			}
			m2, err := parseV2(enc[6:])
			if err != nil || m2.cmd != m.cmd || len(m2.keys)*2 != len(kv) {
				t.Fatalf("round trip of %q: %+v %v", enc, m2, err)
			}
			for i := range m2.keys {
				if m2.vals[i] != kv[2*i+1] {
					t.Fatalf("value %q came back as %q", kv[2*i+1], m2.vals[i])
				}
			}
		}
	})
}

// FuzzReadReply feeds whole byte streams to the conn readers: every
// outcome is a message or an fi.Errno error, never a panic or a hang.
func FuzzReadReply(f *testing.F) {
	for _, s := range pmiSeeds {
		f.Add([]byte(s+"\n"), false)
		f.Add([]byte("    "+strings.Repeat("9", 0)+s), true)
	}
	f.Add([]byte("    68cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,1,2));"), true)
	f.Add([]byte("999999cmd="), true)
	f.Fuzz(func(t *testing.T, b []byte, v2 bool) {
		a, c := net.Pipe()
		go func() { c.Write(b); c.Close() }()
		cn := newConn(a, time.Second, nil, "fuzz")
		defer a.Close()
		for range 4 {
			var err error
			if v2 {
				_, err = cn.readV2("Fuzz")
			} else {
				_, err = cn.readV1("Fuzz")
			}
			if err != nil {
				var e fi.Errno
				if !errors.As(err, &e) {
					t.Fatalf("error without an Errno: %v", err)
				}
				return
			}
		}
	})
}

func FuzzMapping(f *testing.F) {
	for _, s := range []string{"(vector,(0,1,1))", "(vector,(0,2,2))", "(vector,(0,1,2),(1,3,1))",
		"( vector , ( 0 , 4 , 1 ) )", "(vector,(0,0,0))", "(vector,(2,2,4000000))", ""} {
		f.Add(s, 4, 1)
	}
	f.Fuzz(func(t *testing.T, s string, size, rank int) {
		if size < 1 || size > 4096 || rank < 0 || rank >= size {
			return
		}
		sh := shape{rank: rank, size: size, mapping: s}
		if err := localFromMapping(&sh); err != nil {
			return
		}
		if sh.localSize < 1 || sh.localSize > size || sh.localRank < 0 || sh.localRank >= sh.localSize {
			t.Fatalf("mapping %q, rank %d of %d: local %d/%d", s, rank, size, sh.localRank, sh.localSize)
		}
	})
}

func FuzzFrame(f *testing.F) {
	f.Add(encHello(hello{magic: rdzvMagic, key: "world/4", rank: 1, size: 4, host: "h/b/1"}))
	f.Add(encKVs(fFence, 3, []kvPair{{[]byte("gofi.ep.0:1"), []byte{1, 2, 3}}}))
	f.Add(encKVs(fFenced, 0, nil))
	f.Add(encCodeWhy(fFail, 110, "ranks 2 never joined"))
	f.Add(encCodeWhy(fAbort, 7, "why"))
	f.Add(newEnc(fWelcome).u32(1).u32(2).bytes())
	f.Add(newEnc(fFin).bytes())
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 4})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		for {
			fr, err := readFrame(r)
			if err != nil {
				return
			}
			switch fr.typ {
			case fHello:
				if h, err := decHello(fr.body); err == nil {
					if !bytes.Equal(encHello(h)[5:], fr.body) {
						t.Fatalf("hello does not re-encode to itself")
					}
				}
			case fFence, fFenced:
				if e, kvs, err := decKVs(fr.body); err == nil {
					if !bytes.Equal(encKVs(fr.typ, e, kvs)[5:], fr.body) {
						t.Fatalf("pairs do not re-encode to themselves")
					}
					_ = checkOwnKeys(kvs, 1)
				}
			case fFail, fAbort:
				decCodeWhy(fr.body)
			case fWelcome:
				decWelcome(fr.body)
			}
		}
	})
}

// FuzzChunks: any value survives the PMI encoding at any value limit, and
// a corrupt header is an error.
func FuzzChunks(f *testing.F) {
	f.Add([]byte{}, uint16(0))
	f.Add([]byte("hello"), uint16(0))
	f.Add(bytes.Repeat([]byte{0xff}, 800), uint16(959))
	f.Add(bytes.Repeat([]byte{7}, 300), uint16(6))
	f.Fuzz(func(t *testing.T, val []byte, lim uint16) {
		valMax := 64 + int(lim)%4033 // 64 to 4096
		parts, err := chunks(val, valMax)
		if err != nil {
			if !errors.Is(err, fi.ErrMsgSize) {
				t.Fatal(err)
			}
			return
		}
		n, data, err := chunkCount([]byte(parts[0]))
		if err != nil || n != len(parts) {
			t.Fatalf("header of %q: %d %v (%d parts)", parts[0], n, err, len(parts))
		}
		enc := string(data)
		for _, p := range parts {
			if len(p) > valMax || len(p) == 0 || !safeToken(p) {
				t.Fatalf("chunk %q breaks the launcher's rules (max %d)", p, valMax)
			}
		}
		for _, p := range parts[1:] {
			enc += p
		}
		got, err := b64.DecodeString(enc)
		if err != nil || !bytes.Equal(got, val) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
