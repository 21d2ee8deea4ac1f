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

from mpicomm.core.backend import sync_device
from mpicomm.core.topology import Topology
from mpicomm.reducers.base import Reducer
from mpicomm.reducers.ring import (
    PIECE_BYTES,
    chunk_bounds,
    piece_scratch,
    ring_allgather,
    ring_reduce_scatter,
)

__all__ = ["HierarchicalReducer"]

_TAG_INTRA_RS, _TAG_INTRA_AG, _TAG_INTER = 11, 12, 100


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
        piece = max(PIECE_BYTES // item, 1)
        self.scratch = piece_scratch(store, flat, min(int(largest), piece))


class HierarchicalReducer(Reducer):
    """Two-level AllReduce over real or simulated nodes (see module docstring)."""

    name = "hierarchical"

    def __init__(self, comm, options, **kw) -> None:
        super().__init__(comm, options, **kw)
        self.topology = Topology(self.comm, ranks_per_node=options.ranks_per_node)
        self.variant = options.variant
        self._plans: dict[tuple, _Plan] = {}
        self._store: dict = {}  # array module -> one piece of scratch

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
        topo, p2p = self.topology, self.p2p
        node = topo.nodes[topo.node_id]
        l = topo.local_rank  # noqa: E741 - the textbook's name
        # 1. intra-node reduce-scatter: local rank l holds the node sum of segment l
        ring_reduce_scatter(p2p, node, l, flat, plan.node_bounds, plan.scratch, tag=_TAG_INTRA_RS)
        # 2. inter-node ring allreduce of each owned virtual segment
        for v, lo, hi, members, sub in plan.rings:
            seg = flat[lo:hi]
            j = topo.node_id
            tag = _TAG_INTER + v
            ring_reduce_scatter(p2p, members, j, seg, sub, plan.scratch, tag=tag)
            ring_allgather(p2p, members, j, seg, sub, tag=tag)
        # 3. mean: scale the owned segment once
        if scale is not None:
            own = flat[plan.node_bounds[l] : plan.node_bounds[l + 1]]
            own *= scale
            if not isinstance(flat, np.ndarray):
                sync_device(own)
        # 4. intra-node allgather
        ring_allgather(p2p, node, l, flat, plan.node_bounds, tag=_TAG_INTRA_AG)

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
