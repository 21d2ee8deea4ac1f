"""The results table of training runs: one row per run record, columns no record has left out.

By default the table fits ``WIDTH`` (100) columns: the columns of least interest go first
(``DROP_ORDER``) and a note under the table names them; ``width=None`` (``--wide``) keeps all.
"""

from __future__ import annotations

import textwrap
from typing import Any

import numpy as np

__all__ = ["COLUMNS", "DROP_ORDER", "WIDTH", "format_table", "shown_columns"]


COLUMNS = [  # header, record key, format
    ("strategy", "strategy", "{}"),
    ("ranks", "ranks", "{}"),
    ("workers", "workers", "{}"),               # ranks that train (dedicated servers do not)
    ("samples/s", "samples_per_sec", "{:,.0f}"),
    ("±", "samples_per_sec_spread", "%"),       # noise: bootstrap half-width or half range
    # one estimator for every time in the table: the mean over the timed steps (a step: the
    # mean over workers), so comm ms <= step ms and the shares add up (median, p90: the JSON)
    ("step ms", "step_time_mean_s", "ms"),
    ("compute", "compute_share", "%"),          # shares of the step time
    ("comm", "comm_share", "%"),
    ("opt", "optimizer_share", "%"),
    ("other", "other_share", "%"),
    ("comm ms", "comm_s", "ms"),                # exposed comm per step (training thread waited)
    ("overlap", "overlap_fraction", "%"),       # comm hidden behind compute: 1 - exposed/total
    ("calls", "allreduce_calls_per_step", "{}"),  # buckets reduced per optimizer step
    ("model ms", "predicted_comm_s", "ms"),     # costmodel.predict (compare only)
    ("KB/step", "bytes_per_step", "kb"),         # sent by the busiest rank
    ("loss", "final_loss", "{:.4f}"),
    ("train", "final_accuracy", "%"),
    ("test", "test_accuracy", "%"),
    ("eff", "scaling_efficiency", "eff"),
]


WIDTH = 100  # a terminal's columns, the default table's limit
# the columns left out first when the table is wider than WIDTH (strategy, samples/s and step ms
# always stay): the shares that add up to the rest, accuracies, the counts, then the model
DROP_ORDER = ("other", "opt", "train", "test", "calls", "workers", "ranks", "overlap", "compute",
              "eff", "model ms", "loss", "KB/step", "comm ms", "±", "comm")


def _cell(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "-"
    if fmt == "ms":
        return f"{value * 1e3:.2f}"
    if fmt == "%":
        return f"{100 * value:.1f}%"
    if fmt == "kb":
        return f"{value / 1e3:,.0f}"
    if fmt == "eff":
        return f"{value:.2f}"
    return fmt.format(value)


def _render(records: list[dict], cols: list[tuple]) -> list[str]:
    rows = [[h for h, _, _ in cols]]
    rows += [[_cell(r.get(k), f) for _, k, f in cols] for r in records]
    widths = [max(len(row[j]) for row in rows) for j in range(len(cols))]
    lines = ["  ".join(c.ljust(wd) if j == 0 else c.rjust(wd) for j, (c, wd) in
                       enumerate(zip(row, widths, strict=True))) for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return lines


def shown_columns(records: list[dict], width: int | None = WIDTH) -> tuple[list[str], list[str]]:
    """Return (the headers shown, the headers left out to fit ``width``; None: keep all)."""
    cols = [c for c in COLUMNS if any(r.get(c[1]) is not None for r in records)]
    hidden: list[str] = []
    for name in DROP_ORDER if width is not None else ():
        if len(_render(records, cols)[0]) <= width:
            break
        if any(h == name for h, _, _ in cols):
            cols = [c for c in cols if c[0] != name]
            hidden.append(name)
    return [h for h, _, _ in cols], hidden


def format_table(records: list[dict], width: int | None = WIDTH) -> str:
    """Return the aligned results table (one row per record; columns no record has are left
    out), at most ``width`` characters wide when the always-kept columns allow it, with a
    last line naming the columns left out (``width=None``: every column)."""
    shown, hidden = shown_columns(records, width)
    lines = _render(records, [c for c in COLUMNS if c[0] in shown])
    if hidden:
        note = f"({len(hidden)} more columns with --wide: {', '.join(hidden)})"
        lines += textwrap.wrap(note, width or WIDTH, subsequent_indent=" ")
    return "\n".join(lines)
