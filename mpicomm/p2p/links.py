"""Emulated links: one interface per rank and link class, held latency + m/bandwidth per message.

The link strings (``"20us,1GB/s"``) are parsed by ``mpicomm.core.links`` (re-exported
here), so ``ReducerOptions`` refuses a bad one before any message. This module
holds what the transport needs to apply them:

- ``Interface``: the sender's side of one link class. ``reserve(m)`` books a
  message of m bytes: it starts when the interface is free (now, or when the
  previous message of this rank on this class ends) and holds it
  latency + m/bandwidth; it returns the emulated finish time
  (``time.perf_counter()`` seconds). Messages of one rank queue; different
  ranks' interfaces are independent.
- ``sleep_until(t)``: wait by sleeping (never spinning) until perf_counter >= t,
  so an oversubscribed host (8 ranks on 2 cores) measures the emulated network.

See docs/links.md for the design (a small header carries the finish time to
the receiver, which sleeps until then after the real receive).
"""

from __future__ import annotations

import time

from mpicomm.core.links import LINK_FORMAT, LinkSpec, parse_link

__all__ = ["Interface", "sleep_until", "LinkSpec", "parse_link", "LINK_FORMAT"]


class Interface:
    """One rank's emulated interface on one link class (see module docstring)."""

    __slots__ = ("latency", "per_byte", "free_at")

    def __init__(self, spec: LinkSpec) -> None:
        self.latency = spec.latency
        self.per_byte = 1.0 / spec.bandwidth
        self.free_at = 0.0

    def reserve(self, nbytes: int, now: float) -> float:
        """Book a message of ``nbytes`` posted at ``now``; return its emulated finish time."""
        start = now if now > self.free_at else self.free_at
        self.free_at = start + self.latency + nbytes * self.per_byte
        return self.free_at


def sleep_until(deadline: float) -> None:
    """Sleep until ``time.perf_counter() >= deadline`` (returns at once when it is past)."""
    left = deadline - time.perf_counter()
    while left > 0:
        time.sleep(left)
        left = deadline - time.perf_counter()
