"""The standard figures of a result file (``python -m mpicomm plot RESULTS.json``).

    python -m mpicomm plot experiments/results/bench_2ranks.json --out /tmp/figs

The kind of file is read from its keys, so a run on a cluster gets the same pictures:

    predict  (``model --predict``)  time and busbw against ranks, per strategy, one size a figure
    model    (``model``)            busbw against size: measured points, predicted lines; and
                                    measured/predicted with the ±25% band
    bench    (``bench``, gloo)      busbw and time against size, per strategy
    compare  (``compare``/``train``) samples/s per strategy and the stacked step time
                                    (compute / comm / optimizer / other); several files at
                                    different worker counts add throughput and efficiency
                                    against workers

matplotlib is the optional extra ``mpicomm[plot]``; figures are drawn with the Agg
backend (no display), sizes on log₂ axes with KiB/MiB labels.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from mpicomm.core.errors import ConfigError

__all__ = ["detect_kind", "plot_file", "plot_docs", "load",
           "size_axis", "ranks_axis", "new_figure", "color", "marker", "style", "save",
           "human_bytes", "STRATEGY_LOOK",
           "busbw_vs_size", "model_figure",
           "predict_figure", "compare_figure", "scaling_figure", "KINDS"]

KINDS = ("predict", "model", "bench", "compare")
# one colour and one marker per strategy, the same in every figure, no two alike (Figure 8 drew
# tree and recursive doubling both green, ps(S=1) and ring(channels=nics) both grey); the
# colours are matplotlib's tab10 and tab20 tones, the order is the legends'
STRATEGY_LOOK: dict[str, tuple[str, str]] = {
    "native": ("#1f77b4", "o"),
    "ring": ("#ff7f0e", "s"),
    "ring(channels=nics)": ("#ffbb78", "D"),
    "multiring": ("#ffbb78", "D"),
    "recursive_doubling": ("#2ca02c", "^"),
    "tree": ("#17becf", "v"),
    "auto": ("#d62728", "<"),
    "hierarchical": ("#9467bd", "P"),
    "hierarchical(leader)": ("#c5b0d5", "X"),
    "hierarchical(nvls)": ("#e377c2", "*"),
    "ps": ("#7f7f7f", "h"),
    "ps(S=1)": ("#7f7f7f", "h"),
    "ps(S=p)": ("#bcbd22", "p"),
    "zero": ("#8c564b", ">"),
    "gloo": ("#393b79", "d"),
}
_EXTRA = [("#98df8a", "1"), ("#ff9896", "2"), ("#c49c94", "3"), ("#f7b6d2", "4"),
          ("#dbdb8d", "+"), ("#9edae5", "x")]  # names outside the table, by a stable hash
_ORDER = list(STRATEGY_LOOK)


def _plt():
    """matplotlib.pyplot on the Agg backend; a one-line ``ConfigError`` when it is missing."""
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("plotting needs matplotlib: pip install 'mpicomm[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def load(path: str) -> dict:
    """Read a result JSON; ``ConfigError`` when it is not one."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read a JSON result ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise ConfigError(f"{path}: not an mpicomm result (no 'results' list)")
    return doc


def detect_kind(doc: dict) -> str:
    """Which writer made ``doc``: predict, model, bench or compare (train counts as compare)."""
    rows = doc.get("results") or [{}]
    keys = set().union(*(r.keys() for r in rows if isinstance(r, dict)))
    if doc.get("command") == "predict":
        return "predict"
    if "samples_per_sec" in keys:
        return "compare"
    if {"time_us", "predicted_us"} <= keys:
        return "model"
    if {"time_us", "busbw_gbps", "bytes"} <= keys:
        return "bench"
    raise ConfigError(f"cannot tell what wrote this JSON (result keys: {', '.join(sorted(keys))}); "
                      "expected bench, model, model --predict, compare or train output")


# ------------------------------------------------------------------ helpers
def _look(name: str) -> tuple[str, str]:
    base = name.split(" ")[0]
    if base.startswith("ps:"):  # the real parameter server: ps's look
        base = "ps"
    return STRATEGY_LOOK.get(base) or _EXTRA[sum(map(ord, base)) % len(_EXTRA)]


def color(name: str) -> str:
    """One colour per strategy, the same in every figure (``STRATEGY_LOOK``)."""
    return _look(name)[0]


def marker(name: str) -> str:
    """One marker per strategy, the same in every figure (``STRATEGY_LOOK``)."""
    return _look(name)[1]


def _rank(name: str) -> int:
    base = name.split(" ")[0]
    return _ORDER.index(base) if base in _ORDER else len(_ORDER)


def style(name: str) -> str:
    """Line style: dashed for ps with S = p, dotted for auto, dash-dot for leader (they overlap)."""
    return "--" if "S=p" in name else ":" if name.startswith("auto") else \
        "-." if "leader" in name else "-"


def ranks_axis(ax) -> None:
    """Log₂ axis of rank counts with plain integer labels."""
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}"))


def human_bytes(n: float) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{n:.0f} B"


def size_axis(ax, axis: str = "x") -> None:
    """Log₂ axis of message sizes with B/KiB/MiB labels."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    a = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    a.set_major_locator(LogLocator(base=4))
    a.set_major_formatter(FuncFormatter(lambda v, _: human_bytes(v)))


def new_figure(ncols: int = 1, nrows: int = 1, width: float = 6.0, height: float = 4.2):
    plt = _plt()
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    return fig, [ax for row in axes for ax in row]


def save(fig, path: str, layout: bool = True) -> str:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    if layout:  # False: the caller laid the figure out (a legend under its panels)
        fig.tight_layout()
    fig.savefig(path, dpi=110)
    _plt().close(fig)
    return path


def _series(rows: list[dict], key: str = "strategy") -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(str(r[key]), []).append(r)
    return {k: sorted(v, key=lambda r: (r.get("bytes", 0), r.get("ranks", 0)))
            for k, v in sorted(out.items(), key=lambda kv: (_rank(kv[0]), kv[0]))}


def _finite(v) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def _ranks_of(doc: dict) -> int:
    rows = doc["results"]
    return int(doc.get("world_ranks") or (rows[0].get("ranks") if rows else 0) or 0)


# ------------------------------------------------------------------ figures
def _message_size_axes(*axes) -> None:
    """Log message-size x axis, its label and a light grid on each of ``axes``."""
    for ax in axes:
        size_axis(ax)
        ax.set_xlabel("message size")
        ax.grid(True, which="major", alpha=0.3)


def busbw_vs_size(doc: dict, path: str, title: str | None = None) -> str:
    """bench: busbw (left) and time (right) against size, one line per strategy."""
    fig, (bw, tm) = new_figure(2)
    for name, rows in _series(doc["results"]).items():
        rows = [r for r in rows if _finite(r.get("busbw_gbps"))]
        x = [r["bytes"] for r in rows]
        kw = {"color": color(name), "marker": marker(name), "label": name, "ms": 4}
        bw.plot(x, [r["busbw_gbps"] for r in rows], "-", **kw)
        tm.plot(x, [r["time_us"] for r in rows], "-", **kw)
    _message_size_axes(bw, tm)
    bw.set_ylabel("bus bandwidth (GB/s)")
    bw.set_yscale("log")
    tm.set_yscale("log")
    tm.set_ylabel("time per allreduce (µs)")
    bw.legend(fontsize=8)
    fig.suptitle(title or f"allreduce on {_ranks_of(doc)} ranks (bench)")
    return save(fig, path)


def measured_and_model(ax, rows: list[dict], x_key: str) -> None:
    """Per strategy: measured ``time_us`` as points and ``predicted_us`` as a line, in ms,
    against ``x_key`` (rows without a prediction get points only)."""
    for name, series in _series(rows).items():
        series = sorted(series, key=lambda r: r[x_key])
        x = [r[x_key] for r in series]
        ax.plot(x, [r["time_us"] / 1e3 for r in series], ls="none", marker=marker(name),
                color=color(name), label=f"{name} measured")
        if all(r.get("predicted_us") for r in series):
            ax.plot(x, [r["predicted_us"] / 1e3 for r in series], style(name),
                    color=color(name), alpha=0.7, label=f"{name} model")


def _model_panels(doc: dict, bw, ratio) -> None:
    p = _ranks_of(doc)
    factor = 2 * (p - 1) / p if p > 1 else 1.0
    for name, rows in _series(doc["results"]).items():
        c = color(name)
        x = [r["bytes"] for r in rows]
        bw.plot(x, [r["busbw_gbps"] for r in rows], ls="none", marker=marker(name), color=c,
                ms=5, label=f"{name} measured")
        pred = [(r["bytes"], r["bytes"] / (r["predicted_us"] * 1e3) * factor) for r in rows
                if _finite(r.get("predicted_us"))]
        if pred:
            bw.plot(*zip(*pred, strict=True), "-", color=c, alpha=0.8, label=f"{name} model")
            ratio.plot(x, [r["measured_over_predicted"] or math.nan for r in rows], "-",
                       marker=marker(name), color=c,
                       ms=4, label=name)
    ratio.axhspan(0.75, 1.25, color="0.85", label="±25%")
    ratio.axhline(1.0, color="0.4", lw=0.8)
    _message_size_axes(bw, ratio)
    bw.set_ylabel("bus bandwidth (GB/s)")
    bw.set_yscale("log")
    bw.set_title(f"{p} ranks: points measured, lines α-β-γ model")
    ratio.set_yscale("log")
    ratio.set_ylabel("measured / predicted time")
    ratio.set_title(f"{p} ranks: model error")
    bw.legend(fontsize=7, ncol=2)


def model_figure(docs: list[dict], path: str, title: str | None = None) -> str:
    """model: per file, busbw (points measured, lines predicted) and measured/predicted."""
    fig, axes = new_figure(2, len(docs))
    for i, doc in enumerate(docs):
        _model_panels(doc, axes[2 * i], axes[2 * i + 1])
    if title:
        fig.suptitle(title)
    return save(fig, path)


def predict_figure(doc: dict, path: str, nbytes: int | None = None,
                   title: str | None = None) -> str:
    """predict: time, busbw (and step efficiency) against ranks at one size, per strategy."""
    rows = doc["results"]
    sizes = sorted({r["bytes"] for r in rows})
    n = nbytes if nbytes in sizes else sizes[-1]
    rows = [r for r in rows if r["bytes"] == n]
    eff = any(r.get("efficiency") is not None for r in rows)
    fig, axes = new_figure(3 if eff else 2)
    for name, series in _series(rows).items():
        series = sorted(series, key=lambda r: r["ranks"])
        x = [r["ranks"] for r in series]
        c = color(name)
        ls = style(name)
        kw = {"ls": ls, "color": c, "marker": marker(name), "ms": 4}
        axes[0].plot(x, [r["predicted_us"] / 1e3 for r in series], label=name, **kw)
        axes[1].plot(x, [r["busbw_gbps"] or math.nan for r in series], **kw)
        if eff:
            axes[2].plot(x, [r["efficiency"] for r in series], **kw)
    for ax in axes:
        ranks_axis(ax)
        ax.set_xlabel("ranks p")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("predicted allreduce time (ms)")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("predicted bus bandwidth (GB/s)")
    if eff:
        axes[2].set_ylabel(f"compute / step ({doc.get('compute_ms', 0):g} ms compute)")
        axes[2].set_ylim(0, 1.05)
    axes[0].legend(fontsize=7)
    name = (doc.get("profile") or {}).get("name", "?")
    fig.suptitle(title or f"predicted allreduce of {human_bytes(n)}, profile {name}")
    return save(fig, path)


_PARTS = (("compute_s", "compute"), ("comm_s", "comm (exposed)"), ("optimizer_s", "optimizer"),
          ("other_s", "other"))


def compare_figure(doc: dict, path: str, title: str | None = None) -> str:
    """compare/train: samples/s per strategy, and the stacked step-time breakdown (ms)."""
    rows = doc["results"]
    names = [r["strategy"] for r in rows]
    fig, (thr, stack) = new_figure(2)
    x = range(len(rows))
    thr.bar(x, [r["samples_per_sec"] or 0 for r in rows], color=[color(n) for n in names])
    thr.set_ylabel("throughput (samples/s)")
    bottom = [0.0] * len(rows)
    for k, (key, label) in enumerate(_PARTS):
        h = [max(r.get(key) or 0.0, 0.0) * 1e3 for r in rows]
        stack.bar(x, h, bottom=bottom, label=label, color=f"C{k}", alpha=0.85)
        bottom = [b + v for b, v in zip(bottom, h, strict=True)]
    stack.set_ylabel("time per step (ms)")
    stack.legend(fontsize=8)
    for ax in (thr, stack):
        ax.set_xticks(list(x), names, rotation=20, fontsize=8)
        ax.set_xlabel("strategy")
        ax.grid(True, axis="y", alpha=0.3)
    w = rows[0].get("workers", rows[0].get("ranks")) if rows else "?"
    fig.suptitle(title or f"training on {w} workers ({doc.get('command', 'compare')})")
    return save(fig, path)


def scaling_figure(docs: list[dict], path: str, title: str | None = None) -> str:
    """Several compare files: throughput and scaling efficiency against workers, per strategy.

    The 1-worker point is each file's ``baseline_samples_per_sec`` (rank 0 alone).
    """
    rows = [r for d in docs for r in d["results"]]
    fig, (thr, eff) = new_figure(2)
    base = sorted({r["baseline_samples_per_sec"] for r in rows
                   if _finite(r.get("baseline_samples_per_sec"))})
    for name, series in _series(rows).items():
        series = sorted(series, key=lambda r: r["workers"])
        x = [r["workers"] for r in series]
        c = color(name)
        kw = {"color": c, "marker": marker(name), "label": name}
        thr.plot(x, [r["samples_per_sec"] for r in series], "-", **kw)
        eff.plot(x, [r.get("scaling_efficiency") or math.nan for r in series], "-", **kw)
    if base:
        b = base[len(base) // 2]
        top = max(r["workers"] for r in rows)
        thr.plot([1, top], [b, b * top], "k--", lw=0.8, label="linear (1-worker × W)")
        thr.plot([1], [b], "ks", label="1 worker")
    eff.axhline(1.0, color="0.4", lw=0.8)
    thr.set_ylim(bottom=0)
    for ax in (thr, eff):
        ax.set_xlabel("workers W")
        ax.set_xticks(sorted({1, *[r["workers"] for r in rows]}))
        ax.grid(True, alpha=0.3)
    thr.set_ylabel("throughput (samples/s)")
    eff.set_ylabel("scaling efficiency (samples/s ÷ W·1-worker)")
    eff.set_ylim(0, 1.15)
    thr.legend(fontsize=8)
    fig.suptitle(title or "training throughput against workers")
    return save(fig, path)


def plot_docs(docs: list[tuple[str, dict]], out: str) -> list[str]:
    """Draw every standard figure of ``docs`` ((stem, document) pairs) into ``out``; the PNGs."""
    made: list[str] = []
    compares = []
    for stem, doc in docs:
        kind = detect_kind(doc)
        base = os.path.join(out, stem)
        if kind == "bench":
            made.append(busbw_vs_size(doc, f"{base}_busbw.png"))
        elif kind == "model":
            made.append(model_figure([doc], f"{base}_model.png"))
        elif kind == "predict":
            sizes = sorted({r["bytes"] for r in doc["results"]})
            for n in sizes if len(sizes) <= 3 else [sizes[0], sizes[len(sizes) // 2], sizes[-1]]:
                made.append(predict_figure(doc, f"{base}_predict_{n}B.png", n))
        else:
            made.append(compare_figure(doc, f"{base}_steps.png"))
            compares.append(doc)
    if len({d["results"][0].get("workers") for d in compares if d["results"]}) > 1:
        made.append(scaling_figure(compares, os.path.join(out, "scaling.png")))
    return made


def plot_file(path: str, out: str | None = None) -> list[str]:
    """Draw the standard figures of one result file; return the PNG paths."""
    return plot_docs([(Path(path).stem, load(path))], out or os.path.dirname(path) or ".")
