// Package coll runs gofi's collectives (fi_collective(3)): joining a group
// of endpoints named by an AV set, and barrier, broadcast, allreduce,
// allgather, reduce-scatter, alltoall, reduce, scatter and gather over it,
// with the reduction kernels of package dtype/kernel.
//
// It sits beside the engine: Attach installs an Endpoint as the engine
// endpoint's collective sink (engine.CollSink). Collective messages travel
// as transport.KindColl, which the engine hands to the sink rather than to
// its matchers; the sink advances its state machines from the endpoint's
// progress path and completes operations on the transmit CQ with
// FI_COLLECTIVE. Nothing runs on a goroutine of its own.
//
// # Operations and plans
//
// A group runs its operations one at a time, in posting order, every rank
// the same sequence. An operation compiles to a plan (plan.go): rounds of
// transfers (sends, receives, shared-memory steps) followed by local
// actions (reductions, copies). Messages carry the group id, the
// operation's sequence number and a check word (operation, datatype,
// reduction, root, count), so a rank that called a different collective
// is detected where its messages arrive, and the group fails. Plans are
// built into buffers the group keeps: after the first operation of a size
// nothing is allocated.
//
// # Algorithms and when each is chosen
//
// Within one node (every member's Config.NodeKey equal and not 0: the shm
// provider): the join maps a shared-memory region that all members share
// (region.go), and every collective runs over it in phases with no
// point-to-point message at all: stores into slots, an arrival counter
// per rank, reductions of parallel slices; see shm.go for each
// collective's phases, ShmFoldMax for the size where allreduce switches
// from every rank folding everything to parallel slices, and
// ShmBudgetEnv for the region's size. A barrier, and an allreduce or
// reduce of at most 48 bytes (not FLOAT16/BFLOAT16), posted when nothing
// else is queued, take the lean path of lean.go: the same one phase,
// without the generic step machinery, operands in the control lines, the
// first arriver without a fence (sleepers name their phase in a sleep
// word; see leanDone).
//
// Over several nodes with more than one member on some (shm+tcp): the
// hierarchical plans of hier.go (node-local steps over each node's region,
// one representative per node point to point) for barrier, broadcast,
// allreduce, reduce, allgather, reduce-scatter, scatter, gather, and
// alltoall when each node holds consecutive ranks (else point to point).
//
// Point to point (members that do not share a node, or a provider without
// shared memory), every group size, powers of two or not:
//
//   - barrier: dissemination, ceil(log2 n) rounds of zero-byte messages.
//   - broadcast: binomial tree from the root.
//   - allreduce: recursive doubling (ranks beyond the largest power of two
//     fold into a partner first) below AllreduceRingMin bytes; from it,
//     ring reduce-scatter then ring allgather (2(n-1) rounds, each moving
//     1/n of the buffer).
//   - reduce: binomial tree towards the root.
//   - reduce-scatter: recursive doubling on the whole input below
//     ReduceScatterRingMin, the ring reduce-scatter from it.
//   - allgather: ring. alltoall, scatter, gather: every transfer in one
//     round (pairwise exchanges for alltoall, the root sending or
//     receiving one block per rank).
//
// # Reduction order (floating point)
//
// Every element of a result is computed once, or identically by the ranks
// that compute it, so all ranks see the same bits:
//
//   - recursive doubling: a balanced tree over the ranks in increasing
//     order (each exchange combines the lower block's partial, as the
//     left operand, with the higher block's).
//   - ring: segment i is accumulated along the ring starting after the
//     rank that ends with it: ((x[i+1] op x[i+2]) op ...) op x[i]
//     (ranks modulo n), computed by one rank and then copied.
//   - binomial reduce: a balanced tree over the ranks starting at the
//     root (root, root+1, ..., root-1).
//   - shared memory: a left fold over the ranks in increasing order,
//     ((x0 op x1) op x2) ... op x(n-1), for every size.
//   - hierarchical: the left fold within each node, then the
//     point-to-point algorithm's tree (or ring, for reduce-scatter) over
//     the nodes' partials.
//
// FLOAT16 and BFLOAT16 are widened to float32 (exactly) before any
// reduction, every partial travels and is combined in float32, and the
// result is rounded to the 16-bit type once per element.
//
// # Imports
//
// coll imports engine, transport (and its optional Poker, to wake ranks
// asleep in Sread), dtype, dtype/kernel and shm (segments for the
// node-local regions), internal/getcpu (the CPU word of region.go) and
// golang.org/x/sys/unix; nothing in gofi but the root package imports coll.
// It carries no compatibility promise: only the root package fi is
// public.
package coll
