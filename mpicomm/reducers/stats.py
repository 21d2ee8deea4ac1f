"""Counters every reducer keeps: calls, bytes moved by this rank, seconds inside."""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["ReduceStats"]


@dataclass
class ReduceStats:
    """What one reducer did on this rank since creation (or the last ``reset``).

    ``bytes_sent``/``bytes_recv`` count payload bytes this rank handed to or got
    from MPI. For ``native`` MPI chooses the algorithm, so the count is the
    bandwidth-optimal lower bound 2(p-1)/p·n each way, stated as such.
    """

    calls: int = 0
    bytes_sent: int = 0
    bytes_recv: int = 0
    seconds: float = 0.0

    def add(self, sent: int, recv: int, seconds: float) -> None:
        self.calls += 1
        self.bytes_sent += sent
        self.bytes_recv += recv
        self.seconds += seconds

    def reset(self) -> None:
        self.calls = self.bytes_sent = self.bytes_recv = 0
        self.seconds = 0.0

    def as_dict(self) -> dict:
        return asdict(self)
