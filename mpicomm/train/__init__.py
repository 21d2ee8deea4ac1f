"""Training, an application over the reducers: model, data, the SGD loop, checkpoints, compare.

``from mpicomm.train import run_training, TrainConfig`` keeps working from before the
package split (the loop lives in ``mpicomm.train.loop``, loaded on first use).
"""

_FROM_LOOP = ("TrainConfig", "ConfigError", "CheckpointError", "SetupError", "run_training",
              "measure_baseline", "format_table", "write_json")


def __getattr__(name: str):
    if name not in _FROM_LOOP:
        raise AttributeError(f"module 'mpicomm.train' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module("mpicomm.train.loop"), name)
