"""``python -m mpicomm model``: the α-β-γ model's predictions held against measurement.

``--predict`` computes for a cluster that is not here: formulas only, no MPI traffic
(errors exit 2 without ``MPI_Abort``). The command's body is ``mpicomm.bench.model_cmd``.
"""

from __future__ import annotations

import argparse

from mpicomm.bench import model_cmd

__all__ = ["add_arguments", "run", "HELP", "USES_MPI", "uses_mpi"]

HELP = "alpha-beta-gamma cost model: predicted vs measured time"
USES_MPI = True


def uses_mpi(args: argparse.Namespace) -> bool:
    """``--predict`` sends no message: a usage error needs no ``MPI_Abort``."""
    return not getattr(args, "predict", False)


def add_arguments(p: argparse.ArgumentParser) -> None:
    model_cmd.add_arguments(p)


def run(args: argparse.Namespace) -> int:
    return model_cmd.run(args)
