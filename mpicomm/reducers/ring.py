"""ring: bandwidth-optimal AllReduce as a reduce-scatter followed by an allgather.

p ranks sit on a ring; rank i sends to i+1 and receives from i-1. The buffer of
n bytes is cut into p segments with ``np.array_split`` boundaries (any n works,
also n < p: some segments are empty).

1. Reduce-scatter, p-1 steps. At step k, rank i sends segment (i-1-k) mod p to
   the right and receives segment (i-2-k) mod p from the left into a scratch
   buffer, then adds it into its own copy of that segment. After p-1 steps rank
   i holds the full sum of segment i.
2. (op="mean") rank i scales segment i by 1/p: 1/p of the buffer, once.
3. Allgather, p-1 steps. At step k, rank i sends segment (i-k) mod p to the
   right and receives segment (i-1-k) mod p from the left, straight into the
   buffer. After p-1 steps every rank holds every reduced segment.

Cost (α latency, β seconds/byte, γ seconds/byte to reduce):

    T_ring = 2(p-1)·α + 2·(p-1)/p·n·β + (p-1)/p·n·γ

Each rank sends and receives 2(p-1)/p·n bytes: independent of p, which is why
the ring scales where a single parameter server does not.

The two phases are also exported as functions over an explicit list of ranks
(``ring_reduce_scatter``, ``ring_allgather``), so ``hierarchical`` reuses them
for its intra-node and inter-node rings.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from mpicomm.backend import array_module, sync_device
from mpicomm.reducers.base import Reducer

__all__ = ["RingReducer", "chunk_bounds", "ring_reduce_scatter", "ring_allgather"]


def chunk_bounds(n: int, parts: int) -> list[int]:
    """Return ``parts + 1`` offsets cutting ``n`` items like ``np.array_split``.

    The first ``n % parts`` segments get one extra item.
    """
    base, extra = divmod(n, parts)
    bounds = [0]
    for i in range(parts):
        bounds.append(bounds[-1] + base + (1 if i < extra else 0))
    return bounds


def ring_reduce_scatter(
    comm: MPI.Comm,
    ring: list[int],
    pos: int,
    flat,
    bounds: list[int],
    scratch,
    tag: int = 0,
) -> int:
    """Reduce-scatter ``flat`` over the ranks ``ring`` (this rank is ``ring[pos]``).

    Segment j is ``flat[bounds[j]:bounds[j+1]]``. On return this rank holds the
    sum over the ring of segment ``pos``; other segments hold partial sums.
    ``scratch`` must hold the largest segment. Returns bytes sent (= received
    over the ring as a whole; per rank they differ only on uneven segments).
    """
    q = len(ring)
    if q == 1:
        return 0
    right, left = ring[(pos + 1) % q], ring[(pos - 1) % q]
    on_device = not isinstance(flat, np.ndarray)
    sent = 0
    for k in range(q - 1):
        s = (pos - 1 - k) % q
        r = (pos - 2 - k) % q
        send = flat[bounds[s] : bounds[s + 1]]
        mine = flat[bounds[r] : bounds[r + 1]]
        got = scratch[: mine.size]
        comm.Sendrecv(send, right, tag, got, left, tag)
        np.add(mine, got, out=mine)
        if on_device:  # the next step sends this segment: the kernel must finish
            sync_device(mine)
        sent += send.nbytes
    return sent


def ring_allgather(
    comm: MPI.Comm, ring: list[int], pos: int, flat, bounds: list[int], tag: int = 0
) -> int:
    """Allgather segments over ``ring``: this rank contributes segment ``pos``.

    Receives land directly in ``flat``. Returns bytes sent by this rank.
    """
    q = len(ring)
    if q == 1:
        return 0
    right, left = ring[(pos + 1) % q], ring[(pos - 1) % q]
    sent = 0
    for k in range(q - 1):
        s = (pos - k) % q
        r = (pos - 1 - k) % q
        send = flat[bounds[s] : bounds[s + 1]]
        comm.Sendrecv(send, right, tag, flat[bounds[r] : bounds[r + 1]], left, tag)
        sent += send.nbytes
    return sent


class RingReducer(Reducer):
    """Ring AllReduce (reduce-scatter + allgather) with mpi4py point-to-point calls.

    Per (length, dtype) it keeps the segment boundaries and one scratch buffer
    of the largest segment, reused on every call.
    """

    name = "ring"

    def __init__(self, comm, options) -> None:
        super().__init__(comm, options)
        self._ring = list(range(self.size))
        self._plans: dict[tuple, tuple[list[int], object, int]] = {}

    def _plan(self, flat):
        key = (flat.size, flat.dtype.char, type(flat))
        plan = self._plans.get(key)
        if plan is None:
            bounds = chunk_bounds(flat.size, self.size)
            largest = max(bounds[i + 1] - bounds[i] for i in range(self.size))
            scratch = array_module(flat).empty(max(largest, 1), dtype=flat.dtype)
            # received: every segment but the left neighbour's (reduce-scatter)
            # and every segment but its own (allgather)
            seg = [bounds[i + 1] - bounds[i] for i in range(self.size)]
            left = (self.rank - 1) % self.size
            recv = (2 * flat.size - seg[left] - seg[self.rank]) * flat.itemsize
            plan = self._plans[key] = (bounds, scratch, recv)
        return plan

    def _allreduce(self, flat, scale):
        if self.size == 1:
            if scale is not None:
                flat *= scale
            return 0, 0
        bounds, scratch, recv = self._plan(flat)
        sent = ring_reduce_scatter(self.comm, self._ring, self.rank, flat, bounds, scratch, tag=1)
        if scale is not None:
            own = flat[bounds[self.rank] : bounds[self.rank + 1]]
            own *= scale
            if not isinstance(flat, np.ndarray):
                sync_device(own)
        sent += ring_allgather(self.comm, self._ring, self.rank, flat, bounds, tag=2)
        return sent, recv
