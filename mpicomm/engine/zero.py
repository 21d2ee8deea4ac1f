"""ZeRO-style sharded data parallelism: the gradient engine's contract, each rank owning a shard.

    engine = ZeroEngine(reducer, model.params, model.grads, model.tensors,
                        bucket_bytes=25 * 2**20, stage=1, make_optimizer=factory)
    engine.start_step(step, lr)
    model.forward(x, y)
    engine.backward(model.backward())               # stage 2: buckets reduce-scatter here
    for bucket in engine.reduced():                 # none: the shards were updated inside
        ...

A colocated, sharded parameter server with S = p and the optimizer on the
servers (Rajbhandari et al., ZeRO, 2020). The flat buffer is cut into the ring
engine's buckets (the same plan, so the same calls and bytes); bucket b is cut
into p pieces with the ring's ``chunk_bounds``, and rank r owns piece r of
every bucket: its *shard*, about n/p elements. One optimizer step, per bucket:

1. reduce-scatter the bucket's gradient over the ring
   (``reducers.ring.ring_reduce_scatter``, p−1 steps): rank r now holds the
   sum of its piece; it scales it by 1/p (the mean). Stage 1 does this after
   backward, in the full gradient buffer. Stage 2 does it as soon as backward
   has made the bucket final and copies the reduced piece into a gradient
   *shard* (n/p elements): no full reduced gradient is ever kept;
2. rank r applies the loop's SGD rule (``make_optimizer``) to its piece of the
   parameters with its piece of the momentum: the momentum buffer holds n/p
   elements, not n;
3. all-gather the bucket's parameters over the ring (``ring_allgather``,
   p−1 steps): every rank again holds the whole model for the next forward.

Cost per step with b buckets (p ranks, n bytes, α latency, β s/byte, γ s/byte
to reduce, ω s/byte of optimizer work):

    T_zero = b·2(p−1)·α + 2·(p−1)/p·n·β + (p−1)/p·n·γ + ω·n/p

the ring AllReduce's bytes exactly (a reduce-scatter of gradients plus an
all-gather of parameters instead of gradients), with the optimizer's work and
state divided by p. Memory per rank: parameters n, gradients n (stage 1) or n/p
kept after reduction (stage 2; backward still writes the full flat buffer as
its scratch), momentum n/p.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from mpicomm.core import clock, flops, tags, trace
from mpicomm.engine.base import Engine
from mpicomm.engine.buckets import Bucket, plan_buckets
from mpicomm.reducers.ring import (
    chunk_bounds,
    piece_items,
    piece_scratch,
    ring_allgather,
    ring_reduce_scatter,
)

__all__ = ["ZeroEngine", "ZERO_STAGES"]

ZERO_STAGES = (1, 2)


class _Part:
    """One bucket as the engine sees it: its ring bounds and this rank's piece."""

    __slots__ = ("bucket", "bounds", "largest", "lo", "hi", "a", "b", "step")

    def __init__(self, bucket: Bucket, p: int, rank: int, offset: int) -> None:
        self.bucket = bucket
        self.bounds = chunk_bounds(bucket.size, p)          # relative to bucket.lo
        self.largest = max(self.bounds[i + 1] - self.bounds[i] for i in range(p))
        self.lo = bucket.lo + self.bounds[rank]              # this rank's piece in the flat buffer
        self.hi = bucket.lo + self.bounds[rank + 1]
        self.a, self.b = offset, offset + self.hi - self.lo  # ... and in the shard buffers
        self.step: Callable[[float], None] | None = None


def _check_reducer(reducer: Any) -> None:
    """Raise ``ValueError`` (on every rank alike) for a reducer whose options the engine's own
    ring would bypass, or with ranks that never join it (dedicated parameter servers)."""
    if reducer.num_workers != reducer.size:
        raise ValueError(f"ZeroEngine: {reducer.size - reducer.num_workers} of the reducer's "
                         f"{reducer.size} ranks only serve (dedicated parameter servers) and "
                         "would never join the shards' ring; use make_reducer('ring')")
    opts = reducer.options
    for name, value, plain in (("compress", opts.compress, "none"),
                               ("channels", opts.channels, 1)):
        if value != plain:
            raise ValueError(f"ZeroEngine: the reducer's {name}={value!r} would be bypassed (the "
                             "shards travel as plain floats round one ring)")


class ZeroEngine(Engine):
    """Reduce-scatter gradients, update this rank's shard, all-gather parameters.

    Args:
        reducer: a ring-capable reducer whose transport (``p2p``) carries and counts
            every message (``make_reducer("ring", ...)``); its ``rank``/``size``
            give the shard.
        params, grads: the model's flat parameter and gradient buffers (NumPy).
        tensors: ``(layer, lo, hi)`` of every tensor in buffer order (``MLP.tensors``).
        bucket_bytes: close a bucket at this many bytes (the gradient engine's plan).
        stage: 1 shards the optimizer state; 2 also the reduced gradients.
        make_optimizer: ``make_optimizer(p, g, v) -> step(lr)``, the loop's update
            rule on views of one piece (parameters, gradient, momentum).

    Attributes:
        buckets: empty (the loop's optimizer has nothing to apply).
        momentum: this rank's momentum shard (``shard_size`` elements).
        optimizer_state_bytes, grad_bytes_held: the bytes of each kept across a step.
    """

    overlap = False

    def __init__(self, reducer: Any, params: Any, grads: Any,
                 tensors: Sequence[tuple[int, int, int]], *, bucket_bytes: float, stage: int,
                 make_optimizer: Callable[[Any, Any, Any], Callable[[float], None]]) -> None:
        if stage not in ZERO_STAGES:
            raise ValueError(f"ZeroEngine: stage must be 1 or 2, got {stage!r}")
        if not isinstance(grads, np.ndarray):
            raise ValueError("ZeroEngine runs on NumPy buffers (the CPU)")
        _check_reducer(reducer)
        super().__init__()
        self.p2p, self.stage = reducer.p2p, stage
        self.params, self.grads = params, grads
        p, r = reducer.size, reducer.rank
        self._ring, self._pos, self._scale = list(range(p)), r, 1.0 / p
        self.plan = plan_buckets(tensors, grads.itemsize, bucket_bytes)
        self._parts, offset = [], 0
        for bucket in self.plan:
            part = _Part(bucket, p, r, offset)
            self._parts.append(part)
            offset = part.b
        self.shard_size = offset
        self.momentum = np.zeros(offset, dtype=grads.dtype)
        self.grad_shard = np.zeros(offset, dtype=grads.dtype) if stage == 2 else None
        g = self.grad_shard
        for part in self._parts:  # views made once, reused every step
            gv = grads[part.lo : part.hi] if g is None else g[part.a : part.b]
            v = self.momentum[part.a : part.b]
            part.step = make_optimizer(params[part.lo : part.hi], gv, v)
        self._by_layer: dict[int, list[_Part]] = {}
        for part in self._parts:
            self._by_layer.setdefault(part.bucket.ready_layer, []).append(part)
        largest = max((q.largest for q in self._parts), default=1)
        piece = piece_items(grads.itemsize)
        self._scratch = piece_scratch({}, grads, min(largest, piece))
        self.optimizer_state_bytes = int(self.momentum.nbytes)
        self.grad_bytes_held = int(grads.nbytes if g is None else g.nbytes)
        self._lr = 0.0

    # ---------------------------------------------------------------- steps
    def start_step(self, step: int, lr: float) -> None:
        """Take the step's learning rate (the engine applies the optimizer)."""
        self._lr = lr

    def backward(self, layers: Iterator[int], *, last: bool = True) -> None:
        """Run one backward (``model.backward()``); stage 2 reduce-scatters final buckets (1.)."""
        if not last:
            raise ValueError("ZeroEngine: gradient accumulation is not supported")
        rec = trace.active()
        t = clock.now()
        for i in layers:
            if rec is not None:
                t = trace.backward_layer(rec, i, t)
            if self.stage == 2:
                for part in self._by_layer.get(i, ()):
                    self._reduce_scatter(part)
                    self.grad_shard[part.a : part.b] = self.grads[part.lo : part.hi]

    def reduced(self, *, defer: bool = False) -> Iterator[Any]:
        """Stage 1 reduce-scatters (1.); update the shard (2.); all-gather (3.). Yield nothing."""
        for part in self._parts:
            if self.stage == 1:
                self._reduce_scatter(part)
            part.step(self._lr)                                               # 2.
            self._allgather(part)                                             # 3.
        return iter(())

    def _reduce_scatter(self, part: _Part) -> None:
        b = part.bucket
        t0 = clock.stamp(b.index)  # ends the previous part's work, whose cost depends on it
        ring_reduce_scatter(self.p2p, self._ring, self._pos, self.grads[b.lo : b.hi],
                            part.bounds, self._scratch, tag=tags.RING_RS, largest=part.largest)
        self._count("reduce-scatter", b, t0)
        self.grads[part.lo : part.hi] *= self._scale  # the mean, on this rank's piece only
        flops.scale(part.hi - part.lo)

    def _allgather(self, part: _Part) -> None:
        b = part.bucket
        t0 = clock.stamp(b.index)  # ends this part's SGD, whose cost depends on its size
        ring_allgather(self.p2p, self._ring, self._pos, self.params[b.lo : b.hi], part.bounds,
                       tag=tags.RING_AG)
        self._count("allgather", b, t0)

    def _count(self, name: str, b: Bucket, t0: float) -> None:
        """Count one ring phase since ``t0`` as exposed communication (and trace it)."""
        t1 = clock.now()
        self.comm_total_s += t1 - t0
        self.comm_exposed_s += t1 - t0
        rec = trace.active()
        if rec is not None:
            rec.complete(f"{name} bucket {b.index}", "bucket", t0, t1, thread="training",
                         bytes=int(b.size * self.grads.itemsize))

    def describe(self) -> dict:
        """Return the plan and the shard as JSON-able facts."""
        return {"buckets": len(self.plan), "overlap": False, "accumulate": 1,
                "bucket_bytes": [int(b.size * self.grads.itemsize) for b in self.plan],
                "zero_stage": self.stage, "shard_elements": self.shard_size}
