"""What ``--strategy zero`` adds to the one training loop: its checks and its engine.

1. ``check_zero_flags``: every flag ZeRO cannot honour is refused in one line
   (``ConfigError``, the same on every rank, before any message);
2. ``make_zero_engine``: the ring reducer's transport (the run's emulated links
   and byte counts) under an ``engine.ZeroEngine`` whose shards apply the loop's
   SGD rule; the job's momentum becomes this rank's shard, so the record's
   optimizer-state bytes are what the rank really holds.
"""

from __future__ import annotations

from collections.abc import Collection
from types import SimpleNamespace
from typing import Any

import numpy as np

from mpicomm.core.errors import ConfigError
from mpicomm.engine.zero import ZERO_STAGES, ZeroEngine
from mpicomm.train.config import TrainConfig
from mpicomm.train.sgd import SGD

__all__ = ["ZERO", "check_zero_flags", "make_zero_engine", "reducer_strategy"]

ZERO = "zero"


def reducer_strategy(cfg: TrainConfig) -> str:
    """The reducer a run builds: ZeRO sends through the ring's transport."""
    return "ring" if cfg.strategy == ZERO else cfg.strategy


def check_zero_flags(cfg: TrainConfig, *, single_run: bool = True,
                     given: Collection[str] = ()) -> None:
    """Raise ``ConfigError`` for a flag ``--strategy zero`` cannot honour (no MPI).

    ``single_run`` False (a run of compare or of ``--layouts``, whose engine flags are
    shared with the other runs): only what ZeRO cannot run at all. ``given``: the flags
    the command line set (``train.checks.check``).
    """
    if cfg.strategy != ZERO:
        if cfg.zero_stage != 1:
            raise ConfigError("--zero-stage needs --strategy zero")
        return
    if cfg.zero_stage not in ZERO_STAGES:
        raise ConfigError(f"--zero-stage must be 1 or 2, got {cfg.zero_stage!r}")
    def typed(name: str, differs: bool) -> bool:  # a flag set on the command line counts
        return differs or name in given

    refused = [("--compress", cfg.compress != "none", "the shards travel as plain floats"),
               ("--checkpoint", bool(cfg.checkpoint), "each rank holds only its momentum shard"),
               ("--accumulate", typed("accumulate", cfg.accumulate != 1),
                "one backward per optimizer step"),
               ("--device gpu", cfg.device != "cpu", "the shards' optimizer is NumPy"),
               (f"--channels {cfg.channels}", typed("channels", cfg.channels != 1),
                "its reduce-scatter and all-gather run one ring"),
               ("--dedicated", cfg.dedicated, "every rank serves its own shard (S = p, "
                "colocated); for dedicated servers use --strategy ps"),
               (f"--servers {cfg.servers}", typed("servers", cfg.servers != 1),
                "every rank serves its own shard (S = p, colocated); for S servers use "
                "--strategy ps")]
    for flag, bad, why in refused:
        if bad:
            raise ConfigError(f"{flag} is not supported with --strategy zero ({why})")
    if single_run and typed("overlap", not cfg.overlap):  # no communication thread
        flag = "--overlap" if cfg.overlap else "--no-overlap"
        raise ConfigError(f"{flag} has no effect with --strategy zero: its buckets are "
                          "reduced on the training thread (stage 1 after backward, stage 2 "
                          "inside it)")


def make_zero_engine(cfg: TrainConfig, world: Any, job: Any) -> ZeroEngine | None:
    """Return the worker's ``ZeroEngine``; ``job.velocity`` becomes its momentum shard."""
    if not world.is_worker:
        return None
    m = job.model

    def make_optimizer(p: np.ndarray, g: np.ndarray, v: np.ndarray) -> Any:
        sgd = SGD(np, p, g, v, [SimpleNamespace(lo=0, hi=p.size)], cfg.momentum,
                  cfg.weight_decay)  # the loop's update rule, on one piece of the shard
        return lambda lr: sgd.update(0, lr)

    engine = ZeroEngine(world.reducer, m.params, m.grads, m.tensors,
                        bucket_bytes=cfg.bucket_mb * 2**20, stage=cfg.zero_stage,
                        make_optimizer=make_optimizer)
    job.velocity = engine.momentum  # the full buffer set-up made is dropped
    return engine
