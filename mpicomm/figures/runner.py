"""``python -m mpicomm experiments [--quick] [--only 1,8] [--replot]``: every figure, one command.

    python -m mpicomm experiments --quick     # ≤ 10 minutes on 2 cores, into results/
    sh experiments/run_all.sh                 # the full run (≤ 1 hour) into experiments/

A registry of figure functions, one per figure; each, given a ``Context``:

1. runs its sweeps as ``mpiexec -n P python -m mpicomm ...`` subprocesses (hard
   timeout, the whole process group killed on expiry), JSON to ``experiments/results/``;
2. draws its PNGs into ``experiments/figures/`` (``mpicomm.figures.plot``);
3. returns a ``Section``: title, the exact commands, the PNGs, and a conclusion
   computed from the data and tied to the cost formula.

Each section is saved as ``experiments/results/sections/<key>.json``, and
``experiments/README.md`` is regenerated from every saved section, in registry
order — so ``--only 3`` reruns one figure and keeps the others. A new figure is one
function decorated with ``@figure("5", "title")``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from pathlib import Path

from mpicomm.core.errors import ConfigError
from mpicomm.figures import catalog, layouts, sweeps, workload_scaling  # noqa: F401 - importing registers the figures
from mpicomm.figures.registry import FIGURES, Context, Section

__all__ = ["Context", "Section", "FIGURES", "run_figures", "ordered_keys", "write_readme"]


def ordered_keys(keys=None) -> list[str]:
    """Figure keys in reading order: numbers by value ("2" before "10"), then the rest."""
    keys = list(FIGURES) if keys is None else list(keys)
    return sorted(keys, key=lambda k: (0, int(k), "") if k.isdigit() else (1, 0, k))


def run_figures(ctx: Context, keys: list[str] | None = None) -> list[Section]:
    """Run the chosen figures (default: all), save each section, regenerate the README."""
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
        "<!-- generated by `python -m mpicomm experiments`; edit mpicomm/figures/catalog.py -->",
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
