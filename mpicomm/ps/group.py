"""A parameter-server job's roles, transport and stall channel: what a training run holds.

``PSGroup(comm, servers=S, num_params=n, ...)`` is collective over ``comm``:

1. roles and key ranges (``sharding.layout``: the last S ranks serve) — a
   ``ConfigError`` on every rank, before any message, when they do not fit;
2. a private duplicate of ``comm`` and its transport, made with the emulated
   links (``inter_link`` / ``intra_link``, docs/links.md), bytes counted into
   ``stats`` (a ``ReduceStats``, as a reducer's);
3. a stall-inspector channel whose participants are the workers.

It stands where a reducer stands in a run (``is_worker``, ``num_workers``,
``worker_rank``, ``stats``, ``stall_channel``, ``serve``, ``describe``,
``close``). A worker talks to the servers through ``client()`` (a ``PSWorker``);
a server runs the ``PSServer`` given to ``attach_server`` when ``serve()`` is called.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpicomm.core.topology import node_map
from mpicomm.p2p import make_transport, stall
from mpicomm.ps.server import PSServer
from mpicomm.ps.sharding import layout
from mpicomm.ps.worker import PSWorker
from mpicomm.reducers.stats import ReduceStats

__all__ = ["PSGroup"]


class PSGroup:
    """Roles, transport and stall channel of a parameter-server job (module docstring).

    Args:
        comm: the job's communicator (duplicated; the duplicate is freed by ``close``).
        servers: S, the dedicated servers (the last S ranks).
        num_params: n, the keys split over the servers.
        label: the strategy's name in records and stall reports (``ps:async``).
        ranks_per_node: node size for the node map (None: ask MPI).
        inter_link, intra_link: ``LinkSpec`` of emulated links (None: real).
        nics_per_node, links_from: the virtual clock's cluster (as a reducer's options).
        codec: encode pushes and pulls with it (None: plain floats).
    """

    def __init__(self, comm: Any, *, servers: int, num_params: int, label: str,
                 ranks_per_node: int | None = None, inter_link: Any = None,
                 intra_link: Any = None, codec: Any = None, nics_per_node: int | None = None,
                 links_from: str | None = None) -> None:
        self.layout = layout(comm.Get_size(), servers, num_params)          # 1.
        self.label, self.codec = label, codec
        self.comm = comm.Dup()                                              # 2.
        self.stats = ReduceStats()
        self.p2p = make_transport(self.comm, node_map(self.comm, ranks_per_node), self.stats,
                                  inter_link, intra_link, nics_per_node=nics_per_node,
                                  links_from=links_from)
        rank, workers = self.comm.Get_rank(), self.layout.workers
        node = self.p2p.node_of  # --nics-per-node: a rank shares its node's NICs with the
        role = workers if rank in workers else self.layout.servers  # ranks of its role there
        self.p2p.cross_at_once(sum(node[r] == node[rank] for r in role))
        self.num_workers = len(workers)
        self.worker_rank = workers.index(rank) if rank in workers else None
        self.is_worker = self.worker_rank is not None
        self.stall_channel = stall.attach(self.comm, workers)              # 3.
        self.server: PSServer | None = None
        self.counts: dict | None = None  # a server's counts once ``serve`` returned

    def shard(self) -> tuple[int, int]:
        """Return this server's key range ``(lo, hi)``."""
        s = self.layout.shard_of(self.comm.Get_rank())
        return self.layout.bounds[s], self.layout.bounds[s + 1]

    def client(self, dtype: Any = np.float32) -> PSWorker:
        """Return this worker's client of the servers."""
        return PSWorker(self.p2p, self.layout, self.stall_channel, self.label, self.codec, dtype)

    def attach_server(self, server: PSServer) -> None:
        """Give this server rank the ``PSServer`` that ``serve`` runs."""
        self.server = server

    def serve(self) -> None:
        """Apply pushes and answer pulls until every worker is done (a server rank)."""
        if self.server is None:  # set-up failed before the engine: no worker will push
            return
        self.counts = self.server.serve()

    def describe(self) -> dict:
        """JSON-able facts: strategy, servers, transport (emulated links), codec."""
        return {"strategy": self.label, "servers": list(self.layout.servers), "dedicated": True,
                "num_workers": self.num_workers, "transport": self.p2p.describe(),
                "compress": getattr(self.codec, "name", "none")}

    def close(self) -> None:
        """Free the channel and the communicator (every rank, after the run)."""
        self.stall_channel.close()
        self.comm.Free()
