"""Who is on which node: real nodes from MPI, or simulated blocks of ranks.

``Topology(comm, ranks_per_node=None)`` splits ``comm`` three ways:

- ``intra``: the ranks of this node (``local_rank`` / ``local_size``);
- ``leaders``: local rank 0 of every node (``None`` on non-leaders);
- ``cross``: the ranks with the same local rank across nodes (``cross_rank`` /
  ``cross_size``). On uneven nodes, local ranks beyond a small node's size have
  fewer peers.

Nodes come from ``MPI.Comm.Split_type(COMM_TYPE_SHARED)`` when
``ranks_per_node`` is ``None`` (and ``MPICOMM_RANKS_PER_NODE`` is unset), so the
answer is the real machine layout. An integer ``k`` simulates nodes as blocks of
``k`` consecutive ranks (the last node may be smaller), so a single host can
rehearse a multi-node layout.

Nodes are numbered by their lowest world rank; a node's leader is its lowest rank.
"""

from __future__ import annotations

import os

from mpi4py import MPI

from mpicomm.core.errors import ConfigError, ConfigTypeError

__all__ = ["Topology", "resolve_ranks_per_node", "node_map", "unreached_link"]


def spans_world(comm: MPI.Comm) -> bool:
    """True when ``comm`` holds every rank of the job (an error agreed on it is everyone's:
    ``ConfigError.on_every_rank``)."""
    return MPI.Comm.Compare(comm, MPI.COMM_WORLD) in (MPI.IDENT, MPI.CONGRUENT)


def resolve_ranks_per_node(ranks_per_node: int | None) -> int | None:
    """Return ``ranks_per_node``, or ``MPICOMM_RANKS_PER_NODE`` when it is None."""
    if ranks_per_node is None:
        env = os.environ.get("MPICOMM_RANKS_PER_NODE", "").strip()
        if env:
            try:
                ranks_per_node = int(env)
            except ValueError:
                raise ConfigError(
                    f"MPICOMM_RANKS_PER_NODE={env!r}: expected a positive integer"
                ) from None
    if ranks_per_node is not None:
        if isinstance(ranks_per_node, bool) or not isinstance(ranks_per_node, int):
            raise ConfigTypeError(
                f"ranks_per_node must be an int or None, got {type(ranks_per_node).__name__}"
            )
        if ranks_per_node < 1:
            raise ConfigError(f"ranks_per_node must be >= 1, got {ranks_per_node}")
    return ranks_per_node


def node_map(comm: MPI.Comm, ranks_per_node: int | None = None) -> list[int]:
    """Return the node of every rank of ``comm`` (numbered by lowest rank, as ``Topology``).

    Simulated nodes (``ranks_per_node`` given, or ``MPICOMM_RANKS_PER_NODE``) need
    no message: rank r is on node r // k. Real nodes: one shared-memory split and
    one small Allgather (collective over ``comm``).
    """
    ranks_per_node = resolve_ranks_per_node(ranks_per_node)
    size = comm.Get_size()
    if ranks_per_node is not None:
        return [r // ranks_per_node for r in range(size)]
    import numpy as np

    intra = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    leader = np.array([comm.Get_rank()], dtype=np.int64)
    intra.Bcast(leader, root=0)
    intra.Free()
    every = np.empty(size, dtype=np.int64)
    comm.Allgather(leader, every)
    number = {int(r): i for i, r in enumerate(sorted(set(every.tolist())))}
    return [number[int(r)] for r in every]


def unreached_link(node_of: list[int], inter_link: object, intra_link: object,
                   nics_per_node: int | None = None) -> str | None:
    """Why a link flag given for this layout would be silently unused, or None.

    ``--inter-link`` on a job whose ranks share one node (one host without
    ``--ranks-per-node``) is crossed by no message, and ``--intra-link`` on nodes of one rank
    by none either: the run would print the link and time the job without it (``compare``
    gave hierarchical its nodes of 2 and the ring one node, so only hierarchical paid it)."""
    size, nodes = len(node_of), len(set(node_of))
    if inter_link is not None and nodes == 1:
        return (f"--inter-link {inter_link}: the {size} rank(s) of this job are on one node, so "
                "no message would cross it; simulate nodes with --ranks-per-node K")
    if nics_per_node is not None and nodes == 1:
        return (f"--nics-per-node {nics_per_node}: the {size} rank(s) of this job are on one "
                "node, so no message leaves it through an interface; simulate nodes with "
                "--ranks-per-node K")
    if intra_link is not None and nodes == size:
        return (f"--intra-link {intra_link}: every node of this job holds one rank, so no "
                "message would stay inside a node; give --ranks-per-node K (K > 1)")
    local = max(node_of.count(n) for n in set(node_of)) if node_of else 0
    if nics_per_node is not None and nics_per_node > max(local, 1):
        return (f"--nics-per-node {nics_per_node}: a node of this job holds at most {local} "
                f"rank(s), so at most {local} cross at once and {nics_per_node} interfaces "
                f"cannot all be used; give --nics-per-node {local} or less, or more ranks per "
                "node (--ranks-per-node K)")
    return None


class Topology:
    """Node layout of a communicator.

    Args:
        comm: the communicator to describe (default ``MPI.COMM_WORLD``).
        ranks_per_node: ``None`` asks MPI (shared-memory split); an integer
            simulates nodes of that many consecutive ranks.

    Attributes:
        rank, size: this rank and the size of ``comm``.
        node_id, num_nodes: this rank's node (0-based, by lowest rank) and the count.
        local_rank, local_size: position and size within the node.
        is_leader: ``local_rank == 0``.
        node_sizes: ranks on each node, indexed by node_id.
        node_of: the node_id of every rank of ``comm``.
        nodes: for each node, its ranks in ``comm`` ordered by local rank.
        leader_ranks: each node's leader (its lowest rank), indexed by node_id.
        simulated: True when ``ranks_per_node`` was given.
        intra: communicator of this node's ranks.
        leaders: communicator of the node leaders (``None`` on non-leaders).
        cross: communicator of the ranks sharing this ``local_rank`` across nodes.
    """

    def __init__(self, comm: MPI.Comm | None = None, ranks_per_node: int | None = None):
        comm = MPI.COMM_WORLD if comm is None else comm
        ranks_per_node = resolve_ranks_per_node(ranks_per_node)
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.simulated = ranks_per_node is not None
        self.ranks_per_node = ranks_per_node

        # 1. Intra-node communicator: real (shared memory) or simulated blocks.
        if ranks_per_node is None:
            self.intra = comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        else:
            self.intra = comm.Split(self.rank // ranks_per_node, key=self.rank)
        self.local_rank = self.intra.Get_rank()
        self.local_size = self.intra.Get_size()
        self.is_leader = self.local_rank == 0

        # 2. Learn every rank's (node leader, local rank); number nodes by leader rank.
        import numpy as np

        leader = np.array([self.rank], dtype=np.int64)
        self.intra.Bcast(leader, root=0)
        mine = np.array([leader[0], self.local_rank], dtype=np.int64)
        every = np.empty((self.size, 2), dtype=np.int64)
        comm.Allgather(mine, every)
        self.leader_ranks = sorted({int(x) for x in every[:, 0]})
        self.num_nodes = len(self.leader_ranks)
        node_of = {r: i for i, r in enumerate(self.leader_ranks)}
        self.nodes: list[list[int]] = [[] for _ in range(self.num_nodes)]
        for r in np.lexsort((every[:, 1], every[:, 0])):  # by leader, then local rank
            self.nodes[node_of[int(every[r, 0])]].append(int(r))
        self.node_sizes = [len(m) for m in self.nodes]
        self.node_id = node_of[int(leader[0])]
        self.node_of = [node_of[int(x)] for x in every[:, 0]]  # the node of every rank

        # 3. Leaders among themselves; peers with the same local rank across nodes.
        color = 0 if self.is_leader else MPI.UNDEFINED
        self.leaders = comm.Split(color, key=self.node_id)
        if self.leaders == MPI.COMM_NULL:
            self.leaders = None
        self.cross = comm.Split(self.local_rank, key=self.node_id)
        self.cross_rank = self.cross.Get_rank()
        self.cross_size = self.cross.Get_size()

    @property
    def uneven(self) -> bool:
        """True when nodes hold different numbers of ranks."""
        return len(set(self.node_sizes)) > 1

    def describe(self) -> dict:
        """Return a JSON-able summary (for logs and result files)."""
        return {
            "ranks": self.size,
            "num_nodes": self.num_nodes,
            "node_sizes": self.node_sizes,
            "simulated": self.simulated,
            "ranks_per_node": self.ranks_per_node,
        }

    def free(self) -> None:
        """Free the communicators this topology created."""
        for c in (self.intra, self.leaders, self.cross):
            if c is not None and c != MPI.COMM_NULL:
                c.Free()
        self.leaders = None

    def __repr__(self) -> str:
        return (
            f"Topology(rank={self.rank}, node_id={self.node_id}, local_rank={self.local_rank}, "
            f"local_size={self.local_size}, num_nodes={self.num_nodes}, "
            f"node_sizes={self.node_sizes}, simulated={self.simulated})"
        )
