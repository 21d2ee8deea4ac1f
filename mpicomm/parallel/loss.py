"""Softmax cross-entropy for the model-parallel runners (the same rule as ``train.model``)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["softmax_ce"]


def softmax_ce(z: Any, y: Any, scale: float) -> float:
    """Return the mean loss of logits ``z`` (rows) for labels ``y``; overwrite ``z`` with
    (softmax(z) − onehot(y)) · ``scale`` — dloss/dz when ``scale`` is 1/(rows of the step)."""
    z -= z.max(axis=1, keepdims=True)
    rows = np.arange(z.shape[0])
    picked = z[rows, y]
    np.exp(z, out=z)
    total = z.sum(axis=1, keepdims=True)
    loss = float((np.log(total[:, 0]) - picked).mean())
    z /= total
    z[rows, y] -= 1
    z *= scale
    return loss
