"""The training loop's MLP (``nn.mlp.MLP``) as a workload: dense layers, ReLUs and the loss.

Its tensors are laid out as ``MLP.tensors`` lays them: per layer W (fan_in × fan_out), b.
Each layer carries the kernels the loop's MLP runs (``workloads.kernels``, the one count
``nn.ops`` and ``nn.mlp`` charge): per dense layer a product and the bias add forward, dW,
db and dx backward (no dx for the first); per ReLU one kernel forward, two backward (mask,
multiply); the softmax cross-entropy last (8 kernels forward, 4 backward).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from mpicomm.workloads import kernels as k
from mpicomm.workloads.layer import Layer, elementwise, linear
from mpicomm.workloads.workload import Workload

__all__ = ["mlp", "MLP_LAYERS"]

MLP_LAYERS = (256, 512, 512, 10)  # train's --layers default (train.config.DEFAULT_LAYERS)


def _dense(fi: int, fo: int, first: bool, batch: int) -> tuple[tuple, tuple]:
    return k.dense_forward(batch, fi, fo), k.dense_backward(batch, fi, fo, dx=not first)


def _relu(width: int, batch: int) -> tuple[tuple, tuple]:
    return k.relu_forward(batch * width), k.relu_backward(batch * width)


def _xent(classes: int, batch: int) -> tuple[tuple, tuple]:
    return k.xent_forward(batch, classes), k.xent_backward(batch, classes)


def mlp(widths: Sequence[int] = MLP_LAYERS) -> Workload:
    """The MLP with ``widths`` (features, hidden..., classes); ReLU after each hidden layer,
    softmax cross-entropy after the last."""
    layers: list[Layer] = []
    pairs = list(zip(widths[:-1], widths[1:], strict=True))
    for i, (fi, fo) in enumerate(pairs):
        dense = linear(f"layers.{i}", fi, fo, weight_shape=(fi, fo))
        layers.append(Layer(dense.name, dense.params, dense.macs, dense.other_flops,
                            dense.out_elems, partial(_dense, fi, fo, i == 0)))
        if i < len(pairs) - 1:
            relu = elementwise(f"relu.{i}", fo)
            layers.append(Layer(relu.name, (), 0.0, relu.other_flops, relu.out_elems,
                                partial(_relu, fo)))
    classes = widths[-1]
    layers.append(Layer("loss", (), 0.0, 5.0 * classes, float(classes), partial(_xent, classes)))
    return Workload("mlp", tuple(layers), f"vector of {widths[0]} features",
                    "mpicomm nn.MLP (--layers " + ",".join(map(str, widths)) + ")")
