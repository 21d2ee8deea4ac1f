"""The sync engine: reduce the flat gradient bucket by bucket, overlapped with backward.

    engine = GradEngine(reducer, model.grads, model.tensors, model.spans,
                        bucket_bytes=25 * 2**20, overlap=True, accumulate=1)
    for k in range(engine.accumulate):              # micro-batches of one optimizer step
        model.forward(x, y)
        engine.backward(model.backward(), last=k == engine.accumulate - 1)
    for bucket in engine.reduced():                 # each bucket once its reduction is done
        sgd.update(bucket.lo, bucket.hi)            # the optimizer waits only for what it needs
    engine.close()

One optimizer step:

1. micro-batches 1..K−1 (``--accumulate K``): backward runs to the end and its
   gradient is added into an accumulator — no message;
2. the last micro-batch: as backward yields layer i (its gradient final), the
   accumulator's share of layer i is added and scaled by 1/K; every bucket whose
   lowest layer is i is now complete and, with overlap, is handed to the
   communication thread (``AsyncReducer``) at once, while backward goes on;
3. ``reduced()`` waits for the buckets in the order they were sent and yields
   each one; the time spent waiting is the *exposed* communication.

Without overlap (``overlap=False``, or when the whole gradient is one bucket so
there is nothing to overlap) the buckets are reduced on the training thread
after backward, one blocking call each: all their time is exposed.

Cost per step with b buckets (ring, p ranks, n bytes): b·2(p−1)α +
2(p−1)/p·nβ + (p−1)/p·nγ of communication, of which only what outlasts the
remaining backward is exposed: ≈ max(0, comm − backward after the first bucket)
plus the last bucket's reduction.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from mpicomm.core import clock, nvtx, trace
from mpicomm.core.backend import sync_device
from mpicomm.engine.async_reducer import AsyncReducer, Work
from mpicomm.engine.buckets import Bucket, plan_buckets

__all__ = ["GradEngine"]


class GradEngine:
    """Buckets, overlap and accumulation over one flat gradient buffer.

    Args:
        reducer: the worker's reducer (only the engine calls it from now on).
        grads: the flat gradient buffer (NumPy or CuPy).
        tensors: ``(layer, lo, hi)`` of every tensor in buffer order (``MLP.tensors``).
        spans: ``spans[i]``: slice of layer i in ``grads`` (``MLP.spans``).
        bucket_bytes: close a bucket at this many bytes (0: one per tensor).
        overlap: reduce full buckets on the communication thread during backward.
        accumulate: micro-batches per optimizer step (reduce once every K).

    Attributes:
        buckets: the plan, in the order buckets are sent.
        comm_total_s, comm_exposed_s: seconds of reduction and of waiting for it,
            summed since the last ``take_times()``.
    """

    def __init__(self, reducer: Any, grads: Any, tensors: Sequence[tuple[int, int, int]],
                 spans: Sequence[slice], *, bucket_bytes: float, overlap: bool = True,
                 accumulate: int = 1) -> None:
        if accumulate < 1:
            raise ValueError(f"accumulate must be >= 1, got {accumulate}")
        self.reducer, self.grads, self.accumulate = reducer, grads, accumulate
        self.buckets: list[Bucket] = plan_buckets(tensors, grads.itemsize, bucket_bytes)
        self.views = [grads[b.lo : b.hi] for b in self.buckets]  # made once, reused
        self.overlap = overlap and len(self.buckets) > 1  # one bucket: nothing to overlap
        self.on_gpu = type(grads).__module__.split(".")[0] == "cupy"
        self._acc = None if accumulate == 1 else grads.copy()
        self._layers = [(grads[s], None if self._acc is None else self._acc[s]) for s in spans]
        self._by_layer: dict[int, list[int]] = {}
        for b in self.buckets:
            self._by_layer.setdefault(b.ready_layer, []).append(b.index)
        self._async = AsyncReducer(reducer, on_done=self._traced) if self.overlap else None
        self._works = [Work(v, "mean", tag=b, key=b.index)
                       for v, b in zip(self.views, self.buckets, strict=True)]
        self._micro = 0
        self.comm_total_s = self.comm_exposed_s = 0.0
        self._nvtx_names = [f"bucket {b.index}" for b in self.buckets]  # train --nvtx

    # ---------------------------------------------------------------- steps
    def backward(self, layers: Iterator[int], *, last: bool = True) -> None:
        """Run one micro-batch's backward (``model.backward()``); on the last one, send buckets."""
        rec = trace.active()
        perf = clock.now
        t = perf()
        if not last:  # 1. accumulate, no message
            for i in layers:
                if rec is not None:
                    t = _layer_event(rec, i, t)
            if self._micro == 0:
                self._acc[...] = self.grads
            else:
                self._acc += self.grads
            self._micro += 1
            return
        scale = 1.0 / (self._micro + 1)
        for i in layers:  # 2. layer i is final: fold in the accumulator, send what is complete
            if self._micro:
                g, acc = self._layers[i]
                g += acc
                g *= scale
            if rec is not None:
                t = _layer_event(rec, i, t)
            if self._async is not None:
                for k in self._by_layer.get(i, ()):
                    if self.on_gpu:
                        sync_device(self.grads)
                    self._async.submit(self._works[k])
        self._micro = 0

    def reduced(self) -> Iterator[Bucket]:
        """Yield each bucket once reduced, in send order (3.); the wait is exposed comm."""
        rec = trace.active()
        perf = clock.now
        ranges, allreduce, views = nvtx.enabled(), self.reducer.allreduce, self.views
        for k, bucket in enumerate(self.buckets):
            t0 = perf()
            if self._async is not None:
                work = self._works[k]
                with nvtx.range(self._nvtx_names[k]):  # Nsight: the wait for bucket k
                    work.wait()
                t1 = perf()
                self.comm_total_s += work.seconds
                if rec is not None:
                    rec.complete(f"wait bucket {k}", "wait", t0, t1, thread="training")
            else:
                if ranges:
                    with nvtx.range(self._nvtx_names[k]):
                        allreduce(views[k], op="mean", key=bucket.index)
                else:  # the hot path: no context manager per bucket
                    allreduce(views[k], op="mean", key=bucket.index)
                t1 = perf()
                self.comm_total_s += t1 - t0
                if rec is not None:
                    rec.complete(f"bucket {k}", "bucket", t0, t1, thread="training",
                                 bytes=int(self.views[k].nbytes), tensors=bucket.tensors)
            self.comm_exposed_s += t1 - t0
            yield bucket

    stopped = False  # the engine contract (``PSEngine``): this engine never asks to stop

    def start_step(self, step: int, lr: float) -> None:
        """The engine contract: nothing to do (the loop applies the optimizer)."""

    def sync_state(self, momentum: Any) -> None:
        """The engine contract: nothing to do (the loop owns ``momentum``)."""

    def take_times(self) -> tuple[float, float]:
        """Return (comm_total_s, comm_exposed_s) since the last call and reset them."""
        out = (self.comm_total_s, self.comm_exposed_s)
        self.comm_total_s = self.comm_exposed_s = 0.0
        return out

    def close(self) -> None:
        """Stop the communication thread (twice is harmless)."""
        if self._async is not None:
            self._async.close()
            self._async = None

    def describe(self) -> dict:
        """Return the plan as JSON-able facts."""
        return {"buckets": len(self.buckets), "overlap": self.overlap,
                "accumulate": self.accumulate,
                "bucket_bytes": [int(v.nbytes) for v in self.views]}

    @staticmethod
    def _traced(work: Work) -> None:
        rec = trace.active()
        if rec is not None:
            rec.complete(f"bucket {work.tag.index}", "bucket", work.start, work.end,
                         thread="communication", bytes=int(work.buf.nbytes),
                         tensors=work.tag.tensors)


def _layer_event(rec: Any, layer: int, t: float) -> float:
    now = clock.now()
    rec.complete(f"backward layer {layer}", "backward", t, now, thread="training")
    return now
