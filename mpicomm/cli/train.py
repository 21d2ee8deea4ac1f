"""``python -m mpicomm train``: one training run with one sync strategy; time and bytes per step.

    mpiexec -n 4 python -m mpicomm train --strategy ring --steps 300 --json out.json

1. flags → ``TrainConfig`` (``cli.config``: generated from it, each value checked on
   creation), then ``train.checks.check(cfg, ranks)``: what cannot take effect in this
   job; a refusal on any rank is one line and exit 2 on every rank, before any message;
2. ``train.loop.run_training`` (the one loop, every strategy, engine and layout), after
   the 1-worker baseline with ``--baseline``;
3. rank 0 prints the table and notes and writes ``--json``.
"""

from __future__ import annotations

import argparse

from mpicomm.analysis.reading import legend
from mpicomm.analysis.report import WIDTH, shown_columns
from mpicomm.cli.config import add_train_flags, given, train_config
from mpicomm.cli.flags import add_cluster_flags
from mpicomm.core.topology import Topology
from mpicomm.train import loop, metrics
from mpicomm.train.checks import check
from mpicomm.train.config import ONE_RANK_NOTE, ConfigError, TrainConfig

__all__ = ["add_arguments", "run", "HELP", "USES_MPI"]

HELP = "train the MLP with one sync strategy; time and bytes per step"
USES_MPI = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    """One flag per ``TrainConfig`` field (reducer options included)."""
    add_train_flags(p)
    add_cluster_flags(p)  # --profile (cli.flags: the one cluster-flag group)


def run(args: argparse.Namespace) -> int:
    """Train on every rank; rank 0 prints the table and writes --json."""
    comm = metrics.world()
    cfg = _config(args, comm)                                                   # 1.
    if cfg is None:
        return 2
    if cfg.blas_threads:
        loop.limit_blas_threads(cfg.blas_threads)
    topo = Topology(comm, ranks_per_node=cfg.ranks_per_node)
    topology = topo.describe()
    topo.free()
    try:                                                                        # 2.
        baseline = loop.measure_baseline(cfg, comm) if cfg.baseline else None
        record = loop.run_training(cfg, comm, baseline_sps=baseline)
    except loop.SetupError:
        return 2
    if comm.Get_rank() == 0:                                                    # 3.
        _report(cfg, record, topology)
    return 0


def _config(args: argparse.Namespace, comm: object) -> TrainConfig | None:
    """The checked config, or None when any rank refused it (that rank printed why)."""
    failure, cfg = None, None
    try:
        cfg = train_config(args)
        check(cfg, comm.Get_size(), given=given(args))
    except ConfigError as exc:
        failure = exc
    # the same on every rank of one command; ranks started with other flags (MPMD) may
    # disagree, and a rank that returned alone would leave the others waiting
    bad = metrics.first_failure(comm, failure is not None)
    if bad >= 0:
        if comm.Get_rank() == bad:
            where = f" (rank {bad} only: rank 0 accepted its flags)" if bad else ""
            print(f"mpicomm train: error: {failure}{where}", flush=True)
        return None
    if comm.Get_size() == 1:  # the command line without mpiexec: say so, then run
        print(ONE_RANK_NOTE, flush=True)
    return cfg


def _report(cfg: TrainConfig, record: dict, topology: dict) -> None:
    """Rank 0: the table, the notes, the files written."""
    if not record["steps"]:
        print(f"nothing to train: the checkpoint is at step {record['resumed_from_step']} "
              f"of --steps {cfg.steps}")
    print(loop.format_table([record], width=None if cfg.wide else WIDTH))
    if cfg.legend:
        print("\n".join(legend(shown_columns([record], None if cfg.wide else WIDTH)[0])))
    if record.get("slow_rank_note"):
        print(record["slow_rank_note"])
    if record["steps_timed"]:
        print(f"framework overhead (step time outside compute+comm+optimizer): "
              f"{100 * record['other_share']:.1f}%")
    if cfg.trace:
        print(f"wrote trace {cfg.trace} (open in https://ui.perfetto.dev)")
    if cfg.tensorboard:
        print(f"wrote TensorBoard scalars under {cfg.tensorboard} (tensorboard --logdir)")
    if cfg.json:
        loop.write_json(cfg.json, loop.document("train", cfg, [record], topology))
        print(f"wrote {cfg.json}")
