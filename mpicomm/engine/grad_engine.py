"""The sync engine: reduce the flat gradient bucket by bucket, overlapped with backward.

    engine = GradEngine(reducer, model.grads, model.tensors, model.spans,
                        bucket_bytes=25 * 2**20, overlap=True, accumulate=1)
    for k in range(engine.accumulate):              # micro-batches of one optimizer step
        model.forward(x, y)
        engine.backward(model.backward(), last=k == engine.accumulate - 1)
    for bucket in engine.reduced():                 # each bucket once its reduction is done
        sgd.update(bucket.index, lr)                # the optimizer waits only for what it needs
    engine.close()

One optimizer step:

1. micro-batches 1..K−1 (``--accumulate K``): backward runs to the end and its
   gradient is added into an accumulator — no message;
2. the last micro-batch: as backward yields layer i (its gradient final), the
   accumulator's share of layer i is added and scaled by 1/K; every bucket whose
   lowest layer is i is now complete and, with overlap, is handed to the
   communication thread (``AsyncReducer``) at once, while backward goes on;
3. ``reduced()`` waits for the buckets in the order they were sent and yields
   each one; the time spent waiting is the *exposed* communication;
4. with ``overlap_forward`` (ByteScheduler's priority order, made static so that
   every rank issues the same collectives in the same order): after a measured
   step the ranks agree on the *head*, the buckets whose reduction starts before
   backward ends (``engine/priority.py``); from then on only the head is sent as
   backward yields it, the *tail* is sent when backward ends, first layer first,
   ``reduced(defer=True)`` yields the head alone, and the next step's forward
   waits for each tail bucket just before the first layer it holds
   (``ready_for(layer)``), so the tail's reduction runs behind that forward.

Without overlap (``overlap=False``, or when the whole gradient is one bucket so
there is nothing to overlap) the buckets are reduced on the training thread
after backward, one blocking call each: all their time is exposed.

Cost per step with b buckets (ring, p ranks, n bytes): b·2(p−1)α +
2(p−1)/p·nβ + (p−1)/p·nγ of communication, of which only what outlasts the
remaining backward is exposed: ≈ max(0, comm − backward after the first bucket)
plus the last bucket's reduction. With ``overlap_forward`` the tail also hides
behind the next forward: exposed ≈ max(0, comm − backward − forward) plus gaps.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from mpicomm.core import clock, flops, nvtx, trace
from mpicomm.core.backend import sync_device
from mpicomm.engine.async_reducer import AsyncReducer, Work
from mpicomm.engine.base import Engine
from mpicomm.engine.buckets import Bucket, plan_buckets
from mpicomm.engine.priority import agree_head

__all__ = ["GradEngine"]


class GradEngine(Engine):
    """Buckets, overlap and accumulation over one flat gradient buffer.

    Args:
        reducer: the worker's reducer (only the engine calls it from now on).
        grads: the flat gradient buffer (NumPy or CuPy).
        tensors: ``(layer, lo, hi)`` of every tensor in buffer order (``MLP.tensors``).
        spans: ``spans[i]``: slice of layer i in ``grads`` (``MLP.spans``).
        bucket_bytes: close a bucket at this many bytes (0: one per tensor).
        overlap: reduce full buckets on the communication thread during backward.
        accumulate: micro-batches per optimizer step (reduce once every K).
        overlap_forward: also hide the tail behind the next forward (step 4.; needs
            ``overlap`` and ``agree_comm``, the communicator of every worker).
        full_tensors: ``tensors`` unfolded (``--fold``): the buckets are planned on the
            full sizes, so the plan is the unfolded run's (``plan_buckets``).

    Attributes:
        buckets: the plan, in the order buckets are sent.
        comm_total_s, comm_exposed_s: seconds of reduction and of waiting for it,
            summed since the last ``take_times()``.
    """

    def __init__(self, reducer: Any, grads: Any, tensors: Sequence[tuple[int, int, int]],
                 spans: Sequence[slice], *, bucket_bytes: float, overlap: bool = True,
                 accumulate: int = 1, overlap_forward: bool = False,
                 agree_comm: Any = None,
                 full_tensors: Sequence[tuple[int, int, int]] | None = None) -> None:
        if accumulate < 1:
            raise ValueError(f"accumulate must be >= 1, got {accumulate}")
        super().__init__()
        self.reducer, self.grads, self.accumulate = reducer, grads, accumulate
        self.buckets: list[Bucket] = plan_buckets(tensors, grads.itemsize, bucket_bytes,
                                                  full_tensors)
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
        self._nvtx_names = [f"bucket {b.index}" for b in self.buckets]  # train --nvtx
        self.overlap_forward = overlap_forward and self.overlap
        if self.overlap_forward and agree_comm is None:
            raise ValueError("overlap_forward needs agree_comm (the workers' communicator)")
        self._agree_comm, self._full_steps = agree_comm, 0
        self._deferred = [False] * len(self.buckets)  # k: the next forward waits for bucket k
        self._set_head(len(self.buckets))  # all sent as backward yields them (3.)

    # ---------------------------------------------------------------- steps
    def backward(self, layers: Iterator[int], *, last: bool = True) -> None:
        """Run one micro-batch's backward (``model.backward()``); on the last one, send buckets."""
        if self._deferred_left:  # their gradients are still on the wire: never overwrite them
            raise RuntimeError("GradEngine: backward began before the forward took its deferred "
                               "buckets (ready_for every layer, or settle())")
        rec = trace.active()
        perf = clock.now
        t = perf()
        if not last:  # 1. accumulate, no message
            for i in layers:
                if rec is not None:
                    t = trace.backward_layer(rec, i, t)
            if self._micro == 0:
                self._acc[...] = self.grads
                flops.charge(0, 2 * self.grads.size)
            else:
                self._acc += self.grads
                flops.add(self.grads.size)
            self._micro += 1
            return
        scale = 1.0 / (self._micro + 1)
        for i in layers:  # 2. layer i is final: fold in the accumulator, send what is complete
            if self._micro:
                g, acc = self._layers[i]
                g += acc
                g *= scale
                flops.add(g.size)
                flops.scale(g.size)
            if rec is not None:
                t = trace.backward_layer(rec, i, t)
            if self._async is not None:
                for k in self._by_layer.get(i, ()):
                    if k < self.head:  # the tail (step 4.) waits for the end of backward
                        self._submit(k)
        if self._async is not None:
            for k in self._tail:  # step 4.: the tail, first layer first, once backward ends
                self._submit(k)
        self._micro = 0

    def _submit(self, k: int) -> None:
        if self.on_gpu:
            sync_device(self.grads)
        self._async.submit(self._works[k])

    def reduced(self, *, defer: bool = False) -> Iterator[Bucket]:
        """Yield each bucket once reduced, in send order (3.); the wait is exposed comm.

        ``defer`` (with ``overlap_forward``, once the head is agreed): yield the head
        only; the next forward takes the tail through ``ready_for`` (4.)."""
        rec = trace.active()
        if self._async is None:  # no overlap: reduce here, one blocking call per bucket
            yield from self._reduce_here(rec)
            return
        defer = defer and self.head < len(self.buckets)
        for k in self._head if defer else self._order:
            self._wait(k, rec)
            yield self.buckets[k]
        if defer:
            for k in self._tail:
                self._deferred[k] = True
            self._deferred_left = len(self._tail)
        elif self.overlap_forward:
            self._full_steps += 1
            if self._full_steps == 2 and self.head == len(self.buckets):  # 4.: measured, agree
                self._set_head(agree_head(self._agree_comm, self._works))

    def _set_head(self, head: int) -> None:
        """Send buckets [0, head) as backward yields them, the rest after it, first layer first."""
        self.head = head
        self._head = list(range(head))
        self._tail = list(range(len(self.buckets) - 1, head - 1, -1))
        self._order = self._head + self._tail  # the order they are sent, and waited for
        self._tail_of_layer: dict[int, list[int]] = {}  # layer -> tail buckets it is the lowest of
        for k in self._tail:
            self._tail_of_layer.setdefault(self.buckets[k].ready_layer, []).append(k)
        self._deferred_left = 0

    def _reduce_here(self, rec: Any) -> Iterator[Bucket]:
        """Reduce every bucket on the training thread (no overlap): all of it is exposed."""
        perf, stamp = clock.now, clock.stamp
        ranges, allreduce, views = nvtx.enabled(), self.reducer.allreduce, self.views
        for k, bucket in enumerate(self.buckets):
            t0 = stamp(k)  # ends bucket k-1's SGD, whose cost depends on k
            if ranges:
                with nvtx.range(self._nvtx_names[k]):
                    allreduce(views[k], op="mean", key=bucket.index)
            else:  # the hot path: no context manager per bucket
                allreduce(views[k], op="mean", key=bucket.index)
            t1 = perf()
            self.comm_total_s += t1 - t0
            self.comm_exposed_s += t1 - t0
            if rec is not None:
                rec.complete(f"bucket {k}", "bucket", t0, t1, thread="training",
                             bytes=int(views[k].nbytes), tensors=bucket.tensors)
            yield bucket

    def ready_for(self, layer: int) -> Iterator[Bucket]:
        """Yield the deferred buckets the forward of ``layer`` needs, each once reduced (4.)."""
        if self._deferred_left:
            for k in self._tail_of_layer.get(layer, ()):
                if self._deferred[k]:
                    self._deferred[k] = False
                    self._deferred_left -= 1
                    self._wait(k, trace.active())
                    yield self.buckets[k]

    def settle(self) -> Iterator[Bucket]:
        """Yield every bucket still deferred, once reduced (before reading the parameters)."""
        for k in self._tail:
            if self._deferred[k]:
                yield from self.ready_for(self.buckets[k].ready_layer)

    def _wait(self, k: int, rec: Any) -> None:
        """Wait for bucket k's reduction on the communication thread; the wait is exposed."""
        t0 = clock.stamp(k)  # ends bucket k-1's SGD or a layer's forward: told apart by k
        work = self._works[k]
        with nvtx.range(self._nvtx_names[k]):  # Nsight: the wait for bucket k
            work.wait()
        t1 = clock.now()
        self.comm_total_s += work.seconds
        self.comm_exposed_s += t1 - t0
        if rec is not None:
            rec.complete(f"wait bucket {k}", "wait", t0, t1, thread="training")

    def _close(self) -> None:
        """Stop the communication thread."""
        if self._async is not None:
            self._async.close()
            self._async = None

    def describe(self) -> dict:
        """Return the plan as JSON-able facts."""
        return {"buckets": len(self.buckets), "overlap": self.overlap,
                "overlap_forward": self.overlap_forward, "head": self.head,
                "accumulate": self.accumulate,
                "bucket_bytes": [int(v.nbytes) for v in self.views]}

    @staticmethod
    def _traced(work: Work) -> None:
        rec = trace.active()
        if rec is not None:
            rec.complete(f"bucket {work.tag.index}", "bucket", work.start, work.end,
                         thread="communication", bytes=int(work.buf.nbytes),
                         tensors=work.tag.tensors)
