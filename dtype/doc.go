// Package dtype names what gofi computes on: the element datatypes, the
// atomic and reduction operations and the collective operations, with
// libfabric's numbers (enum fi_datatype, enum fi_op and enum
// fi_collective_op in rdma/fi_atomic.h and rdma/fi_collective.h, libfabric
// 2.x numbering, which extends 1.17's without changing it), the size of one
// element and fi_tostr's spelling.
//
// It owns the numbering only; the kernels that compute (atomics on target
// memory, reductions for collectives) live with the code that uses them and
// import this package. The root package fi re-exports the values as
// fi.Datatype, fi.AtomicOp and fi.CollectiveOp by type conversion, so the
// numbers here are the public ones and never change. Values read from the
// wire are untrusted: Valid tells whether a number names a known value.
//
// It imports nothing from gofi and carries no compatibility promise of its
// own: only the root package fi is public.
package dtype
