"""``python -m mpicomm plot RESULTS.json ...``: figures of bench/model/compare/train JSON.

No MPI: the figures (``mpicomm.figures.plot``, matplotlib) load when the command runs.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from mpicomm.core.errors import ConfigError

__all__ = ["add_arguments", "run", "HELP", "USES_MPI"]

HELP = "draw the standard figures of bench/model/compare/train JSON"
USES_MPI = False  # errors exit 2 without MPI_Abort


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", nargs="+", metavar="RESULTS.json",
                   help="bench / model / model --predict / compare / train JSON files")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="folder for the PNGs (default: beside the first file)")


def run(args: argparse.Namespace) -> int:
    """Draw every file's figures; several compare files also give the scaling figure."""
    from mpicomm.figures.plot import _plt, load, plot_docs

    _plt()  # a missing matplotlib: one line, before reading anything
    docs = [(Path(f).stem, load(f)) for f in args.results]  # unreadable: refused before a mkdir
    out = args.out or os.path.dirname(args.results[0]) or "."
    try:  # a folder that cannot be made: one line before any figure, not a traceback
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot create the folder ({exc.strerror})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {out}: the folder is not writable")
    for png in plot_docs(docs, out):
        print(f"wrote {png}")
    return 0
