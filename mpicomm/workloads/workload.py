"""A workload: a model's layers in forward order, read in backward order by the engine.

    w = workload("resnet50")
    w.num_params                  # 25,557,032
    w.tensors_backward()          # [(layer index, name, elements), ...] last layer first
    w.flat_tensors()              # [(layer, lo, hi), ...] in buffer order (engine.buckets)
    w.flat_tensors(fold=8)        # the same, each tensor ⌈n/8⌉ elements (--fold)
    w.fwd_flops, w.bwd_flops      # per sample

The gradient buffer holds the tensors in forward order, so backward (last layer first)
walks it from the end, as ``MLP.tensors`` and ``engine.buckets.plan_buckets`` expect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mpicomm.workloads.layer import Layer

__all__ = ["Workload"]


@dataclass(frozen=True)
class Workload:
    """A model as the cost model sees it (module docstring).

    Attributes:
        name: the ``--model`` name.
        layers: in forward order.
        sample: what one sample is ("224x224 image", "sequence of 128 tokens").
        source: the architecture's definition this follows.
    """

    name: str
    layers: tuple[Layer, ...]
    sample: str
    source: str

    @property
    def num_params(self) -> int:
        return sum(layer.num_params for layer in self.layers)

    @property
    def num_tensors(self) -> int:
        return sum(len(layer.params) for layer in self.layers)

    @property
    def macs(self) -> float:
        """Forward multiply-adds per sample."""
        return sum(layer.macs for layer in self.layers)

    @property
    def fwd_flops(self) -> float:
        return sum(layer.fwd_flops for layer in self.layers)

    @property
    def bwd_flops(self) -> float:
        return sum(layer.bwd_flops for layer in self.layers)

    def act_bytes(self, itemsize: int = 4) -> float:
        """Activation bytes kept for backward per sample."""
        return sum(layer.act_bytes(itemsize) for layer in self.layers)

    def tensors_backward(self) -> list[tuple[int, str, int]]:
        """(layer index, tensor name, elements) of every tensor, in the order backward
        produces them: last layer first, and inside a layer its tensors last first."""
        out = []
        for i in range(len(self.layers) - 1, -1, -1):
            for tname, shape in reversed(self.layers[i].params):
                out.append((i, tname, math.prod(shape)))
        return out

    def flat_tensors(self, fold: int = 1) -> list[tuple[int, int, int]]:
        """``(layer, lo, hi)`` of every tensor in the flat buffer (forward order, contiguous).

        ``fold`` (``--fold F``): each tensor of n elements holds ⌈n/F⌉ of them (charged as
        F times that: ``core.flops``), so a buffer is ~1/F of the model's."""
        out, lo = [], 0
        for i, layer in enumerate(self.layers):
            for _, shape in layer.params:
                hi = lo + -(-math.prod(shape) // fold)
                out.append((i, lo, hi))
                lo = hi
        return out
