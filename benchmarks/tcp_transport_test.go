package benchmarks

import (
	"fmt"
	"io"
	stdnet "net"
	"os"
	"runtime"
	"sort"
	"testing"
	"time"

	fnet "github.com/gofi-dev/fi/net"
	"github.com/gofi-dev/fi/transport"
)

// pingSink is the smallest engine stand-in: it counts arrivals and fetches
// rendezvous payloads into buf.
type pingSink struct {
	tr       *fnet.Transport
	buf      []byte
	dst      [][]byte
	got      int
	fetching bool
	closing  bool
}

func (s *pingSink) Arrive(p transport.Peer, h *transport.Header, eager []byte, cookie uint64) bool {
	if eager != nil {
		copy(s.buf, eager)
		s.got++
		return true
	}
	s.dst[0] = s.buf[:h.Len]
	done, _, c := s.tr.Fetch(p, cookie, s.dst, 1)
	if c != transport.OK {
		panic(fmt.Sprintf("Fetch: %d", c))
	}
	if done {
		s.got++
	} else {
		s.fetching = true
	}
	return true
}
func (s *pingSink) SendDone(transport.Op, transport.Code) {}
func (s *pingSink) FetchDone(_ transport.Op, _ int, c transport.Code) {
	if c != transport.OK {
		panic(fmt.Sprintf("FetchDone: %d", c))
	}
	s.fetching = false
	s.got++
}
func (s *pingSink) PeerDown(_ transport.Peer, c transport.Code) {
	if !s.closing {
		panic(fmt.Sprintf("PeerDown %d", c))
	}
}

type side struct {
	tr   *fnet.Transport
	sink *pingSink
	peer transport.Peer
	hdr  transport.Header
	iov  [][]byte
}

func newSide(b *testing.B, size int) *side {
	return newSideCfg(b, size, fnet.Config{Addr: "127.0.0.1:0"})
}

func newSideCfg(b *testing.B, size int, cfg fnet.Config) *side {
	tr, err := fnet.Listen(cfg)
	if err != nil {
		b.Fatal(err)
	}
	s := &side{tr: tr, sink: &pingSink{tr: tr, buf: make([]byte, size), dst: make([][]byte, 1)}}
	s.hdr = transport.Header{Kind: transport.KindMsg, Len: uint64(size)}
	s.iov = [][]byte{make([]byte, size)}
	return s
}

func (s *side) send() {
	for {
		_, c := s.tr.Send(s.peer, &s.hdr, s.iov, 1)
		if c == transport.OK {
			return
		}
		if c != transport.EAgain {
			panic(fmt.Sprintf("Send: %d", c))
		}
		s.tr.Poll(s.sink)
	}
}

// recv busy-polls (as fi_pingpong does) until one more message is in.
func (s *side) recv() {
	pollWait(s.tr, s.sink, &s.sink.got)
}

// spinFor is how long a waiting side busy-polls before it sleeps in Wait
// (the engine's Sread does the same: spin, then sleep on the transport).
// With both processes spinning on a 2-vCPU machine the gnet loop threads
// are starved (p99 in milliseconds), so the default spins briefly.
var spinFor = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("GOFI_BENCH_SPIN")); err == nil {
		return d
	}
	return 50 * time.Microsecond
}()

func pollWait(tr *fnet.Transport, sink transport.Sink, got *int) {
	want := *got + 1
	var idleSince time.Time
	for n := 0; *got < want; n++ {
		if tr.Poll(sink) {
			idleSince = time.Time{}
			continue
		}
		if idleSince.IsZero() {
			idleSince = time.Now()
		} else if time.Since(idleSince) > spinFor {
			tr.Wait(time.Millisecond)
			continue
		}
		runtime.Gosched() // let this process's gnet loop have the P
	}
}

var sizes = []int{8, 4096, 1 << 20}

// BenchmarkTCPPingPong: two gofi tcp transports in one process, one
// goroutine each, busy-polling; ns/op is one round trip, and the metric
// "us/half-rt" is the fi_pingpong-style latency.
func BenchmarkTCPPingPong(b *testing.B) {
	for _, size := range sizes {
		b.Run(fmt.Sprintf("gofi/%d", size), func(b *testing.B) {
			x, y := newSide(b, size), newSide(b, size)
			defer func() {
				x.sink.closing, y.sink.closing = true, true
				x.tr.Close()
				y.tr.Close()
			}()
			x.peer, _ = x.tr.Resolve(y.tr.Name())
			y.peer, _ = y.tr.Resolve(x.tr.Name())
			stop := make(chan struct{})
			go func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					want := y.sink.got + 1
					for y.sink.got < want {
						if !y.tr.Poll(y.sink) {
							runtime.Gosched()
						}
						select {
						case <-stop:
							return
						default:
						}
					}
					y.send()
				}
			}()
			for i := 0; i < 200; i++ { // warm up: connect both ways
				x.send()
				x.recv()
			}
			b.SetBytes(int64(2 * size))
			b.ReportAllocs()
			b.ResetTimer()
			lat := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				x.send()
				x.recv()
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			close(stop)
			time.Sleep(10 * time.Millisecond)
			report(b, lat)
		})
		b.Run(fmt.Sprintf("stdnet/%d", size), func(b *testing.B) {
			benchStdNet(b, size)
		})
	}
}

func report(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/2000, "us/half-rt-p50")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/2000, "us/half-rt-p99")
}

// benchStdNet is the baseline: Go's net, TCP_NODELAY, a blocking echo
// goroutine.
func benchStdNet(b *testing.B, size int) {
	ln, err := stdnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	c, err := stdnet.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.(*stdnet.TCPConn).SetNoDelay(true)
	buf := make([]byte, size)
	for i := 0; i < 200; i++ {
		c.Write(buf)
		io.ReadFull(c, buf)
	}
	b.SetBytes(int64(2 * size))
	b.ReportAllocs()
	b.ResetTimer()
	lat := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	report(b, lat)
}
