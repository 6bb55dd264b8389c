package main

import (
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// Every parser perftest applies to input it did not write: its flags'
// sizes, fi_pingpong's output, a peer's plan and its control messages.

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"8", "4k", "1m", "2g", "0", "-1", "k", "99999999999", " 12 ", "1.5k"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseSize(s)
		if err == nil && (v < 0 || v > 1<<31-1) {
			t.Fatalf("parseSize(%q) = %d without error", s, v)
		}
	})
}

func FuzzParsePPRow(f *testing.F) {
	f.Add(fiPingpongHeader+"\n8       1k      =1k      15k         3.80s      0.00    1902.16       0.00\n", 8)
	f.Add("1m      100     =100     200m        1.27s   1645.19     637.36       0.00\n", 1<<20)
	f.Add("garbage", 0)
	f.Fuzz(func(t *testing.T, out string, size int) {
		m, err := parsePPRow(out, size)
		if err == nil && strings.Count(out, "\n") == 0 && len(strings.Fields(out)) != 8 {
			t.Fatalf("parsed %+v from a line without 8 fields", m)
		}
	})
}

func FuzzPlanValidate(f *testing.F) {
	good, _ := json.Marshal(&plan{Test: "bw", Prov: "shm", EpType: "rdm", Sizes: []int{8}, Iters: []int{64}, Warmup: []int{64}, Window: 64})
	f.Add(good)
	f.Add([]byte(`{"test":"latency","sizes":[1,2],"iters":[1],"warmup":[1,1]}`))
	f.Add([]byte(`{"test":"bw","sizes":[8],"iters":[10],"warmup":[0],"window":0}`))
	f.Add([]byte(`{"test":"latency","prov":"net","sizes":[0],"iters":[1],"warmup":[1]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p plan
		if json.Unmarshal(b, &p) != nil || p.validate() != nil {
			return
		}
		// a valid plan must be safe to run: sizes bounded, counts line up,
		// bw in whole windows
		if len(p.Sizes) != len(p.Iters) || len(p.Sizes) != len(p.Warmup) || p.maxSize() > 1<<30 || p.maxSize() < 0 {
			t.Fatalf("validated %+v", p)
		}
		if p.Test == "bw" && (p.Window < 1 || p.Iters[0]%p.Window != 0) {
			t.Fatalf("validated bw plan %+v", p)
		}
	})
}

// FuzzCtrlFrames feeds arbitrary bytes to the server side of the control
// protocol: it must fail with an error, never panic or hang.
func FuzzCtrlFrames(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x02{}"))
	f.Add([]byte("\xff\xff\xff\xff"))
	f.Add([]byte("q\x00"))
	f.Add([]byte("\x00\x00\x00\x10{\"test\":\"bw\"}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, b := net.Pipe()
		defer a.Close()
		go func() {
			b.Write(in)
			b.Close()
		}()
		c := &ctrl{conn: a, timeout: time.Second}
		if _, err := c.recvFrame(maxPlan); err == nil {
			return
		}
		a2, b2 := net.Pipe()
		defer a2.Close()
		go func() {
			b2.Write(in)
			io.Copy(io.Discard, b2) // the answers
			b2.Close()
		}()
		c2 := &ctrl{conn: a2, timeout: time.Second}
		c2.exchangeCount(false, 0)
		c2.sync(false)
	})
}
