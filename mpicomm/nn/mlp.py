"""An MLP with a hand-written backward, in ``xp`` (NumPy on the CPU, CuPy on the GPU).

    model = MLP([784, 256, 10], seed=0)          # Linear-ReLU-Linear, softmax cross-entropy
    loss = model.forward(x, y)                    # mean loss over the batch (0-d array)
    for i in model.backward():                    # last layer first; grads[model.spans[i]]
        ...                                       # is final here (the engine starts its comm)
    model.params -= lr * model.grads              # ONE flat buffer each

Every parameter lives in one flat contiguous buffer ``params`` and every
gradient in one flat buffer ``grads`` of the same layout
``[W0, b0, W1, b1, ...]``; each layer's ``W``/``b``/``dW``/``db`` are views into
them, so the reducer gets the whole gradient in one call with no packing copy.

Each op below keeps its backward beside its forward (micrograd-style), so the
derivative can be checked by eye (the math itself: ``nn.ops``); ``tests/nn/test_mlp.py``
checks it against finite differences. Backward *writes* gradients (``out=``) instead of
accumulating them: one forward is followed by exactly one backward, so a
zero-grad pass would only cost a sweep over memory.

Activations and scratch arrays are allocated once per batch size and reused,
so a training step allocates nothing proportional to the model or the batch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from mpicomm.core import flops
from mpicomm.core.unsplit import UnsplitModel
from mpicomm.nn import ops
from mpicomm.workloads import kernels

__all__ = ["MLP", "Linear", "ReLU", "SoftmaxCrossEntropy", "parse_layers", "num_params",
           "layer_tensors"]


def parse_layers(text: str | Sequence[int]) -> tuple[int, ...]:
    """Parse ``"784,256,10"`` (or a sequence) into layer widths; raise ValueError if invalid.

    ``WxN`` repeats a width: ``"256,64x48,10"`` is 256, then 48 hidden layers of 64,
    then 10. The first width is the input features, the last the number of classes;
    at least two widths, all positive integers, at least 2 classes.
    """
    if isinstance(text, str):
        widths = []
        for p in (p.strip() for p in text.split(",")):
            width, _, count = p.partition("x")
            try:
                widths += [int(width)] * (int(count) if count else 1)
            except ValueError:
                raise ValueError(
                    f"--layers {text!r}: {p!r} is not an integer or WIDTHxCOUNT; "
                    "expected comma-separated widths like 128,256,10 or 256,64x48,10"
                ) from None
            if count and int(count) < 1:
                raise ValueError(f"--layers {text!r}: {p!r} repeats a width {count} times; "
                                 "the count must be >= 1")
    else:
        widths = [int(w) for w in text]
    if len(widths) < 2:
        raise ValueError(
            f"--layers {','.join(map(str, widths))}: need at least 2 widths "
            "(input features, ..., classes), e.g. 128,256,10"
        )
    if any(w < 1 for w in widths):
        raise ValueError(f"--layers {','.join(map(str, widths))}: widths must be >= 1")
    if widths[-1] < 2:
        raise ValueError(f"--layers {','.join(map(str, widths))}: need at least 2 classes")
    return tuple(widths)


def num_params(layers: Sequence[int]) -> int:
    """Return the parameter count of an MLP with these widths (weights + biases)."""
    return sum(i * o + o for i, o in zip(layers[:-1], layers[1:], strict=True))


def layer_tensors(layers: Sequence[int]) -> list[tuple[int, int, int]]:
    """Return ``(layer, lo, hi)`` of every weight and bias in the flat buffer, in buffer order."""
    out, lo = [], 0
    for i, (fan_in, fan_out) in enumerate(zip(layers[:-1], layers[1:], strict=True)):
        mid = lo + fan_in * fan_out
        out += [(i, lo, mid), (i, mid, mid + fan_out)]
        lo = mid + fan_out
    return out


# ----------------------------------------------------------------------------- ops
class Linear:
    """y = x @ W + b, with W (fan_in, fan_out) and b (fan_out,) views into the flat buffers."""

    def __init__(self, xp: Any, W: Any, b: Any, dW: Any, db: Any) -> None:
        self.xp = xp
        self.W, self.b, self.dW, self.db = W, b, dW, db
        self.x: Any = None

    def forward(self, x: Any, out: Any) -> Any:
        """Write x @ W + b into ``out`` and remember ``x`` for backward."""
        self.x = x
        return ops.dense(self.xp, x, self.W, self.b, out)

    def backward(self, dy: Any, dx: Any | None) -> Any | None:
        """Write dW = xᵀ·dy, db = Σ_rows dy and (unless ``dx`` is None) dx = dy·Wᵀ."""
        return ops.dense_backward(self.xp, self.x, self.W, dy, self.dW, self.db, dx)


class ReLU:
    """a = max(z, 0), in place; backward masks the incoming gradient where a == 0."""

    def __init__(self, xp: Any, mask: Any) -> None:
        self.xp = xp
        self.mask = mask  # reused (batch, width) 0/1 scratch, in the activations' dtype
        self.zero = mask.dtype.type(0)  # a typed 0: no casting buffer in the ufuncs
        self.a: Any = None

    def forward(self, z: Any) -> Any:
        """Apply max(z, 0) in place and return z (now the activation)."""
        self.a = ops.relu(self.xp, z, self.zero)
        return z

    def backward(self, da: Any) -> Any:
        """Zero ``da`` where the activation was clipped (da *= a > 0), in place."""
        return ops.relu_backward(self.xp, self.a, da, self.mask, da, self.zero)


class SoftmaxCrossEntropy:
    """loss = mean_i [log Σ_c exp(z_ic) − z_i,y_i]; dz = (softmax(z) − onehot(y)) / B."""

    def __init__(self, xp: Any, batch: int, classes: int, dtype: Any) -> None:
        self.xp = xp
        # NumPy's take(out=) copies through a temporary unless mode != "raise"; indices are valid
        self.take = functools.partial(np.take, mode="clip") if xp is np else xp.take
        self.rowmax = xp.empty((batch, 1), dtype=dtype)
        self.rowsum = xp.empty((batch, 1), dtype=dtype)
        self.picked = xp.empty(batch, dtype=dtype)
        self.rows_c = xp.arange(batch, dtype=np.int64) * classes  # flat index of row starts
        self.flat_idx = xp.empty(batch, dtype=np.int64)
        self.z: Any = None

    def forward(self, z: Any, y: Any) -> Any:
        """Return the mean loss; overwrite ``z`` with softmax(z) for backward."""
        xp = self.xp
        self.z = z
        z.max(axis=1, keepdims=True, out=self.rowmax)  # 1. shift by the row max for stability
        z -= self.rowmax
        xp.add(self.rows_c, y, out=self.flat_idx)  # 2. pick z[i, y_i] (shifted) before exp
        self.take(z.reshape(-1), self.flat_idx, out=self.picked)
        xp.exp(z, out=z)  # 3. softmax, in place
        z.sum(axis=1, keepdims=True, out=self.rowsum)
        z /= self.rowsum
        xp.log(self.rowsum, out=self.rowsum)  # 4. loss_i = log Σ exp − z_iy (shifted)
        self.picked -= self.rowsum[:, 0]
        flops.charge(*kernels.xent_forward(*z.shape)[0])  # max, shift, ..., exp, sum, log
        return -self.picked.mean()

    def backward(self) -> Any:
        """Turn the stored softmax into dloss/dz = (p − onehot) / B, in place, and return it."""
        z = self.z
        flat = z.reshape(-1)
        self.take(flat, self.flat_idx, out=self.picked)
        self.picked -= 1
        flat[self.flat_idx] = self.picked  # scatter p_iy − 1 back (B elements)
        z *= 1.0 / z.shape[0]
        flops.charge(*kernels.xent_backward(*z.shape)[0])  # pick, -1, scatter, scale
        return z


# --------------------------------------------------------------------------- model
class _Buffers:
    """Activations and scratch for one batch size (allocated once, reused every step)."""

    def __init__(self, xp: Any, layers: Sequence[int], batch: int, dtype: Any) -> None:
        self.z = [xp.empty((batch, w), dtype=dtype) for w in layers[1:]]  # layer outputs
        self.dx = [xp.empty((batch, w), dtype=dtype) for w in layers[1:-1]]  # grads wrt hidden
        self.relus = [ReLU(xp, xp.empty((batch, w), dtype=dtype)) for w in layers[1:-1]]
        self.loss = SoftmaxCrossEntropy(xp, batch, layers[-1], dtype)
        self.pred = xp.empty(batch, dtype=np.int64)
        self.hit = xp.empty(batch, dtype=bool)


class MLP(UnsplitModel):
    """Linear → ReLU → … → Linear → softmax cross-entropy, parameters in one flat buffer.

    Unsplit: what a part of a split model adds (``nn.model.Model``) comes from
    ``core.unsplit.UnsplitModel``.

    Args:
        layers: widths ``(features, hidden..., classes)``.
        seed: initialisation seed; the same seed gives bit-identical parameters
            on every rank and every array module (drawn on the host with NumPy).
        dtype: ``"float32"`` or ``"float64"``.
        xp: ``numpy`` or ``cupy``.

    Attributes:
        params, grads: flat contiguous buffers of ``num_params`` elements.
        spans: ``spans[i] = slice(lo, hi)`` of layer i (its W then b) in both buffers.
        tensors: ``(layer, lo, hi)`` of every weight and every bias, in buffer order
            (what the sync engine groups into buckets).
        linears: the ``Linear`` layers, whose W/b/dW/db are views into the buffers.
    """

    def __init__(
        self, layers: Sequence[int], *, seed: int = 0, dtype: Any = "float32", xp: Any = np
    ) -> None:
        self.layers = parse_layers(layers)
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"MLP: dtype must be float32 or float64, got {self.dtype}")
        self.xp = xp
        self.num_params = num_params(self.layers)
        self.params = xp.empty(self.num_params, dtype=self.dtype)
        self.grads = xp.zeros(self.num_params, dtype=self.dtype)
        self.linears: list[Linear] = []
        self.spans: list[slice] = []
        self.tensors = layer_tensors(self.layers)
        lo = 0
        for fan_in, fan_out in zip(self.layers[:-1], self.layers[1:], strict=True):
            mid, hi = lo + fan_in * fan_out, lo + fan_in * fan_out + fan_out
            W = self.params[lo:mid].reshape(fan_in, fan_out)
            dW = self.grads[lo:mid].reshape(fan_in, fan_out)
            self.linears.append(Linear(xp, W, self.params[mid:hi], dW, self.grads[mid:hi]))
            self.spans.append(slice(lo, hi))
            lo = hi
        self.init(seed)
        self._bufs: dict[int, _Buffers] = {}
        self._cur: _Buffers | None = None

    def init(self, seed: int) -> None:
        """Fill W with He-normal N(0, 2/fan_in) draws from ``seed`` and b with zeros."""
        rng = np.random.default_rng([seed, 0x6D6C70])  # "mlp": independent of the data streams
        for lin in self.linears:
            fan_in = lin.W.shape[0]
            if isinstance(lin.W, np.ndarray):
                rng.standard_normal(out=lin.W, dtype=self.dtype)  # straight into the flat buffer
                lin.W *= np.sqrt(2.0 / fan_in).astype(self.dtype)
            else:
                host = rng.standard_normal(lin.W.shape, dtype=self.dtype)
                host *= np.sqrt(2.0 / fan_in).astype(self.dtype)
                lin.W.set(host)
            lin.b[...] = 0

    def _buffers(self, batch: int) -> _Buffers:
        bufs = self._bufs.get(batch)
        if bufs is None:
            bufs = self._bufs[batch] = _Buffers(self.xp, self.layers, batch, self.dtype)
        return bufs

    def forward(self, x: Any, y: Any, before_layer: Callable[[int], None] | None = None) -> Any:
        """Return the mean softmax cross-entropy of the batch (0-d array); keep state for backward.

        Args:
            x: (batch, features) array of the model's dtype.
            y: (batch,) int64 class labels.
            before_layer: called with i before layer i runs (the engine's deferred
                buckets: the parameters of layer i are final once it returns).
        """
        bufs = self._cur = self._buffers(x.shape[0])
        h = x
        for i, lin in enumerate(self.linears):
            if before_layer is not None:
                before_layer(i)
            h = lin.forward(h, bufs.z[i])
            if i < len(bufs.relus):
                h = bufs.relus[i].forward(h)
        return bufs.loss.forward(h, y)

    def backward(self) -> Iterator[int]:
        """Compute gradients into ``grads``, yielding each layer index as its grads are final.

        Layers come last first; after ``yield i`` the slice ``grads[spans[i]]``
        will not change again this step. Exhaust the iterator to finish backward.
        """
        bufs = self._cur
        if bufs is None:
            raise RuntimeError("MLP.backward() called before forward()")
        dy = bufs.loss.backward()
        for i in range(len(self.linears) - 1, -1, -1):
            dx = bufs.dx[i - 1] if i > 0 else None
            self.linears[i].backward(dy, dx)
            yield i
            if dx is not None:
                dy = bufs.relus[i - 1].backward(dx)
        self._cur = None

    def loss_and_grads(self, x: Any, y: Any) -> Any:
        """Run forward and the whole backward; return the loss."""
        loss = self.forward(x, y)
        for _ in self.backward():
            pass
        return loss

    def evaluate(self, x: Any, y: Any, batch: int = 1024) -> tuple[float, int]:
        """Return (sum of per-sample losses, number of correct predictions) over ``x``, ``y``.

        Runs forward only, in chunks of ``batch`` rows; the final partial chunk
        uses its own (cached) buffers.
        """
        n = x.shape[0]
        loss_sum, correct = 0.0, 0
        for lo in range(0, n, batch):
            hi = min(lo + batch, n)
            bufs = self._buffers(hi - lo)
            h = x[lo:hi]
            for i, lin in enumerate(self.linears):
                h = lin.forward(h, bufs.z[i])
                if i < len(bufs.relus):
                    h = bufs.relus[i].forward(h)
            h.argmax(axis=1, out=bufs.pred)  # before the loss turns logits into probabilities
            self.xp.equal(bufs.pred, y[lo:hi], out=bufs.hit)
            correct += int(bufs.hit.sum())
            loss_sum += float(bufs.loss.forward(h, y[lo:hi])) * (hi - lo)
        self._cur = None
        return loss_sum, correct
