"""The results table of training runs: one row per run record, columns no record has left out."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["COLUMNS", "format_table"]


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


def format_table(records: list[dict]) -> str:
    """Return the aligned results table (one row per record; columns no record has are left out)."""
    cols = [c for c in COLUMNS if any(r.get(c[1]) is not None for r in records)]
    rows = [[h for h, _, _ in cols]]
    rows += [[_cell(r.get(k), f) for _, k, f in cols] for r in records]
    widths = [max(len(row[j]) for row in rows) for j in range(len(cols))]
    lines = ["  ".join(c.ljust(wd) if j == 0 else c.rjust(wd) for j, (c, wd) in
                       enumerate(zip(row, widths, strict=True))) for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)
