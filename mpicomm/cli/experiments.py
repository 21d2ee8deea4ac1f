"""``python -m mpicomm experiments [--quick] [--only 1,8] [--replot]``: every figure, one command.

Runs write into the untracked ``results/`` unless ``--update-committed`` (or
``--root DIR``) says where: only ``--update-committed`` rewrites the committed
``experiments/`` folder (``experiments/run_all.sh`` passes it).

No MPI in this process: each figure runs ``mpiexec`` subprocesses (``mpicomm.figures``).
The figure pipeline (and matplotlib) is imported when the command runs, not when
another command starts.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mpicomm.core.errors import ConfigError

__all__ = ["add_arguments", "run", "HELP", "USES_MPI"]

HELP = "run every figure; PNGs and a README under results/ (--update-committed: experiments/)"
OUT_ROOT = "results"  # default output folder, in .gitignore
COMMITTED_ROOT = "experiments"  # the committed results: written only with --update-committed
USES_MPI = False  # errors exit 2 without MPI_Abort


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true",
                   help="small sweeps: at most 10 minutes on 2 cores (default: the full hour)")
    p.add_argument("--only", default=None, metavar="KEYS",
                   help="comma-separated figure keys to run (default: all)")
    p.add_argument("--replot", action="store_true",
                   help="run nothing: redraw figures and README from the saved JSON")
    p.add_argument("--root", default=None,
                   help=f"output folder (results/, figures/, README.md); default: {OUT_ROOT}/ "
                        "(untracked), or experiments/ with --update-committed")
    p.add_argument("--update-committed", action="store_true",
                   help="write into experiments/: the committed results, figures and README")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per mpiexec run (default 300 quick, 900 full)")
    p.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                   help="before each figure wait up to S seconds for the load average to fall "
                        "below the CPU count (a shared host); the load is noted either way")


def run(args: argparse.Namespace) -> int:
    """Run the figures; print where the README and the figures went."""
    from mpicomm.figures.plot import _plt
    from mpicomm.figures.runner import Context, run_figures

    if args.timeout is not None and not args.timeout > 0:  # 0 read as the default; < 0 unused
        raise ConfigError(f"--timeout must be > 0 seconds, got {args.timeout:g}")
    if not args.wait_quiet >= 0:
        raise ConfigError(f"--wait-quiet must be >= 0 seconds, got {args.wait_quiet:g}")
    _plt()  # matplotlib missing: one line, before an hour of sweeps
    if args.update_committed and args.root:
        raise ConfigError("--update-committed writes into experiments/; leave out --root")
    root = Path(args.root or (COMMITTED_ROOT if args.update_committed else OUT_ROOT))
    if args.root is None and not args.update_committed:
        root.mkdir(exist_ok=True)  # untracked (.gitignore): a run never rewrites tracked files
    if not root.is_dir():
        raise ConfigError(f"--root {root}: no such folder (run from the repository root)")
    ctx = Context(root.resolve(), quick=args.quick, replot=args.replot,
                  timeout_s=args.timeout or (300.0 if args.quick else 900.0),
                  wait_quiet_s=args.wait_quiet)
    keys = [k.strip() for k in args.only.split(",")] if args.only else None
    sections = run_figures(ctx, keys)
    print(f"[experiments] wrote {root / 'README.md'} ({len(sections)} figures run)")
    return 1 if any(not s.conclusion for s in sections) else 0
