"""``python -m mpicomm train``: one training run with one sync strategy; time and bytes per step.

The flags are generated from ``TrainConfig`` (``mpicomm.train.config``, which holds the
reducer options); the run is ``mpicomm.train.loop`` (the one loop).
"""

from __future__ import annotations

import argparse

from mpicomm.core.flags import add_cluster_flags
from mpicomm.train import loop
from mpicomm.train.config import add_arguments as _config_arguments

__all__ = ["add_arguments", "run", "HELP", "USES_MPI"]

HELP = "train the MLP with one sync strategy; time and bytes per step"
USES_MPI = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    """One flag per ``TrainConfig`` field (reducer options included)."""
    _config_arguments(p)
    add_cluster_flags(p)  # --profile (core.flags: the one cluster-flag group)


def run(args: argparse.Namespace) -> int:
    """Train on every rank; rank 0 prints the table and writes --json (``train.loop.run``)."""
    return loop.run(args)
