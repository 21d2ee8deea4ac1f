"""Progress of a long run on rank 0: a tqdm bar on a terminal, plain lines otherwise.

    prog = Progress(total=12, label="compare", weights=None)
    prog.begin("round 2/3: ring")   # a plain line: what starts, elapsed, estimated time left
    ...                              # the work of one unit
    prog.done()                     # one unit finished (the bar advances)
    prog.close()

tqdm is the optional extra ``[progress]``; without it, or when the output is not a
terminal (a log file, a test), one plain line per unit is printed, never a carriage
return. Under an MPI launcher (mpiexec, mpirun, srun: ``LAUNCHER_VARIABLES``) the rank's
terminal may be the launcher's pseudo-terminal (Open MPI's), whose output lands in a log
as carriage returns: plain lines there too. ``MPICOMM_PROGRESS=bar`` or ``lines`` decides. Units may
carry weights (a bench size costs about its bytes), so the estimate of the time
left is elapsed × remaining weight / finished weight. ``enabled=False`` (ranks
other than 0) makes every call a no-op.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import TextIO

__all__ = ["Progress", "fmt_seconds", "use_bar", "LAUNCHER_VARIABLES"]

# set in a rank's environment by MPICH/Hydra (PMI_*), Open MPI (OMPI_*), PMIx and Slurm
LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID")


def use_bar(stream: TextIO) -> bool:
    """Whether a bar (carriage returns) may go to ``stream``: ``MPICOMM_PROGRESS`` when set
    (``bar`` or ``lines``); else a terminal that no MPI launcher stands between."""
    choice = os.environ.get("MPICOMM_PROGRESS", "").strip().lower()
    if choice in ("bar", "lines"):
        return choice == "bar"
    if any(v in os.environ for v in LAUNCHER_VARIABLES):
        return False
    return stream.isatty() and sys.stderr.isatty()


def fmt_seconds(s: float) -> str:
    """``42 s``, ``3m05s``, ``1h02m``."""
    s = max(float(s), 0.0)
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


class Progress:
    """Units of work counted on rank 0 (see the module docstring)."""

    def __init__(self, total: int, label: str, *, enabled: bool = True,
                 weights: Sequence[float] | None = None, stream: TextIO | None = None,
                 bar: bool | None = None) -> None:
        self.total, self.label, self.enabled = int(total), label, enabled
        self.weights = list(weights) if weights is not None else [1.0] * self.total
        self.stream = stream if stream is not None else sys.stdout
        self.finished = 0
        self.t0 = time.perf_counter()
        self._bar = None
        if enabled and (bar if bar is not None else use_bar(self.stream)):
            try:
                from tqdm import tqdm
            except ImportError:  # the [progress] extra is not installed: plain lines
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=self.total, desc=label, file=sys.stderr, leave=False)

    def left_seconds(self) -> float | None:
        """Estimated seconds left; None before the first unit has finished."""
        done = sum(self.weights[: self.finished])
        if not self.finished or done <= 0:
            return None
        elapsed = time.perf_counter() - self.t0
        return elapsed * sum(self.weights[self.finished :]) / done

    def begin(self, what: str) -> None:
        """Say which unit starts (a line, or the bar's description)."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.set_postfix_str(what)
            return
        left = self.left_seconds()
        eta = "estimating time left" if left is None else f"~{fmt_seconds(left)} left"
        self.stream.write(f"{self.label}: {what} ({self.finished + 1}/{self.total}; "
                          f"{fmt_seconds(time.perf_counter() - self.t0)} elapsed, {eta})\n")
        self.stream.flush()

    def done(self) -> None:
        """Count one unit as finished."""
        self.finished += 1
        if self.enabled and self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
