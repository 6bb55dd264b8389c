package shm

import (
	"runtime/debug"

	"github.com/gofi-dev/fi/dtype"
	"github.com/gofi-dev/fi/dtype/kernel"
	"github.com/gofi-dev/fi/rma"
	"github.com/gofi-dev/fi/transport"
)

// Atomics on AllocMR memory, executed by the initiator.
//
// When every range of an atomic lies in memory the target got from
// AllocMR, this process maps it (the region's segment) and runs the
// element kernels on the mapping itself: the processor's atomic
// instructions on the shared bytes, the same ones the target's executor
// and the target's own sync/atomic use on them (package dtype/kernel), so
// the operation is atomic with respect to every other executor without
// the target running anything. 16-byte types are not done here: their
// kernels are atomic only under the target process's striped lock
// (rma.Table.Lock16), so they go through the channel to its executor.
// Nothing is done here while the peer's channel holds an operation, so
// operations to one peer still execute in order.

// atomicDirectOK reports whether an atomic of datatype dt may take the
// direct path (the ranges must be allocated too).
func atomicDirectOK(dt uint8) bool { return !kernel.Locked(dtype.Type(dt)) }

// rmaAtomicDirect executes req on the mapped memory of its n held ranges
// (t.rma.holds, t.rma.offs), checking first, for every range, what the
// target's executor would: the datatype and operation for the kind, whole
// elements, the count limit and each element's alignment. A refused
// operation touches nothing.
func (t *Transport) rmaAtomicDirect(rp *rmaPeer, req *transport.RMAReq, n int, total uint64) transport.Code {
	st := &t.rma
	k := rma.Kind(req.Kind)
	if c := rma.CheckAtomic(k, req.Datatype, req.Op, total, func(i int) uint64 { return req.Remote[i].Len }, n); c != rma.OK {
		return transport.Code(c)
	}
	dt, op := dtype.Type(req.Datatype), dtype.Op(req.Op)
	align := uint64(kernel.Align(dt))
	for i := 0; i < n; i++ {
		mem, c := rp.tbl.mapAlloc(&st.holds[i])
		if c != transport.OK {
			return c
		}
		v := req.Remote[i]
		st.amem[i] = mem[st.offs[i] : st.offs[i]+v.Len]
		if rma.Addr(st.amem[i])%align != 0 {
			return transport.Code(rma.EInval)
		}
	}
	var src, cmp, res []byte
	var err error
	read := k == rma.KindFetch && req.Op == opAtomicRead
	if total == uint64(dt.Size()) && (read || one(req.Local, total)) && (k != rma.KindCompare || one(req.Compare, total)) &&
		(k == rma.KindAtomic || one(req.Result, total)) {
		// One element (the common counter or lock): the kernel reads the
		// caller's operands and writes its result buffer, no copies (the
		// element's old value is written after the operation, as the
		// copy through ares did).
		if !read {
			src = req.Local[0][:total]
		}
		if k == rma.KindCompare {
			cmp = req.Compare[0][:total]
		}
		if k != rma.KindAtomic {
			res = req.Result[0][:total]
		}
		err = execGuarded(dt, op, st.amem[0], src, cmp, res)
		st.amem[0] = nil
	} else {
		if !read {
			src = st.abuf[:total]
			gather(src, req.Local, 0)
		}
		if k == rma.KindCompare {
			cmp = st.abuf[total : 2*total]
			gather(cmp, req.Compare, 0)
		}
		if k != rma.KindAtomic {
			res = st.ares[:total]
		}
		err = Guard(func() {
			var pos uint64
			for i := 0; i < n; i++ {
				m := st.amem[i]
				l := uint64(len(m))
				var s, c, r []byte
				if src != nil {
					s = src[pos : pos+l]
				}
				if cmp != nil {
					c = cmp[pos : pos+l]
				}
				if res != nil {
					r = res[pos : pos+l]
				}
				kernel.Exec(dt, op, m, s, c, r)
				pos += l
			}
		})
		clear(st.amem[:n])
		if err == nil && res != nil {
			scatter(req.Result, 0, res)
		}
	}
	if err != nil {
		return transport.EIO
	}
	w, r := rma.Counts(k, req.Op)
	tb := rp.tbl.t
	for i := 0; i < n; i++ {
		if w {
			tb.Count(st.holds[i].CntrW)
		}
		if r {
			tb.Count(st.holds[i].CntrR)
		}
	}
	if w {
		tb.Count(rp.svc.cntrW)
	}
	if r {
		tb.Count(rp.svc.cntrR)
	}
	return transport.OK
}

// one reports whether iov is a single buffer of at least n bytes.
func one(iov [][]byte, n uint64) bool { return len(iov) == 1 && uint64(len(iov[0])) >= n }

// execGuarded is kernel.Exec under Guard's panic-on-fault, written out
// (no closure to build and call: about 100 instructions less per
// operation).
func execGuarded(dt dtype.Type, op dtype.Op, mem, src, cmp, res []byte) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = faultError(r)
		}
	}()
	kernel.Exec(dt, op, mem, src, cmp, res)
	return nil
}
