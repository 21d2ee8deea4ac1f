"""Workloads: real models as lists of parameter tensors with FLOPs and activation bytes.

    from mpicomm.workloads import workload, MODEL_NAMES
    w = workload("resnet50")   # ConfigError in one line, listing MODEL_NAMES, if unknown

Pure (no MPI, no download): each model is generated in code from its architecture
(``cnn``, ``inception``, ``transformer``, ``mlp``) and checked against published totals
(tests/workloads/). ``layer.Layer`` and ``workload.Workload`` say what a workload holds.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from mpicomm.core.errors import ConfigError
from mpicomm.workloads.cnn import resnet, vgg16
from mpicomm.workloads.inception import inception3
from mpicomm.workloads.layer import Layer
from mpicomm.workloads.mlp import mlp
from mpicomm.workloads.transformer import bert, gpt2
from mpicomm.workloads.workload import Workload

__all__ = ["workload", "MODEL_NAMES", "Workload", "Layer", "check_model"]

_BUILDERS: dict[str, Callable[[], Workload]] = {
    "mlp": mlp,
    "resnet50": lambda: resnet(50),
    "resnet101": lambda: resnet(101),
    "resnet152": lambda: resnet(152),
    "vgg16": vgg16,
    "inception3": inception3,
    "bert-base": lambda: bert("bert-base"),
    "bert-large": lambda: bert("bert-large"),
    "gpt2": lambda: gpt2("gpt2"),
    "gpt2-medium": lambda: gpt2("gpt2-medium"),
}
MODEL_NAMES = tuple(_BUILDERS)


def check_model(name: str) -> str:
    """``name`` if it is a workload; ``ConfigError`` in one line listing the valid names."""
    if name not in _BUILDERS:
        raise ConfigError(f"unknown model {name!r}; valid models: {', '.join(MODEL_NAMES)}")
    return name


@cache
def workload(name: str) -> Workload:
    """The named workload (built once, then shared: it is frozen)."""
    return _BUILDERS[check_model(name)]()
