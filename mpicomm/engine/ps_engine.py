"""The parameter-server engine: the gradient engine's contract, the optimizer on the servers.

    engine = PSEngine(group.client(dtype), model.params, model.grads, accumulate=K)
    engine.start_step(step, lr)                     # the servers' learning rate this step
    for k in range(K):
        model.forward(x, y)
        engine.backward(model.backward(), last=k == K - 1)
    for bucket in engine.reduced():                 # none: the servers applied the optimizer
        ...
    if engine.stopped: ...                          # async/ssp: server 0 spent the budget
    engine.close()                                  # DONE; every worker gets the final model

One optimizer step:

1. micro-batches 1..K−1: backward runs and its gradient is added into an
   accumulator — no message (as ``GradEngine``);
2. the last micro-batch: the accumulator is folded in and scaled by 1/K;
3. ``reduced()``: push the gradient to the servers and pull their parameters
   into ``params`` in place (``PSWorker.push_pull``; sync / async / ssp is the
   servers' business, ``mpicomm.ps.server``); the time it takes is the exposed
   communication (nothing overlaps it). It yields no bucket: the loop's own
   optimizer has nothing to do.

Cost per step (S servers, n bytes, codec ratio c, 1 for plain floats):
2α + 2·c·(n/S)·β per server, servers in parallel, plus the server's optimizer
and, in sync mode, the wait for the slowest worker's push.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from mpicomm.codecs.quantize import Fp16Codec, Int8Codec
from mpicomm.core import clock, flops, trace
from mpicomm.core.errors import ConfigError
from mpicomm.core.options import parse_compress
from mpicomm.engine.base import Engine

__all__ = ["PSEngine", "ps_codec"]


def ps_codec(compress: str) -> Any:
    """Return the codec for ``--compress`` under ``--ps-mode`` (None for none).

    Raises ``ConfigError`` for top-k: a sparse push would need the servers to
    add index lists, and a sparse pull would leave parameters behind.
    """
    name, _, _ = parse_compress(compress)
    if name == "topk":
        raise ConfigError(f"--compress {compress} under --ps-mode: the parameter server "
                          "compresses with fp16 or int8 only (pushes and pulls are dense)")
    if name == "none":
        return None
    return Fp16Codec() if name == "fp16" else Int8Codec()


class PSEngine(Engine):
    """Push gradients, pull parameters: ``GradEngine``'s contract over a ``PSWorker``.

    Args:
        client: this worker's ``PSWorker`` (``PSGroup.client``).
        params, grads: the model's flat parameter and gradient buffers (NumPy).
        accumulate: micro-batches per optimizer step (push once every K).

    Attributes:
        buckets: empty (the loop's optimizer has nothing to apply).
        stopped: True once server 0 said stop (async/ssp: the push budget is spent).
    """

    overlap = False

    def __init__(self, client: Any, params: Any, grads: Any, *, accumulate: int = 1) -> None:
        if accumulate < 1:
            raise ValueError(f"accumulate must be >= 1, got {accumulate}")
        super().__init__()
        self.client, self.params, self.grads, self.accumulate = client, params, grads, accumulate
        self._acc = None if accumulate == 1 else np.zeros_like(grads)
        self._micro, self._step, self._lr = 0, 0, 0.0

    def start_step(self, step: int, lr: float) -> None:
        """Say which step this is and the learning rate the servers apply to it."""
        self._step, self._lr = step, lr

    def backward(self, layers: Iterator[int], *, last: bool = True) -> None:
        """Run one micro-batch's backward (``model.backward()``); accumulate (1.) or finish (2.)."""
        rec = trace.active()
        t = clock.now()
        for i in layers:
            if rec is not None:
                t = trace.backward_layer(rec, i, t)
        if not last:  # 1. (the accumulator is zero at a step's start: 0 + g is g exactly)
            self._acc += self.grads
            flops.add(self.grads.size)
            self._micro += 1
            return
        if self._micro:  # 2.
            self.grads += self._acc
            self.grads *= 1.0 / (self._micro + 1)
            self._acc.fill(0)
            n = self.grads.size
            flops.add(n)
            flops.scale(n)
            flops.charge(0, n)  # the fill
            self._micro = 0

    def reduced(self, *, defer: bool = False) -> Iterator[Any]:
        """Push and pull (3.); yield no bucket. The push-pull is exposed communication."""
        t0 = clock.now()
        self.stopped = self.client.push_pull(self.grads, self.params, self._step, self._lr)
        t1 = clock.now()
        self.comm_total_s += t1 - t0
        self.comm_exposed_s += t1 - t0
        rec = trace.active()
        if rec is not None:
            rec.complete("push-pull", "bucket", t0, t1, thread="training",
                         bytes=int(self.grads.nbytes))
        return iter(())

    def sync_state(self, momentum: Any) -> None:
        """Fill ``momentum`` with the servers' (between two sync steps, for a checkpoint);
        with a codec also ``server_params`` with their exact parameters."""
        if getattr(self.client, "codec", None) is None:
            self.client.snapshot(momentum)
            return
        if self.server_params is None:
            self.server_params = np.empty_like(self.params)
        self.client.snapshot(momentum, self.server_params)

    def _close(self) -> None:
        """Tell the servers this worker is done; receive their final parameters."""
        self.client.finish(self.params)

    def describe(self) -> dict:
        """Return the plan as JSON-able facts (one push per server per step)."""
        return {"buckets": 1, "overlap": False, "accumulate": self.accumulate,
                "bucket_bytes": [int(self.grads.nbytes)]}
