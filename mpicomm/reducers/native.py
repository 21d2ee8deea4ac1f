"""native: MPI's own in-place AllReduce — the baseline every strategy is measured against.

Algorithm: ``comm.Allreduce(MPI.IN_PLACE, buf, MPI.SUM)``; the MPI library picks
the algorithm (MPICH: recursive doubling for small messages, Rabenseifner's
reduce-scatter + allgather for large ones). The in-place form is used because
it skips the library's copy of the send buffer (16 MiB: 2.0 ms vs 3.5 ms with
two buffers on MPICH 5.0.2 here).

Cost: whatever MPI picks; at best the bandwidth-optimal
2(p-1)α·(or lg p·α) + 2·(p-1)/p·nβ + (p-1)/p·nγ.
Bytes counted in ``stats``: that lower bound, 2(p-1)/p·n each way, since MPI
does not report what it actually moved; the inter-node part as a ring's (to the
right neighbour, from the left).

Emulated links: impossible — MPI's collective never passes through the
transport. ``describe()`` says ``emulated: false`` even when ``inter_link`` is
set, so a table can mark it instead of comparing it silently with emulated runs.
Under the virtual clock the links apply: the transport charges the call as MPICH's
algorithm on the modelled cluster (``p2p.virtual``, ``collective``).
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from mpicomm.core import flops
from mpicomm.reducers.base import Reducer


class NativeReducer(Reducer):
    """In-place ``MPI_Allreduce``."""

    name = "native"
    can_emulate = False
    why_not = "MPI's Allreduce has no fp16, int8 or sparse sum"

    def __init__(self, comm, options, **kw) -> None:
        super().__init__(comm, options, **kw)
        p2p, p, me = self.p2p, self.size, self.rank
        self._inter = (p2p.remote[(me + 1) % p], p2p.remote[(me - 1) % p])
        self._crosses = any(p2p.remote)

    def _allreduce(self, flat, scale):
        p = self.size
        comm = self.comm  # through the transport: the virtual clock charges MPICH's algorithm
        self.p2p.collective("allreduce", flat.nbytes, self._crosses, comm, comm.Allreduce,
                            MPI.IN_PLACE, flat, MPI.SUM)
        if scale is not None:
            flat *= scale
            flops.scale(flat.size)
        nbytes = (2 * (p - 1) * flat.nbytes) // p
        right, left = self._inter
        self.p2p.account(nbytes, nbytes, nbytes if right else 0, nbytes if left else 0)

    def _fast_plan(self, flat, scale):
        """The hot path: MPI's call itself when the transport is direct (not virtual), the
        scale as a 0-d array of the buffer's dtype (half the cost of a Python float's
        multiply, same rounding) and the counted bytes precomputed. A subclass that
        overrides ``_allreduce`` gets it (the base plan).

        The plan ``tests_buffer``: mpi4py takes the buffer as writable and contiguous
        before the call sends anything, and raises ``BufferError`` otherwise (the hot path
        then raises the checked path's error), so ``allreduce`` need not test its flags."""
        comm = self.p2p.direct()
        if comm is None or type(self)._allreduce is not NativeReducer._allreduce:
            return super()._fast_plan(flat, scale)
        allreduce, in_place, op_sum, mul = comm.Allreduce, MPI.IN_PLACE, MPI.SUM, np.multiply
        nbytes = (2 * (self.size - 1) * flat.nbytes) // self.size
        right, left = self._inter
        inter_sent, inter_recv = (nbytes if right else 0), (nbytes if left else 0)
        counts = self.stats
        factor = None if scale is None else np.array(scale, dtype=flat.dtype)

        def run(buf):
            allreduce(in_place, buf, op_sum)
            if factor is not None:
                mul(buf, factor, buf)  # out= by position: 50 ns less than by keyword
            counts.bytes_sent += nbytes
            counts.bytes_recv += nbytes
            if inter_sent or inter_recv:
                counts.inter_bytes_sent += inter_sent
                counts.inter_bytes_recv += inter_recv

        def run_sum(buf):  # within one node (no test per call): a sum,
            allreduce(in_place, buf, op_sum)
            counts.bytes_sent += nbytes
            counts.bytes_recv += nbytes

        def run_mean(buf):  # a mean (the gradient engine's buckets)
            allreduce(in_place, buf, op_sum)
            mul(buf, factor, buf)
            counts.bytes_sent += nbytes
            counts.bytes_recv += nbytes

        plan = run if inter_sent or inter_recv else run_sum if factor is None else run_mean
        plan.tests_buffer = True
        return plan

    def describe(self) -> dict:
        d = super().describe()
        if self.options.emulated and not self.p2p.virtual:  # the virtual clock charges them
            d["emulation_ignored"] = "native is MPI's own collective: links are not emulated"
        return d
