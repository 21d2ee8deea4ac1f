"""Measure the cost model's parameters across a job's links (``python -m mpicomm model``)."""

from __future__ import annotations

import sys

from mpi4py import MPI

from mpicomm.core.progress import Progress
from mpicomm.core.topology import Topology
from mpicomm.core.units import fmt_bytes
from mpicomm.costmodel.calibrate import (
    burst,
    cache_bytes,
    cold_bytes,
    cpu_share,
    cpu_share_measured,
    crossing_seconds,
    exchange,
    fresh_seconds,
    interfaces,
    measure_gamma,
    pingpong,
    stream,
    sustained,
)
from mpicomm.costmodel.formulas import LinkModel, ModelParams

__all__ = ["measure", "calibration_sizes", "link_bound", "FINE", "PROBE_BYTES",
           "COLD_LINK_RATIO"]

# every power of two from FINE[0] to FINE[1] (MPI's protocol switches, 8 KiB here; a shaped
# link's 256 KiB bucket); outside it every fourth: below, t(m) is the latency; above, linear
# (α + m·β on a link, a copy's rate in memory), and the tables read linearly between sizes,
# while each size costs its time budget (small sizes, under load) or its bytes several times
# over (64, 32 and 16 MiB were 85% of the calibration across an 800 Mbit/s link, issue 33)
FINE = (1 << 12, 1 << 20)
PROBE_BYTES = 4 << 20
# a size whose one-way time per byte is this many times the host's add per byte is link-bound:
# its data out of the caches costs it a few percent at most (the cold tables keep the warm
# times there; across the 800 Mbit/s link they had agreed within the noise, issue 33)
COLD_LINK_RATIO = 16  # the interfaces probe's message (or the largest size, when smaller)


def calibration_sizes(max_bytes: int) -> list[int]:
    """The sizes ``measure`` times: 8 B, then powers of two, every one inside ``FINE`` and
    every other one outside it (8, 32, ..., 2 KiB, 4 KiB, 8 KiB, ..., 1 MiB, 4 MiB, 16 MiB,
    ...), then ``max_bytes`` itself (the largest a run asked for)."""
    top = max(max_bytes, 8)
    lo, hi = (f.bit_length() - 1 for f in FINE)
    sizes = [1 << k for k in range(3, top.bit_length())
             if lo <= k <= hi or (k - (3 if k < lo else hi)) % 2 == 0]
    if sizes[-1] < top:
        sizes.append(top)
    return sizes


def measure(comm: MPI.Comm, max_bytes: int, ranks_per_node: int | None = None,
            progress: str | None = None) -> ModelParams:
    """Measure α, β(m) (intra- and inter-node pairs) and γ(m) up to ``max_bytes``; collective.

    1. ping-pong (one way at a time) -> α and β(m) of each kind of link;
    1b. (the inter-node pair) the link's token bucket (``burst``: a stream after the link
       idled) and, where it has one, its one-way times from ``FINE[0]`` up in sustained
       traffic (``stream``) in place of the ping-pong's, which the bucket let run ahead
       (``inter_bucket`` in ``extra``, read by the virtual clock's queues);
    2. exchange steps (both ways at once, then an in-place add) -> β_x(m) and γ(m);
    3. a plain ``np.add`` on every rank -> ``gamma_local``, for reference;
    4. 1. and 2. again with the data out of the caches (``cold``: each message's bytes
       march through a region 4x the last-level cache) -> ``LinkModel.cold``: what a
       message costs when the buffers of a call do not fit in the cache (the virtual
       clock's ``--links-from``), at the sizes below the link-bound ones (``link_bound``);
    5. the cost of writing freshly mapped memory (page faults: ``fresh_s_per_byte`` in
       ``extra``), which MPI's temporaries above glibc's mmap threshold pay on every call;
    6. (two nodes of 2+ ranks) how many pairs of ranks the nodes' interfaces carry at full
       rate: pairs between the two nodes, one alone and all at once (``interfaces_per_node``
       in ``extra``: the virtual clock's ``nics_per_node`` under ``--links-from``);
    7. how many ranks share each core of a machine (``cpu_share`` in ``extra``: 2 for 4
       ranks on 2 cores; ``cpu_share_measured``, as timed, load included), the wall seconds
       per CPU second that ``--links-from`` charges a rank's compute.

    Sizes: ``calibration_sizes``; each size's repetitions by a time budget (``calibrate``).

    ``progress``: a label; rank 0 then writes a line to stderr as each step begins.
    """
    topo = Topology(comm, ranks_per_node=ranks_per_node)
    sizes = calibration_sizes(max_bytes)
    node0 = topo.nodes[0]
    intra_pair = (node0[0], node0[1]) if len(node0) > 1 else None
    inter_pair = (node0[0], topo.nodes[1][0]) if topo.num_nodes > 1 else None
    pairs = [(kind, pair) for kind, pair in (("intra", intra_pair), ("inter", inter_pair))
             if pair is not None]
    prog = Progress(3 + 3 * len(pairs) + (inter_pair is not None), progress or "",
                    enabled=bool(progress)
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
        one_way = pingpong(comm, *pair, sizes)
        if kind == "inter":
            prog.done()
            prog.begin("inter-node token bucket, sustained one way")
            one_way, bucket = _bucketed(comm, pair, sizes, one_way)
        links[kind] = LinkModel.from_pingpong(sizes, one_way, pair, swaps)
        prog.done()
        prog.begin(f"{kind}-node, data out of the caches")
        links[kind].cold = _cold(comm, pair, sizes, (one_way, swaps), gamma_local)
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
    if inter_pair is not None:
        params.extra["inter_bucket"] = bucket
    prog.done()
    prog.begin("interfaces between nodes, CPU share")
    params.extra.update(_sharing(comm, topo, sizes))
    prog.done()
    prog.close()
    topo.free()
    return params


def _bucketed(comm: MPI.Comm, pair: tuple[int, int], sizes: list[int],
              one_way: list[float]) -> tuple[list[float], dict]:
    """Step 1b of ``measure`` (the inter-node pair): the link's token bucket (``burst``) and,
    where it has one, the one-way times from ``FINE[0]`` up in sustained traffic
    (``stream``, ``sustained``): a ping-pong lets each direction's bucket refill while the
    other answers, so through tbf's 256 KiB bucket it timed 64 KiB at half the shaped rate,
    where a ring's back-to-back steps drain it (issue 33). Returns the one-way table and
    the bucket (``extra.inter_bucket``, with the ping-pong times it replaced)."""
    bucket = burst(comm, *pair)
    j = next((k for k, m in enumerate(sizes) if m >= FINE[0]), len(sizes))
    if not bucket["bytes"] or j == len(sizes):
        return one_way, bucket
    alpha = LinkModel.split(sizes, one_way)[0]
    held = stream(comm, *pair, sizes[j:], bucket["bytes"])
    bucket.update(sizes=sizes[j:], pingpong=one_way[j:], held=held)
    return one_way[:j] + sustained(one_way[j:], alpha, held), bucket


def _cold(comm: MPI.Comm, pair: tuple[int, int], sizes: list[int],
          warm: tuple[list[float], list[float]], gamma_local: list[float]) -> dict:
    """Ping-pong and exchange of ``pair`` with the data out of the caches (``cold``), at the
    sizes below ``link_bound``'s; from there the warm times (one way, exchange) stand."""
    region, j = cold_bytes(), link_bound(sizes, warm[0], gamma_local)
    one_way, swaps = list(warm[0]), list(warm[1])
    if j:
        swaps[:j] = exchange(comm, *pair, sizes[:j], cold=region)[0]
        one_way[:j] = pingpong(comm, *pair, sizes[:j], cold=region)
    link = LinkModel.from_pingpong(sizes, one_way, pair, swaps)
    return {"alpha": link.alpha, "beta": link.beta, "alpha_x": link.alpha_x,
            "beta_x": link.beta_x, "cache_bytes": cache_bytes(),
            "measured_to": sizes[j - 1] if j else 0}


def link_bound(sizes: list[int], one_way: list[float], gamma_local: list[float]) -> int:
    """The index from which every size is link-bound: its one-way time per byte at least
    ``COLD_LINK_RATIO`` times this host's add per byte (``gamma_local``, which reads two
    arrays and writes one from memory at the large sizes), so reading the message from
    memory instead of a cache changes its time by well under a tenth; at least 2 sizes
    stay below it (``len(sizes)``: none is link-bound). Across an 800 Mbit/s link every
    size from 16 KiB is (10 ns a byte against 0.1-0.4); on one host's memory none is."""
    j = len(sizes)
    while j > 2 and one_way[j - 1] / sizes[j - 1] >= COLD_LINK_RATIO * gamma_local[j - 1]:
        j -= 1
    return j


def _sharing(comm: MPI.Comm, topo: Topology, sizes: list[int]) -> dict:
    """Steps 6 and 7 of ``measure``: ``interfaces_per_node`` (with the probe's figures) where
    two nodes have 2+ ranks each, and ``cpu_share``."""
    out: dict = {"cpu_share": cpu_share(comm), "cpu_share_measured": cpu_share_measured(comm)}
    if topo.num_nodes < 2:
        return out
    pairs = list(zip(topo.nodes[0], topo.nodes[1], strict=False))
    if len(pairs) < 2:
        return out
    m = max(s for s in sizes if s <= PROBE_BYTES)
    alone = crossing_seconds(comm, pairs[:1], m)
    together = crossing_seconds(comm, pairs, m)
    out["interfaces_per_node"] = interfaces(alone, together, len(pairs))
    out["interfaces_probe"] = {"bytes": m, "pairs": len(pairs), "alone_s": alone,
                               "together_s": together}
    return out
