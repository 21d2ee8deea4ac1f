"""The figure registry: ``@figure(key, title)``, the ``Context`` a figure runs in, its ``Section``.

A figure function, given a ``Context``, runs its sweeps as ``mpiexec`` subprocesses
(``Context.mpicomm``: hard timeout, the process group killed on expiry), draws its
PNGs (``mpicomm.figures.plot``) and fills its ``Section`` (title, the exact commands,
the PNGs, a conclusion computed from the data).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mpicomm.bench.launch import mpiexec_command, shown

__all__ = ["Context", "Section", "figure", "FIGURES", "FigureFn"]


@dataclass
class Section:
    """One figure of the README: what made it and what it shows."""

    key: str
    title: str
    commands: list[str] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)  # paths relative to experiments/
    conclusion: str = ""
    notes: list[str] = field(default_factory=list)  # failures, timeouts, caveats
    seconds: float = 0.0


@dataclass
class Context:
    """Where results go, how big the sweeps are, and the log of commands one figure ran."""

    root: Path  # the experiments/ folder
    quick: bool = True
    replot: bool = False  # draw from the saved JSON, run nothing
    timeout_s: float = 300.0
    wait_quiet_s: float = 0.0  # before each figure, wait up to this long for a quiet host
    commands: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    def pick(self, quick, full):
        """The quick or the full value of a sweep parameter."""
        return quick if self.quick else full

    def mpicomm(self, ranks: int | None, args: list[str], json_name: str,
                timeout_s: float | None = None) -> dict | None:
        """Run ``python -m mpicomm args --json results/json_name`` (under mpiexec -n ranks).

        Returns the JSON document, or None (with a note) when the run failed or timed out.
        With ``replot`` the saved JSON is read and nothing runs.
        """
        path = self.results / json_name
        cmd = mpiexec_command(ranks, [*args, "--json", str(path.relative_to(self.root.parent))])
        self.commands.append(shown(cmd))
        if not self.replot:
            self.results.mkdir(parents=True, exist_ok=True)
            rc = _run(cmd, self.root.parent, timeout_s or self.timeout_s,
                      self.results / "logs" / f"{path.stem}.txt")
            if rc != 0:
                self.notes.append(f"`{shown(cmd)}` " + ("timed out" if rc is None
                                                        else f"exited {rc}") +
                                  f" (log: results/logs/{path.stem}.txt)")
                return None
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            self.notes.append(f"no result file {path.name}")
            return None

    def png(self, name: str) -> str:
        """Path of a figure file (created folder) for ``plot``."""
        self.figures.mkdir(parents=True, exist_ok=True)
        return str(self.figures / name)


def _run(cmd: list[str], cwd: Path, timeout_s: float, log: Path) -> int | None:
    """Run ``cmd`` in its own process group, output to ``log``; None when it timed out."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        out.write(f"$ {shown(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env=_child_env())
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None


def _child_env() -> dict:
    """This environment less the PMI/MPI variables of our own (singleton) MPI process."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("PMI_", "PMIX_", "MPIR_", "HYDRA_", "OMPI_"))}


FigureFn = Callable[[Context, Section], None]
FIGURES: dict[str, tuple[str, FigureFn]] = {}


def figure(key: str, title: str) -> Callable[[FigureFn], FigureFn]:
    """Register ``fn(ctx, section)`` as figure ``key``: it runs, plots, and fills the section."""
    def register(fn: FigureFn) -> FigureFn:
        FIGURES[key] = (title, fn)
        return fn
    return register
