"""``python -m mpicomm experiments [--quick] [--only 1,8] [--replot]``: every figure, one command.

    python -m mpicomm experiments --quick     # ≤ 10 minutes on 2 cores, into results/
    sh experiments/run_all.sh                 # the full run (≤ 1 hour) into experiments/

Runs write into the untracked ``results/`` unless ``--update-committed`` (or
``--root DIR``) says where: only ``--update-committed`` rewrites the committed
``experiments/`` folder.

A registry of figure functions, one per figure; each, given a ``Context``:

1. runs its sweeps as ``mpiexec -n P python -m mpicomm ...`` subprocesses (hard
   timeout, the whole process group killed on expiry), JSON to ``experiments/results/``;
2. draws its PNGs into ``experiments/figures/`` (``mpicomm.bench.plot``);
3. returns a ``Section``: title, the exact commands, the PNGs, and a conclusion
   computed from the data and tied to the cost formula.

Each section is saved as ``experiments/results/sections/<key>.json``, and
``experiments/README.md`` is regenerated from every saved section, in registry
order — so ``--only 3`` reruns one figure and keeps the others. A new figure is one
function decorated with ``@figure("5", "title")``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mpicomm.core.errors import ConfigError

__all__ = ["Context", "Section", "figure", "FIGURES", "mpiexec_command", "run_figures",
           "ordered_keys",
           "write_readme", "add_arguments", "run"]


# --------------------------------------------------------------- plumbing
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


# ---------------------------------------------------------------- registry
FigureFn = Callable[[Context, Section], None]
FIGURES: dict[str, tuple[str, FigureFn]] = {}


def figure(key: str, title: str) -> Callable[[FigureFn], FigureFn]:
    """Register ``fn(ctx, section)`` as figure ``key``: it runs, plots, and fills the section."""
    def register(fn: FigureFn) -> FigureFn:
        FIGURES[key] = (title, fn)
        return fn
    return register


def _register() -> None:
    from mpicomm.bench import figures, figures_sweeps  # noqa: F401 - registers the figures


def ordered_keys(keys=None) -> list[str]:
    """Figure keys in reading order: numbers by value ("2" before "10"), then the rest."""
    keys = list(FIGURES) if keys is None else list(keys)
    return sorted(keys, key=lambda k: (0, int(k), "") if k.isdigit() else (1, 0, k))


def run_figures(ctx: Context, keys: list[str] | None = None) -> list[Section]:
    """Run the chosen figures (default: all), save each section, regenerate the README."""
    _register()
    keys = keys or ordered_keys()
    unknown = [k for k in keys if k not in FIGURES]
    if unknown:
        raise ConfigError(f"unknown figure {', '.join(unknown)}; figures: {', '.join(FIGURES)}")
    done = []
    for key in keys:
        title, fn = FIGURES[key]
        ctx.commands, ctx.notes = [], []
        sec = Section(key, title)
        print(f"[experiments] figure {key}: {title}", flush=True)
        load0 = _wait_quiet(ctx.wait_quiet_s) if not ctx.replot else None
        t0 = time.perf_counter()
        try:
            fn(ctx, sec)
        except Exception as exc:  # noqa: BLE001 - one broken figure must not lose the others
            ctx.notes.append(f"figure failed: {type(exc).__name__}: {exc}")
        if load0 is not None:
            ctx.notes.append(f"host load average {load0:.1f} at the start, "
                             f"{os.getloadavg()[0]:.1f} at the end ({os.cpu_count()} CPUs)")
        sec.commands, sec.notes = list(ctx.commands), list(ctx.notes)
        sec.seconds = time.perf_counter() - t0
        if ctx.replot:  # redrawn, not rerun: keep the run's duration, time and notes
            old = _load_section(ctx, key)
            sec.seconds = old.get("seconds", 0.0)
            sec.notes = old.get("notes", []) + [n for n in sec.notes if n not in
                                                old.get("notes", [])]
        print(f"[experiments]   {sec.seconds:.0f} s; {sec.conclusion[:150]}", flush=True)
        for note in sec.notes:
            print(f"[experiments]   note: {note}", flush=True)
        _save_section(ctx, sec)
        done.append(sec)
    write_readme(ctx)
    return done


def _wait_quiet(limit_s: float) -> float:
    """Wait up to ``limit_s`` for the 1-minute load to fall below the CPU count; return it."""
    end = time.monotonic() + limit_s
    while os.getloadavg()[0] >= (os.cpu_count() or 1) and time.monotonic() < end:
        time.sleep(5)
    return os.getloadavg()[0]


def _load_section(ctx: Context, key: str) -> dict:
    path = ctx.results / "sections" / f"{key}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _save_section(ctx: Context, sec: Section) -> None:
    folder = ctx.results / "sections"
    folder.mkdir(parents=True, exist_ok=True)
    old = _load_section(ctx, sec.key) if ctx.replot else {}
    doc = {**dataclasses.asdict(sec), "quick": old.get("quick", ctx.quick),
           "finished": old.get("finished", _stamp())}
    (folder / f"{sec.key}.json").write_text(json.dumps(doc, indent=1) + "\n")


def _stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def _commit(root: Path) -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, text=True,
                              capture_output=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def write_readme(ctx: Context) -> Path:
    """Regenerate ``experiments/README.md`` from every saved section, in registry order."""
    import platform

    folder = ctx.results / "sections"
    saved = {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json")} \
        if folder.exists() else {}
    order = ordered_keys(FIGURES) + sorted(k for k in saved if k not in FIGURES)
    lines = [
        "# Experiments: the classic results, reproduced by one command",
        "",
        "<!-- generated by `python -m mpicomm experiments`; edit mpicomm/bench/figures.py -->",
        "",
        "    python -m mpicomm experiments --quick    # into results/ (untracked), this page too",
        "    python -m mpicomm experiments            # the full sweeps (about an hour on 2 cores)",
        "    python -m mpicomm experiments --only 8   # one figure; the others are kept",
        "    sh experiments/run_all.sh --quick        # --update-committed: into experiments/",
        "",
        f"Generated {_stamp()} at commit `{_commit(ctx.root)}` on host `{platform.node()}` "
        f"({os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}).",
        f"**Caveat:** this host has {os.cpu_count()} CPUs and was shared with other jobs while "
        "these ran (each figure notes the load average), so timings are noisy: compare "
        "strategies within one figure (they take turns at each size), not across figures or "
        f"runs. Ranks beyond {os.cpu_count()} oversubscribe the cores. How the cost model's "
        "lines are computed, the cluster profiles' sources and where the predictor stops being "
        "trustworthy: [docs/experiments.md](../docs/experiments.md).",
        "",
    ]
    for key in order:
        if key not in saved:
            continue
        s = saved[key]
        lines += [f"## Figure {key}: {s['title']}", ""]
        for fig in s["figures"]:
            lines += [f"![figure {key}]({fig})", ""]
        lines += [s["conclusion"] or "_No conclusion: the runs failed (see notes)._", ""]
        lines += ["Made by" + (" (quick sweep)" if s.get("quick") else " (full sweep)") +
                  f", {s['seconds']:.0f} s, finished {s.get('finished', '?')}:", "", "```sh"]
        lines += s["commands"] + ["```", ""]
        lines += [f"- note: {n}" for n in s["notes"]] + ([""] if s["notes"] else [])
    path = ctx.root / "README.md"
    path.write_text("\n".join(lines))
    return path


# ----------------------------------------------------------------- command
OUT_ROOT = "results"  # default output folder, in .gitignore
COMMITTED_ROOT = "experiments"  # the committed results: written only with --update-committed


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
    from mpicomm.bench.plot import _plt

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
