"""One layer of a workload, and the builders every architecture file uses.

A ``Layer`` holds, per sample: its parameter tensors (name, shape) in forward order, its
forward multiply-adds (``macs``: the convolutions' and matmuls' — what published "FLOPs"
tables count, e.g. torchvision's ``_ops``), the rest of its forward arithmetic
(``other_flops``: normalisation, activations, softmax, residual adds) and the elements
of its output (kept for backward: the activation memory).

    forward FLOPs  = 2·macs + other_flops
    backward FLOPs = 2·(2·macs) + other_flops   (dX and dW each cost the forward matmul;
                                                 Kaplan et al. 2020, arXiv:2001.08361 §2.1)

The kernels a step of it runs at batch B (``fwd_kernels``, ``bwd_kernels``: what the predictor
and ``WorkloadModel`` charge, each ``(FLOPs, values, launches)`` one roofline): by default one
forward kernel of fwd_flops·B FLOPs moving its output twice and its weights
(2·out·B + params values), and a backward of bwd_flops·B FLOPs moving twice that, in two
kernels (dX, dW) when it has parameters. A layer whose kernels are known exactly (the loop's
own MLP: ``workloads.kernels``) carries them instead (``kernels``: batch -> (fwd, bwd)).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Layer", "conv", "bn", "linear", "norm", "elementwise", "embedding"]


@dataclass(frozen=True)
class Layer:
    """One layer: parameter tensors in forward order and its per-sample costs."""

    name: str
    params: tuple[tuple[str, tuple[int, ...]], ...]
    macs: float  # forward multiply-adds per sample (convolutions and matmuls)
    other_flops: float  # forward non-matmul FLOPs per sample
    out_elems: float  # output elements per sample (activation kept for backward)
    kernels: Callable[[int], tuple[tuple, tuple]] | None = field(default=None, compare=False,
                                                                 repr=False)

    def fwd_kernels(self, batch: int) -> tuple[tuple[float, float, int], ...]:
        """The forward's kernels at ``batch`` samples, each (FLOPs, values, launches)."""
        if self.kernels is not None:
            return self.kernels(batch)[0]
        return ((self.fwd_flops * batch, 2 * self.out_elems * batch + self.num_params, 1),)

    def bwd_kernels(self, batch: int) -> tuple[tuple[float, float, int], ...]:
        """The backward's kernels at ``batch`` samples, each (FLOPs, values, launches)."""
        if self.kernels is not None:
            return self.kernels(batch)[1]
        values = 2 * (2 * self.out_elems * batch + self.num_params)
        return ((self.bwd_flops * batch, values, 2 if self.params else 1),)

    @property
    def num_params(self) -> int:
        return sum(math.prod(shape) for _, shape in self.params)

    @property
    def fwd_flops(self) -> float:
        if self.kernels is not None:  # per sample: a kernel's FLOPs are B times its batch-1's
            return sum(f for f, _, _ in self.kernels(1)[0])
        return 2.0 * self.macs + self.other_flops

    @property
    def bwd_flops(self) -> float:
        if self.kernels is not None:
            return sum(f for f, _, _ in self.kernels(1)[1])
        return 4.0 * self.macs + self.other_flops

    def act_bytes(self, itemsize: int = 4) -> float:
        """Bytes of this layer's output per sample at ``itemsize`` bytes a value."""
        return self.out_elems * itemsize


def conv(name: str, cin: int, cout: int, k: int | tuple[int, int], h_out: int, w_out: int,
         bias: bool = False) -> Layer:
    """A k×k (or kh×kw) convolution producing cout × h_out × w_out."""
    kh, kw = (k, k) if isinstance(k, int) else k
    params = ((f"{name}.weight", (cout, cin, kh, kw)),)
    if bias:
        params += ((f"{name}.bias", (cout,)),)
    out = cout * h_out * w_out
    return Layer(name, params, float(out * cin * kh * kw), float(out if bias else 0), float(out))


def bn(name: str, c: int, hw: int, relu: bool = True) -> Layer:
    """Batch normalisation over c channels of hw positions (γ, β), with the ReLU after it.

    4 FLOPs a value to normalise and scale (+1 for the ReLU)."""
    out = c * hw
    return Layer(name, ((f"{name}.weight", (c,)), (f"{name}.bias", (c,))), 0.0,
                 float(out * (5 if relu else 4)), float(out))


def linear(name: str, fan_in: int, fan_out: int, tokens: int = 1, bias: bool = True,
           weight_shape: tuple[int, int] | None = None) -> Layer:
    """A dense layer applied to ``tokens`` positions per sample."""
    shape = weight_shape or (fan_out, fan_in)
    params = ((f"{name}.weight", shape),) + (((f"{name}.bias", (fan_out,)),) if bias else ())
    out = tokens * fan_out
    return Layer(name, params, float(tokens * fan_in * fan_out), float(out if bias else 0),
                 float(out))


def norm(name: str, width: int, tokens: int) -> Layer:
    """Layer normalisation (weight, bias) over ``tokens`` positions: ~5 FLOPs a value."""
    out = tokens * width
    return Layer(name, ((f"{name}.weight", (width,)), (f"{name}.bias", (width,))), 0.0,
                 5.0 * out, float(out))


def elementwise(name: str, elems: float, flops_per_elem: float = 1.0) -> Layer:
    """A layer without parameters (pooling, activation, residual add) over ``elems`` values."""
    return Layer(name, (), 0.0, flops_per_elem * elems, float(elems))


def embedding(name: str, tables: tuple[tuple[str, tuple[int, int]], ...], tokens: int,
              width: int) -> Layer:
    """Embedding tables looked up (no arithmetic but the sum of the lookups)."""
    return Layer(name, tables, 0.0, float(tokens * width * max(0, len(tables) - 1)),
                 float(tokens * width))
