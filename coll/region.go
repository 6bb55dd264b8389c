package coll

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gofi-dev/fi/engine"
	"github.com/gofi-dev/fi/shm"
)

// A group's node-local region is one shared-memory segment that the
// members on one node map (see shm.go for what runs over it):
//
//	[0, 4096)          header: magic, version, local ranks, slot size,
//	                   group id, membership hash, nonce; the abort word
//	                   on a line of its own at 128
//	[4096, ...)        256 bytes of control per local rank: one cache
//	                   line per phase parity s (at +64s), holding the
//	                   rank's arrive counter for the phases of that parity
//	                   (+0), its check word (+8) and inline data (+16, 48
//	                   bytes: small reductions travel in the line that
//	                   signals them, one cache-line transfer per rank);
//	                   at +128 the rank's sleep word (the phase it last
//	                   waited in when it went to sleep in Sread: lean.go),
//	                   and at +136 its CPU word (the CPU + 1 it last
//	                   waited on in a yielding wait, 0: not known;
//	                   othersElsewhere), on a line written only then
//	data (page aligned) two buffer sets, used by phase parity; each holds
//	                   n+1 slots of slot bytes (slot i: local rank i's,
//	                   slot n: results)
//
// Only the rank that owns a control line writes it. Sizes come from the
// header, written by the leader; the others check it against what they
// know (group, members, nonce) and against the mapped size before use.

const (
	regionMagic   = 0x3167726f63696667 // "gficorg1"
	regionVersion = 3
	regionHdr     = 4096
	ctrlLine      = 256 // four cache lines, two pairs: no false sharing with the adjacent-line prefetcher
	sleepOff      = 128
	cpuOff        = sleepOff + 8
	inlineOff     = 16
	inlineMax     = 64 - inlineOff // bytes of inline data per rank and parity

	hMagic   = 0
	hVersion = 8
	hLocal   = 12
	hSlot    = 16
	hGroup   = 24
	hHash    = 32
	hNonce   = 40
	hAbort   = 128

	minSlot = 4 << 10
	maxSlot = 4 << 20
)

// codeNoSpc is FI_ENOSPC.
const codeNoSpc engine.Code = 28

// ShmBudgetEnv names the environment variable that caps the bytes of one
// group's node-local region (default: SmallShmBudget for groups of at
// most SmallGroup ranks on the node, DefaultShmBudget for larger ones).
// The region holds 2(n+1) slots for n local ranks; slots are powers of
// two between 4 KiB and 4 MiB, the largest that fits the budget, so 2
// ranks take 12 MiB of /dev/shm per group by default (2 MiB slots), 4
// ranks 20 MiB (2 MiB), 8 ranks 18 MiB (1 MiB), 16 ranks 4.3 MiB and 64
// ranks 4.1 MiB. A large allreduce runs in chunks of a slot per rank, and
// every chunk's phases need every rank to arrive, which on a loaded host
// (or with more ranks than CPUs) costs context switches: 16 MiB float32
// allreduce p50 with 8 MiB against 24 MiB budgets, medians of alternated
// runs at load 11-15: 4 ranks (7 runs) 64.8 ms against 32.6 (MPICH
// 66.6), 8 ranks (3 runs) 170 against 105 (MPICH 154), 2 ranks (3 runs)
// 33.3 against 26.0 (MPICH 35.1).
const ShmBudgetEnv = "GOFI_COLL_SHM_BYTES"

// DefaultShmBudget is the default cap of the region of a group of more
// than SmallGroup ranks on a node: dozens of ranks stay at a few MiB of
// /dev/shm per group (64 ranks in a 64 MB tmpfs, transport rings
// included).
const DefaultShmBudget = 8 << 20

// SmallShmBudget is the default cap of the region of a group of at most
// SmallGroup ranks on a node.
const SmallShmBudget = 24 << 20

// SmallGroup is the most local ranks whose region gets SmallShmBudget.
const SmallGroup = 8

// shmBudget is the region budget for n local ranks.
func shmBudget(n int) int {
	if s := os.Getenv(ShmBudgetEnv); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			return v
		}
	}
	if n <= SmallGroup {
		return SmallShmBudget
	}
	return DefaultShmBudget
}

// slotFor returns the slot size for n local ranks within budget bytes.
func slotFor(n, budget int) int {
	s := maxSlot
	for s > slotMin(n) && regionSize(n, s) > budget {
		s >>= 1
	}
	return s
}

// slotMin is the smallest slot for n local ranks: every operation needs
// room for one element of 16 bytes per rank in a slot (alltoall and
// reduce-scatter split a slot in n parts).
func slotMin(n int) int {
	s := minSlot
	for s < n*64 {
		s <<= 1
	}
	return s
}

// maxLocal bounds the local ranks of a region (more run point to point):
// slots of at least 64n bytes make 256 ranks' region 8 MiB at least.
const maxLocal = 256

func ctrlBytes(n int) int { return (n*ctrlLine + regionHdr - 1) &^ (regionHdr - 1) }

func regionSize(n, slot int) int { return regionHdr + ctrlBytes(n) + 2*(n+1)*slot }

// region is a group's mapping of its node-local segment.
type region struct {
	seg    *shm.Segment
	mem    []byte
	n      int   // local ranks
	me     int   // my local index
	slot   int   // bytes per slot
	data   int   // offset of buffer set 0
	local  []int // local index -> group rank
	leader bool
	name   string

	ph    uint64 // my phase: the last one I arrived at
	scan  int    // local ranks below scan are known to have arrived at ph
	srcs  [][]byte
	arr   [2][]*atomic.Uint64 // per parity, per local rank: arrive words (index)
	chk   [2][]*atomic.Uint64 // and check words
	inl   [2][]unsafe.Pointer // and inline data (inlineMax bytes each)
	fin   [2][]unsafe.Pointer // inl with my entry at own: what a lean fold reads
	own   [inlineMax]byte     // my inline operand, kept in my own memory too
	slp   []*atomic.Uint64    // per local rank: sleep words
	wph   atomic.Uint64       // ph while waiting, 0 when idle: for the transport's wait condition (ready)
	wslot int                 // its slot in the endpoint's watch, when there
}

// NodeKey identifies this process's shared-memory domain: the boot, the
// file system holding shm segments (its device and inode, so processes
// with different /dev/shm mounts, such as network-namespace hosts with
// their own tmpfs, get different keys) and the user. Members of a group
// whose keys are equal (and not 0) share node-local regions. 0 when it
// cannot be determined.
func NodeKey() uint64 { return NodeKeySalted("") }

// NodeKeySalted is NodeKey with salt mixed in: processes that share
// memory but are told apart by salt (a linked endpoint's domain override,
// which makes them talk over tcp) get different keys.
func NodeKeySalted(salt string) uint64 {
	var st unix.Stat_t
	if err := unix.Stat(shm.Dir(), &st); err != nil {
		return 0
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	h := uint64(14695981039346656037)
	mix := func(b []byte) {
		for _, c := range b {
			h = (h ^ uint64(c)) * 1099511628211
		}
	}
	var w [8]byte
	mix(boot)
	binary.LittleEndian.PutUint64(w[:], st.Dev)
	mix(w[:])
	binary.LittleEndian.PutUint64(w[:], st.Ino)
	mix(w[:])
	binary.LittleEndian.PutUint64(w[:], uint64(os.Geteuid()))
	mix(w[:])
	mix([]byte(salt))
	if h == 0 {
		h = 1
	}
	return h
}

func (r *region) u64(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&r.mem[off]))
}

func (r *region) u32(off int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&r.mem[off]))
}

// arriveWord returns local rank i's arrive counter for the phases of ph's
// parity: it holds ph once i arrived at ph (a rank is never more than one
// phase ahead of another, so the word of the other parity is enough for
// the phase before or after).
func (r *region) arriveWord(i int, ph uint64) *atomic.Uint64 { return r.arr[ph&1][i] }

func (r *region) checkWord(i, set int) *atomic.Uint64 { return r.chk[set&1][i] }

// index finds every rank's arrive and check words in the mapping, once
// (attachArrive, before the region is used or watched): the hot paths
// then load through a pointer instead of slicing the mapping.
func (r *region) index() {
	r.slp = make([]*atomic.Uint64, r.n)
	for i := range r.n {
		r.slp[i] = r.u64(regionHdr + i*ctrlLine + sleepOff)
	}
	for s := range r.arr {
		r.arr[s] = make([]*atomic.Uint64, r.n)
		r.chk[s] = make([]*atomic.Uint64, r.n)
		r.inl[s] = make([]unsafe.Pointer, r.n)
		r.fin[s] = make([]unsafe.Pointer, r.n)
		for i := range r.n {
			r.inl[s][i] = unsafe.Pointer(&r.mem[regionHdr+i*ctrlLine+s*64+inlineOff])
			r.fin[s][i] = r.inl[s][i]
			r.arr[s][i] = r.u64(regionHdr + i*ctrlLine + s*64)
			r.chk[s][i] = r.u64(regionHdr + i*ctrlLine + s*64 + 8)
		}
		if r.me >= 0 && r.me < r.n {
			r.fin[s][r.me] = unsafe.Pointer(&r.own[0])
		}
	}
}

// inline returns local rank i's inline data for buffer set.
func (r *region) inline(i, set int) []byte {
	off := regionHdr + i*ctrlLine + set*64 + inlineOff
	return r.mem[off : off+inlineMax : off+inlineMax]
}

// slotBuf returns slot j of buffer set.
func (r *region) slotBuf(set, j int) []byte {
	off := r.data + (set*(r.n+1)+j)*r.slot
	return r.mem[off : off+r.slot : off+r.slot]
}

// area returns the whole of buffer set (n+1 slots), for operations with
// one writer.
func (r *region) area(set int) []byte {
	off := r.data + set*(r.n+1)*r.slot
	return r.mem[off : off+(r.n+1)*r.slot : off+(r.n+1)*r.slot]
}

// enter starts the next phase: this rank writes what it contributes to
// it next (buffer set ph&1, its check word and inline data), then
// publishes its arrival. The wait condition (ready) learns the phase
// here, before the shared line is written: the store is a locked one,
// which after the arrival would wait until the arrival's line is this
// CPU's own (a round trip between CPUs, when the others poll it); the
// phase's end marks the region idle again (ringSleepers, watchOff).
func (r *region) enter() {
	r.ph++
	r.scan = 0
	r.wph.Store(r.ph)
}

// publish stores this rank's arrival at its phase, after what it wrote
// for the phase (storeRel: a plain store where the CPU keeps stores in
// order, so the rank does not stall until the line is its own; the
// others' loads see the writes before it). The store is not ordered
// before this rank's later loads: shmAdvance fences before it concludes
// that another rank is missing (see there).
func (r *region) publish() { storeRel(r.arriveWord(r.me, r.ph), r.ph) }

// arrive enters the next phase and publishes it at once, ordered before
// every later load.
func (r *region) arrive() {
	r.enter()
	r.publish()
	r.fence()
}

// fence orders this rank's earlier stores (its arrival) before its later
// loads: a locked read-modify-write of a word of its own.
func (r *region) fence() { r.wph.Add(0) }

// ready reports whether every local rank has arrived at my phase or a
// rank aborted: the wait condition's test of a watched region. It runs
// on a goroutine sleeping in the transport's Wait, concurrently with
// progress, so it reads only the mapping and wph (the mapping stays
// until unwatch has seen the condition leave).
func (r *region) ready() bool {
	ph := r.wph.Load()
	if ph == 0 {
		return false // idle: no phase waits (watchOff)
	}
	if r.aborted() != 0 {
		return true
	}
	for i := 0; i < r.n; i++ {
		if r.arriveWord(i, ph).Load() < ph {
			// This rank may go to sleep: the others ring it when they
			// complete a lean phase its sleep word names (leanDone). The
			// store comes before a load that finds i missing: a missing
			// rank's ring then sees it.
			if w := r.slp[r.me]; w.Load() != ph {
				w.Store(ph)
				if r.arriveWord(i, ph).Load() >= ph {
					continue
				}
			}
			return false
		}
	}
	return true
}

// idle reports whether the region's group waits in no phase (watchOff).
func (r *region) idle() bool { return r.wph.Load() == 0 }

// arrived reports whether every local rank has arrived at my phase. It
// is called once this rank published its own arrival, which it does not
// load again: once another CPU has read this rank's control line, a load
// of it may miss in this CPU's cache (measured: 130 ns when the CPUs are
// far apart, on the path from the last arrival to the next operation).
func (r *region) arrived() bool {
	ws, ph := r.arr[r.ph&1], r.ph
	for r.scan < len(ws) {
		if r.scan != r.me && ws[r.scan].Load() < ph {
			return false
		}
		r.scan++
	}
	return true
}

// aborted returns the errno a local rank stored on failing, 0 if none.
func (r *region) aborted() engine.Code { return engine.Code(r.u32(hAbort).Load()) }

func (r *region) setAbort(c engine.Code) {
	if c == 0 {
		c = engine.CodeIO
	}
	r.u32(hAbort).CompareAndSwap(0, uint32(c))
}

func (r *region) close() {
	if r.seg != nil {
		_ = r.seg.Close()
	}
	r.seg, r.mem = nil, nil
}

// regionName is the segment name of a group's region: the leader's pid
// and the nonce of its join record.
func regionName(pid uint32, nonce uint64) string {
	return shm.Prefix() + strconv.FormatUint(uint64(pid), 10) + "-c" + strconv.FormatUint(nonce, 16)
}

// setupRegion is the end of the join (called once its plan ran): nothing
// left to do, the attach step of the plan mapped the region.
func (g *Group) setupRegion() engine.Code { return 0 }

// ---------------------------------------------------------------------------
// attach: the last step of a join whose members share a node.

// setNodes partitions the members into nodes from their join records:
// the ranks of one non-zero node key form a node, unless the key is
// alone or has more than maxLocal ranks (each of those ranks is then a
// node of its own). Every member computes the same partition.
func (g *Group) setNodes() {
	key := func(r int) uint64 { return binary.LittleEndian.Uint64(g.join[r*recSize+8:]) }
	count := map[uint64]int{}
	for r := 0; r < g.size; r++ {
		count[key(r)]++
	}
	idx := map[uint64]int{}
	g.nodeOf = make([]int32, g.size)
	g.nodeLead = g.nodeLead[:0]
	for r := 0; r < g.size; r++ {
		k := key(r)
		shared := k != 0 && count[k] > 1 && count[k] <= maxLocal
		if i, ok := idx[k]; ok && shared {
			g.nodeOf[r] = int32(i)
			continue
		}
		if shared {
			idx[k] = len(g.nodeLead)
		}
		g.nodeOf[r] = int32(len(g.nodeLead))
		g.nodeLead = append(g.nodeLead, r)
	}
	g.reps = make([]int, len(g.nodeLead))
	nn := len(g.nodeLead)
	g.nodeOrd = make([]int, 0, g.size)
	g.nodeStart = make([]int, nn+1)
	for r := 0; r < g.size; r++ {
		g.nodeStart[g.nodeOf[r]+1]++
	}
	for k := 0; k < nn; k++ {
		g.nodeStart[k+1] += g.nodeStart[k]
	}
	for k := 0; k < nn; k++ {
		for r := g.nodeLead[k]; r < g.size; r++ {
			if int(g.nodeOf[r]) == k {
				g.nodeOrd = append(g.nodeOrd, r)
			}
		}
	}
	g.nodeIdent = true
	for i, r := range g.nodeOrd {
		g.nodeIdent = g.nodeIdent && i == r
	}
}

// localMembers returns the ranks of this rank's node, in rank order.
func (g *Group) localMembers() []int {
	var l []int
	for r := 0; r < g.size; r++ {
		if g.nodeOf[r] == g.nodeOf[g.rank] {
			l = append(l, r)
		}
	}
	return l
}

// localIndex returns group rank r's index in the region (-1: not local).
func (r *region) localIndex(rank int) int {
	for i, x := range r.local {
		if x == rank {
			return i
		}
	}
	return -1
}

// attachStart starts the attach step: the leader creates the region, the
// others open it (retried from progress until it appears). A join that
// does not use shared memory finishes the step at once.
func (g *Group) attachStart() bool {
	for r := 0; r < g.size; r++ {
		if binary.LittleEndian.Uint64(g.join[r*recSize:]) != g.hash {
			g.fail(engine.CodeInval) // the members disagree on the membership
			return false
		}
	}
	g.setNodes()
	local := g.localMembers()
	if len(local) < 2 || g.e.cfg.NodeKey == 0 {
		return true // alone on its node: point to point only
	}
	me := -1
	for i, r := range local {
		if r == g.rank {
			me = i
		}
	}
	lead := g.join[local[0]*recSize:]
	r := &region{n: len(local), me: me, local: local, leader: me == 0,
		name: regionName(binary.LittleEndian.Uint32(lead[16:]), binary.LittleEndian.Uint64(lead[24:])),
		srcs: make([][]byte, len(local))}
	g.region = r
	if r.leader {
		if c := g.createRegion(r); c != 0 {
			g.region = nil
			g.fail(c)
			return false
		}
		return g.attachArrive()
	}
	return g.attachOpen()
}

// createRegion creates and initialises the leader's segment, with smaller
// slots when /dev/shm is short of space.
func (g *Group) createRegion(r *region) engine.Code {
	slot := slotFor(r.n, shmBudget(r.n))
	for {
		seg, err := shm.CreateSegment(r.name, regionSize(r.n, slot))
		if err == nil {
			r.seg, r.mem, r.slot = seg, seg.Bytes(), slot
			break
		}
		if errors.Is(err, shm.ErrNoSpace) && slot > slotMin(r.n) {
			slot >>= 1
			continue
		}
		if errors.Is(err, shm.ErrNoSpace) {
			return codeNoSpc
		}
		return engine.CodeIO
	}
	r.data = regionHdr + ctrlBytes(r.n)
	m := r.mem
	binary.LittleEndian.PutUint32(m[hVersion:], regionVersion)
	binary.LittleEndian.PutUint32(m[hLocal:], uint32(r.n))
	binary.LittleEndian.PutUint64(m[hSlot:], uint64(r.slot))
	binary.LittleEndian.PutUint32(m[hGroup:], g.id)
	binary.LittleEndian.PutUint64(m[hHash:], g.hash)
	binary.LittleEndian.PutUint64(m[hNonce:], binary.LittleEndian.Uint64(g.join[g.rank*recSize+24:]))
	r.u64(hMagic).Store(regionMagic) // last: the header is complete
	return 0
}

// attachOpen tries to map the leader's region; true when the attach step
// is finished (mapped and every local rank arrived, or failed).
func (g *Group) attachOpen() bool {
	r := g.region
	if r.seg == nil {
		seg, err := shm.OpenSegment(r.name)
		if errors.Is(err, os.ErrNotExist) {
			return false // not created yet: retried from progress
		}
		if err != nil {
			g.fail(engine.CodeIO)
			return false
		}
		r.seg, r.mem = seg, seg.Bytes()
	}
	if len(r.mem) < regionHdr || r.u64(hMagic).Load() != regionMagic {
		return false // header not written yet
	}
	lead := g.join[r.local[0]*recSize:]
	slot, ok := checkHeader(r.mem, r.n, g.id, g.hash, binary.LittleEndian.Uint64(lead[24:]))
	if !ok {
		g.fail(engine.CodeInval)
		return false
	}
	r.slot = slot
	r.data = regionHdr + ctrlBytes(r.n)
	return g.attachArrive()
}

// checkHeader checks a region's header (m is the whole mapping, written
// by another process: untrusted) against what this member knows, and
// returns the slot size.
func checkHeader(m []byte, n int, id uint32, hash, nonce uint64) (int, bool) {
	if len(m) < regionHdr || binary.LittleEndian.Uint64(m[hMagic:]) != regionMagic {
		return 0, false
	}
	s := binary.LittleEndian.Uint64(m[hSlot:])
	switch {
	case binary.LittleEndian.Uint32(m[hVersion:]) != regionVersion,
		binary.LittleEndian.Uint32(m[hLocal:]) != uint32(n),
		binary.LittleEndian.Uint32(m[hGroup:]) != id,
		binary.LittleEndian.Uint64(m[hHash:]) != hash,
		binary.LittleEndian.Uint64(m[hNonce:]) != nonce,
		s < uint64(slotMin(n)) || s > maxSlot || s&(s-1) != 0:
		return 0, false
	}
	if regionSize(n, int(s)) > len(m) {
		return 0, false
	}
	return int(s), true
}

// attachArrive enters phase 1 (mapped) and waits for every local rank.
func (g *Group) attachArrive() bool {
	r := g.region
	fresh := false
	if r.ph == 0 {
		r.index()
		r.arrive()
		fresh = true
		g.e.rewatch() // mapped and waiting: the wait condition may read it now
	}
	if !r.arrived() {
		return false
	}
	if fresh {
		g.pokeLocal()
	}
	if r.leader {
		// Everyone has it mapped: the name is no longer needed, and a
		// crash from here on leaves nothing in /dev/shm.
		_ = os.Remove(shmPath(r.name))
	}
	return true
}

func shmPath(name string) string { return shm.Dir() + "/" + name }

// othersElsewhere publishes that this rank waits on cpu (its CPU word,
// stored only when it changed) and reports whether every local rank that
// has not yet arrived at the current phase last said it waits on another
// CPU: a yield of this rank's CPU cannot run any of them then (they are
// not on it) and only hands the CPU to another program. False when a
// missing rank's CPU is not known or is cpu.
func (r *region) othersElsewhere(cpu int) bool {
	mine := uint64(cpu) + 1
	if w := r.u64(regionHdr + r.me*ctrlLine + cpuOff); w.Load() != mine {
		w.Store(mine)
	}
	ph := r.ph
	for i := 0; i < r.n; i++ {
		if i == r.me || r.arriveWord(i, ph).Load() >= ph {
			continue
		}
		if c := r.u64(regionHdr + i*ctrlLine + cpuOff).Load(); c == 0 || c == mine {
			return false
		}
	}
	return true
}
