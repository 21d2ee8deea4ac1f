"""The summary of a prediction table: the fastest strategy per rank count, as size ranges.

``model --predict`` computes one row per (ranks, size, strategy); hundreds of rows
answer one question, "which strategy where?". ``best_lines`` answers it in one line
per rank count, e.g. ``64 ranks: fastest native up to 1 MiB, hierarchical from 2 MiB``
(``python -m mpicomm model --predict``, the dgx-h100-ib400 profile).
"""

from __future__ import annotations

from itertools import groupby

from mpicomm.core.units import fmt_bytes

__all__ = ["best_by_size", "best_lines"]


def best_by_size(rows: list[dict], key: str = "predicted_us") -> dict[tuple[int, int], dict]:
    """The fastest row (smallest ``key``) per (ranks, bytes); rows without a time are skipped."""
    best: dict[tuple[int, int], dict] = {}
    for r in rows:
        t = r.get(key)
        if t is None:
            continue
        at = (r["ranks"], r["bytes"])
        if at not in best or t < best[at][key]:
            best[at] = r
    return best


def best_lines(rows: list[dict], key: str = "predicted_us") -> list[str]:
    """One line per rank count: the fastest strategy over each run of sizes, smallest first."""
    best = best_by_size(rows, key)
    lines = []
    for ranks in sorted({p for p, _ in best}):
        sizes = sorted(n for p, n in best if p == ranks)
        runs = [(name, [n for n in group]) for name, group in
                groupby(sizes, key=lambda n, p=ranks: best[(p, n)]["strategy"])]
        parts = []
        for i, (name, ns) in enumerate(runs):
            span = (f"from {fmt_bytes(ns[0])}" if i and i == len(runs) - 1 else
                    f"up to {fmt_bytes(ns[-1])}" if i == 0 and len(runs) > 1 else
                    "at every size" if len(runs) == 1 else
                    f"at {fmt_bytes(ns[0])}" if ns[0] == ns[-1] else
                    f"{fmt_bytes(ns[0])} to {fmt_bytes(ns[-1])}")
            parts.append(f"{name} {span}")
        lines.append(f"{ranks} ranks: fastest " + ", ".join(parts))
    return lines
