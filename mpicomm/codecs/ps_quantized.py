"""ps (colocated servers) with a quantising codec: push encoded, sum in float32, pull encoded.

W workers = p ranks, S colocated servers on the parameter-server reducer's
ranks; server s owns key range s (``chunk_bounds(n, S)``, n_s values).

0. (op="mean") every worker scales its input by 1/W.
1. Push: each worker encodes range s and sends it to server s (its own range,
   on a server rank, stays local and unrounded).
2. Server s decodes every push and adds it into its own range in float32 —
   the compressed pieces are gathered and summed locally: no re-quantisation
   of partial sums.
3. Server s encodes the sum once, decodes it back into place (so it holds what
   the workers will get), and sends the encoded range to every other worker.
4. Pull: each worker decodes every server's range into place.

Cost (b bytes per value on the wire; n_s = n/S):

    T ≈ 2(W-1)·α + 2·(W-1)·n_s·b·β + (W-1)·n_s·(γ + ε) + 2·n·ε
    bytes sent per server rank ≈ (W-1)·n_s·b + (n - n_s)·b;  other workers n·b

Error: each input is rounded once (push), the sum once (pull):

    fp16: |err| ≤ 2^-11·(Σ_r|x_r| + |Σ_r x_r|)·(1 + 2^-11)
    int8: |err| ≤ Σ_r scale(x_r)/2 + scale(sum)/2

Dedicated servers (``dedicated=True``) are refused: their serve() loop speaks
float32 only (see ``wrapper.SUPPORT``).
"""

from __future__ import annotations

import numpy as np

from mpicomm.reducers.ring import chunk_bounds

__all__ = ["QuantizedPS"]

_TAG_PUSH, _TAG_PULL = 71, 72


class _Plan:
    def __init__(self, n: int, servers: list[int], shard: int | None, others: int, enc) -> None:
        self.bounds = b = chunk_bounds(n, len(servers))
        self.sizes = [enc.wire_bytes(b[s + 1] - b[s]) for s in range(len(servers))]
        self.out = [np.empty(nb, dtype=np.uint8) for nb in self.sizes]  # push / pull, per server
        mine = self.sizes[shard] if shard is not None else 0
        self.rows = np.empty((max(others, 1), mine), dtype=np.uint8)  # pushes to this server


class QuantizedPS:
    """The colocated parameter server of ``inner`` with codec ``enc``."""

    def __init__(self, inner, enc) -> None:
        self.p2p, self.rank, self.enc = inner.p2p, inner.rank, enc
        self.servers, self.shard, self.others = inner.servers, inner.shard, inner._others
        self._plans: dict[int, _Plan] = {}

    def __call__(self, flat: np.ndarray, scale: float | None) -> None:
        p2p, enc, me, sh = self.p2p, self.enc, self.rank, self.shard
        if scale is not None:
            flat *= scale
        plan = self._plans.get(flat.size)
        if plan is None:
            plan = self._plans[flat.size] = _Plan(flat.size, self.servers, sh, len(self.others),
                                                  enc)
        b = plan.bounds
        # 1. push encoded ranges; a server receives every other worker's push
        reqs = []
        if sh is not None:
            reqs = [p2p.irecv(plan.rows[i], w, _TAG_PUSH) for i, w in enumerate(self.others)]
        for s, server in enumerate(self.servers):
            if server != me:
                enc.encode(flat[b[s] : b[s + 1]], plan.out[s])
                reqs.append(p2p.isend(plan.out[s], server, _TAG_PUSH))
        p2p.waitall(reqs)
        # 2-3. server: decode-add every push, encode the sum once, decode it back
        pulls = []
        if sh is not None:
            own = flat[b[sh] : b[sh + 1]]
            for i in range(len(self.others)):
                enc.decode_add(plan.rows[i], own)
            enc.encode(own, plan.out[sh])
            enc.decode(plan.out[sh], own)
            pulls = [p2p.isend(plan.out[sh], w, _TAG_PULL) for w in self.others]
        # 4. pull every other server's range
        for s, server in enumerate(self.servers):
            if server != me:
                pulls.append(p2p.irecv(plan.out[s], server, _TAG_PULL))
        p2p.waitall(pulls)
        for s, server in enumerate(self.servers):
            if server != me:
                enc.decode(plan.out[s], flat[b[s] : b[s + 1]])
