"""A workload the training loop can train: real tensor layout, modelled compute, no arithmetic.

    model = WorkloadModel(workload("resnet50"), batch=64, seed=0)
    loss = model.forward(x, y)          # charges each layer's forward (core.flops.charge)
    for layer in model.backward():      # charges each layer's backward, last layer first,
        ...                             # and fills its gradient: the engine buckets it

``fold=F`` (``--fold``): every tensor holds ⌈n/F⌉ elements, each set as above, so every
reduction is still checkable; the virtual clock charges the full size (``core.flops``).

It keeps the loop's model contract (``nn.Model``): flat ``params`` and ``grads`` in the
workload's forward order, ``tensors`` (layer, lo, hi) and ``spans``, ``backward()`` yielding
each layer once its gradient is final. Nothing is learnt: every element of layer i's gradient on
rank r is g(i, r) = (i + 1)·(r + 1)·1e-6, so every strategy's reduction is checkable (the
mean over p ranks is (i + 1)·(p + 1)/2·1e-6), and the loss is 0. What is real is what
decides a synchronisation: the tensor sizes, their order and the compute between them,
charged by the device model as ``costmodel.step.device_compute`` predicts it: each layer's
kernels (``Layer.fwd_kernels``, ``bwd_kernels``), by default

    forward  of layer i: fwd_flops·B FLOPs, 2·out·B + params values, one kernel
    backward of layer i: bwd_flops·B FLOPs, twice those values, two kernels (dX, dW) when it
                         has parameters, one otherwise

or, with ``compute`` (``--single-rate R``: ``costmodel.step.rate_compute``), layer i's
``compute.fwd_s[i]`` and ``bwd_s[i]`` seconds: batch/R a step shared out by FLOPs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from mpicomm.core import clock, flops
from mpicomm.core.unsplit import UnsplitModel
from mpicomm.workloads.workload import Workload

__all__ = ["WorkloadModel", "grad_value"]


def _charge(flop_count: float, values: float, kernels: int) -> None:
    """One layer kernel on the device model (``core.flops.charge``): a layer's compute, which
    no ``--fold`` shrinks (``folded=False``)."""
    flops.charge(flop_count, values, kernels, folded=False)


def _charge_s(seconds: float) -> None:
    """A layer's compute from a measured rate (``--single-rate``): ``seconds`` on the virtual
    clock, times ``--compute-scale``."""
    vc = clock.virtual()
    if vc is not None:
        vc.charge(vc.scale * seconds)


def grad_value(layer: int, rank: int = 0) -> float:
    """The gradient every element of layer ``layer`` gets on ``rank`` (module docstring)."""
    return (layer + 1) * (rank + 1) * 1e-6


class WorkloadModel(UnsplitModel):
    """``nn.Model`` over a workload's tensors (module docstring); unsplit (``core.unsplit``)."""

    def __init__(self, w: Workload, batch: int, *, rank: int = 0, dtype: Any = "float32",
                 xp: Any = np, fold: int = 1, compute: Any = None) -> None:
        self.workload, self.batch, self.xp, self.rank = w, batch, xp, rank
        self.fold = fold
        self.compute = compute  # per-layer seconds (costmodel.step.Compute: --single-rate)
        # or None: each layer's kernels on the device model
        self.tensors = w.flat_tensors(fold)  # --fold F: ⌈n/F⌉ elements a tensor
        self.num_params = self.tensors[-1][2] if self.tensors else 0
        self.spans = self._spans()
        self.params = xp.zeros(self.num_params, dtype=dtype)  # equal on every rank
        self.grads = xp.zeros_like(self.params)

    def _spans(self) -> list[slice]:
        """Layer i's range of the flat buffer (empty, at its place, for a layer without
        parameters)."""
        spans, at = [], 0
        for layer in self.workload.layers:
            n = sum(-(-math.prod(shape) // self.fold) for _, shape in layer.params)
            spans.append(slice(at, at + n))
            at += n
        return spans

    def forward(self, x: Any, y: Any,
                before_layer: Callable[[int], None] | None = None) -> float:
        """Charge every layer's forward (in order); the loss is 0."""
        for i, layer in enumerate(self.workload.layers):
            if before_layer is not None:
                before_layer(i)
            if self.compute is not None:
                _charge_s(self.compute.fwd_s[i])
                continue
            for kernel in layer.fwd_kernels(self.batch):
                _charge(*kernel)
        return 0.0

    def backward(self) -> Iterator[int]:
        """Charge each layer's backward, last first; fill its gradient; yield it."""
        for i in range(len(self.workload.layers) - 1, -1, -1):
            if self.compute is not None:
                _charge_s(self.compute.bwd_s[i])
            else:
                for kernel in self.workload.layers[i].bwd_kernels(self.batch):
                    _charge(*kernel)
            self.grads[self.spans[i]] = grad_value(i, self.rank)
            yield i

    def evaluate(self, x: Any, y: Any, batch: int = 1024) -> tuple[float, int]:
        return 0.0, 0
