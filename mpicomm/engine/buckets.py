"""Group gradient tensors into buckets, in backward order (tensor fusion, as PyTorch DDP).

    plan = plan_buckets(model.tensors, itemsize=4, bucket_bytes=25 * 2**20)

1. walk the tensors from the last one in the flat buffer to the first — the
   order backward produces them (last layer first);
2. add each to the open bucket; once the bucket holds ``bucket_bytes`` or more,
   close it and open the next (``bucket_bytes = 0``: every tensor is a bucket);
3. a bucket is one contiguous range ``[lo, hi)`` of the flat buffer, so it is
   reduced as a view, with no packing copy; it is ready once backward has
   yielded its lowest layer (``ready_layer``).

Cost per step with b buckets of a gradient of n bytes (ring, p ranks):
b·2(p−1)α + 2(p−1)/p·nβ + (p−1)/p·nγ — fusion divides the latency term by the
number of tensors per bucket and leaves the bytes terms unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Bucket", "plan_buckets"]


@dataclass(frozen=True)
class Bucket:
    """Elements ``[lo, hi)`` of the flat gradient; final once layer ``ready_layer`` is yielded."""

    index: int
    lo: int
    hi: int
    ready_layer: int
    tensors: int

    @property
    def size(self) -> int:
        return self.hi - self.lo


def plan_buckets(tensors: Sequence[tuple[int, int, int]], itemsize: int,
                 bucket_bytes: float,
                 full: Sequence[tuple[int, int, int]] | None = None) -> list[Bucket]:
    """Return the buckets, in the order they become ready (backward order).

    Args:
        tensors: ``(layer, lo, hi)`` of every tensor, in buffer order, contiguous.
        itemsize: bytes per element.
        bucket_bytes: close a bucket once it holds at least this many bytes
            (0: one bucket per tensor).
        full: the same tensors unfolded (``--fold``: ``tensors`` hold ~1/F of each): the
            buckets close where the full sizes say, so the plan is the unfolded run's,
            each bucket over the same tensors of ``tensors``.
    """
    if full is not None:
        return _refold(plan_buckets(full, itemsize, bucket_bytes), full, tensors)
    if bucket_bytes < 0:
        raise ValueError(f"bucket size must be >= 0 bytes, got {bucket_bytes}")
    buckets: list[Bucket] = []
    top = None  # open bucket: hi, count
    count = 0
    for layer, lo, hi in reversed(tensors):
        if top is None:
            top, count = hi, 0
        count += 1
        if (top - lo) * itemsize >= bucket_bytes:
            buckets.append(Bucket(len(buckets), lo, top, layer, count))
            top = None
    if top is not None:
        layer, lo, _ = tensors[0]
        buckets.append(Bucket(len(buckets), lo, top, layer, count))
    return buckets


def _refold(plan: list[Bucket], full: Sequence[tuple[int, int, int]],
            tensors: Sequence[tuple[int, int, int]]) -> list[Bucket]:
    """``plan`` (over ``full``) over the same tensors of ``tensors``, the folded layout."""
    if len(full) != len(tensors):
        raise ValueError(f"the folded layout has {len(tensors)} tensors, the full one "
                         f"{len(full)}")
    first = {lo: k for k, (_, lo, _) in enumerate(full)}  # a tensor's start -> its index
    last = {hi: k for k, (_, _, hi) in enumerate(full)}
    return [Bucket(b.index, tensors[first[b.lo]][1], tensors[last[b.hi]][2], b.ready_layer,
                   b.tensors) for b in plan]
