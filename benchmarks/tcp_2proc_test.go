package benchmarks

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	stdnet "net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	fnet "github.com/gofi-dev/fi/net"
	"github.com/gofi-dev/fi/transport"
)

const peerEnv = "GOFI_BENCH_PEER" // "gofi:<size>" or "stdnet:<size>"

// TestBenchPeer is the echo side of the two-process benchmarks; it does
// nothing unless the benchmark started this binary as its peer.
func TestBenchPeer(t *testing.T) {
	role := os.Getenv(peerEnv)
	if role == "" {
		t.Skip("only runs as the peer of BenchmarkTCPPingPong2P")
	}
	kind, sz, _ := strings.Cut(role, ":")
	size, _ := strconv.Atoi(sz)
	go func() { // the parent closes our stdin when done
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	if kind == "stdnet" {
		ln, err := stdnet.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("ADDR %s\n", ln.Addr())
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		c.(*stdnet.TCPConn).SetNoDelay(true)
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				os.Exit(0)
			}
			if _, err := c.Write(buf); err != nil {
				os.Exit(0)
			}
		}
	}
	tr, err := fnet.Listen(fnet.Config{Addr: "127.0.0.1:0", LoopOnly: kind == "gofi-looponly"})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("ADDR %s\n", hex.EncodeToString(tr.Name()))
	s := &echoSink{pingSink: pingSink{tr: tr, buf: make([]byte, size), dst: make([][]byte, 1), closing: true}}
	hdr := transport.Header{Kind: transport.KindMsg, Len: uint64(size)}
	iov := [][]byte{s.buf}
	for {
		pollWait(tr, s, &s.got)
		for {
			_, c := tr.Send(s.from, &hdr, iov, 1)
			if c == transport.OK {
				break
			}
			tr.Poll(s)
		}
	}
}

// echoSink remembers who sent the last message.
type echoSink struct {
	pingSink
	from transport.Peer
}

func (s *echoSink) Arrive(p transport.Peer, h *transport.Header, eager []byte, cookie uint64) bool {
	s.from = p
	return s.pingSink.Arrive(p, h, eager, cookie)
}

type peerProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
}

func startPeer(b *testing.B, role string) *peerProc {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	b.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBenchPeer$")
	cmd.Env = append(os.Environ(), peerEnv+"="+role)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		b.Fatalf("peer: %v", err)
	}
	p := &peerProc{cmd: cmd, stdin: stdin, addr: strings.TrimSpace(strings.TrimPrefix(line, "ADDR "))}
	b.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
		}
	})
	return p
}

// BenchmarkTCPPingPong2P: ping-pong against a peer process (the honest
// setup: each process has its own Go runtime, as with fi_pingpong). Both
// gofi sides busy-poll (Poll, then runtime.Gosched when idle); the baseline
// is Go's net with TCP_NODELAY and blocking reads.
func BenchmarkTCPPingPong2P(b *testing.B) {
	for _, size := range sizes {
		for _, kind := range []string{"gofi", "gofi-looponly"} {
			b.Run(fmt.Sprintf("%s/%d", kind, size), func(b *testing.B) { benchGofi2P(b, kind, size) })
		}
		b.Run(fmt.Sprintf("stdnet/%d", size), func(b *testing.B) { benchStdNet2P(b, size) })
	}
}

// benchGofi2P: kind "gofi" lets Poll borrow the loop and read sockets
// itself; "gofi-looponly" leaves every read to the gnet loop.
func benchGofi2P(b *testing.B, kind string, size int) {
	{
		{
			peer := startPeer(b, fmt.Sprintf("%s:%d", kind, size))
			name, err := hex.DecodeString(peer.addr)
			if err != nil {
				b.Fatal(err)
			}
			x := newSideCfg(b, size, fnet.Config{Addr: "127.0.0.1:0", LoopOnly: kind == "gofi-looponly"})
			defer func() { x.sink.closing = true; x.tr.Close() }()
			var c transport.Code
			if x.peer, c = x.tr.Resolve(name); c != transport.OK {
				b.Fatalf("Resolve: %d", c)
			}
			for i := 0; i < 200; i++ {
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
			report(b, lat)
		}
	}
}

func benchStdNet2P(b *testing.B, size int) {
	{
		{
			peer := startPeer(b, fmt.Sprintf("stdnet:%d", size))
			c, err := stdnet.Dial("tcp", peer.addr)
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
	}
}
