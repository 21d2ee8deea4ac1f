"""``python -m mpicomm <command>``: one entry point, one small module per command.

Each command module defines ``add_arguments(parser)`` and ``run(args) -> int``
and is registered by one line in ``COMMANDS``. The entry point:

1. parses flags identically on every rank (usage errors are printed by rank 0 only);
2. runs the command on every rank;
3. if any rank raises, prints ``mpicomm: rank R: <traceback>`` and calls
   ``MPI.COMM_WORLD.Abort(1)``, so no rank waits forever and mpiexec exits non-zero.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback

from mpicomm.core.errors import ConfigError

__all__ = ["main", "COMMANDS", "guarded"]

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "info": ("mpicomm.cli.info", "print MPI, topology and buffer-support facts"),
    "bench": ("mpicomm.bench.harness",
              "nccl-tests-style sweep: time, algbw, busbw, #wrong per size"),
    "model": ("mpicomm.bench.model_cmd",
              "alpha-beta-gamma cost model: predicted vs measured time"),
    "train": ("mpicomm.train.loop",
              "train the MLP with one sync strategy; time and bytes per step"),
    "compare": ("mpicomm.train.compare",
                "train under several strategies in one job; side-by-side table"),
    "plot": ("mpicomm.bench.plot", "draw the standard figures of bench/model/compare/train JSON"),
    "experiments": ("mpicomm.bench.experiments", "run every figure; PNGs, experiments/README.md"),
}


# before MPI_Abort: time for the launcher to forward what this rank just wrote to stderr
# (without it, mpiexec sometimes kills the job before the message reaches the terminal)
ABORT_GRACE_S = 0.5


def _world_rank() -> int:
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank()


class RankZeroParser(argparse.ArgumentParser):
    """ArgumentParser that prints help and usage errors on rank 0 only."""

    def _print_message(self, message, file=None):  # noqa: D401 - argparse hook
        if message and _world_rank() == 0:
            super()._print_message(message, file)


def build_parser() -> argparse.ArgumentParser:
    parser = RankZeroParser(
        prog="python -m mpicomm",
        description="Compare gradient-synchronisation strategies over MPI. "
        "Run under mpiexec, e.g. `mpiexec -n 4 python -m mpicomm compare`.",
    )
    sub = parser.add_subparsers(dest="command", metavar="command", parser_class=RankZeroParser)
    sub.required = True
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(module).add_arguments(p)
        p.set_defaults(_module=module)
    return parser


def guarded(fn, *args, **kwargs):
    """Call ``fn``; if it raises on this rank, print the error and abort every rank.

    A ``ConfigError`` (bad strategy or option: the same on every rank, raised
    before any message) is printed as one line by rank 0, and the job ends with
    exit code 2. Anything else prints ``mpicomm: rank R: <traceback>`` and ends
    the job with exit code 1. Either way ``MPI_Abort`` ends every rank: a rank
    that merely exited would leave the others waiting in their next collective.
    """
    try:
        return fn(*args, **kwargs)
    except SystemExit:
        raise
    except ConfigError as exc:
        from mpi4py import MPI

        rank = MPI.COMM_WORLD.Get_rank()
        sys.stdout.flush()
        if rank != 0:
            # rank 0 raised the same error and aborts first; print only if it did not
            time.sleep(1.0)
        sys.stderr.write(f"mpicomm: error: {exc}\n" if rank == 0 else
                         f"mpicomm: rank {rank}: error: {exc}\n")
        sys.stderr.flush()
        time.sleep(ABORT_GRACE_S)
        MPI.COMM_WORLD.Abort(2)
    except BaseException as exc:  # noqa: BLE001 - any failure must end the job
        from mpi4py import MPI

        rank = MPI.COMM_WORLD.Get_rank()
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        sys.stdout.flush()
        sys.stderr.write(
            "".join(f"mpicomm: rank {rank}: {line}\n" for line in text.rstrip().splitlines())
        )
        sys.stderr.write(f"mpicomm: rank {rank}: {type(exc).__name__}: {exc} -- aborting job\n")
        sys.stderr.flush()
        time.sleep(ABORT_GRACE_S)
        MPI.COMM_WORLD.Abort(1)


def _run(module, args: argparse.Namespace):
    """Install the clock the flags ask for (``--clock``, train/compare/bench/model), then run."""
    if hasattr(args, "compute_scale"):
        from mpicomm.p2p import virtual

        virtual.install_for(getattr(args, "clock", None), args.compute_scale,
                            getattr(args, "ranks_per_node", None), args.inter_link,
                            args.intra_link)
    return module.run(args)


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen command on every rank."""
    parser = build_parser()
    args = parser.parse_args(argv)
    module = importlib.import_module(args._module)
    rc = guarded(_run, module, args)
    return int(rc or 0)
