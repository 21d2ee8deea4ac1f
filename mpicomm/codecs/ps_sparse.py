"""ps (colocated servers) with top-k: workers push sparse per range, servers pull back the sum.

W workers = p ranks, S colocated servers; range s has n_s values and each
worker selects k_s = ceil(RATIO·n_s) pairs in it (top-k per range, so every
push has a size the server knows; error feedback over the whole buffer).

1. Encode: per range s, acc = x + residual; the k_s largest |acc| of the range
   become the pairs pushed to server s (``topk.TopKCodec``); the rest stays in
   the residual (``:noef``: dropped).
2. Server s zeroes its range and adds the W pushes (its own locally) in worker
   order; op="mean" scales by 1/W.
3. Pull the sum, sparse: the server sends its count c of non-zeros (8 bytes),
   then the c pairs (indices from ``np.flatnonzero``), c ≤ W·k_s.
4. Each worker zeroes every other range and scatters the pulled pairs into it.

Cost (P = 4 + w bytes a pair):

    T ≈ 4(W-1)·α + (W-1)·k_s·P·β (push) + (W-1)·c·P·β (pull) + O(n)
    bytes sent per worker ≈ Σ_s k_s·P + 8·S   ≈ RATIO·n·P
    per server, in addition: (W-1)·(8 + c·P)

Error: the sum of what was pushed is exact up to float32 summation.
"""

from __future__ import annotations

import numpy as np

from mpicomm.codecs.sparse_allgather import SlotBuffer
from mpicomm.reducers.ring import chunk_bounds

__all__ = ["SparsePS"]

_TAG_PUSH, _TAG_COUNT, _TAG_PULL = 81, 82, 83


class SparsePS:
    """Top-k push / sparse pull over the colocated servers of ``inner``."""

    def __init__(self, inner, codec) -> None:
        self.p2p, self.rank, self.codec = inner.p2p, inner.rank, codec
        self.servers, self.shard, self.others = inner.servers, inner.shard, inner._others
        self.pushes, self.rows, self.pulls = SlotBuffer(), SlotBuffer(), SlotBuffer()
        self.counts = np.zeros(len(self.servers), dtype=np.int64)

    def __call__(self, flat: np.ndarray, scale: float | None) -> None:
        p2p, codec, me, sh, S = self.p2p, self.codec, self.rank, self.shard, len(self.servers)
        b = chunk_bounds(flat.size, S)
        ks = [codec.k_of(b[s + 1] - b[s]) for s in range(S)]
        nbs = [codec.pair_bytes(k, flat.itemsize) for k in ks]
        slot = max(nbs)
        residual = codec.residual(flat)
        # 1. encode each range's top-k (indices relative to the range) and push
        push = self.pushes.reserve(S, slot)
        for s in range(S):
            codec.encode(flat[b[s] : b[s + 1]], push[s * slot :], residual[b[s] : b[s + 1]])
        W = len(self.others) + 1
        rows = self.rows.reserve(W, slot)
        reqs = []
        if sh is not None:
            reqs = [p2p.irecv(rows[i * slot : i * slot + nbs[sh]], w, _TAG_PUSH)
                    for i, w in enumerate(self.others)]
            rows[(W - 1) * slot : (W - 1) * slot + nbs[sh]] = push[sh * slot : sh * slot + nbs[sh]]
        reqs += [p2p.isend(push[s * slot : s * slot + nbs[s]], server, _TAG_PUSH)
                 for s, server in enumerate(self.servers) if server != me]
        p2p.waitall(reqs)
        # 2. server: sum the pushes into its range; 3. send count and pairs back
        cap = W * slot
        pulls = self.pulls.reserve(S, cap)
        sends = []
        if sh is not None:
            own = flat[b[sh] : b[sh + 1]]
            own.fill(0)
            for i in range(W):
                codec.decode_add(rows[i * slot :], ks[sh], own)
            if scale is not None:
                own *= scale
            nz = np.flatnonzero(own).astype(np.int32)
            c = self.counts[sh] = nz.size
            msg = pulls[sh * cap :]
            idx, val = codec.split(msg, c, flat.dtype)
            idx[:] = nz
            np.take(own, nz, out=val)
            sends = [p2p.isend(self.counts[sh : sh + 1], w, _TAG_COUNT) for w in self.others]
            sends += [p2p.isend(msg[: codec.pair_bytes(c, flat.itemsize)], w, _TAG_PULL)
                      for w in self.others]
        # 4. pull: counts, then pairs, from every other server
        others = [(s, server) for s, server in enumerate(self.servers) if server != me]
        p2p.waitall([p2p.irecv(self.counts[s : s + 1], server, _TAG_COUNT)
                     for s, server in others])
        got = [p2p.irecv(pulls[s * cap : s * cap + codec.pair_bytes(int(self.counts[s]),
                                                                     flat.itemsize)],
                         server, _TAG_PULL) for s, server in others]
        p2p.waitall(got + sends)
        for s, _ in others:
            part = flat[b[s] : b[s + 1]]
            part.fill(0)
            codec.decode_add(pulls[s * cap :], int(self.counts[s]), part)
