"""Print Markdown tables from experiments/results/*.json (written by experiments/run_all.sh).

    python experiments/summarize.py [results-dir]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mpicomm.core.units import fmt_bytes as human  # the one byte formatter


def load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def pivot(rows: list[dict], cell) -> str:
    names = list(dict.fromkeys(r["strategy"] for r in rows))
    sizes = sorted({r["bytes"] for r in rows})
    at = {(r["strategy"], r["bytes"]): r for r in rows}
    lines = ["| size | " + " | ".join(names) + " |", "|---:|" + "---:|" * len(names)]
    for n in sizes:
        cells = [cell(at[(s, n)]) if (s, n) in at else "-" for s in names]
        lines.append(f"| {human(n)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def bench_table(data: dict) -> str:
    def cell(r):
        vs = r.get("vs_baseline")
        return f"{r['time_us']:.1f} µs, {r['busbw_gbps']:.2f} GB/s" + (
            f", **{vs:.2f}×**" if vs is not None else "")
    return pivot(data["results"], cell)


def model_table(data: dict) -> str:
    def cell(r):
        if r.get("predicted_us") is None:
            return f"- / {r['time_us']:.1f}"
        return f"{r['predicted_us']:.1f} / {r['time_us']:.1f} ({r['measured_over_predicted']:.2f})"
    return pivot(data["results"], cell)


def gloo_table(gloo: dict, bench: dict) -> str:
    at = {(r["strategy"], r["bytes"]): r for r in bench["results"]}
    lines = ["| size | gloo time | gloo busbw | auto time | ring busbw | auto speed-up "
             "| ring/gloo busbw |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for g in gloo["results"]:
        n = g["bytes"]
        a, r = at.get(("auto", n)), at.get(("ring", n))
        if a is None or r is None:
            continue
        lines.append(f"| {human(n)} | {g['time_us']:.0f} µs | {g['busbw_gbps']:.2f} GB/s | "
                     f"{a['time_us']:.1f} µs | {r['busbw_gbps']:.2f} GB/s | "
                     f"{g['time_us'] / a['time_us']:.0f}× | "
                     f"{r['busbw_gbps'] / g['busbw_gbps']:.1f}× |")
    return "\n".join(lines)


def ps_table(results: Path) -> str:
    lines = ["| ranks p | size | ps S=1: pred / meas µs | ps S=p: pred / meas µs | "
             "ring: meas µs | ps(S=p) busbw / ring busbw |", "|---:|---:|---:|---:|---:|---:|"]
    for p in (2, 3, 4):
        one, many = load(results / f"ps_p{p}_s1.json"), load(results / f"ps_p{p}_s{p}.json")
        if one is None or many is None:
            continue
        at1 = {(r["strategy"], r["bytes"]): r for r in one["results"]}
        atp = {(r["strategy"], r["bytes"]): r for r in many["results"]}
        for n in sorted({r["bytes"] for r in one["results"]}):
            a, b, ring = at1[("ps", n)], atp[("ps", n)], atp[("ring", n)]
            lines.append(
                f"| {p} | {human(n)} | {a['predicted_us']:.0f} / {a['time_us']:.0f} | "
                f"{b['predicted_us']:.0f} / {b['time_us']:.0f} | {ring['time_us']:.0f} | "
                f"{b['busbw_gbps'] / ring['busbw_gbps']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    results = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "results")
    bench, model = load(results / "bench_2ranks.json"), load(results / "model_2ranks.json")
    gloo = load(results / "gloo_2ranks.json")
    if bench:
        print("## bench, 2 ranks (time, busbw, ×: native time / time)\n")
        print(bench_table(bench), "\n")
    if model:
        print("## model, 2 ranks (predicted / measured µs (measured/predicted))\n")
        print(model_table(model), "\n")
    if gloo and bench:
        print("## gloo vs mpicomm, 2 ranks\n")
        print(gloo_table(gloo, bench), "\n")
    print("## PS shape\n")
    print(ps_table(results))


main()
