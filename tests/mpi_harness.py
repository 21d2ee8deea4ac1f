"""Launch MPI jobs from pytest with a hard timeout, and say which ranks failed.

Rank scripts report through ``report(**fields)``, which prints one line
``@@MPICOMM {"rank": r, ...}`` per call. ``run_mpi`` collects those lines per
rank; ``MPIResult.expect_ok()`` fails the test naming every rank that did not
report ``ok`` (because it raised, hung, or was killed), with the job's output.

A job that outlives ``timeout`` is killed as a whole process group: a hang
fails the test, it never blocks CI.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from mpicomm.core.segments import present as mpi_segments
from mpicomm.core.segments import remove_leaked as remove_leaked_segments

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).resolve().parent / "scripts"
TAG = "@@MPICOMM "


def load_script(relative: str):
    """The script at ``ROOT / relative`` (``experiments/summarize.py``: outside the package)
    imported as a module, so a test calls its functions."""
    import importlib.util

    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mpiexec(python: str | None = None) -> str:
    """Return the mpiexec beside this Python, or ``python`` (the venv's MPICH or Open MPI),
    else PATH's."""
    here = Path(python or sys.executable).parent / "mpiexec"
    if here.exists():
        return str(here)
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if not found:
        raise RuntimeError("no mpiexec found: pip install mpich (or load your MPI module)")
    return found


@functools.cache
def launcher_family(path: str) -> str:
    """``"openmpi"`` if ``path --version`` says Open MPI, OpenRTE or PRRTE; else ``"other"``."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return "other"
    text = out.stdout + out.stderr
    return "openmpi" if any(k in text for k in ("Open MPI", "OpenRTE", "PRRTE")) else "other"


def launcher_env(path: str) -> dict[str, str]:
    """Variables the launcher at ``path`` needs to run a test job on one small host.

    Open MPI refuses to run as root and to start more ranks than cores (a
    5-rank test on 2 cores); these variables allow both, for Open MPI 5 (PRRTE)
    and 4 (ORTE). MPICH's Hydra needs neither. A value already set in the
    environment wins.
    """
    if launcher_family(path) != "openmpi":
        return {}
    env = {
        "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",  # Open MPI 5
        "OMPI_MCA_rmaps_base_oversubscribe": "1",  # Open MPI 4
        # libfabric's btl probes for a fabric this host lacks: MPI_Init took 1.09 s with it
        # and 0.09 s without (Open MPI 5.0.11 from PyPI, 2 ranks, 2026-12-03); sm, tcp and
        # self still carry every message
        "OMPI_MCA_btl": "^ofi",
    }
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env |= {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    return {k: v for k, v in env.items() if k not in os.environ}


# every strategy, and each option that changes its code path (for error and GPU tests)
STRATEGY_CASES = [
    ("native", {}),
    ("ring", {}),
    ("recursive_doubling", {}),
    ("auto", {}),
    ("hierarchical", {"ranks_per_node": 2}),
    ("hierarchical", {"ranks_per_node": 2, "variant": "leader"}),
    ("ps", {"servers": 2}),
    ("ps", {"dedicated": True}),
]


def expect_raises(problems: list[str], exc_type, fragment: str, fn) -> str:
    """Call ``fn``; unless it raises ``exc_type`` with ``fragment`` in its message,
    append what happened instead to ``problems``. Returns the message (or "")."""
    try:
        fn()
    except exc_type as e:
        if fragment not in str(e):
            problems.append(f"{exc_type.__name__} without {fragment!r}: {e}")
        return str(e)
    except Exception as e:  # noqa: BLE001 - any other outcome is the finding
        problems.append(f"expected {exc_type.__name__} ({fragment!r}), got {type(e).__name__}: {e}")
    else:
        problems.append(f"expected {exc_type.__name__} ({fragment!r}), nothing raised")
    return ""


def report(**fields) -> None:
    """Print one result record for this rank (used inside rank scripts)."""
    from mpi4py import MPI

    fields.setdefault("rank", MPI.COMM_WORLD.Get_rank())
    sys.stdout.write(TAG + json.dumps(fields) + "\n")
    sys.stdout.flush()


@dataclass
class MPIResult:
    nranks: int
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    records: list[dict] = field(default_factory=list)

    def by_rank(self) -> dict[int, list[dict]]:
        out: dict[int, list[dict]] = {r: [] for r in range(self.nranks)}
        for rec in self.records:
            out.setdefault(int(rec["rank"]), []).append(rec)
        return out

    def tail(self, n: int = 4000) -> str:
        return (
            f"--- stdout (tail) ---\n{self.stdout[-n:]}\n--- stderr (tail) ---\n{self.stderr[-n:]}"
        )

    def failed_ranks(self) -> list[int]:
        """Ranks with no final ``ok`` record, or any record with ok == False."""
        bad = []
        for r, recs in self.by_rank().items():
            finals = [x for x in recs if "ok" in x]
            if not finals or not all(x["ok"] for x in finals):
                bad.append(r)
        return bad

    def expect_ok(self) -> MPIResult:
        """Assert the job exited 0 in time and every rank reported ok."""
        bad = self.failed_ranks()
        if self.timed_out or self.returncode != 0 or bad:
            why = "timed out" if self.timed_out else f"exit code {self.returncode}"
            details = [
                f"rank {x['rank']}: {x.get('error') or x}"
                for x in self.records
                if x.get("ok") is False
            ]
            raise AssertionError(
                f"mpiexec -n {self.nranks} {' '.join(self.argv)}: {why}; "
                f"failed or silent ranks: {bad}\n" + "\n".join(details[:20]) + "\n" + self.tail()
            )
        return self


def job_env(launcher: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a test job: this one, the launcher's variables, the checkout and
    tests/ (and the CuPy stand-in for gpu-marked tests) on PYTHONPATH, then ``env``."""
    full_env = dict(os.environ) | launcher_env(launcher)
    tests_dir = str(Path(__file__).resolve().parent)
    paths = [str(ROOT), tests_dir, full_env.get("PYTHONPATH", "")]
    standin = full_env.get("MPICOMM_CUPY_STANDIN", "")
    if standin not in ("", "0"):  # a gpu-marked test on the CuPy stand-in (conftest.gpu_backend)
        paths.insert(0, standin)
    full_env["PYTHONPATH"] = os.pathsep.join(paths)
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    if env:
        full_env.update(env)
    return full_env


def parse_records(out: str) -> list[dict]:
    """The ``report`` records in a job's standard output."""
    records = []
    for line in out.splitlines():
        if line.startswith(TAG):
            try:
                records.append(json.loads(line[len(TAG) :]))
            except json.JSONDecodeError:
                pass
    return records


def _kill_session(pgid: int) -> None:
    """SIGKILL what is left of a job's process group (its session: ``start_new_session``)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_mpi(
    nranks: int,
    argv: list[str],
    timeout: float = 120.0,
    env: dict[str, str] | None = None,
    python: str | None = None,
) -> MPIResult:
    """Run ``mpiexec -n nranks python <argv...>`` with a hard timeout.

    Args:
        nranks: number of ranks.
        argv: arguments after ``python`` (e.g. ``["-m", "mpi4py", script, ...]``).
        timeout: seconds before the whole job is killed and the result marked timed out.
        env: extra environment variables.
        python: another interpreter (another venv, so another MPI): it and the mpiexec
            beside it run the job; default this one's.
    """
    launcher = mpiexec(python)
    cmd = [launcher, "-n", str(nranks), python or sys.executable, *argv]
    full_env = job_env(launcher, env)
    before = mpi_segments()
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=full_env,
        cwd=str(ROOT),
        start_new_session=True,
    )
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_session(proc.pid)
        out, err = proc.communicate()
    if timed_out or proc.returncode:  # a killed or aborted job leaves MPI's segments
        if not timed_out:
            _kill_session(proc.pid)  # ranks mpiexec left behind, if any
        remove_leaked_segments(before)
    records = parse_records(out)
    return MPIResult(
        nranks=nranks,
        argv=list(argv),
        returncode=None if timed_out else proc.returncode,
        stdout=out,
        stderr=err,
        seconds=time.monotonic() - t0,
        timed_out=timed_out,
        records=records,
    )


def run_script(nranks: int, script: str, *args: str, timeout: float = 120.0, env=None):
    """Run ``tests/scripts/<script>`` under ``python -m mpi4py`` (abort on any exception)."""
    return run_mpi(
        nranks, ["-m", "mpi4py", str(SCRIPTS / script), *map(str, args)], timeout=timeout, env=env
    )
