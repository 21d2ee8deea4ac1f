"""hierarchical (variant reduce_scatter) with a quantising codec: re-quantise per hop.

m nodes of L ranks; the node layout and segment plan are the hierarchical
reducer's own (``reducers.hierarchical._Plan``: uneven nodes included).

0. (op="mean") scale the input by 1/p.
1. Intra-node quantised ring reduce-scatter (``ring_quantized.q_reduce_scatter``):
   local rank l holds its node's sum of segment l.
2. For each virtual segment it owns: quantised ring reduce-scatter + allgather
   among the m ranks (one per node) that own it, on n/L values.
3. Intra-node quantised allgather: segment l is encoded once more, one piece
   per virtual segment (so that nodes of different sizes round the same values
   alike and every rank ends bitwise equal), and travels encoded; every rank
   decodes.

Cost (b bytes per value on the wire, as in ring_quantized):

    T = 2(L-1)·α_intra + 2·(L-1)/L·n·b·β_intra
      + 2(m-1)·α_inter + 2·(m-1)/m·(n/L)·b·β_inter + O(n/L·(γ + ε))
    bytes sent per rank = 2·(L-1)/L·n·b + 2·(m-1)/m·(n/L)·b

Error: a value is rounded at most (L-1) + (m-1) + 2 ≤ p + 1 times, each time
on a partial sum of at most all p inputs:

    fp16: |err| ≤ (p+1)·2^-11·Σ_r|x_r|;   int8: |err| ≤ ((p+1)/2)·max scale
"""

from __future__ import annotations

import numpy as np

from mpicomm.codecs.ring_quantized import WireBuffers, q_allgather, q_reduce_scatter

__all__ = ["QuantizedHierarchical"]

_TAG_RS, _TAG_AG, _TAG_INTER = 41, 42, 1000


class QuantizedHierarchical:
    """The 2-D hierarchical allreduce of ``inner`` with codec ``enc``."""

    def __init__(self, inner, enc) -> None:
        self.inner, self.p2p, self.enc = inner, inner.p2p, enc
        self.wire = WireBuffers()

    def __call__(self, flat: np.ndarray, scale: float | None) -> None:
        if scale is not None:
            flat *= scale
        plan = self.inner._plan(flat)
        topo, p2p, enc, wire = self.inner.topology, self.p2p, self.enc, self.wire
        largest = max(np.diff(plan.node_bounds).max(initial=0),
                      max((max(np.diff(r[4]), default=0) for r in plan.rings), default=0))
        wire.reserve(enc.wire_bytes(int(largest)) + 4 * len(plan.vbounds))
        node, l = topo.nodes[topo.node_id], topo.local_rank  # noqa: E741
        # 1. intra-node reduce-scatter
        q_reduce_scatter(p2p, node, l, flat, plan.node_bounds, enc, wire, _TAG_RS)
        # 2. inter-node allreduce of each owned virtual segment
        for v, lo, hi, members, sub in plan.rings:
            seg = flat[lo:hi]
            q_reduce_scatter(p2p, members, topo.node_id, seg, sub, enc, wire, _TAG_INTER + v)
            q_allgather(p2p, members, topo.node_id, seg, sub, enc, wire, _TAG_INTER + v)
        # 3. intra-node allgather, encoded per virtual segment
        q_allgather(p2p, node, l, flat, plan.node_bounds, enc, wire, _TAG_AG,
                    parts=self._parts(plan, len(node)))

    def _parts(self, plan, local_size: int) -> list[list[tuple[int, int]]]:
        """Each local rank's owned virtual segments, as (lo, hi) ranges (cached on the plan)."""
        parts = getattr(plan, "codec_parts", None)
        if parts is None:
            vb, nb = plan.vbounds, plan.node_bounds
            parts = [[(vb[v], vb[v + 1]) for v in range(len(vb) - 1)
                      if nb[i] <= vb[v] < nb[i + 1]] for i in range(local_size)]
            plan.codec_parts = parts
        return parts
