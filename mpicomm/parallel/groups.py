"""The ranks of a model-parallel run: ``replicas × parts`` and the communicators between them.

    g = ParallelGroup(comm, parts=P, strategy="ring", options={...})
    g.part, g.replica             # rank r is part r % P of replica r // P
    g.p2p                         # transport among the P parts of this replica (counted, emulated)
    g.reducer                     # reducer among the replicas of this part (data parallelism)
    g.gather_parts(local)         # every part's flat array (checkpoints, the record)

1. every rank's node (``core.topology.node_map`` over ``comm``: collective);
2. ``Split`` by replica: the replica's parts, ranked by part, get one private
   communicator and a ``p2p`` transport (the run's emulated links, its node map);
3. ``Split`` by part: the replicas of one part get a reducer (any strategy) to
   average that part's gradients — data parallelism across replicas. With
   simulated nodes the reducer is told its own ranks per node (``replica_nodes``):
   replica j's copy of part k is world rank k + j·P, so a node of k ranks holds
   k/P replicas of the part (one when P >= k), not k of the reducer's ranks.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from mpicomm.core.options import ReducerOptions
from mpicomm.core.topology import node_map, resolve_ranks_per_node
from mpicomm.p2p import Traffic, make_transport
from mpicomm.reducers import make_reducer

__all__ = ["ParallelGroup", "replica_nodes"]


def replica_nodes(nodes: list[int], parts: int, part: int) -> int:
    """Ranks per node among the replicas of ``part`` (world rank ``part + j·parts`` is
    replica j's), for a reducer that numbers simulated nodes by its own ranks: the size of
    the first node's run of replicas. Nodes cut evenly (``train`` refuses others) give
    equal runs; with uneven ones the first run's length is an approximation."""
    mine = nodes[part::parts]
    return sum(n == mine[0] for n in mine)


class ParallelGroup:
    """This rank's part and replica, the transport among parts and the reducer among replicas.

    Args:
        comm: every rank of the run; its size must be a multiple of ``parts``.
        parts: pipeline stages or tensor-parallel ranks per replica.
        strategy: the reducer across replicas; options: its ``make_reducer`` options.
    """

    def __init__(self, comm: MPI.Comm, parts: int, *, strategy: str, options: dict) -> None:
        size, rank = comm.Get_size(), comm.Get_rank()
        if parts < 1 or size % parts:
            raise ValueError(f"{size} ranks do not split into replicas of {parts} parts")
        self.parts, self.replicas = parts, size // parts
        self.part, self.replica = rank % parts, rank // parts
        opts = ReducerOptions(**{k: v for k, v in options.items()
                                 if k in ("ranks_per_node", "inter_link", "intra_link",
                                          "nics_per_node", "links_from")})
        nodes = node_map(comm, opts.ranks_per_node)                                     # 1.
        self.comm = comm.Split(self.replica, self.part)                                 # 2.
        mine = [nodes[self.replica * parts + j] for j in range(parts)]
        self.counts = Traffic()
        self.p2p = make_transport(self.comm, mine, self.counts, opts.inter_link,
                                  opts.intra_link, nics_per_node=opts.nics_per_node,
                                  links_from=opts.links_from)  # the virtual clock's cluster
        self._dp = comm.Split(self.part, self.replica)                                  # 3.
        if resolve_ranks_per_node(opts.ranks_per_node) is not None:  # simulated nodes
            options = {**options, "ranks_per_node": replica_nodes(nodes, parts, self.part)}
        self.reducer = make_reducer(strategy, comm=self._dp, **options)

    @property
    def replicas_comm(self) -> MPI.Comm:
        """The replicas of this rank's part (the reducer's ranks, in replica order)."""
        return self._dp

    def gather_parts(self, local: np.ndarray) -> list[np.ndarray]:
        """Every part's ``local`` (a flat host array; sizes may differ), in part order
        (collective over the replica's parts; off the hot path: checkpoints, the record)."""
        local = np.ascontiguousarray(local)
        sizes = np.empty(self.parts, dtype=np.int64)
        self.comm.Allgather(np.array([local.size], dtype=np.int64), sizes)
        every = np.empty(int(sizes.sum()), dtype=local.dtype)
        self.comm.Allgatherv(local, [every, sizes.tolist()])
        return np.split(every, np.cumsum(sizes)[:-1])

    def close(self) -> None:
        """Free the reducer and both communicators (collective over the run)."""
        self.reducer.close()
        self._dp.Free()
        self.comm.Free()
