"""Choose the MPI thread level before ``mpi4py.MPI`` is imported (it initialises MPI).

``python -m mpicomm`` imports the package — and with it ``mpi4py.MPI`` — before
``__main__`` or any argument parser runs, so ``--thread-level`` must be read
here, first thing in ``mpicomm/__init__.py``:

1. if ``mpi4py.MPI`` is already imported, MPI is initialised: nothing to do
   (commands report the level actually provided);
2. when this process is the mpicomm command line (``python -m mpicomm ...`` or the
   ``mpicomm`` script), take ``--thread-level X`` / ``--thread-level=X`` from it;
3. otherwise take ``MPICOMM_THREAD_LEVEL``; if neither is set, keep mpi4py's
   default ("multiple");
4. set ``mpi4py.rc.thread_level``. An unknown value is left for the command's
   argument parser to reject with the list of valid levels.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

__all__ = ["THREAD_LEVELS", "requested_thread_level", "apply_thread_level"]

THREAD_LEVELS = ("single", "funneled", "serialized", "multiple")


def requested_thread_level(argv: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """Return the level asked for by ``--thread-level`` in ``argv``, else by the environment."""
    level = None
    for i, arg in enumerate(argv):
        if arg == "--thread-level" and i + 1 < len(argv):
            level = argv[i + 1]
        elif arg.startswith("--thread-level="):
            level = arg.split("=", 1)[1]
    if level is None:
        level = environ.get("MPICOMM_THREAD_LEVEL", "").strip() or None
    return level


def _cli_argv() -> list[str]:
    """Arguments of the mpicomm command line, or [] when mpicomm is imported as a library."""
    orig = list(getattr(sys, "orig_argv", []))
    for i in range(len(orig) - 1):
        if orig[i] == "-m" and orig[i + 1] == "mpicomm":
            return orig[i + 2 :]
    if sys.argv and os.path.basename(sys.argv[0]) == "mpicomm":
        return list(sys.argv[1:])
    return []


def apply_thread_level() -> None:
    """Set ``mpi4py.rc.thread_level`` from the command line or environment (see module doc)."""
    if "mpi4py.MPI" in sys.modules:
        return
    level = requested_thread_level(_cli_argv(), os.environ)
    if level in THREAD_LEVELS:
        import mpi4py

        mpi4py.rc.thread_level = level


apply_thread_level()
