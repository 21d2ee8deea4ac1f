"""Error feedback: a residual per bucket around the top-k codec (EF-SGD, as PowerSGD's state).

Each call names its bucket with a ``key`` (the engine passes ``bucket.index``;
without one, the reducer uses the buffer's layout, ``"n<length>:<dtype>"``):

1. acc = residual[key] + x (the residual is created as zeros on first use);
2. the codec writes the top-k pairs of acc into the message;
3. residual[key] = acc with the sent positions zeroed — what was not sent waits
   for the next call with the same key.

``enabled=False`` (``topk:RATIO:noef``) encodes x itself and keeps nothing.

State is bounded: at most ``max_keys`` residuals (least recently used dropped
first), freed with the reducer (``clear``). It is never keyed by a buffer's
address, so a new buffer at a freed one's address inherits nothing, and equal-length
buckets that pass through one staging buffer (CuPy without CUDA-aware MPI) keep
their own residuals. ``state()`` / ``load_state()`` save and restore the residuals
(checkpoints), as ``{str(key): array}``.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from mpicomm.core import flops

__all__ = ["ErrorFeedback", "MAX_KEYS"]

MAX_KEYS = 1024  # residuals kept at most (a model's buckets are far fewer)


class ErrorFeedback:
    """Residual memory, keyed by bucket id, around a sparse ``codec`` (see module docstring)."""

    def __init__(self, codec, *, enabled: bool = True, max_keys: int = MAX_KEYS) -> None:
        self.codec, self.enabled, self.max_keys = codec, enabled, max_keys
        self._residuals: OrderedDict[str, np.ndarray] = OrderedDict()

    def residual(self, key: str, n: int, dtype) -> np.ndarray | None:
        """The residual of bucket ``key`` (``n`` values of ``dtype``); None without feedback."""
        if not self.enabled:
            return None
        r = self._residuals.get(key)
        if r is None or r.size != n or r.dtype != dtype:
            r = self._residuals[key] = np.zeros(n, dtype=dtype)
            while len(self._residuals) > self.max_keys:
                self._residuals.popitem(last=False)
        else:
            self._residuals.move_to_end(key)
        return r

    def encode(self, x: np.ndarray, msg: np.ndarray, residual: np.ndarray | None) -> None:
        """Steps 1-3 for ``x`` with its ``residual`` view (None: no feedback)."""
        if residual is None:
            self.codec.encode(x, msg)
            return
        np.add(residual, x, out=residual)
        flops.add(x.size)
        idx = self.codec.encode(residual, msg)
        residual[idx] = 0
        flops.charge(0, idx.size, 1, nbytes=8 * idx.size)

    def clear(self) -> None:
        """Forget every residual."""
        self._residuals.clear()

    def state(self) -> dict[str, np.ndarray]:
        """Return a copy of every residual, by key."""
        return {k: v.copy() for k, v in self._residuals.items()}

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Replace the residuals by ``state`` (as returned by ``state``)."""
        self._residuals.clear()
        for k, v in state.items():
            self._residuals[str(k)] = np.array(v, copy=True).ravel()
