"""The kernels the loop's MLP runs, written once: what ``nn.ops`` and ``nn.mlp`` charge and what
the predictor (``costmodel.step.device_compute``, ``workloads.mlp``) counts.

    dense_forward(B, i, o)            # x·W, then + b
    dense_backward(B, i, o, dx=True)  # dW = xᵀ·dy, db = Σ_rows dy, dx = dy·Wᵀ (not layer 0's)
    relu_forward(n), relu_backward(n) # max(z, 0); the mask a > 0, then da *= mask
    xent_forward(B, c), xent_backward(B, c)   # softmax cross-entropy and its gradient

Each function returns a tuple of kernels ``(FLOPs, values moved, launches)``, as
``core.flops.charge`` takes them (values at the precision's width). A product is
``core.flops.matmul_cost``; an elementwise kernel over n values reads and writes them.

Per dense layer at B rows, fan-in i, fan-out o: forward 2·B·i·o + B·o FLOPs in 2 kernels,
backward 4·B·i·o + B·o in 3 (2·B·i·o + B·o in 2 without dx).
"""

from __future__ import annotations

from mpicomm.core.flops import matmul_cost

__all__ = ["Kernel", "bias_add", "column_sum", "dense_forward", "dense_backward",
           "relu_forward", "relu_backward", "xent_forward", "xent_backward"]

Kernel = tuple[float, float, int]  # (FLOPs, values moved, launches)


def bias_add(rows: int, o: int) -> Kernel:
    """out += b over ``rows`` × ``o``: 1 FLOP a value, out read and written, b read."""
    return float(rows * o), 2 * rows * o + o, 1


def column_sum(rows: int, o: int) -> Kernel:
    """db = Σ_rows dy: 1 FLOP a value, dy read, db written."""
    return float(rows * o), rows * o + o, 1


def dense_forward(batch: int, i: int, o: int) -> tuple[Kernel, ...]:
    """x·W (B×i by i×o), then the bias add."""
    return matmul_cost(batch, i, o), bias_add(batch, o)


def dense_backward(batch: int, i: int, o: int, dx: bool = True) -> tuple[Kernel, ...]:
    """dW = xᵀ·dy, db, and (``dx``) dx = dy·Wᵀ."""
    out = (matmul_cost(i, batch, o), column_sum(batch, o))
    return out + ((matmul_cost(batch, o, i),) if dx else ())


def relu_forward(n: int) -> tuple[Kernel, ...]:
    """z = max(z, 0) in place: 1 FLOP a value, read and written."""
    return ((float(n), 2 * n, 1),)


def relu_backward(n: int) -> tuple[Kernel, ...]:
    """mask = a > 0 (a read, mask written), then da *= mask (2 read, 1 written): 2 kernels."""
    return ((2.0 * n, 5 * n, 2),)


def xent_forward(batch: int, classes: int) -> tuple[Kernel, ...]:
    """Softmax cross-entropy of B×c logits: row max, shift, index, pick, exp, row sum, divide,
    log (8 kernels, ~5 FLOPs a logit)."""
    n = batch * classes
    return ((5.0 * n, 8 * n + 6 * batch, 8),)


def xent_backward(batch: int, classes: int) -> tuple[Kernel, ...]:
    """(softmax − onehot) / B in place: pick, −1, scatter, scale (4 kernels)."""
    n = batch * classes
    return ((float(n), 2 * n + 4 * batch, 4),)
