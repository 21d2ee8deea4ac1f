"""The one check every command calls: ``check(cfg, ranks)``, each family's checks in one place.

    cfg = train_config(args)                # cli/config.py: each value checked on creation
    check(cfg, comm.Get_size(), given=given(args))  # cli/: what cannot take effect here

A ``TrainConfig`` checks each value on creation (``train.config``); what depends on the
job or on several flags of one family is checked here, before any message, the same on
every rank, raising ``ConfigError`` with one line. ``given`` names the flags the command
line set (``cli.config.given``): one typed at its default value is refused as one typed
otherwise where it cannot take effect; a config built in Python has none, and its values
alone tell.

1. the job (``config.check_world``): ranks, simulated nodes, rows per step, memory;
2. the strategy's options (``core.options.check_strategy_options``; ``single_run``);
3. the parameter server (``ps_setup.check_ps_flags``);
4. ZeRO (``zero_setup.check_zero_flags``);
5. pipeline and tensor parallelism (``parallel_setup.check_parallel_flags``);
6. a real model's workload, ``--model``, and ``--fold`` (``workload_setup.check_model_flags``).

``single_run`` False: a run of ``compare`` (its engine flags are shared by every run
compared, and its strategies are checked as one list), where only what the run cannot
take at all is refused.
"""

from __future__ import annotations

from collections.abc import Collection

from mpicomm.train import parallel_setup, ps_setup, workload_setup, zero_setup
from mpicomm.train.config import TrainConfig, check_strategy_options, check_world

__all__ = ["check"]


def check(cfg: TrainConfig, ranks: int, *, given: Collection[str] = (),
          single_run: bool = True) -> None:
    """Raise ``ConfigError`` for a flag of ``cfg`` that cannot take effect on ``ranks`` ranks."""
    workload_setup.check_model_flags(cfg, given, ranks)                         # 6.
    check_world(cfg, ranks)                                                     # 1.
    if single_run:
        check_strategy_options(cfg, [cfg.strategy], "--strategy", given=given)  # 2.
    ps_setup.check_ps_flags(cfg, ranks, single_run=single_run, given=given)     # 3.
    zero_setup.check_zero_flags(cfg, single_run=single_run, given=given)        # 4.
    parallel_setup.check_parallel_flags(cfg, ranks, given=given)                # 5.
