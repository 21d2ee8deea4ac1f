"""Agree on the buckets reduced during backward; the rest go after it, first layer first.

    head = agree_head(comm, works)   # once, after a measured step (``GradEngine``, step 4.)

ByteScheduler reduces the buckets the next forward needs first (the first layer's)
and so hides communication behind that forward too. Its order is chosen at run
time from what is ready, and a collective library needs every rank to issue the
same collectives in the same order, so here the order is static and agreed once:

1. after a step reduced in send order (the last layer's bucket first), each rank
   counts the buckets whose reduction *started* before backward ended (before the
   last bucket, which holds the first layer, was handed over): the communication
   thread's work during backward. The one still running when backward ends stays in
   the head: left to the tail, it would leave the thread idle until backward ends;
2. the ranks take the least count (one Allreduce of two numbers, MAX of the clock
   and of the negated count; under the virtual clock every rank leaves at the
   latest time, as from any collective): that many buckets form the *head*, never
   all of them;
3. from then on the head is sent as backward yields it and the *tail* when
   backward ends, in forward order, so the next forward finds its first layer's
   bucket first; every rank sends the same buckets in the same order.

Cost: one Allreduce of 16 bytes once per run (α). A head chosen too short idles
the communication thread until backward ends; too long delays the first layer's
bucket behind the extra buckets' reductions. Either way the sums are the same: only
their order changes, so the run's losses are bitwise those of the plain order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mpicomm.p2p import max_over

__all__ = ["agree_head", "local_head"]


def local_head(works: Sequence[Any]) -> int:
    """Step 1: how many reductions (in send order) started before the last was handed over."""
    backward_end = max(w.posted for w in works)
    started = sum(1 for w in works if w.start < backward_end)
    return min(started, len(works) - 1)  # the first layer's bucket is always in the tail


def agree_head(comm: Any, works: Sequence[Any]) -> int:
    """Steps 1–2: the least ``local_head`` over the ranks of ``comm`` (collective)."""
    return -int(max_over(comm, np.array([-local_head(works)], dtype=np.float64))[0])
