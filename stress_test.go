package fi

// Stress: several sender processes stream tagged messages of random sizes
// into one receiver. Each message carries its sender and sequence number
// in the tag and a CRC-32C of its payload as remote CQ data (and, when it
// is long enough, a 16-byte stamp repeating sender and sequence), so the
// receiver proves no loss, no duplicate, no corruption and per-sender
// order (FI_ORDER_SAS: a sender's messages match receives in send order).
//
// Sizes are log-uniform over [0, max]: every power of two is as likely as
// any other, so the small-message protocols get as much traffic as the
// rendezvous ones and the volume stays feasible (mean about max/ln(max),
// some 275 KiB for 4 MiB, instead of 2 MiB for a uniform draw).
//
// The normal run is 4 x 20,000 messages up to 1 MiB (under -short 4 x
// 2,000). GOFI_STRESS=1 runs the full 4 x 1,000,000 up to 4 MiB;
// GOFI_STRESS_COUNT and GOFI_STRESS_MAX override count and size.

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type stressParams struct {
	senders int
	count   int // messages per sender
	max     int // largest message
}

func stressConfig(t *testing.T) stressParams {
	p := stressParams{senders: 4, count: 20000, max: 1 << 20}
	if testing.Short() {
		p.count = 2000
	}
	if os.Getenv("GOFI_STRESS") == "1" {
		p.count, p.max = 1000000, 4<<20
	}
	if v, err := strconv.Atoi(os.Getenv("GOFI_STRESS_COUNT")); err == nil && v > 0 {
		p.count = v
	}
	if v, err := strconv.Atoi(os.Getenv("GOFI_STRESS_MAX")); err == nil && v >= 0 {
		p.max = v
	}
	return p
}

func TestStress_shm(t *testing.T) { runStress(t, "shm", 1) }

// TestStress_tcp: the same over tcp, loopback sockets between processes
// (a quarter of the messages in the normal run).
func TestStress_tcp(t *testing.T) { runStress(t, "tcp", 4) }

// TestStress_shm_segments: the same with single copy off (an eighth of
// the messages in the normal run: segments cost more CPU).
func TestStress_shm_segments(t *testing.T) { runStress(t, "shm_segments", 8) }

// runStress runs the stress in the configuration provCases[name], with
// the normal-run message count divided by div.
func runStress(t *testing.T, name string, div int) {
	pc := provCases[name]
	prov := pc.prov
	if pc.setup != nil {
		pc.setup(t)
	}
	sp := stressConfig(t)
	if os.Getenv("GOFI_STRESS") != "1" && os.Getenv("GOFI_STRESS_COUNT") == "" {
		sp.count /= div
	}
	timeout := 10 * time.Minute
	if os.Getenv("GOFI_STRESS") == "1" {
		timeout = 3 * time.Hour
	}
	n := openNode(t, prov, nodeCfg{caps: Tagged | RemoteCQData | Source})
	peers := make([]*peerProc, sp.senders)
	for i := range peers {
		arg := strings.Join([]string{name, strconv.Itoa(i), strconv.Itoa(sp.count), strconv.Itoa(sp.max)}, "/")
		peers[i] = startPeer(t, "stress", arg, timeout)
		peers[i].send("addr", n.names())
		a := peers[i].expect("addr")
		got := n.insertNames(a[0], false)
		if got[0] != Addr(i) {
			t.Fatalf("sender %d inserted at %d", i, got[0])
		}
	}
	start := time.Now()
	for _, p := range peers {
		p.send("go")
	}
	const posted = 16
	type rec struct{ post, seq uint32 }
	bufs := make([][]byte, posted)
	serial := make([]uint32, posted) // post serial of each slot's receive
	var next uint32
	post := func(slot int) {
		serial[slot] = next
		next++
		if err := n.retry(func() error { return n.ep.TRecv(bufs[slot], AddrUnspec, 0, ^uint64(0), slot) }); err != nil {
			t.Fatalf("TRecv: %v", err)
		}
	}
	for i := range bufs {
		bufs[i] = make([]byte, sp.max)
		post(i)
	}
	seen := make([][]rec, sp.senders)
	for i := range seen {
		seen[i] = make([]rec, 0, sp.count)
	}
	var bytesMoved int64
	total := sp.senders * sp.count
	var es [16]CQEntry
	lastProgress := time.Now()
	for done := 0; done < total; {
		k, err := n.rxcq.Sread(es[:], 100*time.Millisecond)
		if errors.Is(err, ErrAvail) {
			e, _ := n.rxcq.ReadErr()
			t.Fatalf("receive error completion: %v (olen %d, %+v)", e.Err, e.OLen, e.CQEntry)
		}
		if k == 0 {
			if time.Since(lastProgress) > time.Minute {
				t.Fatalf("no message for a minute after %d of %d", done, total)
			}
			continue
		}
		lastProgress = time.Now()
		for _, e := range es[:k] {
			slot := e.Context.(int)
			id, seq := int(e.Tag>>32), uint32(e.Tag)
			if id >= sp.senders || int(seq) >= sp.count {
				t.Fatalf("message with tag %#x from no sender", e.Tag)
			}
			if crc := crc32.Checksum(e.Buf, castagnoli); uint64(crc) != e.Data {
				t.Fatalf("sender %d seq %d len %d: checksum %#x, sent %#x", id, seq, e.Len, crc, e.Data)
			}
			if e.Len >= 16 && (binary.LittleEndian.Uint64(e.Buf) != uint64(id) || binary.LittleEndian.Uint64(e.Buf[8:]) != uint64(seq)) {
				t.Fatalf("sender %d seq %d: stamp says %d/%d", id, seq, binary.LittleEndian.Uint64(e.Buf), binary.LittleEndian.Uint64(e.Buf[8:]))
			}
			if e.Src != Addr(id) {
				t.Fatalf("sender %d seq %d: Src %d", id, seq, e.Src)
			}
			seen[id] = append(seen[id], rec{serial[slot], seq})
			bytesMoved += int64(e.Len)
			done++
			if total >= 100000 && done%(total/20) == 0 {
				t.Logf("%d%%: %d messages, %.1f GB, %v", 100*done/total, done, float64(bytesMoved)/1e9, time.Since(start).Round(time.Second))
			}
			post(slot)
		}
	}
	elapsed := time.Since(start)
	// A sender is done when its last sends complete, which may need our
	// answers (a rendezvous acknowledgement left in the control queue for
	// the next progress call, as manual progress allows): keep
	// progressing until every sender is done.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		var es [16]CQEntry
		for {
			select {
			case <-stop:
				return
			default:
			}
			n.rxcq.Sread(es[:], 10*time.Millisecond)
		}
	}()
	defer func() { close(stop); <-stopped }()
	for i, p := range peers {
		p.wait(t)
		s := seen[i]
		// Receives were posted in serial order: sorted by serial, each
		// sender's sequence numbers must be 0, 1, 2, ... (no loss, no
		// duplicate, order kept).
		slices.SortFunc(s, func(a, b rec) int { return int(a.post) - int(b.post) })
		for j, r := range s {
			if r.seq != uint32(j) {
				t.Fatalf("sender %d: receive #%d holds seq %d (lost, duplicated or reordered)", i, j, r.seq)
			}
		}
	}
	t.Logf("stress %s: %d senders x %d messages (0..%d B, log-uniform): %.2f GB in %v (%.2f GB/s, %.0f msg/s)",
		name, sp.senders, sp.count, sp.max, float64(bytesMoved)/1e9, elapsed.Round(time.Millisecond),
		float64(bytesMoved)/1e9/elapsed.Seconds(), float64(total)/elapsed.Seconds())
}

// stressSize draws a log-uniform size in [0, max].
func stressSize(r *rand.Rand, max int) int {
	if max <= 0 {
		return 0
	}
	return int(math.Exp(r.Float64()*math.Log(float64(max)+1))) - 1
}

func init() {
	peerRoles["stress"] = func(t *testing.T, l *link, arg string) {
		f := strings.Split(arg, "/")
		prov := provCases[f[0]].prov
		id, _ := strconv.Atoi(f[1])
		count, _ := strconv.Atoi(f[2])
		maxSize, _ := strconv.Atoi(f[3])
		n := openNode(t, prov, nodeCfg{caps: Tagged | RemoteCQData | Source})
		a := l.expect("addr")
		n.peers = n.insertNames(a[0], false)
		l.send("addr", n.names())
		l.expect("go")
		dest := n.peers[0]

		r := rand.New(rand.NewPCG(uint64(id)+1, 0x9e3779b97f4a7c15))
		pool := make([]byte, maxSize+4096)
		for i := 0; i+8 <= len(pool); i += 8 {
			binary.LittleEndian.PutUint64(pool[i:], r.Uint64())
		}
		// Stamps of sends in flight, by slot; a slot is free again when its
		// send completes (the stamp is part of the payload until then).
		const slots = 1024
		stamps := make([][16]byte, slots)
		free := make([]int, 0, slots)
		for i := range slots {
			free = append(free, i)
		}
		var es [16]CQEntry
		reap := func(block bool) {
			var k int
			var err error
			if block {
				k, err = n.txcq.Sread(es[:], 100*time.Millisecond)
			} else {
				k, err = n.txcq.Read(es[:])
			}
			if errors.Is(err, ErrAvail) {
				e, _ := n.txcq.ReadErr()
				t.Fatalf("sender %d: transmit error completion %v", id, e.Err)
			}
			for _, e := range es[:k] {
				free = append(free, e.Context.(int))
			}
		}
		iov := make([][]byte, 2)
		msg := &TaggedMsg{Addr: dest}
		for seq := range count {
			size := stressSize(r, maxSize)
			for len(free) == 0 {
				reap(true)
			}
			slot := free[len(free)-1]
			free = free[:len(free)-1]
			st := stamps[slot][:]
			binary.LittleEndian.PutUint64(st, uint64(id))
			binary.LittleEndian.PutUint64(st[8:], uint64(seq))
			head := min(size, 16)
			off := r.IntN(4096)
			iov[0], iov[1] = st[:head], pool[off:off+size-head]
			crc := crc32.Update(crc32.Checksum(iov[0], castagnoli), castagnoli, iov[1])
			msg.IOV, msg.Tag, msg.Data, msg.Context = iov, uint64(id)<<32|uint64(seq), uint64(crc), slot
			for {
				err := n.ep.TSendMsg(msg, RemoteCQData|Completion)
				if err == nil {
					break
				}
				if !errors.Is(err, ErrAgain) {
					t.Fatalf("sender %d seq %d: %v", id, seq, err)
				}
				reap(false)
			}
			if seq%64 == 0 {
				reap(false)
			}
		}
		for len(free) < slots {
			reap(true)
		}
	}
}
