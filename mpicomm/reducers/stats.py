"""Counters every reducer keeps: calls, seconds inside, and the bytes its transport moved."""

from __future__ import annotations

from dataclasses import dataclass

from mpicomm.p2p.transport import Traffic

__all__ = ["ReduceStats"]


@dataclass
class ReduceStats(Traffic):
    """What one reducer did on this rank since creation (or the last ``reset``).

    The byte and message fields (``Traffic``) are counted by the reducer's
    transport (``reducer.p2p``): ``bytes_sent``/``bytes_recv`` are totals of the
    buffers this rank handed to or got from MPI, ``inter_bytes_sent``/``_recv``
    the part to or from another node. For ``native`` MPI chooses the algorithm,
    so the count is the bandwidth-optimal lower bound 2(p-1)/p·n each way, with
    the inter-node part a ring's (to the right neighbour, from the left), stated
    as such. The leader variant of hierarchical counts its in-node MPI
    Reduce/Bcast as a flat one (see its docstring). A dedicated ps also counts its
    32-byte command headers. Emulated links add no bytes or messages: their
    small timing headers are the transport's, not the strategy's.
    """

    calls: int = 0
    seconds: float = 0.0

    def add(self, seconds: float) -> None:
        """Count one call that took ``seconds``."""
        self.calls += 1
        self.seconds += seconds

    def reset(self) -> None:
        self.reset_traffic()
        self.calls = 0
        self.seconds = 0.0
