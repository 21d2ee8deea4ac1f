"""multiring: the ring over K channels — K rotated rings, each reducing 1/K of the buffer.

``make_reducer("ring", channels=K)`` with K > 1 builds this (K = 1 is ``ring``).
NCCL runs its ring on several channels so that every network interface of a
node carries a ring crossing; one ring leaves each node through one rank only.

The buffer of n bytes is cut into K slices (``np.array_split`` boundaries);
channel c reduces slice c with the ring algorithm of ``ring`` over its own ring
order, and the K channels take their steps together.

1. Ring orders (``costmodel.algos.channel_rings``, from the node map): ranks
   grouped by node; channel c visits the nodes in turn and starts inside node j
   (L_j ranks) at local rank c mod L_j. So channel c leaves every node from its
   local rank (c-1) mod L and enters the next at local rank c mod L: with nodes
   of L consecutive ranks and K <= L, the K channels cross every node boundary
   through K different rank pairs, and each rank sends across a boundary on at
   most ⌈K/L⌉ channels. Example, 2 nodes of 4 ranks, K = 4:
   c=0: 0 1 2 3 | 4 5 6 7, c=1: 1 2 3 0 | 5 6 7 4, c=2: 2 3 0 1 | 6 7 4 5, ...
   — boundary pairs 3→4, 0→5, 1→6, 2→7. On one node the K rings are the same
   ring with different segment owners.
2. Reduce-scatter, p-1 steps. At step k every channel c does ring step k on its
   slice: send segment (q_c-1-k) mod p to its right neighbour, receive segment
   (q_c-2-k) mod p from its left (q_c: this rank's position in ring c). All K
   receives (into K preallocated scratch pieces) and K sends of the step are
   posted with ``p2p.irecv``/``p2p.isend`` and completed by one ``waitall``, so
   the channels' messages travel at the same time; then each received piece is
   added into its segment. Segments over ``PIECE_BYTES`` move in pieces, as in
   ``ring`` (the count from the largest segment of any channel, so every rank
   agrees).
3. (op="mean") each rank scales the segment it owns in each channel (q_c).
4. Allgather, p-1 steps: channel c sends segment (q_c-k) mod p right and
   receives (q_c-1-k) mod p from the left straight into the buffer, all K
   channels per ``waitall``. Each sum is made once, by its owner, and copied:
   every rank ends bit-identical.

Cost (per channel the ring on n/K bytes, the K channels concurrent; s = n/(K·p)):

    T_multiring = 2(p-1)·S + (p-1)/p·n·γ,
    S = max over ranks and link classes of (messages of that class per step)·(α + s·β)

A rank sends K messages of s bytes per step. On one link class S = K·(α + s·β),
which is the ring's 2(p-1)/p·n·β with K·α per step instead of α. Across nodes
(β_inter ≫ β_intra) a plain ring's exit rank sends n/p per step across the
boundary; with K channels each exit rank sends ⌈K/L⌉·s, so the inter-node term
shrinks about K times (K <= L) until the intra-node term K·(α_intra + s·β_intra)
dominates. Bytes per rank: 2(p-1)/p·n, as the ring. ``costmodel.cluster_predict.cluster_time``
evaluates S from the ring orders.
"""

from __future__ import annotations

import numpy as np

from mpicomm.core import flops, tags
from mpicomm.core.backend import array_module, sync_device
from mpicomm.costmodel.algos import channel_rings
from mpicomm.reducers.base import Reducer
from mpicomm.reducers.ring import chunk_bounds, piece_items

__all__ = ["MultiRingReducer"]

_TAG = tags.MULTIRING  # channel c: reduce-scatter on _TAG + 2c, allgather on _TAG + 2c + 1


class _Plan:
    """Per (length, dtype, array type): every channel's segment offsets and scratch."""

    __slots__ = ("bounds", "scratch", "largest", "piece")

    def __init__(self, bounds, scratch, largest, piece) -> None:
        self.bounds, self.scratch, self.largest, self.piece = bounds, scratch, largest, piece


class MultiRingReducer(Reducer):
    """Ring AllReduce over ``options.channels`` rotated rings (see module docstring)."""

    name = "ring"

    def __init__(self, comm, options, **kw) -> None:
        super().__init__(comm, options, **kw)
        self.channels = options.channels
        rings = channel_rings(self.p2p.node_of, self.channels)
        self._pos = [ring.index(self.rank) for ring in rings]
        p = self.size
        self._right = [ring[(q + 1) % p] for ring, q in zip(rings, self._pos, strict=True)]
        self._left = [ring[(q - 1) % p] for ring, q in zip(rings, self._pos, strict=True)]
        self._plans: dict[tuple, _Plan] = {}
        self._store: dict = {}  # array module name -> K pieces of scratch

    def crossing_ranks(self) -> int:
        """Each of the K rings crosses a node boundary at a different rank: K at once."""
        return self.options.channels

    def describe(self) -> dict:
        d = super().describe()
        d["channels"] = self.channels
        return d

    def _plan(self, flat) -> _Plan:
        key = (flat.size, flat.dtype.char, type(flat))
        plan = self._plans.get(key)
        if plan is None:
            slices = chunk_bounds(flat.size, self.channels)
            bounds = [[lo + b for b in chunk_bounds(hi - lo, self.size)]
                      for lo, hi in zip(slices[:-1], slices[1:], strict=True)]
            largest = max(b[i + 1] - b[i] for b in bounds for i in range(self.size))
            piece = piece_items(flat.itemsize)
            need = max(min(largest, piece), 1) * flat.itemsize
            need += -need % 8  # each channel's piece starts 8-byte aligned
            xp = array_module(flat)
            raw = self._store.get(xp.__name__)
            if raw is None or raw.nbytes < self.channels * need:  # grows to K pieces at most
                raw = self._store[xp.__name__] = xp.empty(self.channels * need, dtype=np.uint8)
                self._plans.clear()  # older plans view the old buffer: drop them
            width = raw.nbytes // self.channels
            scratch = [raw[c * width:(c + 1) * width].view(flat.dtype)
                       for c in range(self.channels)]
            plan = self._plans[key] = _Plan(bounds, scratch, largest, piece)
        return plan

    def _allreduce(self, flat, scale) -> None:
        if self.size == 1 or flat.size == 0:
            if scale is not None:
                flat *= scale
                flops.scale(flat.size)
            return
        plan = self._plan(flat)
        on_device = not isinstance(flat, np.ndarray)
        for k in range(self.size - 1):  # 2. reduce-scatter
            for lo in range(0, max(plan.largest, 1), plan.piece):
                self._reduce_step(flat, plan, k, lo, lo + plan.piece, on_device)
        if scale is not None:  # 3. mean: each owner scales its segment once
            for c, q in enumerate(self._pos):
                own = flat[plan.bounds[c][q]:plan.bounds[c][q + 1]]
                own *= scale
                flops.scale(own.size)
            if on_device:
                sync_device(flat)
        for k in range(self.size - 1):  # 4. allgather
            self._gather_step(flat, plan, k)

    def _reduce_step(self, flat, plan: _Plan, k: int, lo: int, hi: int, on_device: bool) -> None:
        """Reduce-scatter step k, items [lo, hi) of each segment, all channels at once."""
        p, p2p = self.size, self.p2p
        reqs, adds = [], []
        for c, q in enumerate(self._pos):
            b = plan.bounds[c]
            s, r = (q - 1 - k) % p, (q - 2 - k) % p
            send = flat[b[s]:b[s + 1]][lo:hi]
            mine = flat[b[r]:b[r + 1]][lo:hi]
            got = plan.scratch[c][:mine.size]
            reqs.append(p2p.irecv(got, self._left[c], _TAG + 2 * c))
            reqs.append(p2p.isend(send, self._right[c], _TAG + 2 * c))
            adds.append((mine, got))
        p2p.waitall(reqs)
        for mine, got in adds:
            np.add(mine, got, out=mine)
            flops.add(mine.size)
        if on_device:  # the sums are sent next step and the scratch is reused
            sync_device(flat)

    def _gather_step(self, flat, plan: _Plan, k: int) -> None:
        """Allgather step k, all channels at once, received straight into ``flat``."""
        p, p2p = self.size, self.p2p
        reqs = []
        for c, q in enumerate(self._pos):
            b = plan.bounds[c]
            s, r = (q - k) % p, (q - 1 - k) % p
            reqs.append(p2p.irecv(flat[b[r]:b[r + 1]], self._left[c], _TAG + 2 * c + 1))
            reqs.append(p2p.isend(flat[b[s]:b[s + 1]], self._right[c], _TAG + 2 * c + 1))
        p2p.waitall(reqs)
