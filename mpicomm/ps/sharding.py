"""Who serves and which keys: the last S ranks are servers, each owning one contiguous range.

Ranges follow ``chunk_bounds(n, S)`` (the ring's split): server s owns
``[bounds[s], bounds[s+1])`` of the flat parameter vector. With ``edges`` (the tensors'
boundaries in the flat buffer) the ranges are cut only at tensor edges, as ps-lite's key
ranges hold whole keys (one key a tensor, never split): ``tensor_bounds`` picks the cuts
that make the busiest server's range the smallest possible (binary search on the load,
then a greedy sweep). How the other placements real systems use (whole tensors onto the
least-loaded server, BytePS's 4 MB chunks) cost a step: ``costmodel.ps_placement``.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpicomm.core.errors import ConfigError
from mpicomm.reducers.ring import chunk_bounds

__all__ = ["Layout", "layout", "tensor_bounds"]


@dataclass(frozen=True)
class Layout:
    """Roles and key ranges of a parameter-server job."""

    workers: list[int]
    servers: list[int]
    bounds: list[int]

    def shard_of(self, rank: int) -> int | None:
        """Return the shard index served by ``rank`` (None for a worker)."""
        return self.servers.index(rank) if rank in self.servers else None


def layout(size: int, servers: int, n: int, edges: list[int] | None = None) -> Layout:
    """Return the roles for ``size`` ranks with ``servers`` dedicated servers over ``n`` keys.

    ``edges``: the tensors' boundaries (0 < e < n, ascending); given, a range never splits
    a tensor (``tensor_bounds``). Raises ``ConfigError`` (the same on every rank, before any
    message) when no worker would be left or a server would own no key.
    """
    if servers < 1 or servers >= size:
        raise ConfigError(f"--ps-mode needs at least one worker besides the {servers} "
                          f"dedicated server(s): got {size} ranks")
    if servers > n:
        raise ConfigError(f"--servers {servers} exceeds the {n} parameters")
    if edges is not None and servers > len(edges) + 1:
        raise ConfigError(f"--servers {servers} exceeds the {len(edges) + 1} tensors: a "
                          "server would hold no whole tensor")
    bounds = chunk_bounds(n, servers) if edges is None else tensor_bounds(edges, n, servers)
    return Layout(list(range(size - servers)), list(range(size - servers, size)), bounds)


def tensor_bounds(edges: list[int], n: int, servers: int) -> list[int]:
    """Bounds of ``servers`` contiguous ranges over ``n`` keys cut only at ``edges``, the
    busiest range as small as it can be; every range holds at least one tensor."""
    sizes = [b - a for a, b in zip([0, *edges], [*edges, n], strict=True)]
    lo, hi = max(sizes), n
    while lo < hi:  # the least load L at which a greedy sweep needs <= servers ranges
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _ranges_needed(sizes, mid) <= servers else (mid + 1, hi)
    cuts, load = [0], 0
    for i, x in enumerate(sizes):  # greedy under lo, keeping a tensor for each range left
        left = servers - len(cuts)
        if load + x > lo or (left > 0 and len(sizes) - i == left):
            cuts.append(cuts[-1] + load)
            load = 0
        load += x
    return cuts + [n]


def _ranges_needed(sizes: list[int], cap: int) -> int:
    ranges, load = 1, 0
    for x in sizes:
        if load + x > cap:
            ranges, load = ranges + 1, 0
        load += x
    return ranges
