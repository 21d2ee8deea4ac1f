"""The engine contract: what the training loop calls, typed once (no ``getattr`` probing).

    engine.start_step(step, lr)                        # the step and its learning rate
    engine.backward(model.backward(), last=True)       # one micro-batch's backward
    for bucket in engine.reduced(defer=False): ...     # each reduced bucket: the loop's SGD
    total, exposed = engine.take_times()               # seconds of comm since the last call
    engine.sync_state(momentum); engine.close()

Three engines keep it: ``GradEngine`` (buckets, overlap, accumulation, reduced by a
reducer), ``PSEngine`` (push, the servers' SGD, pull) and ``ZeroEngine`` (reduce-scatter,
shard update, all-gather). An engine that applies the optimizer itself (PS, ZeRO) yields no
bucket. The base class writes the shared parts once: the time counters and ``take_times``,
``close`` (once, however often called), and the defaults of what only one engine does
(``--overlap-forward``'s ``ready_for``, the parameter servers' ``stopped`` and
``server_params``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

__all__ = ["Engine"]


class Engine(ABC):
    """The sync engine's contract (module docstring).

    Attributes:
        buckets: the buckets ``reduced()`` yields for the loop's SGD (none when the
            engine applies the optimizer itself).
        comm_total_s, comm_exposed_s: seconds of communication and of waiting for it,
            summed since the last ``take_times()``.
        on_gpu: the gradients live on a GPU (the loop synchronises before timing).
        overlap_forward: the next forward takes deferred buckets (``ready_for``).
        stopped: the run's pushes are spent (async parameter server): the loop ends.
        server_params: a compressed parameter server's exact parameters, for a checkpoint.
    """

    on_gpu = False
    overlap_forward = False
    stopped = False
    server_params: Any = None

    def __init__(self) -> None:
        self.buckets: list = []
        self.comm_total_s = self.comm_exposed_s = 0.0
        self._closed = False

    def start_step(self, step: int, lr: float) -> None:
        """Take the step's index and learning rate (engines that apply the optimizer)."""
        return

    @abstractmethod
    def backward(self, layers: Iterator[int], *, last: bool = True) -> None:
        """Run one micro-batch's backward (``model.backward()``); the last sends."""

    @abstractmethod
    def reduced(self, *, defer: bool = False) -> Iterator[Any]:
        """Yield each bucket once reduced (``defer``: the head only, ``overlap_forward``)."""

    def ready_for(self, layer: int) -> Iterator[Any]:
        """Yield the deferred buckets the forward of ``layer`` needs: none by default."""
        return iter(())

    def take_times(self) -> tuple[float, float]:
        """Return (comm_total_s, comm_exposed_s) since the last call and reset them."""
        out = (self.comm_total_s, self.comm_exposed_s)
        self.comm_total_s = self.comm_exposed_s = 0.0
        return out

    def sync_state(self, momentum: Any) -> None:
        """Fill ``momentum`` with state kept elsewhere (a checkpoint): nothing by default."""
        return

    def close(self) -> None:
        """Finish the engine's work once (twice is harmless)."""
        if not self._closed:
            self._closed = True
            self._close()

    def _close(self) -> None:
        """What ``close`` does the first time: nothing by default."""
        return

    @abstractmethod
    def describe(self) -> dict:
        """Return the plan as JSON-able facts."""
