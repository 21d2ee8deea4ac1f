"""Where a parameter server's keys live, as real systems place them, and what it costs.

Three placements of a model's tensors (bytes each) over S servers:

- ``even``: the flat gradient cut into S equal key ranges (mpicomm's own ``ps``,
  ``ps.sharding.layout``: ``chunk_bounds``); perfectly balanced by construction;
- ``tensors``: whole tensors, each on one server — largest first onto the least-loaded
  server (the LPT rule; TensorFlow's ``GreedyLoadBalancingStrategy`` places onto the
  least-loaded server in creation order, ``largest_first=False``); a tensor is never split,
  so VGG-16's 411 MB fc6 weight lands on one server whatever S is;
- ``chunks``: BytePS (Jiang et al., OSDI 2020, §4.2): every tensor partitioned into chunks
  of at most 4 MB (``BYTEPS_PARTITION_BYTES``, default 4096000), each chunk onto the
  least-loaded server.

The busiest server decides a synchronous step. Servers are either colocated with the
workers (server s on the node of rank ⌊s·p/S⌋, as ``ps_interfaces_time``) or on S separate
CPU-only machines, each with its own NIC (BytePS's deployment). Per direction (links full
duplex, pushes and pulls streamed in chunks so the two directions overlap):

    colocated: node j's NICs carry  L·(n − Lj) + Lj·(p − L) bytes each way  (its L workers
               push/pull what is not on the node; its servers, load Lj, answer the p − L
               workers elsewhere), over c NICs: ·β_e/c
    separate:  server s's NIC carries p·load_s; a worker node's NICs L·n, over c NICs
    one node:  server s carries (p−1)·load_s, a worker n, on the intra link

    T = α_call + 2α + max(busiest NIC's bytes·β, max_s (W−1)·load_s·γ)

With one rank per node, one NIC and an even split over S = p colocated servers this is the
ring's 2(p−1)/p·nβ, as ``cluster_formulas.ps_interfaces_time`` (mpicomm's ps; tests hold the
two equal at α = 0).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from mpicomm.core.errors import ConfigError

__all__ = ["PLACEMENTS", "BYTEPS_PARTITION_BYTES", "place_tensors", "place_chunks",
           "server_loads", "ps_placed_time"]

PLACEMENTS = ("even", "tensors", "chunks")
BYTEPS_PARTITION_BYTES = 4096000  # BytePS docs/env.md: BYTEPS_PARTITION_BYTES default


def place_tensors(sizes: Sequence[float], servers: int, largest_first: bool = True) -> list[int]:
    """The server of each tensor: each onto the least-loaded server (ties: the lowest index),
    the largest first (LPT) or in the given order (TensorFlow's greedy strategy)."""
    if servers < 1:
        raise ConfigError(f"parameter server placement needs >= 1 server, got {servers}")
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i]) if largest_first \
        else range(len(sizes))
    heap = [(0.0, s) for s in range(servers)]
    owner = [0] * len(sizes)
    for i in order:
        load, s = heapq.heappop(heap)
        owner[i] = s
        heapq.heappush(heap, (load + sizes[i], s))
    return owner


def place_chunks(sizes: Sequence[float], servers: int,
                 chunk: float = BYTEPS_PARTITION_BYTES) -> list[tuple[int, float, int]]:
    """BytePS: (tensor, chunk bytes, server) of every chunk of at most ``chunk`` bytes, in
    order, each onto the least-loaded server."""
    if chunk <= 0:
        raise ConfigError(f"chunk size must be > 0 bytes, got {chunk}")
    pieces = [(i, b) for i, size in enumerate(sizes) for b in _pieces(size, chunk)]
    owner = place_tensors([b for _, b in pieces], servers, largest_first=False)
    return [(i, b, s) for (i, b), s in zip(pieces, owner, strict=True)]


def _pieces(size: float, chunk: float) -> list[float]:
    """A tensor's chunks: as many full ones as fit, then the rest (one piece if it is small)."""
    full, rest = divmod(size, chunk)
    return [chunk] * int(full) + ([rest] if rest or not full else [])


def server_loads(sizes: Sequence[float], servers: int, placement: str,
                 chunk: float = BYTEPS_PARTITION_BYTES) -> list[float]:
    """Bytes each server holds under ``placement`` (one of ``PLACEMENTS``)."""
    if placement not in PLACEMENTS:
        raise ConfigError(f"unknown placement {placement!r}; valid: {', '.join(PLACEMENTS)}")
    loads = [0.0] * servers
    if placement == "even":
        return [sum(sizes) / servers] * servers
    if placement == "tensors":
        for size, s in zip(sizes, place_tensors(sizes, servers), strict=True):
            loads[s] += size
    else:
        for _, size, s in place_chunks(sizes, servers, chunk):
            loads[s] += size
    return loads


def ps_placed_time(loads: Sequence[float], p: int, local: int, intra: tuple[float, float],
                   inter: tuple[float, float], gamma: float, nics: int = 1,
                   separate: bool = False, alpha_call: float = 0.0) -> float:
    """Seconds of one synchronous push-pull of ``sum(loads)`` bytes (module docstring).

    Args:
        loads: bytes on each server (``server_loads``).
        p: workers; local: workers per node (L); nics: NICs per worker node (c).
        intra, inter: (α, β) of the two link classes.
        separate: servers on their own CPU machines (one NIC each), not on the worker nodes.
    """
    if p <= 1 and not separate:
        return 0.0
    n, s = float(sum(loads)), len(loads)
    nodes = -(-p // local)
    if nodes == 1 and not separate:
        a, b = intra
        busiest = max(max((p - 1) * x for x in loads), n)
    else:
        a, b = inter
        if separate:
            busiest = max(p * max(loads), local * n / nics)
        else:
            on_node = [0.0] * nodes
            for k, x in enumerate(loads):
                on_node[(k * p // s) // local] += x
            busiest = max(local * (n - lj) + lj * (p - local) for lj in on_node) / nics
    adds = (p - 1) * max(loads) * gamma
    return alpha_call + 2 * a + max(busiest * b, adds)
