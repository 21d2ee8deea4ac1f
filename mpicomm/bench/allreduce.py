"""The allreduce plug-in of the bench harness: one reducer behind nccl-tests' callbacks.

The harness (``mpicomm.bench``) knows nothing about strategies; it asks a
plug-in for the five things nccl-tests' ``testColl`` record gives:

- ``count(nbytes, itemsize)``: elements per rank for a message of ``nbytes``;
- ``init_data(buf, expected, seed, rep)``: this rank's input, and the expected
  result computed independently of the reducer;
- ``bus_factor(ranks)``: busbw = algbw × 2(p-1)/p for allreduce (see README, "algbw and busbw");
- ``run(buf)``: one in-place allreduce;
- roles: ``active`` (takes part in the sweep) and ``serve()`` for a rank that
  only serves (a dedicated parameter server), ``close()`` at the end.

Inputs are small integers drawn from (seed, worker rank, rep) in a block of
``PERIOD`` values tiled over the buffer, so any sum of them is exact in
float32 and float64: a wrong element is off by at least 1, never by rounding.

Buffers may be NumPy or CuPy arrays (``bench --device gpu``): the inputs and
the expectation are drawn on the host, copied to the device once per fill
(outside the timed calls), and each timed call waits for the device, so a
call's time includes its GPU work.
"""

from __future__ import annotations

import numpy as np

from mpicomm.core.backend import array_module, sync_device
from mpicomm.reducers import Reducer

__all__ = ["AllreduceTest", "PERIOD", "rank_block", "tile"]

PERIOD = 4099  # a prime: a misplaced segment of any ordinary length lands on other values


def rank_block(seed: int, rank: int, rep: int) -> np.ndarray:
    """Return ``PERIOD`` integers in [-4, 4] (float64) for worker ``rank``."""
    rng = np.random.default_rng([seed, rank, rep])
    return rng.integers(-4, 5, size=PERIOD).astype(np.float64)


def tile(block: np.ndarray, out) -> None:
    """Fill ``out`` with ``block`` repeated (``out[i] = block[i % len(block)]``), no temporaries.

    ``out`` may be a CuPy array: the block is copied to the device once.
    """
    block = array_module(out).asarray(block)
    period = block.size
    k, rest = divmod(out.size, period)
    if k:
        out[: k * period].reshape(k, period)[...] = block
    out[k * period :] = block[:rest]


class AllreduceTest:
    """In-place allreduce through ``reducer`` with op ``op`` ("sum" or "mean")."""

    collective = "allreduce"

    def __init__(self, reducer: Reducer, op: str = "sum") -> None:
        self.reducer = reducer
        self.op = op
        self.label = reducer.name
        self.active = reducer.is_worker
        self.ranks = reducer.num_workers

    def count(self, nbytes: int, itemsize: int) -> int:
        """Elements per rank for a message of ``nbytes`` (at least one)."""
        return max(nbytes // itemsize, 1)

    def bus_factor(self, ranks: int) -> float:
        """busbw / algbw for allreduce: 2(p-1)/p (each rank's link carries that share)."""
        return 2.0 * (ranks - 1) / ranks if ranks > 1 else 0.0

    def init_data(self, buf, expected, seed: int, rep: int) -> float:
        """Fill this rank's input and the expected result; return the allowed error."""
        me, p = self.reducer.worker_rank, self.ranks
        tile(rank_block(seed, me, rep), buf)
        total = np.zeros(PERIOD)
        for r in range(p):  # every rank's input, redrawn: independent of the reducer
            total += rank_block(seed, r, rep)
        if self.op == "mean":
            total /= p
        tile(total, expected)
        eps = float(np.finfo(buf.dtype).eps)
        return 4 * eps * (4 * p + 1)  # rounding of a mean; sums of small integers are exact

    def run(self, buf) -> None:
        """One in-place allreduce (on a GPU buffer: until the device is done)."""
        self.reducer.allreduce(buf, op=self.op)
        sync_device(buf)

    def serve(self) -> None:
        """Serve the workers until they close (dedicated parameter servers)."""
        self.reducer.serve()

    def close(self) -> None:
        self.reducer.close()

    def describe(self) -> dict:
        return self.reducer.describe()
