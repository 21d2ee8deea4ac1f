"""Who serves and which keys: the last S ranks are servers, each owning one contiguous range.

Ranges follow ``chunk_bounds(n, S)`` (the ring's split, as ps-lite shards keys):
server s owns ``[bounds[s], bounds[s+1])`` of the flat parameter vector.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpicomm.core.errors import ConfigError
from mpicomm.reducers.ring import chunk_bounds

__all__ = ["Layout", "layout"]


@dataclass(frozen=True)
class Layout:
    """Roles and key ranges of a parameter-server job."""

    workers: list[int]
    servers: list[int]
    bounds: list[int]

    def shard_of(self, rank: int) -> int | None:
        """Return the shard index served by ``rank`` (None for a worker)."""
        return self.servers.index(rank) if rank in self.servers else None


def layout(size: int, servers: int, n: int) -> Layout:
    """Return the roles for ``size`` ranks with ``servers`` dedicated servers over ``n`` keys.

    Raises ``ConfigError`` (the same on every rank, before any message) when no
    worker would be left or a server would own no key.
    """
    if servers < 1 or servers >= size:
        raise ConfigError(f"--ps-mode needs at least one worker besides the {servers} "
                          f"dedicated server(s): got {size} ranks")
    if servers > n:
        raise ConfigError(f"--servers {servers} exceeds the {n} parameters")
    return Layout(list(range(size - servers)), list(range(size - servers, size)),
                  chunk_bounds(n, servers))
