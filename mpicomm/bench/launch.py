"""``mpiexec -n P python -m mpicomm ...`` as a command list (figures and calibration)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from mpicomm.core.errors import ConfigError

__all__ = ["mpiexec_command", "shown"]


def _mpiexec() -> str:
    here = Path(sys.executable).parent / "mpiexec"
    found = str(here) if here.exists() else shutil.which("mpiexec") or shutil.which("mpirun")
    if not found:
        raise ConfigError("experiments need mpiexec: pip install 'mpicomm[mpich]' "
                          "(or load your MPI module)")
    return found


def mpiexec_command(ranks: int | None, args: list[str]) -> list[str]:
    """``mpiexec -n ranks python -m mpicomm args`` (no mpiexec when ``ranks`` is None)."""
    py = [sys.executable, "-m", "mpicomm", *args]
    return py if ranks is None else [_mpiexec(), "-n", str(ranks), *py]


def shown(cmd: list[str]) -> str:
    """The command as a reader types it: ``mpiexec`` and ``python`` without their paths."""
    out = list(cmd)
    for i, word in enumerate(out):
        if word == sys.executable:
            out[i] = "python"
        elif os.path.basename(word) in ("mpiexec", "mpirun") and os.sep in word:
            out[i] = "mpiexec"
    return shlex.join(out)
