"""Measure the cost model's parameters across a job's links (``python -m mpicomm model``)."""

from __future__ import annotations

import sys

from mpi4py import MPI

from mpicomm.core.progress import Progress
from mpicomm.core.topology import Topology
from mpicomm.core.units import fmt_bytes
from mpicomm.costmodel.calibrate import (
    cache_bytes,
    cold_bytes,
    exchange,
    fresh_seconds,
    measure_gamma,
    pingpong,
)
from mpicomm.costmodel.formulas import LinkModel, ModelParams

__all__ = ["measure"]


def measure(comm: MPI.Comm, max_bytes: int, ranks_per_node: int | None = None,
            progress: str | None = None) -> ModelParams:
    """Measure α, β(m) (intra- and inter-node pairs) and γ(m) up to ``max_bytes``; collective.

    1. ping-pong (one way at a time) -> α and β(m) of each kind of link;
    2. exchange steps (both ways at once, then an in-place add) -> β_x(m) and γ(m);
    3. a plain ``np.add`` on every rank -> ``gamma_local``, for reference;
    4. 1. and 2. again with the data out of the caches (``cold``: each message's bytes
       march through a region 4x the last-level cache) -> ``LinkModel.cold``: what a
       message costs when the buffers of a call do not fit in the cache (the virtual
       clock's ``--links-from``);
    5. the cost of writing freshly mapped memory (page faults: ``fresh_s_per_byte`` in
       ``extra``), which MPI's temporaries above glibc's mmap threshold pay on every call.

    ``progress``: a label; rank 0 then writes a line to stderr as each step begins.
    """
    topo = Topology(comm, ranks_per_node=ranks_per_node)
    sizes = [1 << k for k in range(3, max(max_bytes, 8).bit_length())]
    if sizes[-1] < max_bytes:
        sizes.append(max_bytes)
    node0 = topo.nodes[0]
    intra_pair = (node0[0], node0[1]) if len(node0) > 1 else None
    inter_pair = (node0[0], topo.nodes[1][0]) if topo.num_nodes > 1 else None
    pairs = [(kind, pair) for kind, pair in (("intra", intra_pair), ("inter", inter_pair))
             if pair is not None]
    prog = Progress(2 + 3 * len(pairs), progress or "", enabled=bool(progress)
                    and comm.Get_rank() == 0, stream=sys.stderr)
    prog.begin(f"γ: np.add, {len(sizes)} sizes up to {fmt_bytes(sizes[-1])}")
    gamma_local = measure_gamma(comm, sizes)
    links, gammas = {}, {}
    for kind, pair in pairs:
        prog.done()
        prog.begin(f"{kind}-node exchange, ranks {pair[0]}-{pair[1]}")
        swaps, gammas[kind] = exchange(comm, *pair, sizes)
        prog.done()
        prog.begin(f"{kind}-node ping-pong")
        links[kind] = LinkModel.from_pingpong(sizes, pingpong(comm, *pair, sizes), pair, swaps)
        prog.done()
        prog.begin(f"{kind}-node, data out of the caches")
        links[kind].cold = _cold(comm, pair, sizes)
    prog.done()
    prog.begin("page faults of fresh memory")
    if not links:  # one rank: nothing travels; keep the formulas finite
        links["intra"] = LinkModel(0.0, sizes, [0.0] * len(sizes))
    intra = links.get("intra") or links["inter"]
    inter = links.get("inter") or intra
    flat = "inter" if topo.num_nodes > 1 and "inter" in gammas else "intra"
    gamma = gammas.get(flat, gamma_local)
    params = ModelParams(intra, inter, sizes, gamma, topo.num_nodes, max(topo.node_sizes),
                         gamma_local=gamma_local)
    params.extra["fresh_s_per_byte"] = fresh_seconds(comm)
    prog.done()
    prog.close()
    topo.free()
    return params


def _cold(comm: MPI.Comm, pair: tuple[int, int], sizes: list[int]) -> dict:
    """Ping-pong and exchange of ``pair`` with the data out of the caches (``cold``)."""
    region = cold_bytes()
    swaps, _ = exchange(comm, *pair, sizes, cold=region)
    link = LinkModel.from_pingpong(sizes, pingpong(comm, *pair, sizes, cold=region), pair, swaps)
    return {"alpha": link.alpha, "beta": link.beta, "alpha_x": link.alpha_x,
            "beta_x": link.beta_x, "cache_bytes": cache_bytes()}
