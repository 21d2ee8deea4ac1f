"""hierarchical with top-k: pairs gathered inside each node, between node leaders, then back.

m nodes (node j of L_j ranks), k pairs of (4 + w) bytes per rank; the message
buffer holds p slots in node order (node 0's ranks, node 1's, ...).

1. Encode (``topk.TopKCodec``, error feedback as in ``sparse_allgather``).
2. Intra-node ring allgather of the node's L_j slots: every rank of node j
   holds its node's block.
3. Node leaders: ring allgather of the m node blocks (block sizes L_j·k pairs,
   known to all) — only leaders use the links between nodes.
4. Each leader sends the other nodes' blocks (the slots before and after its
   own block: at most two messages) to every other rank of its node.
5. Sum all p slots in slot order (bitwise equal on every rank); mean scales.

Cost (P = k·(4 + w) bytes per slot, L = max L_j):

    T = (L-1)·(α_intra + P·β_intra) + (m-1)·α_inter + (p - L)·P·β_inter
      + (L-1)·(α_intra + (p - L)·P·β_intra) + p·k·γ
    bytes sent: a leader (L-1)·P + (p - L)·P + (L-1)·(p - L)·P; others (L-1)·P

Inter-node bytes: each leader (p - L)·P, instead of (p-1)·P from every rank
with a flat ring. Error: as in ``sparse_allgather`` (exact sum of the pairs sent).
"""

from __future__ import annotations

import numpy as np

from mpicomm.codecs.sparse_allgather import SlotBuffer, add_slots
from mpicomm.reducers.ring import ring_allgather

__all__ = ["SparseHierarchical"]

_TAG_INTRA, _TAG_LEADERS, _TAG_DOWN = 61, 62, 63


class SparseHierarchical:
    """Top-k gather over the nodes of ``inner`` (a ``HierarchicalReducer``)."""

    def __init__(self, inner, codec) -> None:
        self.p2p, self.topo, self.codec = inner.p2p, inner.topology, codec
        nodes = self.topo.nodes
        order = [r for node in nodes for r in node]
        self.slot_of = {r: i for i, r in enumerate(order)}
        self.node_start = [0]
        for node in nodes:
            self.node_start.append(self.node_start[-1] + len(node))
        self.p = len(order)
        self.slots = SlotBuffer()

    def __call__(self, flat: np.ndarray, scale: float | None) -> None:
        topo, p2p, codec, p = self.topo, self.p2p, self.codec, self.p
        k = codec.k_of(flat.size)
        nb = codec.pair_bytes(k, flat.itemsize)
        buf = self.slots.reserve(p, nb)
        j, node = topo.node_id, topo.nodes[topo.node_id]
        lo, hi = self.node_start[j] * nb, self.node_start[j + 1] * nb
        me = self.slot_of[p2p.rank]
        # 1. encode into this rank's slot
        codec.encode(flat, buf[me * nb : (me + 1) * nb])
        # 2. intra-node allgather of the node's block
        ring_allgather(p2p, node, topo.local_rank, buf[lo:hi],
                       [s * nb for s in range(len(node) + 1)], tag=_TAG_INTRA)
        # 3. leaders: allgather of the node blocks; 4. leaders hand the rest down
        rest = [part for part in (buf[:lo], buf[hi:]) if part.size]
        if topo.is_leader:
            ring_allgather(p2p, topo.leader_ranks, j, buf, [s * nb for s in self.node_start],
                           tag=_TAG_LEADERS)
            reqs = [p2p.isend(part, r, _TAG_DOWN) for r in node[1:] for part in rest]
            p2p.waitall(reqs)
        else:
            p2p.waitall([p2p.irecv(part, node[0], _TAG_DOWN) for part in rest])
        # 5. sum every slot
        add_slots(buf, p, nb, k, codec, flat, scale)
