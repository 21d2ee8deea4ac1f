"""Seconds of one allreduce of each strategy on a ``Cluster``: which formula, on which links.

Layout: L = min(ranks per node, p) ranks per node (``ranks_per_node`` option overrides the
cluster's), m = ⌈p/L⌉ nodes; one node means every step is intra-node. The formulas are in
``cluster_formulas`` (pipelined forms; see there for each derivation). Per strategy:

    ring            K = ``channels`` rings (1: the plain ring; "nics": one per NIC; unset: the
                    cluster's default, one per NIC on a named profile, 1 on link flags)
    tree            NCCL's double binary tree
    hierarchical    reduce_scatter or leader, phases pipelined; ``in_network`` and a cluster
                    with a reducing switch: switch reduction inside, tree across (NVLSTree)
    ps              mpicomm's ps on every cluster, as the clock runs it (``ps_interfaces_time``):
                    pushes in pieces, then pulls; a queue across nodes shares its node's c
                    NICs with the node's ranks in the same role (workers push from all L at
                    once, answers leave from the node's S_j servers): β_e·⌈L/c⌉, β_e·⌈S_j/c⌉
    recursive_doubling: all L ranks cross at once
    native          MPI's Allreduce as MPICH picks it (``native.mpi_collective_time``: recursive
                    doubling below 2 KiB, Rabenseifner from there), all L ranks crossing
    auto            the best of recursive doubling, the ring and hierarchical

A named GPU profile (``profiles.nccl_protocols``) runs NCCL's three protocols: ring, tree
and the switch tree are each the fastest of LL, LL128 and Simple, every protocol with
NCCL's own latencies and bandwidth share (``profiles.NCCL_PROTOCOLS``, from NCCL's
``src/graph/tuning.cc``; a hop never costs less than the profile's own α for that link).

A cluster that is not ``pipelined`` (mpicomm's reducers over MPI, one blocking exchange per
step) takes the step-by-step forms for ring, tree, hierarchical and ps, each local add a
kernel (``Cluster.launch_s``, as the virtual clock charges ``core.flops.add``): the ring as
the clock runs it, each rank waiting for its left neighbour only (``stepwise``; with
channels, a step waits for its slowest link), hierarchical's rings inside and across nodes
one after the other (``stepwise.ring_phase_time``); mpicomm's tree spans ranks
(``tree_steps.tree_cluster_time``: the clock's recurrence over both trees' steps); a
server pushes then pulls, its messages queuing per link class (``ps_interfaces_time``:
intra-node peers do not queue on the NIC).
"""

from __future__ import annotations

import math

from mpicomm.costmodel import formulas as host
from mpicomm.costmodel import profiles as nccl
from mpicomm.costmodel.cluster import Cluster
from mpicomm.costmodel.cluster_formulas import (
    hierarchical_pipelined_time,
    multichannel_ring_time,
    ps_interfaces_time,
    recursive_doubling_cluster_time,
    switch_tree_time,
    tree_time,
)
from mpicomm.costmodel.native import mpi_collective_time
from mpicomm.costmodel.queues import interface_share
from mpicomm.costmodel.stepwise import PIECE_BYTES, ring_phase_time, ring_stepwise_time
from mpicomm.costmodel.tree_steps import tree_cluster_time

__all__ = ["cluster_time", "layout", "CLUSTER_STRATEGIES", "auto_crossover",
           "nccl_protocol_times"]

CLUSTER_STRATEGIES = ("ring", "tree", "hierarchical", "ps", "recursive_doubling", "native",
                      "auto")


def layout(p: int, cluster: Cluster, options: dict | None = None) -> tuple[int, int]:
    """(L ranks per node, m nodes) of p ranks on ``cluster``."""
    o = options or {}
    local = max(1, min(int(o.get("ranks_per_node") or cluster.ranks_per_node), p))
    return local, -(-p // local)


def _channels(value, cluster: Cluster) -> int:
    """A ring's channels: the option, or the cluster's default (a profile: one per NIC)."""
    if value in (None, ""):
        return cluster.channel_count
    if value == "nics":
        return cluster.channel_count
    return max(1, int(value))


def cluster_time(strategy: str, p: int, n: float, cluster: Cluster,
                 options: dict | None = None) -> float | None:
    """Predicted seconds of one allreduce of n bytes over p ranks; None without a formula.

    ``options``: the strategy's ``ReducerOptions`` fields that change its cost (channels,
    servers, dedicated, variant, ranks_per_node), ``in_network`` (use the cluster's
    reducing switch; None where it has none) and ``op`` ("mean": mpicomm's reducers' scaling
    kernel added, ``_mean_scale``; the engine's op).
    """
    o = options or {}
    if p <= 1:
        return 0.0
    local, nodes = layout(p, cluster, o)
    intra, a0, g, c = cluster.link("intra"), cluster.alpha_call_s, cluster.gamma_s_per_byte, \
        cluster.nics_per_node
    inter = cluster.link("inter") if nodes > 1 else intra
    shared = (inter[0], inter[1] * max(1.0, local / c)) if nodes > 1 else intra
    protocols = nccl.nccl_protocols(cluster)
    if protocols and (strategy in ("ring", "tree") or (strategy == "hierarchical"
                                                       and o.get("in_network"))):
        times = _nccl_times(strategy, p, n, cluster, local, nodes, o, protocols)
        return min(times.values()) if times else None
    if not cluster.pipelined and strategy in ("ring", "tree", "hierarchical", "ps", "native"):
        scale = _mean_scale(strategy, p, n, cluster, local, nodes, o)
        if strategy == "native":  # MPI's Allreduce, then the whole buffer scaled
            return mpi_collective_time("allreduce", n, p, local, intra, shared, g, a0) + scale
        return _stepwise(strategy, p, n, cluster, local, nodes, intra, inter, shared, o) + scale
    if strategy == "ring":
        return multichannel_ring_time(p, n, nodes, intra, inter, g, _channels(o.get("channels"),
                                                                              cluster), c, a0)
    if strategy == "tree":
        return tree_time(p, n, local, nodes, intra, inter, g, c, a0)
    if strategy == "hierarchical":
        if o.get("in_network"):
            if cluster.in_network is None:
                return None
            switch = (cluster.in_network.alpha_s, cluster.in_network.beta)
            return switch_tree_time(n, local, nodes, switch, inter, c, a0)
        return hierarchical_pipelined_time(n, local, nodes, intra, inter, g, c, a0,
                                           o.get("variant") or "reduce_scatter")
    if strategy == "ps":  # mpicomm's ps as the clock runs it: pushes in pieces, then pulls
        return _stepwise("ps", p, n, cluster, local, nodes, intra, inter, shared, o)
    if strategy == "recursive_doubling":
        return recursive_doubling_cluster_time(p, n, local, intra, shared, g, a0)
    if strategy == "native":  # MPICH's pick, as the virtual clock charges MPI's Allreduce
        return mpi_collective_time("allreduce", n, p, local, intra, shared, g, a0)
    if strategy == "auto":
        return min(t for t in (cluster_time(s, p, n, cluster, o) for s in
                               ("recursive_doubling", "ring", "hierarchical")) if t is not None)
    return None



def auto_crossover(p: int, cluster: Cluster, sizes=None) -> int:
    """Smallest power-of-two size from which the ring is predicted faster than recursive
    doubling on ``cluster``, at that size and the next two (auto's switch under the virtual
    clock: no host timing enters it)."""
    sizes = sizes or [1 << k for k in range(3, 31)]
    wins = [cluster_time("ring", p, n, cluster) < cluster_time("recursive_doubling", p, n,
                                                                   cluster) for n in sizes]
    for i, n in enumerate(sizes):
        if all(wins[i : i + 3]):
            return int(n)
    return int(sizes[-1]) * 2


def _stepwise(strategy: str, p: int, n: float, cluster: Cluster, local: int, nodes: int, intra,
              inter, shared, o: dict) -> float:
    """Ring, hierarchical, tree and ps as mpicomm runs them: one blocking exchange per step,
    each local add a kernel (``cluster.launch_s``), as the virtual clock charges them."""
    g, nics, a0, launch = (cluster.gamma_s_per_byte, cluster.nics_per_node,
                           cluster.alpha_call_s, cluster.launch_s)
    if strategy == "ring":
        channels = _channels(o.get("channels"), cluster)
        if channels == 1:  # neighbour-paced, an add kernel a reduce-scatter step (stepwise)
            return a0 + ring_stepwise_time(p, n, local, intra, inter, g, launch)
        # K channels (multiring): a step waits for its slowest link; one rank a node: no step
        # crosses an intra-node link; each step adds the K channels' pieces, a kernel each
        k = max(1, min(channels, nics)) if nodes > 1 else 1
        slow = inter if local == 1 else (max(intra[0], inter[0]), max(intra[1], inter[1]))
        b = max(intra[1] if local > 1 else 0.0, inter[1] / k) if nodes > 1 else intra[1]
        pieces = max(1, math.ceil(n / (channels * p) / PIECE_BYTES))
        return a0 + host.ring_time(p, n, slow[0], b, g) + (p - 1) * channels * pieces * launch
    if strategy == "hierarchical":
        variant = o.get("variant") or "reduce_scatter"  # leader: one rank of a node crosses
        # reduce_scatter: the node's L ranks cross at once, ⌈L/nics⌉ on the busiest NIC
        b_e = inter[1] * (1.0 if variant == "leader" else interface_share(1, local, local, nics))
        if variant == "leader":
            return a0 + host.hierarchical_time(n, local, nodes, intra, (inter[0], b_e), g,
                                               variant) + (nodes - 1) * launch
        # the rings inside nodes (reduce-scatter, then allgather) and across them on n/L
        return a0 + ring_phase_time(local, n, intra, g, launch) \
            + ring_phase_time(nodes, n / local, (inter[0], b_e), g, launch)
    if strategy == "tree":
        return a0 + tree_cluster_time(p, n, local, intra, inter, g, launch,  # its own NIC share
                                      nics=nics if nodes > 1 else None)
    s = int(o.get("servers") or 1)  # each role's queues share the node's NICs by themselves
    return a0 + ps_interfaces_time(p, n, local, intra, inter, g, s, bool(o.get("dedicated")),
                                   nics=nics if nodes > 1 else None, launch=launch)


def _mean_scale(strategy: str, p: int, n: float, cluster: Cluster, local: int, nodes: int,
                o: dict) -> float:
    """op="mean" (``options["op"]``, the training engine's): the kernel that scales the
    bytes a rank owns once they are summed (``core.flops.scale``: a launch, 2 bytes moved a
    byte, ⅔·γ), on every rank's path: the ring's n/p (K channels: K kernels of n/(K·p)),
    hierarchical's n/L (leader: the leaders' n/m), a server's n/S, native's whole n. The
    tree's roots scale chunk by chunk inside its pipeline: not added."""
    if o.get("op") != "mean" or strategy == "tree":
        return 0.0
    launch, g = cluster.launch_s, cluster.gamma_s_per_byte * 2 / 3
    if strategy == "ring":
        kernels = _channels(o.get("channels"), cluster)
        return kernels * launch + n / p * g
    owned = {"hierarchical": n / (nodes if o.get("variant") == "leader" else local),
             "ps": n / max(1, int(o.get("servers") or 1)), "native": n}[strategy]
    return launch + owned * g


def nccl_protocol_times(strategy: str, p: int, n: float, cluster: Cluster,
                        options: dict | None = None) -> dict[str, float]:
    """Seconds of NCCL's ring, tree or switch tree (``strategy`` "hierarchical") on a named
    GPU profile, one entry per protocol NCCL runs there ({} where it has no such algorithm,
    or the cluster is not a named profile): ``cluster_time`` takes the fastest. Shown per
    protocol by ``experiments/validation/check.py --breakdown``."""
    o = options or {}
    protocols = nccl.nccl_protocols(cluster)
    if not protocols or p <= 1:
        return {}
    local, nodes = layout(p, cluster, o)
    return _nccl_times(strategy, p, n, cluster, local, nodes, o, protocols)


def _nccl_times(strategy: str, p: int, n: float, cluster: Cluster, local: int, nodes: int,
                o: dict, protocols) -> dict[str, float]:
    """Ring, tree or switch tree as NCCL's tuning model runs them, per protocol.

    Each protocol (LL, LL128, Simple) brings its per-call latency, its latency per hop
    (``_protocol_links``) and the share of the bandwidth it achieves (β divided by it; LL's
    bus bandwidth capped as NCCL's). Ring Simple across nodes pays its latency x1.4 (NCCL's
    "plateau effect"); the tree's bandwidth takes NCCL's correction for medium sizes. The
    switch tree (NVLS / NVLSTree) runs Simple only.
    """
    g, c = cluster.gamma_s_per_byte, cluster.nics_per_node
    if strategy == "hierarchical":
        if cluster.in_network is None:
            return {}
        ae, be = cluster.link("inter")
        hop = nccl.NVLSTREE_NET_S + 2 * nccl.net_plugin_latency(cluster)
        switch = (max(nccl.NVLS_SWITCH_S, cluster.in_network.alpha_s), cluster.in_network.beta)
        inter = (max(hop, ae), be) if nodes > 1 else switch
        return {"Simple": switch_tree_time(n, local, nodes, switch, inter, c, 0.0)}
    ring = strategy == "ring"
    ch = _channels(o.get("channels"), cluster)
    times = {}
    for pr in protocols:
        intra, inter = _protocol_links(pr, ring, n, nodes, cluster)
        if ring:
            lat = multichannel_ring_time(p, 0.0, nodes, intra, inter, g, ch, c, pr.base[0])
            t = multichannel_ring_time(p, n, nodes, intra, inter, g, ch, c, pr.base[0]) - lat
            if pr.name == "Simple" and nodes > 1 and n / (max(1, ch) * p) >= 64:
                lat *= nccl.ring_simple_plateau(cluster)
            bus = 2 * (p - 1) / p * n  # bytes at bus bandwidth (ring: busBw = algBw·2(p−1)/p)
        else:
            lat = tree_time(p, 0.0, local, nodes, intra, inter, g, c, pr.base[1])
            t = tree_time(p, n, local, nodes, intra, inter, g, c, pr.base[1]) - lat
            bus = 2 * n  # NCCL's tree: busBw = 2·algBw
        if pr.name == "LL":
            t = max(t, bus / nccl.ll_max_busbw(cluster, nodes))
        times[pr.name] = lat + t
    return times


def _protocol_links(pr, ring: bool, n: float, nodes: int, cluster: Cluster):
    """((α, β) intra, (α, β) inter) of one protocol for the ring or the tree.

    α per hop: NCCL's for the protocol and algorithm, never below the profile's own α for
    that link; a network hop adds the network plugin's declared latency (twice for Simple);
    a ring step once the ring crosses nodes costs at least NCCL's net overhead of the host
    CPU (x3 for Simple). β: divided by the protocol's bandwidth share (the tree's with
    NCCL's medium-size correction).
    """
    (ai, bi), (ae, be) = cluster.link("intra"), cluster.link("inter")
    k, simple = (0 if ring else 1), pr.name == "Simple"
    f = pr.bw[0] if ring else (pr.bw[1] if nodes > 1 else pr.bw[2]) * _tree_correction(pr.name, n)
    floor = nccl.net_overhead(cluster) * (3 if simple else 1) if ring and nodes > 1 else 0.0
    intra = (max(pr.nvlink[k], ai, floor), bi / f)
    hop = pr.net[k] + nccl.net_plugin_latency(cluster) * (2 if simple else 1)
    return intra, ((max(hop, ae), be / f) if nodes > 1 else intra)


def _tree_correction(protocol: str, n: float) -> float:
    """NCCL's tree bandwidth correction for medium sizes (1.0 below 64 B and from 512 MiB)."""
    factors = nccl.TREE_CORRECTION[protocol]
    if n < 64:
        return 1.0
    i = int(n // 64).bit_length() - 1
    return factors[i] if i < len(factors) - 1 else 1.0
