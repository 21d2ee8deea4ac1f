"""The training loop's MLP (``train.model.MLP``) as a workload: dense layers and ReLUs.

Its tensors are laid out as ``MLP.tensors`` lays them: per layer W (fan_in × fan_out), b.
"""

from __future__ import annotations

from collections.abc import Sequence

from mpicomm.workloads.layer import Layer, elementwise, linear
from mpicomm.workloads.workload import Workload

__all__ = ["mlp", "MLP_LAYERS"]

MLP_LAYERS = (256, 512, 512, 10)  # train's --layers default (train.config.DEFAULT_LAYERS)


def mlp(widths: Sequence[int] = MLP_LAYERS) -> Workload:
    """The MLP with ``widths`` (features, hidden..., classes); ReLU after each hidden layer."""
    layers: list[Layer] = []
    pairs = list(zip(widths[:-1], widths[1:], strict=True))
    for i, (fi, fo) in enumerate(pairs):
        layers.append(linear(f"layers.{i}", fi, fo, weight_shape=(fi, fo)))
        if i < len(pairs) - 1:
            layers.append(elementwise(f"relu.{i}", fo))
    return Workload("mlp", tuple(layers), f"vector of {widths[0]} features",
                    "mpicomm nn.MLP (--layers " + ",".join(map(str, widths)) + ")")
