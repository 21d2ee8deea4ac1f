"""The model's layers, below the parallel layouts and the engines that split and sync them.

``ops``: dense and ReLU forward/backward, written once. ``mlp``: the unsplit MLP, its
parameters in one flat buffer. ``model``: the contract the training loop drives, which
the MLP, a pipeline stage and a tensor shard (``mpicomm.parallel.parts``) all keep.

    from mpicomm.nn import MLP, Model, layer_tensors, num_params, parse_layers
"""

from mpicomm.nn.mlp import (
           MLP,
           Linear,
           ReLU,
           SoftmaxCrossEntropy,
           layer_tensors,
           num_params,
           parse_layers,
)
from mpicomm.nn.model import Model

__all__ = ["MLP", "Linear", "ReLU", "SoftmaxCrossEntropy", "Model", "layer_tensors",
           "num_params", "parse_layers"]
