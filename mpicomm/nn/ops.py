"""The layers' math, written once: dense (x·W + b) and ReLU, forward and backward, in ``xp``.

    dense(xp, x, W, b, out)                       # out = x·W + b
    dense_backward(xp, x, W, dy, dW, db, dx)      # dW = xᵀ·dy, db = Σ_rows dy, dx = dy·Wᵀ
    relu(xp, z)                                   # z = max(z, 0), in place
    relu_backward(xp, a, da, mask, out)           # out = da · (a > 0)

The unsplit model (``nn.mlp.MLP``), a pipeline stage (``parallel.stage``) and a
tensor-parallel shard (``parallel.tensor``) compose these; each matmul is charged
through ``core.flops`` (``--flop-rate``), every other kernel as ``workloads.kernels``
counts it (the predictor's count: one description). Every function writes into buffers the
caller keeps (``out=``): nothing is allocated per call.

Cost per dense layer at B rows, fan-in i, fan-out o: forward 2·B·i·o flops, backward
2·B·i·o for dW plus 2·B·i·o for dx (left out for the first layer); the bias add and db
B·o each (``workloads.kernels``).
"""

from __future__ import annotations

from typing import Any

from mpicomm.core import flops
from mpicomm.workloads import kernels

__all__ = ["dense", "dense_backward", "relu", "relu_backward"]


def dense(xp: Any, x: Any, W: Any, b: Any, out: Any) -> Any:
    """Write ``x·W + b`` into ``out`` and return it."""
    flops.matmul(xp, x, W, out)
    out += b
    flops.charge(*kernels.bias_add(out.shape[0], b.size))
    return out


def dense_backward(xp: Any, x: Any, W: Any, dy: Any, dW: Any, db: Any,
                   dx: Any | None = None) -> Any | None:
    """Write dW = xᵀ·dy, db = Σ_rows dy and (unless ``dx`` is None) dx = dy·Wᵀ."""
    flops.matmul(xp, x.T, dy, dW)
    dy.sum(axis=0, out=db)
    flops.charge(*kernels.column_sum(dy.shape[0], db.size))
    if dx is not None:
        flops.matmul(xp, dy, W.T, dx)
    return dx


def relu(xp: Any, z: Any, zero: Any = 0) -> Any:
    """Apply max(z, 0) in place and return z (``zero``: a typed 0, no casting buffer)."""
    flops.charge(*kernels.relu_forward(z.size)[0])
    return xp.maximum(z, zero, out=z)


def relu_backward(xp: Any, a: Any, da: Any, mask: Any, out: Any, zero: Any = 0) -> Any:
    """Write ``da · (a > 0)`` into ``out`` (``mask``: scratch like ``a``); ``out`` may be ``da``."""
    xp.greater(a, zero, out=mask)
    flops.charge(*kernels.relu_backward(da.size)[0])  # the mask, then da *= mask
    return xp.multiply(da, mask, out=out)
