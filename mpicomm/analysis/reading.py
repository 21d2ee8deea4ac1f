"""What ``compare`` prints under its table: the verdicts, the reading, and the legend.

Pure functions of the run's records (no MPI): ``verdicts`` decides who beats
whom with ``analysis.verdict`` (a win needs a difference beyond this run's noise),
``reading`` explains it in α-β-γ terms with the numbers the table shows, and
``legend`` defines every printed column by its printed name.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

import numpy as np

from mpicomm.analysis import verdict as V
from mpicomm.core.units import fmt_bytes, fmt_num

__all__ = ["LEGEND", "METHOD", "legend", "verdicts", "verdict_lines", "reading",
           "algorithm_at", "busiest_bytes_formula", "gap_note"]

LEGEND = [  # (printed column names, meaning): one entry per group of columns
    (("ranks", "workers"), "MPI ranks / ranks that train (dedicated ps servers only serve)"),
    (("samples/s",), "samples per second, all workers (median round)"),
    (("±",), "its noise: 95% bootstrap half-width over steps, or half the range over rounds"),
    (("step ms",), "mean step time over the timed steps, the estimator of comm ms and the "
     "shares (median and 90th percentile: --json)"),
    (("compute", "comm", "opt", "other"),
     "shares of the step: forward+backward / allreduce / SGD update / the rest (data, Python)"),
    (("comm ms", "model ms"), "allreduce ms per step the training waited for (exposed) / α-β-γ "
     "model"),
    (("overlap",), "share of the allreduce time hidden behind compute (backward, the SGD of "
                   "earlier buckets, with --overlap-forward the next forward): 1 - exposed/total"),
    (("calls",), "allreduce calls (buckets) per optimizer step"),
    (("KB/step",), "KB (1000 B) sent per step by the busiest rank"),
    (("loss", "train", "test"), "final loss / accuracy on training rows / on held-out rows"),
    (("eff",), "samples/s over (workers × the 1-worker samples/s)"),
]

METHOD = (
    "Method: each round's step times are summarised by their median, and a strategy's speed "
    "is its global batch over the mean of its round medians. A bootstrap redraws the steps "
    "inside each round and the rounds (the same rounds for every strategy, since they took "
    "turns) 2,000 times with a fixed seed; the middle 95% of the redrawn speed ratios, widened "
    "to the Student-t interval of the per-round ratios from three rounds on, is the "
    "interval. A strategy beats another only when the whole interval lies beyond 1 (and beyond "
    "the gap measured between two runs of one algorithm, when the job has such a pair); "
    "otherwise the verdict is a tie."
)


def legend(headers: list[str], explain: bool = False) -> list[str]:
    """Return the legend lines for the printed column names ``headers`` (+ the method)."""
    parts = []
    for names, meaning in LEGEND:
        shown = [h for h in names if h in headers]
        if shown:
            parts.append(f"{' / '.join(shown)}: {meaning}" if len(shown) == len(names) else
                         f"{' / '.join(shown)}: {meaning} (of: {' / '.join(names)})")
    lines = textwrap.wrap("columns: " + "; ".join(parts) + ".", 100, subsequent_indent="  ")
    if explain:
        lines += textwrap.wrap(METHOD, 100)
    return lines


def algorithm_at(rec: dict) -> str:
    """The algorithm a record's strategy ran at its message size (auto is ring or rd)."""
    if rec["strategy"] == "auto":
        x = rec.get("reducer", {}).get("crossover_bytes")
        if x is not None:
            return "ring" if rec["grad_bytes"] >= x else "recursive_doubling"
    return rec["strategy"]


def _rounds(runs: list[dict]) -> list[list[float]]:
    return [r.get("step_times_s") or [] for r in runs]


def verdicts(records: list[dict], runs: dict[str, list[dict]], seed: int = 0
             ) -> tuple[list[V.Verdict], float]:
    """The fastest record against every other, and the noise floor used.

    Args:
        records: the table's records (median rounds), fastest first or not.
        runs: every round's record per strategy (their ``step_times_s``).

    Returns:
        One ``Verdict`` (fastest vs other) per other record, and the floor: the
        largest speed gap measured between two strategies that ran the same
        algorithm (1.0 when there is no such pair).
    """
    ok = [r for r in records if math.isfinite(r["samples_per_sec"]) and _rounds(runs[r["strategy"]])
          and any(_rounds(runs[r["strategy"]]))]
    if len(ok) < 2:
        return [], 1.0
    work = {r["strategy"]: r["global_batch"] for r in ok}

    def pair(a: dict, b: dict, floor: float = 1.0) -> V.Verdict:
        sa, sb = a["strategy"], b["strategy"]
        same = algorithm_at(a) == algorithm_at(b) and a["workers"] == b["workers"]
        return V.compare_pair(sa, sb, _rounds(runs[sa]), _rounds(runs[sb]), work[sa], work[sb],
                              seed=seed, floor=floor, same_algorithm=same)

    floor = 1.0
    for i, a in enumerate(ok):
        for b in ok[i + 1 :]:
            v = pair(a, b)
            if v.same_algorithm:
                floor = max(floor, v.ratio.value, 1 / v.ratio.value)
    top = max(ok, key=lambda r: r["samples_per_sec"])
    return [pair(top, r, floor) for r in ok if r is not top], floor


def verdict_lines(vs: list[V.Verdict], floor: float, repeats: int,
                  names: list[str] | None = None, exact: bool = False) -> list[str]:
    """The verdict: who beats whom, or which strategies tie, with intervals.

    ``names``: the strategies run; one alone is a measurement, not a failed comparison.
    ``exact``: a deterministic clock gave every round the same times (``is_exact``): the
    ratios are exact, no interval is printed. Otherwise, with fewer than
    ``verdict.MIN_ROUNDS_T`` rounds the intervals cover step-to-step noise only, not the
    drift between rounds: no verdict is given, the ratios are shown as such.
    """
    if not vs and names is not None and len(names) == 1:
        return [f"{names[0]} alone: its time and bytes above, no verdict (one strategy; "
                f"compare it with others: --strategies {names[0]},native,ring,...)"]
    if not vs:
        return ["verdict: fewer than two strategies completed timed steps; nothing to compare"]
    top = vs[0].a
    if not exact and repeats < V.MIN_ROUNDS_T:
        return [f"verdict: none from {repeats} round{'s' if repeats > 1 else ''} — "
                "its intervals cover step-to-step noise only, not the drift between rounds "
                "of this host's time; --repeats 3 or more (or the device model: docs/"
                "virtual_clock.md). Ratios, steps only: " + "; ".join(
                    f"{v.a}/{v.b} {v.ratio.value:.2f}x [{v.ratio.low:.2f}-{v.ratio.high:.2f}]"
                    for v in vs) + "."]
    if exact:
        head = "verdict: exact (the modelled device and links, the same in every round): "
        return [head + "; ".join(v.text(exact=True) for v in vs) + "."]
    beaten = [v for v in vs if v.winner == top]
    tied = [v for v in vs if v.winner is None]
    if tied:
        head = (f"verdict: no clear winner between {', '.join([top] + [v.b for v in tied])}"
                + (f"; {top} beats {', '.join(v.b for v in beaten)}" if beaten else ""))
    else:
        head = f"verdict: {top} beats every other strategy"
    lines = [head + ". " + "; ".join(v.text() for v in vs) + "."]
    if floor > 1.0:
        lines.append(f"noise floor: two runs of one algorithm differed by {floor:.2f}x in this "
                     "job, so only larger differences count as wins.")
    return lines


def bound_line(rec: dict) -> str:
    """Which part bounds ``rec``'s step: communication (the exposed allreduce) or compute
    (forward+backward and the optimizer), with the shares and the device that charged them."""
    comm = rec.get("comm_share") or 0.0
    work = (rec.get("compute_share") or 0.0) + (rec.get("optimizer_share") or 0.0)
    kind = "communication-bound" if comm >= work else "compute-bound"
    dev = rec.get("device")
    on = (f" on the modelled {dev['name']} at {dev.get('precision', 'fp32')}"
          if dev and dev.get("precision") else " (compute: this host's time)")
    return (f"bound: {rec['strategy']}'s step is {kind}{on}: communication {100 * comm:.0f}%, "
            f"compute and optimizer {100 * work:.0f}% of the step.")


def is_exact(records: list[dict], runs: dict[str, list[dict]]) -> bool:
    """True when every record ran on the virtual clock under the device model (``device``
    set) and every strategy's rounds gave the same step times: a deterministic clock."""
    if not records or not all(r.get("clock") == "virtual" and r.get("device") for r in records):
        return False
    for r in records:
        times = [np.asarray(x.get("step_times_s") or [], dtype=float)
                 for x in runs.get(r["strategy"], [r])]
        if any(t.shape != times[0].shape or not np.allclose(t, times[0], rtol=1e-9, atol=0)
               for t in times):
            return False
    return True


def busiest_bytes_formula(rec: dict) -> tuple[str, float] | None:
    """(formula, bytes) sent per step by the busiest rank of ``rec``'s strategy, when known."""
    n, p, W = rec["grad_bytes"], rec["ranks"], rec["workers"]
    algo = algorithm_at(rec)
    if algo == "ring":
        return "2(p-1)/p·n", 2 * (p - 1) / p * n
    if algo == "hierarchical":
        d = rec.get("reducer", {})
        sizes = (d.get("topology") or {}).get("node_sizes") or []
        if d.get("variant", "reduce_scatter") != "reduce_scatter" or len(set(sizes)) != 1:
            return None
        L, N = sizes[0], len(sizes)  # ranks per node, nodes (real or simulated)
        return (f"2(L-1)/L·n inside nodes + 2(N-1)/N·n/L across them, L = {L}, N = {N}",
                2 * (L - 1) / L * n + 2 * (N - 1) / N * n / L)
    if algo == "ps" or algo.startswith("ps:"):  # ps:MODE: per round of W pushes
        S = len(rec.get("reducer", {}).get("servers") or [0])
        if rec.get("reducer", {}).get("dedicated"):
            return (f"max(W·n/S, n) with W = {W}, S = {S}", max(W * n / S, n))
        return (f"(S-1)/S·n + (W-1)/S·n with W = {W}, S = {S}",
                (S - 1) / S * n + (W - 1) / S * n)
    if algo == "recursive_doubling" and p & (p - 1) == 0:
        return "lg p·n", math.log2(p) * n
    return None


def _kb(b: float) -> str:
    return f"{b / 1e3:,.0f} KB"  # as the KB/step column prints it


def bytes_line(records: list[dict]) -> str:
    """Bytes per step of the busiest rank: the table's numbers, each beside its formula."""
    parts = []
    for r in records:
        f = busiest_bytes_formula(r)
        shown = f"{r['strategy']} {_kb(r['bytes_per_step'])}"
        if f is not None:
            formula, want = f
            match = abs(r["bytes_per_step"] - want) <= 0.05 * want + 64
            shown += f" ({formula}: {_kb(want)}{'' if match else ', not what it sent'})"
        parts.append(shown)
    n = records[0]["grad_bytes"]
    return (f"bytes sent per step by the busiest rank (KB/step; n = {fmt_bytes(n, binary=False)} "
            f"of gradients, p = {records[0]['ranks']}): " + ", ".join(parts) + ".")


def workers_line(records: list[dict]) -> str | None:
    """When strategies ran with different worker counts: what differs and what is held equal."""
    counts = {r["workers"] for r in records}
    if len(counts) == 1:
        return None
    shown = ", ".join(f"{r['strategy']} {r['workers']} worker{'s' * (r['workers'] != 1)} "
                      f"(global batch {r['global_batch']})" for r in records)
    batch = records[0]["global_batch"] // records[0]["workers"]
    return (f"different worker counts: {shown}. Held equal: the ranks ({records[0]['ranks']}), "
            f"the per-worker batch ({batch} rows), the model, data and steps. So samples/s "
            "compares what the same ranks achieve, and loss and accuracy differ partly because "
            "the global batch differs.")


def _flat_terms(params: Any, link: tuple[float, float] | None, m: float) -> tuple[float, float]:
    """(α, β at message size m) of the link a flat ring crosses: the modelled cluster's
    (``link``, under the virtual clock) or, without it, this job's measured parameters'."""
    if link is not None:
        return link
    measured = params.flat_link()
    return measured.alpha, measured.beta_at(m)


def _regime(win: dict, params: Any, link: tuple[float, float] | None = None) -> str:
    p, n = win["ranks"], win["grad_bytes"]
    alpha, beta = _flat_terms(params, link, n / p)
    latency = 2 * (p - 1) * alpha
    bandwidth = 2 * (p - 1) / p * n * beta
    terms = (f"the ring's bytes term 2(p-1)/p·nβ = {fmt_num(bandwidth, '.0f', 1e6)} µs and "
             f"latency term 2(p-1)α = {fmt_num(latency, '.0f', 1e6)} µs")
    if bandwidth >= latency:
        return (f"Comm is bandwidth-bound at n = {fmt_bytes(n, binary=False)} ({terms}): bytes "
                "through the busiest link decide.")
    return (f"Comm is latency-bound at n = {fmt_bytes(n, binary=False)} ({terms}): the number of "
            "message rounds decides (2(p-1) for ring, lg p for recursive doubling).")


def reading(records: list[dict], params: Any, runs: dict[str, list[dict]] | None = None,
            repeats: int = 1, seed: int = 0,
            link: tuple[float, float] | None = None) -> list[str]:
    """Return the verdict and reading lines of one compare job (consistent with its table).

    Args:
        records: the table's records (one per strategy; ``predicted_comm_s`` set).
        params: the ``costmodel.ModelParams`` measured in this job.
        runs: every round's record per strategy (defaults to the records themselves).
        repeats: rounds per strategy (for the note on what the intervals cover).
        link: (α s, β s/B) of the modelled link a flat ring crosses (the virtual clock's
            cluster): the regime line and the α, 1/β it quotes are then the modelled
            cluster's, as the model column is; None: this job's measured links.
    """
    ok = [r for r in records if math.isfinite(r["samples_per_sec"])]
    if not ok:
        return ["no strategy completed a timed step"]
    runs = runs or {r["strategy"]: [r] for r in records}
    vs, floor = verdicts(records, runs, seed)
    lines = verdict_lines(vs, floor, repeats, names=[r["strategy"] for r in records],
                          exact=is_exact(records, runs))
    win = max(ok, key=lambda r: r["samples_per_sec"])
    why = _regime(win, params, link)
    if win["comm_share"] < 0.2:
        why += (f" Compute-bound: comm is {100 * win['comm_share']:.0f}% of {win['strategy']}'s "
                "step, so the strategies can differ by little.")
    lines.append(why)
    lines.append(bound_line(win))
    lines.append(bytes_line(records))
    for r in records:
        x = r.get("reducer", {}).get("crossover_bytes")
        if r["strategy"] == "auto" and x is not None:
            lines.append(f"auto ran {algorithm_at(r)} at n = {fmt_bytes(r['grad_bytes'])} (its "
                         f"switch size, calibrated at start-up: {fmt_bytes(x)}).")
    w = workers_line(records)
    if w:
        lines.append(w)
    pairs = [(r["strategy"], r["comm_s"], r.get("predicted_comm_s")) for r in records]
    shown = ", ".join(f"{s} {fmt_num(m, '.2f', 1e3)}/{fmt_num(x, '.2f', 1e3)}"
                      for s, m, x in pairs if x)
    alpha, beta = _flat_terms(params, link, win["grad_bytes"] / win["ranks"])
    lines.append(f"comm ms per step, measured/model: {shown} (α = "
                 f"{fmt_num(alpha, '.1f', 1e6)} µs, 1/β(n/p) = "
                 f"{fmt_num(1e-9 / beta if beta > 0 else None, '.2f')} GB/s).")
    ratios = sorted(m / x for _, m, x in pairs if x and math.isfinite(m))
    lines[-1] += gap_note(ratios, all(r.get("clock") == "virtual" for r in records))
    return lines


def gap_note(ratios: list[float], virtual: bool) -> str:
    """Why measured comm runs over twice the model (sorted measured/model ratios), in the
    terms of the run's clock: in virtual time no rank waits for a core."""
    if not ratios or ratios[len(ratios) // 2] <= 2:
        return ""
    return (f" Measured runs {ratios[0]:.1f}-{ratios[-1]:.1f}x the model: time in allreduce "
            "also holds waiting for the slowest rank's compute" + (
                " (in virtual time no rank waits for a core: each is charged its own compute); "
                "α-β does not see it." if virtual else
                " and, with more ranks than cores, for a core; α-β sees neither."))
