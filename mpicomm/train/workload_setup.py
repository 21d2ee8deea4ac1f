"""What ``--model NAME`` adds to the one training loop: a real model's tensors and compute.

    mpiexec -n 4 python -m mpicomm compare --model resnet50 --clock virtual --steps 10

``train --model M`` and ``compare --model M`` run the same loop, engines and reducers as the
MLP over ``workloads.model.WorkloadModel``: the model's parameter tensors in its own layout
(bucketing, overlap and every reducer see ResNet-50's 161 tensors and 25,557,032
parameters), each layer's forward and backward charged by the device model under the
virtual clock, as ``costmodel.step.device_compute`` predicts them. Nothing is learnt (rank
r's layer-i gradient is (i+1)(r+1)·1e-6, the loss 0) and no data is read.

1. ``check_model_flags``: what cannot take effect with a workload, refused in one line
   (``ConfigError``, the same on every rank, before any message);
2. ``run_tensors`` / ``run_num_params``: the run's model's tensor list and size (the MLP's
   from ``--layers``, or the workload's), for the thread check and the record;
3. ``run_fold``: ``--fold F`` (SimGrid/SMPI's shared-malloc idea): each rank holds ⌈n/F⌉
   elements of every n-element tensor and the virtual clock charges the full size
   (``p2p.set_fold``; ``core.flops`` applies it); ``auto`` (the default) is the smallest
   power of 2 that keeps the job's parameters, gradients and momenta under
   ``FOLD_BUDGET_BYTES`` — 1 for the MLP and small jobs, 16 for ResNet-50 on 64 ranks;
4. ``make_model`` and ``no_data``: the worker's model and the placeholder rows its shard
   hands the loop (one column of zeros, one global batch: the loop's contract kept);
   ``--single-rate R`` charges its layers batch/R a step shared out by FLOPs
   (``costmodel.step.rate_compute``, as ``model --predict --single-rate``), and the SGD
   update nothing (inside the measured rate).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from mpicomm.core import clock
from mpicomm.core.errors import ConfigError
from mpicomm.costmodel.step import check_single_rate, rate_compute
from mpicomm.nn import layer_tensors
from mpicomm.train.config import TrainConfig
from mpicomm.train.data import Dataset
from mpicomm.workloads import workload
from mpicomm.workloads.model import WorkloadModel

__all__ = ["check_model_flags", "run_tensors", "run_num_params", "make_model", "no_data",
           "run_fold", "FOLD_BUDGET_BYTES"]

_FIELDS = TrainConfig.__dataclass_fields__
DATA_FLAGS = ("layers", "data", "train_samples", "test_samples", "eval_samples")
# --fold auto: the whole job's folded parameters, gradients and momenta stay under this. The
# issue's scale target (64 ranks of ResNet-50 in 12 GB of RSS on a 24 GiB host) leaves ~10 GB
# to 64 interpreters and MPI's buffers; 2 GiB of model state is a fifth of that
FOLD_BUDGET_BYTES = 2 * 2**30


def check_model_flags(cfg: TrainConfig, given: Collection[str] = (), ranks: int = 1) -> None:
    """Raise ``ConfigError`` for a flag that cannot take effect with ``--model`` (no MPI), or
    a ``--fold`` above 1 without it or under the wall clock.

    ``given``: the flags the command line set, so one typed at its default value counts too
    (a config built in Python has none: its values alone tell). ``ranks``: the job's."""
    _check_fold(cfg)
    _check_single_rate(cfg)
    if cfg.model is None:
        return
    m = f"--model {cfg.model}"
    if clock.virtual() is None:
        raise ConfigError(f"{m} needs the virtual clock (--clock virtual, or a --profile): "
                          "its layers' compute is charged by the device model, and under the "
                          "wall clock it would cost nothing")
    if (cfg.accelerator or "").lower() == "host":
        raise ConfigError(f"--accelerator host cannot take effect with {m}: its layers are "
                          "charged by a modelled device (e.g. --accelerator h100), and this "
                          "host computes nothing of them")
    # (--holdout needs --data, which is refused here; --eval-samples only when typed: the
    # docs test's MPICOMM_DOCS_QUICK shortens its default)
    typed = set(given)
    data = [f"--{name.replace('_', '-')}" for name in DATA_FLAGS if name in typed or (
            name != "eval_samples" and getattr(cfg, name) != _FIELDS[name].default)]
    if data:
        raise ConfigError(f"{', '.join(data)} cannot take effect with {m}: the workload is "
                          f"the model, and it reads no data")
    _check_memory(cfg, ranks)
    refused = [("--checkpoint", bool(cfg.checkpoint), "it learns nothing to save"),
               ("--ps-mode", cfg.ps_mode is not None, "the servers build the MLP's "
                "parameters; --strategy ps reduces the workload's gradient"),
               ("--pipeline-stages", cfg.pipeline_stages > 1, "the stages split the MLP"),
               ("--tensor-parallel", cfg.tensor_parallel > 1, "the shards split the MLP")]
    for flag, bad, why in refused:
        if bad:
            raise ConfigError(f"{flag} cannot take effect with {m}: {why}")


def _check_fold(cfg: TrainConfig) -> None:
    """``--fold F`` above 1 needs the virtual clock (a folded message is charged its full
    size) and ``--model`` (the MLP learns from every element of its gradient)."""
    if cfg.fold is None or cfg.fold == 1:
        return
    if clock.virtual() is None:
        raise ConfigError(f"--fold {cfg.fold}: virtual-clock only (a folded message is charged "
                          "its full size, which the wall clock cannot do); add --clock virtual")
    if cfg.model is None:
        raise ConfigError(f"--fold {cfg.fold} cannot take effect without --model: the MLP "
                          "learns from every element of its gradient")


def _check_single_rate(cfg: TrainConfig) -> None:
    """``--single-rate R``: a finite rate > 0, under the virtual clock, with ``--model`` (it
    replaces the device model's charge for the workload's layers)."""
    rate = cfg.single_rate
    if rate is None:
        return
    check_single_rate(rate)
    if clock.virtual() is None:
        raise ConfigError(f"--single-rate {rate:g}: virtual-clock only (the rate is charged "
                          "to the virtual clock in place of the layers' compute); add --clock "
                          "virtual")
    if cfg.model is None:
        raise ConfigError(f"--single-rate {rate:g} cannot take effect without --model: the "
                          "MLP's compute is its own matmuls")


def _state_bytes(cfg: TrainConfig) -> int:
    """A rank's parameters, gradient and momentum, unfolded."""
    return 3 * run_num_params(cfg) * np.dtype(cfg.dtype).itemsize


def run_fold(cfg: TrainConfig, ranks: int) -> int:
    """The run's fold: ``--fold F``, or (auto) the smallest power of 2 that keeps the job's
    ``ranks`` × parameters, gradient and momentum under ``FOLD_BUDGET_BYTES`` with
    ``--model`` (1 without: the MLP is never folded). The same on every rank, no message."""
    if cfg.fold is not None:
        return cfg.fold
    if cfg.model is None:
        return 1
    need, fold = ranks * _state_bytes(cfg), 1
    while need > fold * FOLD_BUDGET_BYTES:
        fold *= 2
    return fold


def _check_memory(cfg: TrainConfig, ranks: int) -> None:
    """The workload's parameters, gradient and momentum (folded: ``run_fold``) on every rank
    of this host must fit its available memory (a floor: the reducer's buffers come on top),
    else one line before any rank allocates, naming the smallest fold that fits; no verdict
    where the memory is unknown."""
    from mpicomm.core.memory import available_memory, ranks_on_this_host
    from mpicomm.core.units import fmt_bytes

    available, local = available_memory(), ranks_on_this_host()
    fold, full = run_fold(cfg, ranks), _state_bytes(cfg)
    need = -(-full // fold)
    if available is not None and need * local > available:
        fits = -(-full * local // max(available, 1))
        raise ConfigError(f"--model {cfg.model} --fold {fold}: its parameters, gradient and "
                          f"momentum need at least {fmt_bytes(need * local)} on this host "
                          f"({fmt_bytes(need)} a rank x {local} rank(s)), more than its "
                          f"{fmt_bytes(available)} available; --fold {fits} would fit")


def run_tensors(cfg: TrainConfig) -> list[tuple[int, int, int]]:
    """``(layer, lo, hi)`` of every tensor of the run's model (``nn.MLP.tensors`` layout)."""
    if cfg.model is None:
        return layer_tensors(cfg.layers)
    return workload(cfg.model).flat_tensors()


def run_num_params(cfg: TrainConfig) -> int:
    """Parameters of the run's model: the MLP's of ``--layers``, or the workload's."""
    return run_tensors(cfg)[-1][2]


def make_model(cfg: TrainConfig, worker_rank: int, xp: Any, fold: int = 1) -> WorkloadModel:
    """The worker's ``WorkloadModel`` (its gradients identify the worker: module docstring),
    each tensor folded ``fold`` times (``run_fold``)."""
    w = workload(cfg.model)
    rate = cfg.single_rate  # the layers' seconds from a measured rate, as the predictor's
    compute = None if rate is None else rate_compute(w, cfg.batch_size, rate)
    return WorkloadModel(w, cfg.batch_size, rank=worker_rank, dtype=cfg.dtype, xp=xp,
                         fold=fold, compute=compute)


def full_tensors(cfg: TrainConfig, fold: int) -> list[tuple[int, int, int]] | None:
    """The run's tensors unfolded when ``fold`` > 1 (the engine plans its buckets on them:
    the unfolded run's plan), else None."""
    return run_tensors(cfg) if fold > 1 else None


def no_data(cfg: TrainConfig, workers: int) -> Dataset:
    """Rows of zeros, one feature, one global batch of them: a workload reads none."""
    rows = cfg.batch_size * workers * cfg.accumulate
    x = np.zeros((rows, 1), dtype=cfg.dtype)
    y = np.zeros(rows, dtype=np.int64)
    return Dataset(x, y, x[:workers], y[:workers],
                   source=f"no data (--model {cfg.model}: the gradients are set per layer)")

