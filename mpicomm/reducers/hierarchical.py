"""hierarchical: AllReduce intra-node first, then inter-node, then intra-node again.

m nodes of L ranks (p = m·L); intra-node links have (α_intra, β_intra), links
between nodes (α_inter, β_inter). Node layout comes from ``Topology`` (real
nodes from MPI, or simulated blocks of ``ranks_per_node`` consecutive ranks).

variant="reduce_scatter" (default; the bandwidth-optimal 2-D form):

1. Intra-node ring reduce-scatter: the buffer is cut into L segments; local
   rank l ends with its node's sum of segment l.
2. Inter-node ring AllReduce of segment l among the m ranks that own it (one
   per node: the ranks sharing local rank l), on n/L bytes.
3. (op="mean") each rank scales its segment once.
4. Intra-node ring allgather of the L segments.

    T = 2(L-1)·α_intra + 2·(L-1)/L·n·β_intra + (L-1)/L·n·γ
      + 2(m-1)·α_inter + 2·(m-1)/m·(n/L)·β_inter + (m-1)/m·(n/L)·γ

   The inter-node term carries n/L per rank: the slow links move L times less
   than in a flat ring over p ranks, and every rank uses its own link.

   Uneven nodes (the last node smaller): the buffer is cut into L_max
   "virtual" segments; on a node of L_j < L_max ranks each rank owns a
   contiguous run of them (``chunk_bounds(L_max, L_j)``), so step 1 is still one
   ring reduce-scatter. Step 2 runs one inter-node ring per virtual segment v
   among its owners, in increasing v on every rank (tag per v), which cannot
   deadlock: ring v's members have all finished the rings before v.

variant="leader" (the classic form, as in Horovod's hierarchical allreduce):

1. Reduce to the node leader (MPI_Reduce on the node communicator).
2. Ring AllReduce of the whole buffer among the m leaders.
3. Broadcast from the leader within the node (MPI_Bcast).

    T ≈ 2·lg L·(α_intra + n·β_intra) + lg L·n·γ        (binomial-tree reduce and bcast)
      + 2(m-1)·α_inter + 2·(m-1)/m·n·β_inter + (m-1)/m·n·γ

   Simpler, but only one rank per node drives the network, with all n bytes.

Compressed (``compress``): fp16/int8 (variant reduce_scatter) are the steps'
``wire``: the input is scaled by 1/p first (op="mean"), every ring step of
1, 2 and 4 sends encoded (re-quantised per hop), and the step-4 allgather
encodes segment l once per virtual segment (so nodes of different sizes round
the same values alike and every rank ends bitwise equal). Bytes sent per rank:
2·(L-1)/L·n·b + 2·(m-1)/m·(n/L)·b (b bytes a value on the wire); a value is
rounded at most (L-1) + (m-1) + 2 ≤ p + 1 times:
fp16 |err| ≤ (p+1)·2^-11·Σ_r|x_r|; int8 |err| ≤ ((p+1)/2)·max scale.
The leader variant cannot quantise (its node reduce is MPI's). top-k (both
variants): pairs gathered in each node, between leaders, then handed down
(``_sparse``).

Bytes counted (by the transport): point-to-point payloads exactly; the leader
variant's MPI Reduce/Bcast as a flat one (each non-leader sends, then receives,
n bytes; the leader receives, then sends, (L-1)·n), since MPI does not report
its tree — all intra-node. Emulated links: every point-to-point message is
emulated; the leader variant's in-node Reduce/Bcast are MPI collectives and are
not (``describe()`` says ``intra_emulated: false`` when an intra link is set).
With an emulated inter link, α_inter = its latency and β_inter = 1/bandwidth
(or the real link's, when slower).
"""

from __future__ import annotations

import numpy as np

from mpicomm.core import flops, tags
from mpicomm.core.backend import sync_device
from mpicomm.core.errors import ConfigError
from mpicomm.core.options import parse_compress
from mpicomm.core.topology import Topology
from mpicomm.reducers.base import Reducer
from mpicomm.reducers.ring import (
    chunk_bounds,
    piece_items,
    piece_scratch,
    ring_allgather,
    ring_reduce_scatter,
)
from mpicomm.reducers.sparse import SlotBuffer, add_slots

__all__ = ["HierarchicalReducer"]

_TAG_INTRA_RS, _TAG_INTRA_AG, _TAG_INTER = tags.HIER_INTRA_RS, tags.HIER_INTRA_AG, tags.HIER_INTER
_TAG_TOPK_INTRA, _TAG_TOPK_LEADERS, _TAG_TOPK_DOWN = (tags.HIER_TOPK_INTRA, tags.HIER_TOPK_LEADERS,
                                                      tags.HIER_TOPK_DOWN)


class _Plan:
    """Boundaries and scratch view for one (length, dtype, array type)."""

    def __init__(self, flat, topo: Topology, variant: str, store: dict) -> None:
        n, item = flat.size, flat.itemsize
        L = max(topo.node_sizes)
        Lj = topo.local_size
        largest = 1
        if variant == "leader":
            self.node_bounds = None
            self.ring_bounds = chunk_bounds(n, topo.num_nodes)
            largest = max(largest, max(np.diff(self.ring_bounds), default=1))
        else:
            # virtual segments, and the contiguous run of them each local rank owns
            self.vbounds = chunk_bounds(n, L)
            owner_runs = [chunk_bounds(L, size) for size in topo.node_sizes]
            runs = owner_runs[topo.node_id]
            self.node_bounds = [self.vbounds[runs[i]] for i in range(Lj + 1)]
            largest = max(largest, max(np.diff(self.node_bounds), default=1))
            # inter-node rings: one per virtual segment this rank owns
            self.rings = []
            first, last = runs[topo.local_rank], runs[topo.local_rank + 1]
            for v in range(first, last):
                members = []
                for j, node in enumerate(topo.nodes):
                    rj = owner_runs[j]
                    owner = next(i for i in range(len(node)) if rj[i] <= v < rj[i + 1])
                    members.append(node[owner])
                lo, hi = self.vbounds[v], self.vbounds[v + 1]
                sub = chunk_bounds(hi - lo, len(members))
                self.rings.append((v, lo, hi, members, sub))
                largest = max(largest, max(np.diff(sub), default=1))
        # the ring functions move at most one PIECE_BYTES piece into scratch at a time
        piece = piece_items(item)
        self.scratch = piece_scratch(store, flat, min(int(largest), piece))


class HierarchicalReducer(Reducer):
    """Two-level AllReduce over real or simulated nodes (see module docstring)."""

    name = "hierarchical"
    compressions = ("fp16", "int8", "topk")

    @classmethod
    def check_compress(cls, options, able=None) -> None:
        super().check_compress(options, able)
        if options.variant == "leader" and parse_compress(options.compress)[0] in ("fp16", "int8"):
            raise ConfigError(f"compress={options.compress!r}: hierarchical variant 'leader' "
                              f"reduces with MPI's Reduce/Bcast; use variant 'reduce_scatter'")

    def __init__(self, comm, options, **kw) -> None:
        super().__init__(comm, options, **kw)
        self.topology = Topology(self.comm, ranks_per_node=options.ranks_per_node)
        self.variant = options.variant
        self._plans: dict[tuple, _Plan] = {}
        self._store: dict = {}  # array module -> one piece of scratch
        self._slots = SlotBuffer()  # top-k: p messages, in node order
        order = [r for node in self.topology.nodes for r in node]
        self._slot_of = order.index(self.rank)
        self._node_start = [0]
        for node in self.topology.nodes:
            self._node_start.append(self._node_start[-1] + len(node))

    def crossing_ranks(self) -> int:
        """reduce_scatter: every rank runs an inter-node ring at once; leader: one per node."""
        return 1 if self.options.variant == "leader" else self.comm.Get_size()

    def describe(self) -> dict:
        d = super().describe()
        d.update(variant=self.variant, topology=self.topology.describe())
        if self.variant == "leader" and self.options.intra_link is not None:
            d["intra_emulated"] = False  # the in-node Reduce/Bcast are MPI's
        return d

    def _release(self) -> None:
        self.topology.free()

    def _plan(self, flat) -> _Plan:
        key = (flat.size, flat.dtype.char, type(flat))
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = _Plan(flat, self.topology, self.variant, self._store)
        return plan

    def _allreduce(self, flat, scale):
        plan = self._plan(flat)
        if self.variant == "leader":
            return self._leader(flat, scale, plan)
        return self._two_d(flat, scale, plan)

    def _two_d(self, flat, scale, plan: _Plan) -> None:
        topo, p2p, wire = self.topology, self.p2p, self.wire
        node = topo.nodes[topo.node_id]
        l = topo.local_rank  # noqa: E741 - the textbook's name
        # 1. intra-node reduce-scatter: local rank l holds the node sum of segment l
        ring_reduce_scatter(p2p, node, l, flat, plan.node_bounds, plan.scratch, tag=_TAG_INTRA_RS,
                            wire=wire)
        # 2. inter-node ring allreduce of each owned virtual segment
        for v, lo, hi, members, sub in plan.rings:
            seg = flat[lo:hi]
            j = topo.node_id
            tag = _TAG_INTER + v
            ring_reduce_scatter(p2p, members, j, seg, sub, plan.scratch, tag=tag, wire=wire)
            ring_allgather(p2p, members, j, seg, sub, tag=tag, wire=wire)
        # 3. mean: scale the owned segment once
        if scale is not None:
            own = flat[plan.node_bounds[l] : plan.node_bounds[l + 1]]
            own *= scale
            flops.scale(own.size)
            if not isinstance(flat, np.ndarray):
                sync_device(own)
        # 4. intra-node allgather (a wire encodes per virtual segment: see the module doc)
        parts = None if wire is None else self._parts(plan, len(node))
        ring_allgather(p2p, node, l, flat, plan.node_bounds, tag=_TAG_INTRA_AG, wire=wire,
                       parts=parts)

    @staticmethod
    def _parts(plan: _Plan, local_size: int) -> list[list[tuple[int, int]]]:
        """Each local rank's owned virtual segments, as (lo, hi) ranges (cached on the plan)."""
        parts = getattr(plan, "codec_parts", None)
        if parts is None:
            vb, nb = plan.vbounds, plan.node_bounds
            parts = [[(vb[v], vb[v + 1]) for v in range(len(vb) - 1)
                      if nb[i] <= vb[v] < nb[i + 1]] for i in range(local_size)]
            plan.codec_parts = parts
        return parts

    def _sparse(self, flat, scale, residual) -> None:
        """top-k: pairs gathered inside each node, between node leaders, then handed down.

        m nodes (node j of L_j ranks), k pairs of (4 + w) bytes per rank; the message
        buffer holds p slots in node order.

        1. encode this rank's top-k of x + residual into its slot;
        2. intra-node ring allgather of the node's L_j slots;
        3. node leaders: ring allgather of the m node blocks;
        4. each leader sends the other nodes' blocks (at most two messages) to its node;
        5. sum all p slots in slot order (bitwise equal on every rank); mean scales.

            T = (L-1)·(α_intra + P·β_intra) + (m-1)·α_inter + (p - L)·P·β_inter
              + (L-1)·(α_intra + (p - L)·P·β_intra) + p·k·γ      (P = k·(4 + w), L = max L_j)

        Inter-node bytes: each leader (p - L)·P, instead of (p-1)·P from every rank.
        """
        topo, p2p, ef, p = self.topology, self.p2p, self.feedback, self.size
        k = ef.codec.k_of(flat.size)
        nb = ef.codec.pair_bytes(k, flat.itemsize)
        buf = self._slots.reserve(p, nb)
        j, node = topo.node_id, topo.nodes[topo.node_id]
        lo, hi = self._node_start[j] * nb, self._node_start[j + 1] * nb
        me = self._slot_of
        ef.encode(flat, buf[me * nb : (me + 1) * nb], residual)  # 1.
        ring_allgather(p2p, node, topo.local_rank, buf[lo:hi],  # 2.
                       [s * nb for s in range(len(node) + 1)], tag=_TAG_TOPK_INTRA)
        rest = [part for part in (buf[:lo], buf[hi:]) if part.size]
        if topo.is_leader:  # 3.-4.
            ring_allgather(p2p, topo.leader_ranks, j, buf, [s * nb for s in self._node_start],
                           tag=_TAG_TOPK_LEADERS)
            p2p.waitall([p2p.isend(part, r, _TAG_TOPK_DOWN) for r in node[1:] for part in rest])
        else:
            p2p.waitall([p2p.irecv(part, node[0], _TAG_TOPK_DOWN) for part in rest])
        add_slots(buf, p, nb, k, ef.codec, flat, scale)  # 5.

    def _leader(self, flat, scale, plan: _Plan) -> None:
        from mpi4py import MPI

        topo, p2p = self.topology, self.p2p
        nbytes = flat.nbytes
        others = (topo.local_size - 1) * nbytes  # counted as a flat reduce / bcast
        # 1. reduce to the node leader
        if topo.local_size > 1:
            intra = topo.intra
            if topo.is_leader:
                p2p.collective("reduce", nbytes, False, intra, intra.Reduce, MPI.IN_PLACE, flat,
                               MPI.SUM, 0)
                p2p.account(0, others)
            else:
                p2p.collective("reduce", nbytes, False, intra, intra.Reduce, flat, None,
                               MPI.SUM, 0)
                p2p.account(nbytes, 0)
        # 2. ring among the leaders; each leader scales its own segment once
        if topo.is_leader:
            ring, j, bounds = topo.leader_ranks, topo.node_id, plan.ring_bounds
            ring_reduce_scatter(p2p, ring, j, flat, bounds, plan.scratch, tag=_TAG_INTRA_RS)
            if scale is not None:
                own = flat[bounds[j] : bounds[j + 1]]
                own *= scale
                flops.scale(own.size)
                if not isinstance(flat, np.ndarray):
                    sync_device(own)
            ring_allgather(p2p, ring, j, flat, bounds, tag=_TAG_INTRA_AG)
        # 3. broadcast within the node
        if topo.local_size > 1:
            p2p.collective("bcast", nbytes, False, topo.intra, topo.intra.Bcast, flat, 0)
            if topo.is_leader:
                p2p.account(others, 0)
            else:
                p2p.account(0, nbytes)
