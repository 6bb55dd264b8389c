package fi

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// Multi-process atomics: the parent is the target, holding one region
// (word 0 a fetch-add counter, word 1 a lock, word 2 a plain counter the
// lock guards) registered under one key in the domain of every provider
// its children use, so peers on different transports hit the same words:
// with a shm child the region comes from AllocMR (shm children execute
// on their own mapping of it) and the tcp domain registers those bytes.
// Children ("atomic" role) do fetch-adds on word 0 and DoubleComplex
// adds on bytes 32-47, then take the lock
// with CSwap, increment word 2 with an RMA read and write, and release
// with OpAtomicWrite; the parent adds to word 0 and takes the same lock
// with sync/atomic on MR.Bytes().

const (
	atomicWordAdd  = 0
	atomicWordLock = 8
	atomicWordCntr = 16
	atomicWordCplx = 32 // a DoubleComplex
)

// atomicChildArg is "prov,rank,adds,locks".
func atomicChildArg(prov string, rank, adds, locks int) string {
	return fmt.Sprintf("%s,%d,%d,%d", prov, rank, adds, locks)
}

func init() {
	peerRoles["atomic"] = func(t *testing.T, l *link, arg string) {
		f := strings.Split(arg, ",")
		if len(f) != 4 {
			t.Fatalf("atomic arg %q", arg)
		}
		rank, _ := strconv.Atoi(f[1])
		adds, _ := strconv.Atoi(f[2])
		locks, _ := strconv.Atoi(f[3])
		prov, _ := atomicSpec(f[0])
		n := openRMANode(t, prov, rmaNodeCfg{caps: Msg | RMA | Atomic})
		tgt := l.expect("target")
		name, err := hex.DecodeString(tgt[0])
		if err != nil {
			t.Fatal(err)
		}
		key, err := strconv.ParseUint(tgt[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if n.remote { // shm+tcp_remote: reach the target over tcp
			name = otherDomain(t, name)
		}
		addrs, err := n.av.Insert([][]byte{name}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n.remote {
			if s, _ := n.av.Lookup(addrs[0]); !bytes.HasSuffix(s, []byte("via=tcp")) {
				t.Fatalf("remote child routes %q", s)
			}
		}
		l.send("ready")
		l.expect("go")
		got, err := atomicFetchAdds(n, addrs[0], key, adds)
		if err != nil {
			l.send("fail", err)
			return
		}
		var b strings.Builder
		for i, v := range got {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatUint(v, 10))
		}
		l.send("adds", b.String())
		l.expect("lock")
		if err := atomicSpinLock(n, addrs[0], key, uint64(rank+1), locks); err != nil {
			l.send("fail", strings.ReplaceAll(err.Error(), "\n", " "))
			return
		}
		l.send("locked")
	}
}

// atomicNext returns the context of the next transmit completion, or its
// error.
func atomicNext(n *rmaNode) (any, error) {
	var e [1]CQEntry
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		k, err := n.cq.Read(e[:])
		if k == 1 {
			return e[0].Context, nil
		}
		if errors.Is(err, ErrAvail) {
			ee, err := n.cq.ReadErr()
			if err != nil {
				return nil, err
			}
			return ee.Context, fmt.Errorf("error completion: %w", ee.Err)
		}
		if !errors.Is(err, ErrAgain) {
			return nil, err
		}
		if i&1023 == 0 && time.Now().After(deadline) {
			return nil, errors.New("no completion within 60 s")
		}
	}
}

// atomicWindowed runs n operations, window in flight: post starts one
// in slot (its context), done takes its result.
func atomicWindowed(node *rmaNode, n, window int, post func(slot int, ctx any) error, done func(slot int)) error {
	ctxs := make([]*int, window)
	for i := range ctxs {
		ctxs[i] = new(int)
		*ctxs[i] = i
	}
	start := func(slot int) error {
		for {
			err := post(slot, ctxs[slot])
			if !errors.Is(err, ErrAgain) {
				return err
			}
			node.cq.Read(nil)
		}
	}
	posted, inflight := 0, 0
	for ; posted < min(window, n); posted++ {
		if err := start(posted); err != nil {
			return err
		}
		inflight++
	}
	for inflight > 0 {
		ctx, err := atomicNext(node)
		if err != nil {
			return err
		}
		slot := *ctx.(*int)
		done(slot)
		inflight--
		if posted < n {
			if err := start(slot); err != nil {
				return err
			}
			posted++
			inflight++
		}
	}
	return nil
}

// atomicFetchAdds does n fetch-adds of 1 on word 0 and returns the values
// fetched, then n/5 DoubleComplex adds of 1+1i on the 16-byte element at
// atomicWordCplx (atomic only under the target's lock, whichever
// transport brought them).
func atomicFetchAdds(node *rmaNode, dest Addr, key uint64, n int) ([]uint64, error) {
	const window = 16
	one := make([]byte, 16)
	ne64.PutUint64(one, 1)
	res := make([][]byte, window)
	for i := range res {
		res[i] = make([]byte, 8)
	}
	out := make([]uint64, 0, n)
	err := atomicWindowed(node, n, window, func(slot int, ctx any) error {
		return node.ep.FetchAtomic(one[:8], 1, nil, res[slot], nil, dest, atomicWordAdd, key, Uint64, OpSum, ctx)
	}, func(slot int) { out = append(out, ne64.Uint64(res[slot])) })
	if err != nil {
		return nil, err
	}
	cplx := make([]byte, 16)
	ne64.PutUint64(cplx, math.Float64bits(1))
	ne64.PutUint64(cplx[8:], math.Float64bits(1))
	err = atomicWindowed(node, n/5, window, func(slot int, ctx any) error {
		return node.ep.Atomic(cplx, 1, nil, dest, atomicWordCplx, key, DoubleComplex, OpSum, ctx)
	}, func(int) {})
	return out, err
}

// atomicDo posts one operation and waits for its completion.
func atomicDo(node *rmaNode, post func(ctx any) error) error {
	ctx := new(int)
	if err := post(ctx); err != nil {
		return err
	}
	got, err := atomicNext(node)
	if err != nil {
		return err
	}
	if got != ctx {
		return fmt.Errorf("completion for %v", got)
	}
	return nil
}

// atomicSpinLock takes the lock word with CSwap (me: the holder's
// mark), increments the guarded counter with an RMA read and write, and
// releases with OpAtomicWrite, locks times.
func atomicSpinLock(n *rmaNode, dest Addr, key, me uint64, locks int) error {
	mine, zero, res, cntr := make([]byte, 8), make([]byte, 8), make([]byte, 8), make([]byte, 8)
	ne64.PutUint64(mine, me)
	for i := 0; i < locks; i++ {
		// Bounded by time, not tries: a holder the host keeps off its
		// CPU holds the lock however fast the others' CSwaps come back.
		deadline := time.Now().Add(60 * time.Second)
		for {
			err := atomicDo(n, func(ctx any) error {
				return n.ep.CompareAtomic(mine, 1, nil, zero, nil, res, nil, dest, atomicWordLock, key, Uint64, OpCSwap, ctx)
			})
			if err != nil {
				return fmt.Errorf("lock %d: %w", i, err)
			}
			if ne64.Uint64(res) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("lock %d: held by %d for 60 s", i, ne64.Uint64(res))
			}
		}
		if err := atomicDo(n, func(ctx any) error { return n.ep.Read(cntr, nil, dest, atomicWordCntr, key, ctx) }); err != nil {
			return err
		}
		ne64.PutUint64(cntr, ne64.Uint64(cntr)+1)
		if err := atomicDo(n, func(ctx any) error { return n.ep.Write(cntr, nil, dest, atomicWordCntr, key, ctx) }); err != nil {
			return err
		}
		err := atomicDo(n, func(ctx any) error {
			return n.ep.FetchAtomic(zero, 1, nil, res, nil, dest, atomicWordLock, key, Uint64, OpAtomicWrite, ctx)
		})
		if err != nil {
			return err
		}
		if ne64.Uint64(res) != me {
			return fmt.Errorf("lock %d: released a lock held by %d", i, ne64.Uint64(res))
		}
	}
	return nil
}

// atomicTarget is the parent's side: one endpoint per provider its
// children use, all exposing the same memory under one key.
type atomicTarget struct {
	nodes map[string]*rmaNode // by spec
	mrs   []*MR
	mem   []byte
	key   uint64
}

func openAtomicTarget(t *testing.T, specs []string) *atomicTarget {
	x := &atomicTarget{nodes: map[string]*rmaNode{}}
	// AllocMR first (it chooses the key), then the others register the
	// same bytes under that key.
	order := slices.Clone(specs)
	slices.SortStableFunc(order, func(a, b string) int {
		_, aa := atomicSpec(a)
		_, ba := atomicSpec(b)
		return map[bool]int{true: 0, false: 1}[aa] - map[bool]int{true: 0, false: 1}[ba]
	})
	for _, spec := range order {
		if x.nodes[spec] != nil {
			continue
		}
		prov, alloc := atomicSpec(spec)
		n := openRMANode(t, prov, rmaNodeCfg{caps: Msg | RMA | Atomic})
		var mr *MR
		var err error
		switch {
		case alloc && x.mem == nil:
			mr, err = n.dom.AllocMR(64, RemoteRead|RemoteWrite)
			if err == nil {
				x.mem, x.key = mr.Bytes(), mr.Key()
			}
		case alloc:
			t.Fatal("two AllocMR targets")
		default:
			if x.mem == nil {
				x.mem, x.key = alignedBytes(64), 7
			}
			mr, err = n.dom.RegMR(x.mem, RemoteRead|RemoteWrite, 0, x.key, 0)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mr.Close() })
		x.nodes[spec] = n
		x.mrs = append(x.mrs, mr)
	}
	return x
}

// bytes returns the memory, ordered with every domain's executors.
func (x *atomicTarget) bytes() []byte {
	for _, mr := range x.mrs {
		mr.Bytes()
	}
	return x.mem
}

// word is the target's own view of an 8-byte word for sync/atomic.
func (x *atomicTarget) word(off int) *uint64 {
	return (*uint64)(unsafe.Pointer(&x.bytes()[off]))
}

// runAtomicProcs starts one child per entry of provs, runs the fetch-add
// phase (adds each) and the lock phase (locks each, and locks by the
// parent itself through sync/atomic), and checks the results.
func runAtomicProcs(t *testing.T, provs []string, adds, locks int) {
	shmTestDir(t)
	x := openAtomicTarget(t, provs)
	kids := make([]*peerProc, len(provs))
	for i, p := range provs {
		kids[i] = startPeer(t, "atomic", atomicChildArg(p, i, adds, locks), 4*time.Minute)
		name, err := x.nodes[p].ep.Name()
		if err != nil {
			t.Fatal(err)
		}
		kids[i].send("target", hex.EncodeToString(name), x.key)
	}
	for _, k := range kids {
		k.expect("ready")
	}
	for _, k := range kids {
		k.send("go")
	}
	// The target adds too, with sync/atomic on the same word.
	own := make([]uint64, adds)
	ownDone := make(chan struct{})
	go func() {
		defer close(ownDone)
		w := x.word(atomicWordAdd)
		for i := range own {
			own[i] = atomic.AddUint64(w, 1) - 1
			if i%64 == 0 {
				runtime.Gosched()
			}
		}
	}()
	seen := make(map[uint64]int, adds*(len(provs)+1))
	for i, k := range kids {
		vals := strings.Split(k.expect("adds")[0], ",")
		if len(vals) != adds {
			t.Fatalf("child %d reported %d fetch-adds, want %d", i, len(vals), adds)
		}
		for _, s := range vals {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if j, dup := seen[v]; dup {
				t.Fatalf("value %d fetched by children %d and %d", v, j, i)
			}
			seen[v] = i
		}
	}
	<-ownDone
	for _, v := range own {
		if j, dup := seen[v]; dup {
			t.Fatalf("value %d fetched by child %d and the target's own sync/atomic add", v, j)
		}
		seen[v] = -1
	}
	total := uint64(adds * (len(provs) + 1))
	for v := range seen {
		if v >= total {
			t.Fatalf("fetched %d, beyond %d adds", v, total)
		}
	}
	if got := atomic.LoadUint64(x.word(atomicWordAdd)); got != total {
		t.Fatalf("counter %d after %d fetch-adds", got, total)
	}
	mem := x.bytes()
	re, im := math.Float64frombits(ne64.Uint64(mem[atomicWordCplx:])), math.Float64frombits(ne64.Uint64(mem[atomicWordCplx+8:]))
	if want := float64(adds / 5 * len(provs)); re != want || im != want {
		t.Fatalf("double complex sum %v+%vi after %v adds of 1+1i: a 16-byte atomic was lost", re, im, want)
	}
	// The lock phase: the children and the parent at once.
	for _, k := range kids {
		k.send("lock")
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < locks; i++ {
			for !atomic.CompareAndSwapUint64(x.word(atomicWordLock), 0, 1000) {
				runtime.Gosched()
			}
			mem := x.bytes()
			ne64.PutUint64(mem[atomicWordCntr:], ne64.Uint64(mem[atomicWordCntr:])+1)
			x.bytes()
			if !atomic.CompareAndSwapUint64(x.word(atomicWordLock), 1000, 0) {
				t.Error("the parent's lock was taken from it")
				return
			}
		}
	}()
	for _, k := range kids {
		k.expect("locked")
	}
	wg.Wait()
	for _, k := range kids {
		k.wait(t)
	}
	if got, want := ne64.Uint64(x.bytes()[atomicWordCntr:]), uint64(locks*(len(provs)+1)); got != want {
		t.Fatalf("guarded counter %d, want %d: mutual exclusion failed", got, want)
	}
	if got := atomic.LoadUint64(x.word(atomicWordLock)); got != 0 {
		t.Fatalf("lock word %d at the end", got)
	}
}

// TestAtomic_Processes: three processes doing 10 000 fetch-adds each on
// one word while the target adds 10 000 with sync/atomic (every value
// fetched once, the final value exact), then a CSwap spin lock guarding a
// plain counter, taken by them and by the target itself; on each
// provider's paths, and with shm and tcp children on the same word at
// once.
func TestAtomic_Processes(t *testing.T) {
	// shm-reg's executor path is in these runs already (the 16-byte
	// adds of shm children), so it gets no run of its own: CI time.
	runs := map[string][]string{"mixed": {"shm", "tcp", "shm"}, "tcp": {"tcp", "tcp", "tcp"}, "shm": {"shm", "shm", "shm"},
		"shm+tcp": {"shm+tcp", "shm+tcp_remote", "shm+tcp"}}
	for name, specs := range runs {
		t.Run(name, func(t *testing.T) {
			runAtomicProcs(t, specs, 10000, 100)
		})
	}
}
