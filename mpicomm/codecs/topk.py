"""top-k sparsification with error feedback (EF-SGD / Deep Gradient Compression).

Per call on a buffer of m values, with k = min(m, max(1, ceil(RATIO·m))):

1. (error feedback, ``feedback.ErrorFeedback``) acc = x + residual of the bucket;
   without it acc = x;
2. idx = the k positions of largest |acc| (``top_k``: a sampled threshold,
   then ``np.argpartition`` over the candidates; exact), val = acc[idx];
3. (error feedback) residual = acc with acc[idx] set to 0 — what was not sent
   waits for the next step (``:noef``: the rest is dropped).

So ``sent + residual_new == x + residual_old`` exactly (bit for bit: values are
copied, not rounded). A pair is (int32 index, value in the buffer's dtype); a
message of k pairs is one ``uint8`` buffer [k × int32][k × value]:
``pair_bytes(k) = k·(4 + itemsize)`` (8k for float32).

The codec itself keeps no state between calls (only scratch): the residuals
live in ``feedback.ErrorFeedback``, keyed by the bucket id the caller passes.
"""

from __future__ import annotations

import math

import numpy as np

from mpicomm.core import flops

__all__ = ["TopKCodec"]


def top_k(mag: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest of ``mag`` (any order; ties broken arbitrarily), exactly.

    A threshold t from a strided sample (its top 2k/m fraction) splits ``mag``:
    when fewer than k values exceed t but at least k reach it, t is the k-th
    largest — take those above and fill with those equal (ties, zeros of a
    sparse input); when at least k exceed t, the top k are among them, and
    one ``argpartition`` over these few candidates picks them. Otherwise (t
    too high) ``argpartition`` over all of ``mag``. NaN counts as above every
    threshold, as ``argpartition`` sorts it last: it is always sent, never
    left in a residual (a diverging run stays visible) — as long as there are
    at most k non-finite values; beyond k, k of them are sent.
    """
    m = mag.size
    if k >= m:
        return np.arange(m)
    stride = max(1, m // 16384)  # a sample of about 16k values
    if stride > 1:
        sample = mag[::stride]
        want = min(sample.size - 1, max(1, (2 * k * sample.size) // m))
        t = np.partition(sample, sample.size - want)[sample.size - want]
        above = np.flatnonzero(~(mag <= t))  # NaN too: argpartition ranks it largest
        if above.size >= k:
            return above[np.argpartition(mag[above], above.size - k)[above.size - k :]]
        equal = np.flatnonzero(mag == t)
        if above.size + equal.size >= k:
            return np.concatenate((above, equal[: k - above.size]))
    return np.argpartition(mag, m - k)[m - k :]


class TopKCodec:
    """Top-k (index, value) pairs of a buffer (see module docstring); no state but scratch."""

    name = "topk"

    def __init__(self, ratio: float) -> None:
        self.ratio = ratio
        self._abs: dict[str, np.ndarray] = {}

    def k_of(self, m: int) -> int:
        return min(m, max(1, math.ceil(self.ratio * m))) if m else 0

    @staticmethod
    def pair_bytes(k: int, itemsize: int) -> int:
        return k * (4 + itemsize)

    @staticmethod
    def split(msg: np.ndarray, k: int, dtype) -> tuple[np.ndarray, np.ndarray]:
        """(indices, values) views of a message of ``k`` pairs."""
        return msg[: 4 * k].view(np.int32), msg[4 * k : k * (4 + np.dtype(dtype).itemsize)].view(
            dtype)

    def encode(self, x: np.ndarray, msg: np.ndarray) -> np.ndarray:
        """Write the top-k pairs of ``x`` into ``msg``; return their indices (a view of ``msg``)."""
        m = x.size
        k = self.k_of(m)
        idx, val = self.split(msg, k, x.dtype)
        if k == 0:
            return idx
        mag = self._abs.get(x.dtype.char)
        if mag is None or mag.size < m:
            mag = self._abs[x.dtype.char] = np.empty(m, dtype=x.dtype)
        np.abs(x, out=mag[:m])
        idx[:] = top_k(mag[:m], k)
        np.take(x, idx, out=val)
        flops.charge(m, 3 * m + 2 * k, 3, nbytes=8 * k)  # |x|, the selection, the gather
        return idx

    @staticmethod
    def decode_add(msg: np.ndarray, k: int, acc: np.ndarray) -> None:
        """Add ``k`` pairs of ``msg`` into the dense ``acc`` (indices of one message are unique)."""
        idx, val = TopKCodec.split(msg, k, acc.dtype)
        acc[idx] += val
        flops.charge(k, 3 * k, 1, nbytes=8 * k)  # a scatter-add
