"""Measure the cost model's parameters across a job's links (``python -m mpicomm model``)."""

from __future__ import annotations

from mpi4py import MPI

from mpicomm.core.topology import Topology
from mpicomm.costmodel.calibrate import exchange, measure_gamma, pingpong
from mpicomm.costmodel.formulas import LinkModel, ModelParams

__all__ = ["measure"]


def measure(comm: MPI.Comm, max_bytes: int, ranks_per_node: int | None = None) -> ModelParams:
    """Measure α, β(m) (intra- and inter-node pairs) and γ(m) up to ``max_bytes``; collective.

    1. ping-pong (one way at a time) -> α and β(m) of each kind of link;
    2. exchange steps (both ways at once, then an in-place add) -> β_x(m) and γ(m);
    3. a plain ``np.add`` on every rank -> ``gamma_local``, for reference.
    """
    topo = Topology(comm, ranks_per_node=ranks_per_node)
    sizes = [1 << k for k in range(3, max(max_bytes, 8).bit_length())]
    if sizes[-1] < max_bytes:
        sizes.append(max_bytes)
    node0 = topo.nodes[0]
    intra_pair = (node0[0], node0[1]) if len(node0) > 1 else None
    inter_pair = (node0[0], topo.nodes[1][0]) if topo.num_nodes > 1 else None
    gamma_local = measure_gamma(comm, sizes)
    links, gammas = {}, {}
    for kind, pair in (("intra", intra_pair), ("inter", inter_pair)):
        if pair is not None:
            swaps, gammas[kind] = exchange(comm, *pair, sizes)
            links[kind] = LinkModel.from_pingpong(sizes, pingpong(comm, *pair, sizes), pair, swaps)
    if not links:  # one rank: nothing travels; keep the formulas finite
        links["intra"] = LinkModel(0.0, sizes, [0.0] * len(sizes))
    intra = links.get("intra") or links["inter"]
    inter = links.get("inter") or intra
    flat = "inter" if topo.num_nodes > 1 and "inter" in gammas else "intra"
    gamma = gammas.get(flat, gamma_local)
    params = ModelParams(intra, inter, sizes, gamma, topo.num_nodes, max(topo.node_sizes),
                         gamma_local=gamma_local)
    topo.free()
    return params
